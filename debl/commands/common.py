"""What every command shares: the config, loaded once, and errors turned into click messages."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from debl.config import Config, load_config
from debl.errors import DeblError


def config_of(ctx: click.Context) -> Config:
    """The config of this invocation, loaded on first use."""
    root = ctx.find_root()
    if not isinstance(root.obj, Config):
        root.obj = load_config()
    return root.obj


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn DeblError into ClickException, so users see a message, not a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DeblError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper
