#!/usr/bin/env python3
"""How much a conversion order can shorten buffered waits: a model of the paper's buffering
(``debl`` against ``debl-fifo``) with closed-loop clients (docs/BENCHMARKS.md, "How much room
the order has").

The model: ``--threads`` closed-loop threads ask the bench's own requests
(``debl.workload.requests``, the same recency share and seed); a request whose id1 lies in a
cold bucket not yet converted waits for that bucket, any other is answered in ``--request-ms``.
gen_HF converts ``--run-buckets`` buckets per run of ``--run-s`` seconds, chosen at the run's
start by the buffered queries then (demand order, lowest bucket on ties) or by bucket number
(fifo); a run's queries are released at its end. Cold buckets are equal id ranges below the hot
files' ids (a range dump's hot files hold the newest ``--hot-ids`` of the ids). It prints each
order's mean wait of buffered queries, their number, and the ratio, over ``--seeds`` runs.

    python scripts/order_model.py --max-id 4002910 --recency-share 0.9 --buckets 64

Pitfall: the model leaves out what both orders share (the coordinator's poll, gen_HF's start);
it is meant for the ratio and for what moves it, not for absolute seconds. With the defaults it
gives the measured waits of the 1 GiB bench within about 10% (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse

import numpy as np

from debl.errors import DeblError
from debl.workload.requests import READ_SHAPE, RequestSpec, RequestStream


def cold_demand(max_id: int, recency_share: float, shape: float, buckets: int, hot_ids: float,
                seed: int, draws: int = 2_000_000) -> np.ndarray:
    """The share of all requests that falls in each cold bucket (bucket 0: the oldest ids)."""
    id1, _ = RequestStream(RequestSpec(max_id=max_id, seed=seed, shape=shape,
                                       recency_share=recency_share)).draw(draws)
    cold_end = 1 + (max_id - 1) * (1.0 - hot_ids)
    edges = np.linspace(1, cold_end, buckets + 1)
    cold = id1[id1 < cold_end]
    return np.bincount(np.searchsorted(edges, cold, side="right") - 1,
                       minlength=buckets)[:buckets] / draws


def mean_wait(share: np.ndarray, order: str, threads: int, run_buckets: int, run_s: float,
              request_s: float, seed: int) -> tuple[float, int]:
    """(mean wait of buffered queries, their number) until every bucket is converted."""
    rng = np.random.default_rng(seed)
    loaded = np.zeros(len(share), dtype=bool)
    bucket = np.full(threads, -1)  # the bucket each thread waits on (-1: none left)
    since = np.zeros(threads)  # when its query was buffered

    def ask(thread: int, now: float) -> None:
        """The thread asks on from *now* until a request falls on an unconverted bucket."""
        open_share = np.where(loaded, 0.0, share)
        p = open_share.sum()
        if p <= 0.0:
            bucket[thread] = -1
            return
        since[thread] = now + rng.geometric(p) * request_s
        bucket[thread] = rng.choice(len(share), p=open_share / p)

    for thread in range(threads):
        ask(thread, 0.0)
    now, waits = 0.0, []
    while not loaded.all():
        todo = np.flatnonzero(~loaded)
        if order == "demand":
            waiting = (bucket >= 0) & (since <= now)
            demand = np.bincount(bucket[waiting], minlength=len(share))
            todo = todo[np.lexsort((todo, -demand[todo]))]
        chosen = todo[:run_buckets]
        now += run_s
        loaded[chosen] = True
        for thread in np.flatnonzero(np.isin(bucket, chosen)).tolist():
            if since[thread] <= now:  # buffered before its bucket landed
                waits.append(now - since[thread])
            ask(thread, max(now, since[thread]))
    return float(np.mean(waits)), len(waits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-id", type=int, default=4_002_910)
    parser.add_argument("--recency-share", type=float, default=0.9)
    parser.add_argument("--shape", type=float, default=READ_SHAPE,
                        help="Zipf shape of LinkBench's draws and of the recency draws")
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--hot-ids", type=float, default=0.2,
                        help="share of the ids in hot files; 0 models a change log, where "
                             "every id has cold rows")
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--run-buckets", type=int, default=2)
    parser.add_argument("--run-s", type=float, default=1.3, help="one gen_HF run (measured: 1.3)")
    parser.add_argument("--request-ms", type=float, default=17.0,
                        help="an answered request, per thread (50 threads at ~3,000 req/s)")
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    if not 0.0 <= args.hot_ids < 1.0:
        parser.error(f"--hot-ids is a share of the ids, from 0 up to (not including) 1, not "
                     f"{args.hot_ids}")
    if min(args.buckets, args.threads, args.run_buckets, args.seeds) < 1:
        parser.error("--buckets, --threads, --run-buckets and --seeds must be at least 1")
    try:
        share = cold_demand(args.max_id, args.recency_share, args.shape, args.buckets,
                            args.hot_ids, seed=1)
    except DeblError as exc:  # the request generator's own check of its settings
        parser.error(str(exc))
    if not share.all():
        parser.error(f"some of the {args.buckets} cold buckets got no request in the sample: "
                     "give fewer --buckets or a larger --max-id")
    print(f"cold share of requests {share.sum():.3f}; most / least wanted cold bucket "
          f"{share.max() / share.min():.1f}x")
    results = {}
    for order in ("demand", "fifo"):
        runs = [mean_wait(share, order, args.threads, args.run_buckets, args.run_s,
                          args.request_ms / 1000, seed) for seed in range(args.seeds)]
        results[order] = np.mean([w for w, _ in runs])
        print(f"{order:6s}  mean wait {results[order]:5.2f} s, "
              f"{np.mean([n for _, n in runs]):5.0f} buffered")
    print(f"demand / fifo: {results['demand'] / results['fifo']:.2f}")


if __name__ == "__main__":
    main()
