"""``debl source``: the sources of input files. ``serve``, a directory over HTTP (the remote
server of an experiment); ``db url`` and ``db init``, the source database (docs/RUNTIME.md,
"The source database"); ``dump``, its table as a day's files with the dump's position."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TypeVar

import click

from debl.bench.source_server import make_server, manifest_cache_dir
from debl.commands.common import config_of, friendly_errors
from loaders.source_dump import LAYOUTS, dump_source
from loaders.source_init import init_source
from loaders.source_url import check_no_password

T = TypeVar("T")


@click.group()
def source() -> None:
    """Input files: serve a directory over HTTP, or fill and dump the source database."""


@source.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--port", type=int, default=8800, show_default=True)
@click.option("--rate", type=float, help="Bandwidth cap in MB/s for all transfers together "
              "(12.5 = 100 Mbit/s).")
@click.pass_context
@friendly_errors
def serve(ctx, directory, port, rate):
    """Serve DIRECTORY on http://127.0.0.1:PORT (index.json, files/NAME) until Ctrl-C.

    index.json lists every file with its manifest: DIRECTORY/index.json's when it matches the
    file, else computed before serving and cached under the state directory (manifests/); and
    the dump's position where DIRECTORY/index.json gives one."""
    try:
        server = make_server(directory, port=port, rate_mb_s=rate,
                             manifest_cache=manifest_cache_dir(config_of(ctx)),
                             progress=lambda line: click.echo(line, err=True))
    except OSError as exc:  # the port is taken, or not ours to take
        raise click.ClickException(f"cannot serve on 127.0.0.1:{port}: {exc.strerror}; give "
                                   "another --port") from exc
    cap = f"capped at {rate} MB/s" if rate else "uncapped"
    click.echo(f"serving {directory} on http://127.0.0.1:{port} ({cap}); Ctrl-C stops")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@source.group()
def db() -> None:
    """The source database: a MariaDB with LinkBench's link table and its binary log, which
    `debl stack up` starts ([source_db] in the config)."""


@db.command()
@click.option("--with-password", is_flag=True,
              help="Print the URL with the password in it, for a client to connect with (it is "
                   "then on your terminal: keep it out of logs and shell history).")
@click.pass_context
@friendly_errors
def url(ctx, with_password):
    """Print the source database's SQLAlchemy URL (mysql+pymysql://USER@HOST:PORT/DB), without
    the password unless asked; stderr says where the password is."""
    config = config_of(ctx)
    if with_password:
        click.echo(config.source_db_url(with_password=True))
        return
    click.echo(config.source_db.url)
    where = ("DEBL_SOURCE_DB_PASSWORD / [source_db] password" if config.source_db.password
             is not None else str(config.source_db_password_file))
    click.echo(f"the password is in {where} (give it to the driver, e.g. "
               "create_engine(url, connect_args={\"password\": ...}), or use --with-password)",
               err=True)


@db.command()
@click.argument("source_spec", metavar="SOURCE")
@click.option("--replace", is_flag=True, help="Drop the rows the table holds first.")
@click.option("--max-bad", type=int, help="Fail once more than N lines are rejected.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
@friendly_errors
def init(ctx, source_spec, replace, max_bad, as_json):
    """Fill the source's link table from the files of SOURCE (a directory, any layout `debl
    generate` writes, or an http:// URL), merged by the merge rule, and record the position of
    the source's log at which the table equals them. No client may write meanwhile."""
    check_no_password(source_spec)
    config = config_of(ctx)
    s = _with_progress("reading the files", as_json, lambda progress: init_source(
        config, source_spec, replace=replace, max_bad=max_bad, progress=progress))
    if as_json:
        click.echo(json.dumps(s.as_dict(), indent=2))
        return
    click.echo(f"`{config.source_db.table}` holds {s.rows:,} rows: the merged {s.lines:,} good "
               f"lines of {s.files} files ({s.bytes / 1e6:,.1f} MB) in {s.seconds:.1f} s")
    click.echo(f"  position: GTID {s.gtid} of source {s.source_id}")
    click.echo(f"  bad lines: {s.rejects}" + (f" (see {s.reject_file})" if s.rejects else ""))


@source.command()
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--files", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--layout", type=click.Choice(LAYOUTS), default="ranges", show_default=True,
              help="ranges: files by id1 range; days: files by time period (a change log).")
@click.option("--overwrite", is_flag=True, help="Replace a data set OUT already holds.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
@friendly_errors
def dump(ctx, out, files, layout, overwrite, as_json):
    """Write the source's link table into OUT as a day's files, with their manifests and
    index.json, from one consistent snapshot while writes go on; index.json carries the
    snapshot's position (`debl load OUT` records it)."""
    s = _with_progress("dumping rows", as_json, lambda progress: dump_source(
        config_of(ctx), out, files=files, layout=layout, overwrite=overwrite, progress=progress))
    if as_json:
        click.echo(json.dumps(s.as_dict(), indent=2))
        return
    click.echo(f"{s.rows:,} rows in {len(s.files)} files ({s.bytes / 1e6:,.1f} MB, {layout}) "
               f"in {s.out_dir}, {s.seconds:.1f} s")
    click.echo(f"  position: GTID {s.position.gtid} of source {s.position.source}")


def _with_progress(label: str, hidden: bool, run: Callable[[Callable[[int, int], None]], T]) -> T:
    """*run* given a ``progress(done, total)`` that moves a bar on stderr (its total known only
    once the work began)."""
    with click.progressbar(length=1, label=label, file=sys.stderr, hidden=hidden) as bar:
        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        return run(progress)
