"""Time the hot path alone: ``loaders.mysql_bulk.load_hot`` on the newest files of a directory.

    python scripts/hot_path_bench.py DIR [--files 2] [--table hot_bench] [--run-bytes N] [--json]

Loads the *files* newest files of DIR (oldest first, as ``debl load`` numbers them) into the
table *table* of the configured MySQL (``debl.toml`` / ``DEBL_*``), then prints the bytes, lines,
rows, each phase's seconds, MB/s over the whole call and the process's peak RSS (``ru_maxrss``:
the client only; the server's memory is its own). docs/LOADING.md, "The hot path's cost", quotes
it. It runs against any checkout: old code without the ``table`` parameter gets the table through
``link_table`` instead, so an A/B of two checkouts is ``PYTHONPATH=A python ...`` then
``PYTHONPATH=B python ...``, alternated.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from debl.config import load_config
from loaders import mysql_bulk
from loaders.rejects import RejectWriter
from loaders.source import LocalSource


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--files", type=int, default=2, help="how many of the newest files")
    parser.add_argument("--table", default="hot_bench")
    parser.add_argument("--run-bytes", type=int, help="merge in runs of this many input bytes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    config = load_config()
    source = LocalSource(args.directory)
    listed = source.list()
    files = list(enumerate(listed))[-args.files:]
    kwargs = {"run_bytes": args.run_bytes} if args.run_bytes else {}
    if "table" in inspect.signature(mysql_bulk.load_hot).parameters:
        kwargs["table"] = args.table
    else:
        config = dataclasses.replace(config, link_table=args.table)
    with tempfile.TemporaryDirectory(prefix="hot-bench-") as tmp:
        with RejectWriter(Path(tmp)).open_part("hot") as part:
            t0 = time.time()
            result = mysql_bulk.load_hot(config, source, files, part, **kwargs)
            wall = time.time() - t0
            part.commit()
    report = {
        "code": str(Path(mysql_bulk.__file__).resolve().parent.parent),
        "files": [f.name for _, f in files], "bytes": result.bytes, "lines": result.lines,
        "rows": result.rows, "rejects": result.rejects, "runs": getattr(result, "runs", None), "wall_s": round(wall, 2),
        "mb_per_s": round(result.bytes / wall / 1e6, 2),
        "phases": {name: round(t1 - t0, 2) for name, t0, t1 in result.phases},
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>13}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
