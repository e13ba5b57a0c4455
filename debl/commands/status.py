"""``debl status``: the current load (and a new one beside it), its answers before uptime, bucket
states, demand, running gen_HF jobs."""

from __future__ import annotations

import json
import time

import click

from debl.catalog import Catalog, EarlyAnswering, HotState, LoadState
from debl.commands.common import config_of, friendly_errors, printable
from debl.status import read_status
from loaders.source_url import redact_url


def _when(epoch: float | None) -> str:
    return "-" if epoch is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def _hot(load: dict) -> str:
    """Where a load's hot rows are: MySQL (since when), or its hot files' buckets."""
    state = load["hot_state"]
    if state == HotState.NONE:
        return "none (no hot file)"
    if state == HotState.MYSQL:
        since = ("" if load["taken_over_s"] is None else
                 f", MySQL took them over {load['taken_over_s']:,.1f} s after the start")
        return (f"MySQL: {load['hot_rows']:,} rows, id1 {load['hot_k_lo']}..{load['hot_k_hi']}"
                f"{since}")
    if state == HotState.FAILED:
        return "MySQL's hot path failed: answered from the hot files' buckets; resume the load"
    return ("MySQL is taking them in (the paper's uptime waits for it)" if load["wait_for_hot"]
            else "answered from the hot files' buckets while MySQL takes them in")


def _share(x: float) -> str:
    return f"{100 * x:.1f}%"


def _early(early: dict, up: bool, failed: bool = False) -> list[str]:
    """A load's answers before its uptime (read_status's ``early``): whether it answers early
    or stopped at a false claim, the shares answerable, the bytes fetched on demand, the keys
    waiting, then each claim found false with the early answers given in the id1s it
    affects."""
    stopped = early["state"] == EarlyAnswering.STOPPED
    head = ("stopped at a false claim: queries wait for the uptime" if stopped and not up else
            "stopped at a false claim before the uptime" if stopped else
            "answered before the uptime" if up else
            "answering before the uptime from what the failed load copied" if failed else
            "answering before the uptime")
    were = "were" if up or stopped else "are"
    lines = [f"  early      {head}; {_share(early['key_share'])} of the key space and "
             f"{_share(early['bytes_share'])} of the bytes ({_mb(early['answerable_bytes'])} of "
             f"{_mb(early['total_bytes'])}) {were} answerable",
             f"             {_mb(early['demand_bytes'])} fetched on demand, "
             f"{early['keys_waiting']:,} key(s) waiting now"]
    for c in early["false_claims"]:
        lo, hi = c["affected"]
        lines += [f"  false claim #{c['claim_no']} in {c['file']} at byte {c['offset']:,} "
                  f"({c['kind']}): {c['detail']}",
                  f"             id1 {lo}..{hi} affected: {c['early_answers']:,} early "
                  "answer(s) given in them"]
    more = early["false_claims_total"] - len(early["false_claims"])
    if more > 0:
        lines.append(f"             and {more:,} more false claim(s)")
    return lines


