"""What an open status page costs the coordinator (docs/UI.md, "What it costs").

    python scripts/ui_cost.py [--pairs 2] [--duration 30] [--threads 4] [--processes 1]
                              [--warmup 1]

Runs ``debl query --target debl`` on the current load, alternately without and with ``debl ui``
serving and a headless Chromium polling its page (Debian's, as the page tests use it), each
pair in the other order than the last one (A B, B A, ...) so that a machine getting slower or
faster weighs on both alike, and prints each run's requests/s and the median ratio with / without.
Uses the config of the working directory (``debl.toml``, ``DEBL_*``), like every ``debl``
command; the page's port is a free one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager

DEBL = [sys.executable, "-m", "debl"]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def page_open():
    """``debl ui`` on a free port and a headless Chromium polling its page, until the end."""
    port = _free_port()
    ui = subprocess.Popen([*DEBL, "ui", "--port", str(port)], stdout=subprocess.DEVNULL)
    profile = tempfile.mkdtemp(prefix="ui-cost-chromium-")
    browser = None
    try:
        deadline = time.monotonic() + 60
        while True:  # the page answers
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or ui.poll() is not None:
                    raise SystemExit("debl ui did not start: see its message above") from None
                time.sleep(0.2)
        browser = subprocess.Popen(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                    f"http://127.0.0.1:{port}/"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)  # the page loaded and polling
        yield
    finally:
        for proc in (browser, ui):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def query_rate(args: argparse.Namespace) -> float:
    """requests/s of one ``debl query --target debl`` run."""
    out = subprocess.run([*DEBL, "query", "--target", "debl", "--threads", str(args.threads),
                          "--processes", str(args.processes), "--duration", str(args.duration),
                          "--json"], check=True, capture_output=True, text=True).stdout
    return float(json.loads(out)["throughput"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per run")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1,
                        help="runs not counted first (the stores' caches warm up)")
    args = parser.parse_args(argv)
    if shutil.which("chromium") is None:
        raise SystemExit("no chromium: bash scripts/setup.sh installs it")
    for _ in range(args.warmup):
        print(f"warm-up: {query_rate(args):,.0f} requests/s (not counted)", flush=True)
    runs: dict[str, list[float]] = {"without": [], "with": []}
    for pair in range(args.pairs):
        for kind in (("without", "with") if pair % 2 == 0 else ("with", "without")):
            if kind == "with":
                with page_open():
                    rate = query_rate(args)
            else:
                rate = query_rate(args)
            runs[kind].append(rate)
            print(f"pair {pair + 1}, {kind:<7} the page: {rate:,.0f} requests/s", flush=True)
    ratios = [w / wo for w, wo in zip(runs["with"], runs["without"])]
    print(f"median requests/s without the page {statistics.median(runs['without']):,.0f}, "
          f"with it {statistics.median(runs['with']):,.0f}; with / without per pair: "
          + ", ".join(f"{r:.3f}" for r in ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
