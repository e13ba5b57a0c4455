"""What one bench experiment is: ``BenchSpec``, reproducible from it alone, with the ``debl bench``
command line that repeats it.

The defaults are the paper's setting (docs/WORKLOAD.md): a ``ranges`` dump and requests of which
``DEFAULT_RECENCY_SHARE`` follow recency; ``days`` and ``recency_share=0`` (LinkBench alone) are
the other scenarios.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, fields
from pathlib import Path

from debl.bench.baselines import get_approach
from debl.errors import ConfigError
from debl.workload.spec import GenerateSpec

DEFAULT_APPROACHES = ("fileCopy", "bulkLoad-mysql", "bulkLoad-hbase", "batchPut-hbase",
                      "debl-cold", "debl")
GEN_HF_STARTS = ("uptime", "load")
# When a query phase starts: at the approach's uptime, or, for the approaches whose target is
# the coordinator, with the load (its requests wait there until answerable; docs/BENCHMARKS.md,
# "Answers before the copy ends").
QUERIES_FROM = ("uptime", "load")
# The bench's share of requests by recency (docs/WORKLOAD.md, "Recency share": why 0.9).
DEFAULT_RECENCY_SHARE = 0.9
DEFAULT_LAYOUT = "ranges"  # the paper's setting (docs/DESIGN.md section 3)


@dataclass(frozen=True)
class BenchSpec:
    """One experiment. ``source_rate`` in MB/s (None: uncapped); ``requests`` and ``duration``
    bound each query phase (whichever first); ``request_rate`` makes it open loop (requests/s
    over all threads; None: closed loop); ``hot_share`` is debl's hot share of the bytes;
    ``recency_share`` the requests' share by recency; the layout is ``input.layout``.
    ``queries_from`` "load" runs the query client of each approach served by the coordinator
    beside its load, asking from just before the load starts (the baselines' still from their
    uptime)."""

    input: GenerateSpec
    data_dir: Path
    approaches: tuple[str, ...] = DEFAULT_APPROACHES
    source_rate: float | None = None
    threads: int = 16
    requests: int = 10000
    duration: float | None = None
    request_rate: float | None = None
    seed: int = 1
    chunk_size: int | None = None
    bucket_width: int | None = None
    hot_share: float = 0.2
    buckets: int = 16  # without bucket_width: loading.bucket_target_bytes = cold bytes / buckets
    recency_share: float = DEFAULT_RECENCY_SHARE
    query_timeout: float = 600.0
    full_timeout: float = 3600.0
    gen_hf_start: str = "load"  # or "uptime" (debl.bench.gen_hf_process)
    queries_from: str = "uptime"  # or "load" (QUERIES_FROM)

    def __post_init__(self) -> None:
        if self.gen_hf_start not in GEN_HF_STARTS:
            raise ConfigError(f"gen_hf_start must be one of {', '.join(GEN_HF_STARTS)}")
        if self.queries_from not in QUERIES_FROM:
            raise ConfigError(f"--queries-from must be one of {', '.join(QUERIES_FROM)}, "
                              f"not {self.queries_from!r}")
        if not self.approaches:
            raise ConfigError("a bench needs at least one approach")
        for name in self.approaches:
            get_approach(name)
        if len(set(self.approaches)) != len(self.approaches):
            raise ConfigError("an approach is listed twice")
        if self.threads < 1 or self.requests < 1:
            raise ConfigError("--threads and --requests must be at least 1")
        if self.buckets < 1:
            raise ConfigError(f"--buckets must be at least 1, not {self.buckets}")
        if not 0.0 < self.hot_share < 1.0:
            raise ConfigError(f"--hot-share must be in (0, 1), not {self.hot_share}")
        if self.request_rate is not None and self.request_rate <= 0:
            raise ConfigError("--rate must be positive (leave it out for a closed loop)")
        if self.source_rate is not None and self.source_rate <= 0:
            raise ConfigError("--source-rate must be positive (leave it out for uncapped)")
        if not 0.0 <= self.recency_share <= 1.0:
            raise ConfigError(f"--recency-share must be in [0, 1], not {self.recency_share}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["data_dir"] = str(self.data_dir)
        d["approaches"] = list(self.approaches)
        return d

    @staticmethod
    def from_dict(d: dict) -> "BenchSpec":
        """Also reads the bench.json of benches made before layouts, recency, the gen_HF start
        and the query start existed (days, LinkBench's requests alone, gen_HF started at
        uptime, queries from uptime)."""
        d = dict(d)
        d.setdefault("recency_share", 0.0)
        d.setdefault("gen_hf_start", "uptime")
        d.setdefault("queries_from", "uptime")
        d["input"] = GenerateSpec(**{"layout": "days", **d["input"]})
        d["data_dir"] = Path(d["data_dir"])
        d["approaches"] = tuple(d["approaches"])
        return BenchSpec(**d)

    def command_line(self) -> str:
        """The ``debl bench`` command that repeats this experiment."""
        g = self.input
        args = ["debl", "bench", "--approaches", ",".join(self.approaches),
                "--max-id", str(g.max_id), "--files", str(g.files), "--days", str(g.days),
                "--layout", g.layout, "--input-seed", str(g.seed), "--data", str(self.data_dir),
                "--threads", str(self.threads), "--requests", str(self.requests),
                "--seed", str(self.seed), "--hot-share", f"{self.hot_share:g}",
                "--recency-share", f"{self.recency_share:g}"]
        if g.max_degree is not None:
            args += ["--max-degree", str(g.max_degree)]
        if self.source_rate is not None:
            args += ["--source-rate", f"{self.source_rate:g}"]
        if self.duration is not None:
            args += ["--duration", f"{self.duration:g}"]
        if self.request_rate is not None:
            args += ["--rate", f"{self.request_rate:g}"]
        if self.chunk_size is not None:
            args += ["--chunk-size", str(self.chunk_size)]
        if self.bucket_width is not None:
            args += ["--bucket-width", str(self.bucket_width)]
        else:
            args += ["--buckets", str(self.buckets)]
        if self.gen_hf_start != "load":
            args += ["--gen-hf-start", self.gen_hf_start]
        args += ["--queries-from", self.queries_from]  # always: it decides what is measured
        defaults = {f.name: f.default for f in fields(GenerateSpec)}
        for name in ("start_id", "update_share", "hidden_share", "link_types", "bad_lines", "ids"):
            if getattr(g, name) != defaults[name]:
                raise ConfigError(f"{name} is not a `debl bench` option; "
                                  "use run_bench() for such inputs")
        return shlex.join(args)
