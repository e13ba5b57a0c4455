"""The report of ``debl bench --writes`` (``debl.bench.fresh``; docs/FRESHNESS.md, "The bench
with writes"): ``fresh.md`` from the result, a row per run and per phase, and ``fresh.png``, the
read p99 and the follower's lag p99 of every second, from the runs' ``timeline.csv``."""

from __future__ import annotations

import csv
from pathlib import Path

PHASES = ("load", "conversion", "after")


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


def render(result: dict) -> str:
    """The bench as Markdown: a row per run, then its phases."""
    spec = result["spec"]
    rate = "uncapped" if spec["source_rate"] is None else f"{spec['source_rate']} MB/s"
    lines = [f"# Fresh answers under writes: {result['bench_id']}", "",
             f"{spec['input']['max_id']:,} ids in {spec['input']['files']} files "
             f"({spec['input']['layout']}), source {rate}; per run {spec['duration']:g} s of "
             f"reads at {spec['read_rate']:g}/s over {spec['threads']} threads and writes at "
             f"{spec['write_rate']:g}/s over {spec['writers']} connections, from the moment "
             "the follower follows (s after the load's start: 'client s'). Read latency from "
             "each read's send; lag from a write's acknowledgement to its capture.", "",
             "| run | client s | up s | in HBase s | reads | read p50 / p99 / max ms | "
             "writes/s (asked) | lag p50 / p99 ms | applied on demand / background | "
             "checked | violations | verify missing / extra / different |",
             "|---|---:|---:|---:|---:|---|---:|---|---|---:|---:|---|"]
    for run in result["runs"]:
        r, lag, w = run["reads"]["all"], run["lag"]["all"], run["writes"]
        a, c, f = run["against_source"], run["check"], run["fresh"]
        lines.append(
            f"| {run['name']} | {_ms(run['client_started_s'])} | {run['uptime_s']:.1f} | "
            f"{_ms(run['converted_s'])} | "
            f"{r['n']:,} | {_ms(r['p50_ms'])} / {_ms(r['p99_ms'])} / {_ms(r['max_ms'])} | "
            f"{w['per_s']:,.0f} ({w['asked_per_s']:g}) | {_ms(lag['p50_ms'])} / "
            f"{_ms(lag['p99_ms'])} | {f['applied_on_demand']:,} / {f['applied_background']:,} "
            f"| {c['checked']:,} | {_violations(c)} | "
            f"{a['missing']} / {a['extra']} / {a['different']} |")
    lines += ["", "| run | phase | reads | read p50 / p99 / max ms | lag p50 / p99 ms |",
              "|---|---|---:|---|---|"]
    for run in result["runs"]:
        for phase in PHASES:
            r, lag = run["reads"][phase], run["lag"][phase]
            lines.append(f"| {run['name']} | {phase} | {r['n']:,} | {_ms(r['p50_ms'])} / "
                         f"{_ms(r['p99_ms'])} / {_ms(r['max_ms'])} | {_ms(lag['p50_ms'])} / "
                         f"{_ms(lag['p99_ms'])} |")
    lines += ["", "Where the CPU went while the client ran (CPU seconds by role, debl.bench.cpu):",
              ""]
    for run in result["runs"]:
        cpu = run["cpu"]
        if cpu is not None:
            roles = ", ".join(f"{role} {s:,.0f}" for role, s in cpu["by_role"].items() if s >= 1)
            lines.append(f"- {run['name']}: machine busy {cpu['busy_s']:,.0f} of "
                         f"{cpu['cores'] * cpu['seconds']:,.0f} s: {roles}")
    for run in result["runs"]:
        day = run["next_day"]
        if day is not None:
            lines.append(f"- {run['name']}: the next day {day['load_id']} dumped at "
                         f"{_ms(day.get('dumped_s'))} s, current at {_ms(day.get('current_s'))} "
                         f"s, rolled back at {_ms(day.get('rolled_back_s'))} s")
    lines += ["", "The slowest 1% of each run's reads (debl.bench.tail):", ""]
    lines += [f"- {run['name']}: {run['slowest_reads'] or '-'}" for run in result["runs"]]
    for promised in (True, False):
        runs = [run for run in result["runs"] if (run["mode"] != "off") == promised]
        if runs:
            checked = sum(run["check"]["checked"] for run in runs)
            wrong = sum(v["count"] for run in runs for v in run["check"]["violations"].values())
            lines.append(f"\n{'With freshness on (on, serial)' if promised else 'Freshness off'}"
                         f": {checked:,} answers checked, {wrong:,} violations" +
                         ("." if promised else " (off promises no contract: an answer may be "
                          "older than its arrival, docs/FRESHNESS.md)."))
    return "\n".join(lines) + "\n"


def _violations(check: dict) -> str:
    kinds = check["violations"]
    total = sum(v["count"] for v in kinds.values())
    return str(total) if not total else f"{total:,} ({', '.join(sorted(kinds))})"


def plot(result: dict, directory: Path) -> Path:
    """``fresh.png``: per mix, the read p99 and the follower's lag p99 per second since the
    load's start, a line per run."""
    # lazy import: matplotlib would cost every `debl` command's start-up (docs/ARCHITECTURE.md,
    # "Lazy imports")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy import: as matplotlib above

    mixes = list(dict.fromkeys(run["mix"] for run in result["runs"]))
    fig, axes = plt.subplots(2, len(mixes), figsize=(6 * len(mixes), 7), squeeze=False,
                             sharex=True)
    for column, mix in enumerate(mixes):
        for run in (r for r in result["runs"] if r["mix"] == mix):
            with open(directory / run["name"] / "timeline.csv") as f:
                rows = list(csv.DictReader(f))
            for row_no, field in enumerate(("read_p99_ms", "lag_p99_ms")):
                points = [(int(r["t_s"]), float(r[field])) for r in rows if r[field]]
                if points:
                    axes[row_no][column].plot(*zip(*points), label=run["name"], linewidth=1)
        axes[0][column].set_title(mix)
        axes[0][column].set_ylabel("read p99 per second, ms")
        axes[1][column].set_ylabel("follower lag p99 per second, ms")
        axes[1][column].set_xlabel("seconds since the load's start")
        for ax in axes[:, column]:
            ax.set_yscale("log")
            ax.legend(fontsize=7)
    fig.tight_layout()
    path = directory / "fresh.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
