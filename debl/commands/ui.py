"""``debl ui``: the live status page on 127.0.0.1 (docs/UI.md)."""

from __future__ import annotations

import click

from debl.commands.common import config_of, friendly_errors
from debl.ui.server import serve_ui


@click.command("ui")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port on 127.0.0.1 (default: the ui.port setting, 8790; 0: any free one).")
@click.pass_context
@friendly_errors
def ui(ctx: click.Context, port: int | None) -> None:
    """Serve a live status page of the load on 127.0.0.1: phases, bucket map, answers per
    second by route, failures. Read-only; Ctrl-C stops it."""
    serve_ui(config_of(ctx), port, report=click.echo)