def render(s: dict) -> str:
    """The status dict of debl.status.read_status as text."""
    load = s["load"]
    if load is None:
        return "no load yet: run `debl load SOURCE`"
    out = [f"load {load['load_id']} ({load['approach']}) from {load['source']}",
           f"  state      {load['state']}" + (f": {load['error'].splitlines()[0][:200]}"
                                                if load["error"] else ""),
           f"  started    {_when(load['started'])} ({load['age_s']:,.0f} s ago)"]
    if load["uptime_s"] is not None:
        out.append(f"  uptime     {load['uptime_s']:,.1f} s after the start "
                   f"({_when(load['uptime'])})")
    else:
        out.append("  uptime     not yet: queries wait")
    out.append(f"  hot        {_hot(load)}")
    if load["position"]:
        out.append(f"  position   the dump's: GTID {load['position']['gtid']} of source "
                   f"{printable(load['position']['source'])}")
    if load.get("early"):
        out.extend(_early(load["early"], load["uptime"] is not None,
                          load["state"] == LoadState.FAILED))
    bmap = load["bucket_map"]
    out.append("  buckets    " + ("not decided yet" if bmap is None else
                                  f"fixed width {bmap['width']}" if bmap["kind"] == "width" else
                                  f"{bmap['buckets']} at sampled split points"))
    rejects = load.get("rejects") or {"total": 0}
    if rejects["total"]:
        per_file = ", ".join(f"{f['file']}: {f['rejects']}" for f in rejects["files"][:5])
        out.append(f"  rejects    {rejects['total']:,} lines ({per_file}); `debl ui` shows them")
    for title, other in (("loading", s.get("loading")), ("previous", s.get("previous"))):
        if other:
            state = other["state"] + (f": {other['error'].splitlines()[0][:200]}"
                                      if other["error"] else "")
            up = ("" if other["uptime_s"] is None else
                  f", up {other['uptime_s']:,.1f} s after its start")
            out.append(f"  {title:<10} load {other['load_id']} ({other['approach']}) from "
                       f"{other['source']}: {state}{up}; hot {_hot(other)}")
            if other.get("early"):
                out.extend("  " + line for line in _early(
                    other["early"], other["uptime"] is not None,
                    other["state"] == LoadState.FAILED))
    for d in s.get("dropping", []):
        out.append(f"  dropping   load {d['load_id']} ({d['approach']}) from {d['source']}: "
                   f"cleanup began dropping its stores {d['dropping_s']:,.0f} s ago; never "
                   "served again (a cleanup that was stopped: `debl cleanup` finishes it)")
    if s["phases"]:
        out.append("  phases     items   sum s  wall s        bytes")
        for p in s["phases"]:
            still = f"  ({p['open']} open)" if p["open"] else ""
            out.append(f"    {p['phase']:<11}{p['items']:>5}{p['seconds']:>8.1f}"
                       f"{p['wall_s']:>8.1f}{_mb(p['bytes']):>13}{still}")
    b = s["buckets"]
    states = ", ".join(f"{n} {state}" for state, n in b["by_state"].items() if n) or "none"
    out.append(f"buckets    {b['loaded']}/{b['total']} loaded ({states}); "
               f"{_mb(b['loaded_bytes'])} of {_mb(b['bytes'])}, {b['rows']:,} cold rows")
    if b["total"]:
        out.append(f"           largest {_mb(b['largest_bytes'])}, mean "
                   f"{_mb(b['bytes'] // b['total'])}")
    if "list" in b:
        out.append(f"  {'bucket':>7} {'k_lo':>20} {'k_hi':>20} {'cold id1 span':>31} "
                   f"{'rows':>11} {'bytes':>13}  state")
        for e in b["list"]:
            span = f"{e['c_lo']}..{e['c_hi']}"
            out.append(f"  {e['b_index']:>7} {e['k_lo']:>20} {e['k_hi']:>20} {span:>31} "
                       f"{e['rows']:>11,} {e['bytes']:>13,}  {e['state']}")
    fa = s["full_availability"]
    if fa:
        out.append(f"full availability {fa['seconds']:,.1f} s after the start "
                   f"({fa['after_uptime_s']:,.1f} s after uptime)")
    d = s["demand"]
    if d["total"]:
        top = ", ".join(f"bucket {t['b_index']}: {t['waiting']}" for t in d["top"])
        out.append(f"demand     {d['total']} queries waiting on {d['buckets']} buckets from "
                   f"{d['coordinators']} coordinator(s); top: {top}")
    else:
        out.append("demand     no query waiting")
    a = s["answers"]
    if a["total"] or a["by_route"].get("timeouts"):
        n = a["by_route"]
        early = (f"{n.get('early', 0):,} early (before the uptime), " if n.get("early") or
                 load.get("early") else "")
        out.append(f"answers    {a['total']:,} by {a['coordinators']} coordinator(s): {early}"
                   f"{n.get('immediate', 0):,} at once, {n.get('raw', 0):,} raw (bucket not "
                   f"loaded), {n.get('buffered', 0):,} when their bucket landed, "
                   f"{n.get('waited_uptime', 0):,} at uptime, {n.get('partial', 0):,} partial; "
                   f"{n.get('timeouts', 0):,} timed out")
        if any(route.startswith("via_") for route in n):
            out.append(f"           at once from MySQL alone {n.get('via_mysql', 0):,}, from "
                       f"HBase {n.get('via_hbase', 0):,}; hot keys from the hot files "
                       f"{n.get('via_hot_raw', 0):,}")
    out.extend(_followers(s.get("followers", [])))
    if s["running_jobs"]:
        out.append("running    bucket  run id                      for s  attempt")
        for j in s["running_jobs"]:
            secs = "-" if j["running_s"] is None else f"{j['running_s']:.1f}"
            out.append(f"           {j['b_index']:>6}  {str(j['run_id'] or '-'):<24}"
                       f"{secs:>8}  {j['attempts']:>7}")
    for j in s["failed_jobs"]:
        out.append(f"failed     bucket {j['b_index']} after {j['attempts']} attempt(s): "
                   f"{j['error'].splitlines()[0] if j['error'] else '-'}")
    # Names, sources and errors come from outside (a file named with ESC ] 0 ; once set the
    # terminal's title): each line is shown escaped (docs/RELIABILITY.md, "Security").
    return "\n".join(printable(line) for line in out)


def _followers(followers: list[dict]) -> list[str]:
    """Each source's follower (read_status's ``followers``): where it is, how far behind the
    source's head, what it captured, its error and what to do."""
    out = []
    for f in followers:
        behind = ("" if f["behind"] is None else
                  f", {f['behind']:,} transaction(s) behind the source's head {f['head_gtid']} "
                  f"(read {f['head_age_s']:,.0f} s ago)")
        lag = ("" if f["lag_s"] is None else
               f"; its last captured commit was captured {f['lag_s']:,.1f} s after it, "
               f"{f['captured_age_s']:,.0f} s ago")
        out.append(f"follower   source {f['source']}: {f['state']}, captured up to GTID "
                   f"{f['gtid']}{behind}")
        out.append(f"           {f['changes']:,} changes captured{lag}; host {f['host']} pid "
                   f"{f['pid']}, last sign of life {f['heartbeat_age_s']:,.0f} s ago")
        if f["error"]:
            out.append(f"           error: {f['error']}")
    return out


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True,
              help="How many buckets to list by demand.")
@click.option("--buckets", "every_bucket", is_flag=True,
              help="List every bucket: b_index, k_lo, k_hi, cold id1 span, rows, bytes, state.")
@click.pass_context
@friendly_errors
def status(ctx: click.Context, as_json: bool, top: int, every_bucket: bool) -> None:
    """Uptime, hot path, buckets loaded / total, demand and running gen_HF jobs of the current
    load, and a new load beside it."""
    with Catalog(config_of(ctx)) as catalog:
        report = read_status(catalog, top=top, every_bucket=every_bucket)
    for brief in (report["load"], report["loading"], report["previous"], *report["dropping"]):
        if brief and brief.get("source"):  # recorded without a password; a catalog is not trusted
            brief["source"] = redact_url(brief["source"])
    click.echo(json.dumps(report, indent=2) if as_json else render(report))
