"""``debl ui``: a live status page on 127.0.0.1 (docs/UI.md).

One small HTTP server serves one page (``static/``: plain HTML, CSS and JavaScript, nothing
fetched from elsewhere) and the JSON it polls every second: the status that ``debl status
--json`` prints (``debl.status.read_status``, the one source), sampled by the server
itself once a second, with what the page draws over time (answers per second by route over the
last minutes), whether each service answers, and the first rejected lines. Read-only: nothing
on the page or in its JSON can change the load, and no credential is ever in either.

- ``server``: the HTTP server and ``serve_ui``, what the command calls;
- ``sampler``: the status read every second, kept with its error while MySQL does not answer;
- ``history``: answers per second by route from the cumulative counts;
- ``services``: whether HDFS and HBase answer (read-only probes);
- ``rejects``: the first lines a load rejected, from its reject files;
- ``payload``: the JSON the page polls, with any credential scrubbed.
"""
