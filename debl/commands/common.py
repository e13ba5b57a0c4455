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
            # Notes (``add_note``) say what to do next, e.g. how to resume a load.
            raise click.ClickException("\n".join([str(exc), *getattr(exc, "__notes__", ())])
                                       ) from exc

    return wrapper


_UNITS = {"": 1, "B": 1, "K": 1000, "KB": 1000, "M": 10**6, "MB": 10**6, "G": 10**9,
          "GB": 10**9, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}


def parse_size(text: str) -> int:
    """'256MiB', '1.5GB', '4096' -> bytes; a click error for anything else."""
    value = text.strip().upper().replace(" ", "")
    number = value.rstrip("KMGIB")
    unit = value[len(number):]
    try:
        if unit not in _UNITS:
            raise ValueError
        size = int(float(number) * _UNITS[unit])
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size (e.g. 256MiB, 1GB, 4096)") from None
    if size <= 0:
        raise click.BadParameter(f"{text!r}: a size must be positive")
    return size
