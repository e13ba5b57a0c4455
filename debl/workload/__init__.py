"""The LinkBench-faithful workload: link files to load, and requests to serve.

One module per role:

- ``distribution``: the empirical CDFs Facebook published (``Distribution.dat``) and the Zipf
  sampler LinkBench uses for request ids;
- ``shuffle``: the invertible id permutation that decorrelates degree (and popularity) from id;
- ``spec``: what ``debl generate`` makes (``GenerateSpec``), the reference instant, the periods;
- ``synth``: one chunk of ids turned into link records (degrees, times, data, updates);
- ``lineformat``: records to tab-separated lines, vectorized;
- ``badlines``: malformed lines for testing rejects;
- ``generator``: the whole run, chunk by chunk into daily files (``generate``);
- ``requests``: LinkBench's choice of ``(id1, link_type)`` for ``get_link_list``;
- ``latency``: histograms that merge exactly, percentiles and the per-second timeline;
- ``tail``: the slowest requests and where their time went, by route and by cause;
- ``pacing``: the open-loop send schedule (Poisson instants per thread);
- ``client``: the LinkBench-style client, threads over worker processes (``run_client``), and its
  result; ``client_spec`` what it is asked to do, ``requesters`` the request loop of one
  process's threads, ``client.processes`` the worker processes;
- ``targets``: ``open_target(config, name)``, the store or coordinator the client queries;
- ``mix``: the operation mixes of ``debl query --mix`` and a reader's choice of its reads;
  ``link_ids`` the id2s an operation names (LinkBench's ID2Chooser); ``writes`` the writes
  (their ids and rows); ``writers`` the writer pool that sends them to the source database.

The library never imports click; ``debl.commands.generate`` and ``debl.commands.query`` do.
"""
