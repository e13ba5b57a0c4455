"""``debl report``: the tables and the throughput plot of one bench, as Markdown, HTML and PNG.

Written next to the bench's results (``<state_dir>/bench/<bench_id>/``):

- ``report.md`` and ``report.html``: the experiment (input, rate, client, machine, the command
  that repeats it); the Table 1 analog (per approach: uptime, the wall time of each phase, when
  all queries were served, full availability, the paper's uptime); latency percentiles per
  approach (and, for DeBL, the buffered queries' waits); the service from uptime (the paper's
  Figure 7.6 in numbers: requests served in the first 30 s after uptime, throughput once
  everything is loaded, the longest stall, the last query); the ratios of docs/DESIGN.md section 11
  beside the paper's;
- the share of requests answered by each second since the load started, per approach, when
  MySQL took DeBL's hot keys over, and whether debl-raw was at or above every other approach at
  every second (``debl.bench.service``);
- the answers since the load started, per approach (``debl.bench.answers``): when its query
  client started (``--queries-from``), its first answer, and the shares of the bench's requests
  answered by its uptime and by the end of a plain copy of the files, with ``answered.png``, the
  share answered against the time since the load started, a vertical line at the copy's end;
- "The tail", for a bench that recorded it (``debl.bench.tail``): each approach's slowest 1%
  by route and by dominant cause, every answer by route, what ran beside the slowest;
- ``throughput.png``: requests completed per second against the time since the load started,
  one line per approach, each approach's uptime marked by a dashed line of its colour (full
  availability, for DeBL, by a dotted one, MySQL's take-over by a dash-dot one); below it the
  share of the query phase's requests served so far (where it reaches 1: all served).

Every figure comes from the bench's files alone, so a report can be rebuilt any time.

Pitfalls:

- Phase columns are wall spans (first start to last end, in seconds): pipelined phases overlap,
  so a row's phases do not add up to its uptime.
- Service figures come from the per-second timeline (``debl.bench.service``). "Served in the
  first 30 s" compares approaches only while each query phase lasts 30 s: a phase that ends
  sooner has served all its requests.
- Ratios need their reference approach in the same bench (fileCopy, bulkLoad-mysql, debl-fifo);
  without it the ratio is shown as "-". On one machine only ratios measured in one run compare
  with the paper's (docs/DESIGN.md section 11).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from debl.bench import ApproachRun, read_bench
from debl.bench.answers import answered_by, copy_end, plot_answered
from debl.bench.baselines import APPROACHES
from debl.bench.cpu import PER_GB_HEADERS, PER_GB_NOTE, per_gb_rows
from debl.bench.service import (SERVICE_WINDOW_S, STALL_SHARE, answered_share, least_margin,
                                service_from_uptime)
from debl.bench.tail import read_tails, tail_tables

PAPER_FILECOPY_S = 893.0
PAPER_BULK_MYSQL_S = 2565.0
# Checkpoints of the "answered by second" table, seconds since the load started.
ANSWERED_AT_S = (15, 30, 45, 60, 90, 120, 180, 240, 300, 420, 600)
# (column title, phase names whose wall span it shows)
PHASE_COLUMNS = (
    ("copy", ("copy",)),
    ("dist_ch", ("dist_ch",)),
    ("MySQL load", ("mysql_load",)),
    ("MySQL merge", ("mysql_merge",)),
    ("MySQL index", ("mysql_index",)),
    ("gen_HF", ("gen_hf",)),
    ("puts", ("batch_put",)),
)


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""

    def markdown(self) -> str:
        right = ["---:" if i else "---" for i in range(len(self.headers))]
        lines = ["| " + " | ".join(self.headers) + " |", "| " + " | ".join(right) + " |"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines) + (f"\n\n{self.note}" if self.note else "")

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                       for r in self.rows)
        note = f"<p>{html.escape(self.note)}</p>" if self.note else ""
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


@dataclass(frozen=True)
class Report:
    markdown: Path
    html: Path
    plot: Path
    answered: Path | None = None  # the answers since the load started (answered.png)


def _s(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def phase_wall(run: ApproachRun, names: tuple[str, ...]) -> float | None:
    """First start to last end of the phases named, in seconds; None if none ran."""
    spans = [(p.start_s, p.end_s) for p in run.phases if p.phase in names and p.end_s is not None]
    if not spans:
        return None
    return max(e for _, e in spans) - min(s for s, _ in spans)


def last_item(run: ApproachRun, name: str) -> float | None:
    """Duration of the phase item that ended last (e.g. the last dist_ch)."""
    ended = [(p.end_s, p.start_s) for p in run.phases if p.phase == name and p.end_s is not None]
    if not ended:
        return None
    end, start = max(ended, key=lambda span: span[0])
    return end - start


def table1(runs: list[ApproachRun]) -> Table:
    headers = ("approach", "hot MB", "uptime s", *(c for c, _ in PHASE_COLUMNS),
               "last dist_ch", "all served s", "full avail. s", "paper", "paper uptime s")
    rows = []
    for r in runs:
        a = APPROACHES[r.approach]
        rows.append((r.approach, _s(r.summary.get("hot_bytes", 0) / 1e6), _s(r.uptime_s),
                     *(_s(phase_wall(r, names)) for _, names in PHASE_COLUMNS),
                     _s(last_item(r, "dist_ch")), _s(r.all_served_s),
                     _s(r.full_availability_s), a.paper or "-", _s(a.paper_uptime_s, 0)))
    return Table(headers, tuple(rows),
                 "Seconds since the approach's load started; 'hot MB': the bytes loaded into "
                 "MySQL (the newest files that fit the hot share). Phase columns are wall spans "
                 "(first start to last end); pipelined phases overlap. 'all served': the last "
                 "of the query phase's requests answered (the phase starts at uptime). "
                 "'full avail.': the last bucket in HBase (DeBL), else the uptime.")


def latency_table(runs: list[ApproachRun]) -> Table:
    headers = ("approach", "target", "ok", "errors", "req/s", "p50 ms", "p95 ms", "p99 ms",
               "mean ms", "max ms", "answered at once", "at once, 1st min", "raw answers",
               "mean wait s", "p95 wait s")
    rows = []
    for r in runs:
        if r.query is None:
            continue
        q, lat, w = r.query, r.query["latency"], r.waits
        rows.append((r.approach, r.target or "-", f"{q['completed']:,}", f"{q['errors']:,}",
                     _s(q["throughput"]), _s(lat["p50"], 2), _s(lat["p95"], 2),
                     _s(lat["p99"], 2), _s(lat["mean"], 2), _s(lat["max"], 1),
                     f"{w['immediate_share']:.1%}" if w else "-",
                     _first_minute(w),
                     f"{w['raw_share']:.1%}" if w and "raw_share" in w else "-",
                     _s(w["mean_wait_s"], 2) if w else "-",
                     _s(w["p95_wait_s"], 2) if w else "-"))
    return Table(headers, tuple(rows),
                 "Latency of successful requests, from the query phase's start at uptime. "
                 "Waits (DeBL): queries buffered on a bucket not yet in HBase, from the "
                 "coordinator's own statistics; 'answered at once' is the share that did not "
                 "wait at all, over the whole phase and (with the number of queries) among "
                 "the queries asked in its first minute; 'raw answers' the share answered by "
                 "the raw route (debl-raw: from the HDFS files of a bucket not yet in HBase).")


def _first_minute(waits: dict | None) -> str:
    # benches recorded before the first-minute counts existed lack the keys
    if not waits or not waits.get("first_minute_answered"):
        return "-"
    return (f"{waits['first_minute_immediate_share']:.1%} "
            f"({waits['first_minute_answered']:,})")


def service_table(runs: list[ApproachRun]) -> Table:
    headers = ("approach", "uptime s", f"served in 1st {SERVICE_WINDOW_S:g} s", "of all",
               "all loaded at s", "req/s once loaded", "longest stall s", "stall from s",
               "last query s")
    rows = []
    for r in runs:
        sv = service_from_uptime(r)
        if sv is None:
            continue
        total = (r.query or {}).get("completed") or 1
        rows.append((r.approach, _s(r.uptime_s), f"{sv.first_window:,}",
                     f"{sv.first_window / total:.0%}", _s(sv.loaded_from_s),
                     _s(sv.loaded_rate, 0), _s(sv.longest_stall_s),
                     _s(sv.stall_at_s), _s(sv.last_query_s)))
    return Table(headers, tuple(rows),
                 f"Seconds since the approach's load started. 'served in 1st {SERVICE_WINDOW_S:g}"
                 " s': requests answered in that window after uptime (with a query phase "
                 "shorter than the window, all of them). 'all loaded at': full availability "
                 "(DeBL: the last bucket in HBase; the others: their uptime); 'req/s once "
                 "loaded': from then to the last query ('-' if that is under a second). "
                 f"'longest stall': the longest stretch after uptime with under {STALL_SHARE:.0%}"
                 " of the approach's best second's requests per second.")


def answered_table(runs: list[ApproachRun]) -> Table:
    """The share of requests each approach had answered by each checkpoint since its load
    started, when MySQL took DeBL's hot keys over, and whether DeBL as it ships (debl-raw) was
    at or above each other approach at every second."""
    queried = [r for r in runs if r.query is not None]
    last = max((r.all_served_s or 0.0 for r in queried), default=0.0)
    points = [t for t in ANSWERED_AT_S if t < last + 15] or [ANSWERED_AT_S[0]]
    headers = ("approach", "uptime s", "MySQL took over s",
               *(f"by {t} s" for t in points), "debl-raw at or above it")
    ours = next((r for r in queried if r.approach == "debl-raw"), None)
    rows = []
    for r in queried:
        margin = "-"
        if ours is not None and r is not ours:
            worst, at = least_margin(ours, r)
            margin = "yes" if worst >= 0 else f"no: {-worst:.1%} below it at {at:.0f} s"
        rows.append((r.approach, _s(r.uptime_s), _s(r.taken_over_s),
                     *(f"{answered_share(r, t):.0%}" for t in points), margin))
    return Table(headers, tuple(rows),
                 "The share of the query phase's requests answered by each second since the "
                 "approach's load started (every approach asks the same requests from its "
                 "uptime on, a DeBL approach with --queries-from load from its load's "
                 "start). 'MySQL took over': when MySQL took DeBL's hot keys over (before "
                 "that they were answered from the hot files' buckets). The last column checks "
                 "every second up to the last query.")


def answers_table(runs: list[ApproachRun], meta: dict) -> Table:
    """Per approach with a query phase: when its client started, its first answer, and the
    shares of the bench's requests answered by its uptime and by a plain copy's end."""
    spec, input_bytes = meta["spec"], meta["input"]["bytes"]
    requests, rate = spec["requests"], spec["source_rate"]
    end = copy_end(runs, input_bytes, rate)
    headers = ("approach", "queries from", "asked from s", "uptime s", "first answer s",
               "answered by uptime", "answered by copy end", "early answers")
    rows = []
    for r in runs:
        if r.query is None:
            continue
        by_end = None if end is None else answered_by(r, end.seconds, requests)
        early = (r.waits or {}).get("early")
        rows.append((r.approach, r.queries_from or "uptime", _s(r.query_start_s),
                     _s(r.uptime_s), _s(r.first_answer_s, 2),
                     f"{answered_by(r, r.uptime_s, requests):.1%}",
                     "-" if by_end is None else f"{by_end:.1%}",
                     "-" if early is None else f"{early:,}"))
    copy = (f"A plain copy of the files ends at {end.describe(input_bytes, rate)}"
            if end is not None else
            "'answered by copy end' is not shown: no fileCopy in this bench and an uncapped "
            "source, so when a plain copy ends is not known")
    return Table(headers, tuple(rows),
                 "Seconds since the approach's load started; shares of the bench's "
                 f"{requests:,} requests. 'queries from': when its query client started: "
                 "'load' (`--queries-from load`: a DeBL approach's requests wait in the "
                 "coordinator until their key is answerable or the load is up) or 'uptime' "
                 "(the baselines always: MySQL and HBase answer nothing before their uptime). "
                 "'asked from': when its client sent its first requests (with 'uptime', its "
                 "start after the uptime is in its first answer). 'first answer': its first "
                 "request answered (errors and timeouts are not answers). 'early answers': "
                 "the coordinator's own count of its answers by the early route, given until "
                 f"its poll sees the uptime (so a few may come after it). {copy}.")


def ratio_table(runs: list[ApproachRun]) -> Table:
    by = {r.approach: r for r in runs}
    rows = []
    copy = by.get("fileCopy")
    mysql = by.get("bulkLoad-mysql")
    for r in runs:
        a = APPROACHES[r.approach]
        if r.approach != "fileCopy":
            rows.append(("uptime / fileCopy uptime", r.approach,
                         _s(_ratio(r.uptime_s, copy.uptime_s if copy else None), 2),
                         _s(_ratio(a.paper_uptime_s, PAPER_FILECOPY_S), 2)))
    cold, hbase_load = by.get("debl-cold"), by.get("bulkLoad-hbase")
    for r in runs:
        if r.approach == "debl-raw" and cold is not None:
            rows.append(("uptime / debl-cold uptime", r.approach,
                         _s(_ratio(r.uptime_s, cold.uptime_s), 2), "-"))
        if r.approach in ("debl-raw", "debl", "debl-cold") and hbase_load is not None:
            rows.append(("uptime / bulkLoad-hbase uptime", r.approach,
                         _s(_ratio(r.uptime_s, hbase_load.uptime_s), 2), "-"))
    for r in runs:
        a = APPROACHES[r.approach]
        if r.approach != "bulkLoad-mysql":
            rows.append(("uptime / bulkLoad-mysql uptime", r.approach,
                         _s(_ratio(r.uptime_s, mysql.uptime_s if mysql else None), 2),
                         _s(_ratio(a.paper_uptime_s, PAPER_BULK_MYSQL_S), 2)))
    for r in runs:
        if r.all_served_s is not None:
            paper = "< 1" if r.approach in ("debl", "debl-cold") else "-"
            rows.append(("all queries served / bulkLoad-mysql uptime", r.approach,
                         _s(_ratio(r.all_served_s, mysql.uptime_s if mysql else None), 2),
                         paper))
    mysql_service = service_from_uptime(mysql) if mysql else None
    hbase = by.get("bulkLoad-hbase")
    for r in runs:
        sv = service_from_uptime(r)
        if sv is None:
            continue
        if r.approach != "bulkLoad-mysql" and mysql_service is not None:
            rows.append((f"served in 1st {SERVICE_WINDOW_S:g} s after uptime / bulkLoad-mysql's",
                         r.approach, _s(_ratio(sv.first_window, mysql_service.first_window), 2),
                         "-"))
        if r.approach != "bulkLoad-hbase" and hbase is not None and hbase.all_served_s:
            rows.append(("last query / bulkLoad-hbase's last query", r.approach,
                         _s(_ratio(r.all_served_s, hbase.all_served_s), 2),
                         "< 1" if r.approach in ("debl", "debl-cold") else "-"))
    demand, fifo = by.get("debl"), by.get("debl-fifo")
    if demand and fifo and demand.waits and fifo.waits:
        rows.append(("mean wait, demand order / fifo order", "debl vs debl-fifo",
                     _s(_ratio(demand.waits["mean_wait_s"], fifo.waits["mean_wait_s"]), 2),
                     "not quoted"))
    return Table(("ratio", "approach", "measured", "paper"), tuple(rows),
                 "Paper (100M links, 10 GB over 100 Mbit/s, 5 region servers): fileCopy 893 s, "
                 "DeBL (no mysql) 952 s, DeBL (2g mysql) 1257 s, bulkLoad (HBase) 1978 s, "
                 "bulkLoad (MySQL) 2565 s; both DeBL variants served all 500,000 queries "
                 "before bulkLoad (MySQL) was up. docs/DESIGN.md section 11 quotes no figure for "
                 "the demand/fifo wait ratio.")


def cpu_sections(runs: list[ApproachRun], meta: dict) -> list[tuple[str, Table]]:
    """Where the CPU went, per GB (none for a bench recorded before it was measured)."""
    rows = tuple(per_gb_rows(runs, meta["input"]["bytes"]))
    return [("Where the CPU goes: CPU seconds per GB of input",
             Table(PER_GB_HEADERS, rows, PER_GB_NOTE))] if rows else []


def _buckets_line(spec: dict, effective: dict) -> str:
    if spec.get("bucket_width"):
        return f"buckets: fixed width {spec['bucket_width']:,} ids"
    targets = effective.get("bucket_target_bytes") or {}
    each = ", ".join(f"{n} {t / 1e6:,.1f} MB" for n, t in targets.items())
    return (f"buckets: about {spec['buckets']} of each approach's cold bytes"
            + (f" (target per bucket: {each})" if each else ""))


def spark_line(spark: dict | None) -> str:
    if spark is None:  # a bench recorded before the Spark master was
        return "spark: not recorded"
    if spark["workers"]:
        return (f"spark: {spark['master']}, a standalone cluster of {spark['workers']} "
                f"worker(s), {spark['cores_max']} cores per application")
    return f"spark: {spark['master']}"


def experiment_lines(meta: dict) -> list[str]:
    spec, m, inp = meta["spec"], meta["machine"], meta["input"]
    effective = meta.get("effective", {})
    rate = spec["source_rate"]
    rate_text = f"{rate:g} MB/s ({rate * 8:g} Mbit/s)" if rate else "uncapped"
    g = spec["input"]
    return [
        f"bench {meta['bench_id']} ({meta['state']})",
        f"input: {inp['bytes'] / 1e6:,.1f} MB in {inp['files']} files "
        f"(max-id {g['max_id']:,}, seed {g['seed']}"
        + (f", max-degree {g['max_degree']}" if g["max_degree"] is not None else "")
        + f", layout {g.get('layout', 'days')})",
        f"source: HTTP on loopback, {rate_text}",
        f"query phase: {spec['threads']} threads, {spec['requests']:,} requests"
        + (f" or {spec['duration']:g} s" if spec["duration"] else "")
        + f", seed {spec['seed']}, {spec.get('recency_share', 0.0):.0%} of the id1s by "
        f"recency; DeBL hot share {spec['hot_share']:.0%}" + _queries_from(spec),
        _buckets_line(spec, effective),
        f"machine: {m['cpus']} CPUs ({m['cpu_model'] or 'unknown model'}), "
        f"{m['memory_gib']} GiB, {m['system']}, Python {m['python']}; "
        f"code {meta.get('code') or 'unknown'}",
        spark_line(meta.get("spark")),
        f"command: {meta['command'] or '(library call, no command line)'}",
    ]


def _queries_from(spec: dict) -> str:
    if spec.get("queries_from", "uptime") == "load":
        return ("; queries from the load's start for the DeBL approaches (the baselines': "
                "from their uptime)")
    return "; queries from each approach's uptime"


def plot_throughput(runs: list[ApproachRun], path: Path, title: str) -> Path:
    """Two panels against seconds since the load started: requests completed per second, and
    the share of the query phase's requests served so far; a dashed line at each uptime."""
    # lazy import: matplotlib would cost every `debl` command's start-up (docs/ARCHITECTURE.md,
    # "Lazy imports"); and the headless backend must be chosen before pyplot loads
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy import: as matplotlib above

    fig, (ax, cum) = plt.subplots(2, 1, figsize=(11, 8), dpi=110, sharex=True,
                                  gridspec_kw={"height_ratios": [3, 2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    top = 1
    for i, r in enumerate(runs):
        color = colors[i % len(colors)]
        if r.timeline:
            t = [r.query_start_s] + [p[0] + 1.0 for p in r.timeline]
            y = [0] + [p[1] for p in r.timeline]
            ax.step(t, y, where="pre", color=color, lw=1.4, label=r.approach)
            total = sum(y) or 1
            done, share = 0, []
            for n in y:
                done += n
                share.append(done / total)
            cum.step(t, share, where="pre", color=color, lw=1.4)
            top = max(top, max(y))
        else:
            ax.plot([], [], color=color, label=f"{r.approach} (no queries)")
        for axis in (ax, cum):
            axis.axvline(r.uptime_s, color=color, ls="--", lw=1.0, alpha=0.8)
            if r.gen_hf and r.full_availability_s is not None:
                axis.axvline(r.full_availability_s, color=color, ls=":", lw=1.0, alpha=0.8)
            if r.taken_over_s is not None:
                axis.axvline(r.taken_over_s, color=color, ls="-.", lw=1.0, alpha=0.8)
    for i, r in enumerate(runs):
        ax.annotate(f"{r.approach} up", (r.uptime_s, top), xytext=(3, -12 - 11 * i),
                    textcoords="offset points", fontsize=8, color=colors[i % len(colors)])
    ax.set_ylabel("requests completed per second")
    ax.set_title(title, fontsize=10)
    cum.set_ylabel("share of requests served")
    cum.set_xlabel("seconds since the load started")
    cum.set_ylim(0, 1.02)
    for axis in (ax, cum):
        axis.set_xlim(left=0)
        axis.grid(alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(directory: Path) -> Report:
    """Write report.md, report.html, throughput.png and answered.png into the bench
    *directory*."""
    directory = Path(directory)
    meta, runs = read_bench(directory)
    plot = plot_throughput(runs, directory / "throughput.png",
                           f"bench {meta['bench_id']}: throughput over time (dashed: each "
                           "approach's uptime; dotted: DeBL's full availability; dash-dot: "
                           "MySQL took DeBL's hot keys over)")
    answered = _plot_answers(runs, meta, directory)
    sections = [("Phase latencies (Table 1 analog)", table1(runs)),
                ("Query latency", latency_table(runs)),
                ("Service from uptime (Figure 7.6 in numbers)", service_table(runs)),
                ("Answered by each second since the load started", answered_table(runs)),
                ("Answers before the copy ends", answers_table(runs, meta)),
                ("Ratios of docs/DESIGN.md section 11", ratio_table(runs)),
                *cpu_sections(runs, meta), *tail_sections(directory, runs)]
    intro = experiment_lines(meta)

    md = [f"# DeBL bench {meta['bench_id']}", ""] + [f"- {line}" for line in intro] + [""]
    for title, table in sections:
        md += [f"## {title}", "", table.markdown(), ""]
    md += ["## Throughput over time", "", f"![throughput]({plot.name})", ""]
    md += ["## Answers since the load started", "", f"![answered]({answered.name})", ""]
    md_path = directory / "report.md"
    md_path.write_text("\n".join(md))

    body = [f"<h1>DeBL bench {html.escape(meta['bench_id'])}</h1>", "<ul>"]
    body += [f"<li>{html.escape(line)}</li>" for line in intro] + ["</ul>"]
    for title, table in sections:
        body += [f"<h2>{html.escape(title)}</h2>", table.html()]
    body += ["<h2>Throughput over time</h2>", f'<img src="{plot.name}" alt="throughput">']
    body += ["<h2>Answers since the load started</h2>",
             f'<img src="{answered.name}" alt="answered">']
    html_path = directory / "report.html"
    html_path.write_text(
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>DeBL bench {html.escape(meta['bench_id'])}</title><style>"
        "body{font-family:sans-serif;max-width:1200px;margin:2em auto}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
        "padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
        "p{color:#555;font-size:90%}img{max-width:100%}</style></head><body>"
        + "\n".join(body) + "</body></html>\n")
    return Report(md_path, html_path, plot, answered)


def tail_sections(directory: Path, runs: list[ApproachRun]) -> list[tuple[str, Table]]:
    """The section "The tail" (``debl.bench.tail``): none for a bench without its files."""
    return [(title, Table(headers, rows, note)) for title, headers, rows, note
            in tail_tables(read_tails(directory, runs), runs)]


def tail_report(directory: Path) -> str:
    """The tail of the bench in *directory* as Markdown (``debl report --tail``)."""
    meta, runs = read_bench(Path(directory))
    sections = tail_sections(Path(directory), runs)
    if not sections:
        return f"bench {meta['bench_id']}: no tail recorded (a bench from before it was)"
    return "\n\n".join(f"## {title}\n\n{table.markdown()}" for title, table in sections)


def _plot_answers(runs: list[ApproachRun], meta: dict, directory: Path) -> Path:
    spec = meta["spec"]
    end = copy_end(runs, meta["input"]["bytes"], spec["source_rate"])
    return plot_answered(runs, spec["requests"], end, directory / "answered.png",
                         f"bench {meta['bench_id']}: share of the {spec['requests']:,} requests "
                         "answered since the load started\n(dashed: each approach's uptime; "
                         "dot: its first answer; black: a plain copy's end)")
