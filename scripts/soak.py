"""The soak's command line: many client threads through the coordinator for minutes while
gen_HF converts; a Markdown table and JSON (docs/RELIABILITY.md, "Soak").

    python scripts/soak.py                                  # 200 threads, 4 processes, 10 min
    python scripts/soak.py --threads 20 --duration 60       # a short one

Runs in the namespace ``<mysql_database>_soak`` of the configured stack (``debl stack up``
first); results go to ``<state_dir>/soak/<run id>/`` (results.json, table.md, logs).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from debl.config import load_config
from debl.errors import DeblError
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the harness
from harness.soak import SoakSpec, run_soak  # noqa: E402


@click.command()
@click.option("--threads", type=click.IntRange(min=1), default=SoakSpec.threads, show_default=True)
@click.option("--processes", type=click.IntRange(min=1), default=SoakSpec.processes,
              show_default=True, help="Client worker processes sharing the threads.")
@click.option("--duration", type=click.FloatRange(min=60), default=SoakSpec.duration_s,
              show_default=True, help="Seconds of querying.")
@click.option("--query-timeout", type=click.FloatRange(min=1), default=SoakSpec.query_timeout_s,
              show_default=True, help="The deadline of each query, in seconds.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Result directory (default <state_dir>/soak/<run id>).")
def main(threads: int, processes: int, duration: float, query_timeout: float,
         out: Path | None) -> None:
    """Query through the coordinator under load while gen_HF converts; report errors, latency,
    answers against the reference, and whether memory and MySQL sessions stay flat."""
    config = load_config()
    out = out or config.state_dir / "soak" / time.strftime("S%Y%m%d-%H%M%S")
    spec = SoakSpec(threads=threads, processes=processes, duration_s=duration,
                    query_timeout_s=query_timeout)
    try:
        result = run_soak(config, out, spec, report=lambda text: click.echo(text, err=True))
    except (DeblError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(result.markdown())
    click.echo(f"results: {out}/results.json")
    sys.exit(0 if result.clean else 1)


if __name__ == "__main__":
    main()
