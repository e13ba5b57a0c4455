"""What every command shares: the config, loaded once, and errors turned into click messages."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import click

from debl.config import Config, load_config
from debl.config.names import OldSpellingWarning
from debl.errors import DeblError


def config_of(ctx: click.Context) -> Config:
    """The config of this invocation, loaded on first use; an old spelling of a setting is
    shown as one line on stderr, naming the new spelling."""
    root = ctx.find_root()
    if not isinstance(root.obj, Config):
        caught: list[warnings.WarningMessage] = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", OldSpellingWarning)
                root.obj = load_config()
        finally:  # said also when the file has an error further down
            for warning in caught:
                if issubclass(warning.category, OldSpellingWarning):
                    click.echo(f"warning: {warning.message}", err=True)
                else:
                    warnings.warn_explicit(warning.message, warning.category,
                                           warning.filename, warning.lineno)
    return root.obj


# The services' client libraries, by the top-level package of their exceptions. An error of
# theirs that DeBL did not word itself (a server-side failure it did not foresee) still reaches
# the user as a message that names the service, never as a traceback.
LIBRARY_SERVICES = {"pymysql": "MySQL", "MySQLdb": "MySQL", "thriftpy2": "HBase (Thrift)",
                    "happybase": "HBase (Thrift)", "py4j": "Spark"}


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn DeblError, and any error of a service's client library, into ClickException, so
    users see a message, not a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DeblError as exc:
            # Notes (``add_note``) say what to do next, e.g. how to resume a load.
            raise click.ClickException(printable(
                "\n".join([str(exc), *getattr(exc, "__notes__", ())]), newlines=True)) from exc
        except Exception as exc:
            service = LIBRARY_SERVICES.get(type(exc).__module__.partition(".")[0])
            if service is None:
                raise
            raise click.ClickException(
                f"{service} failed: {type(exc).__name__}: {exc}. Check the service "
                "(`debl stack status`, its log under the state directory) and run the command "
                "again; a load that stopped continues with `debl load SOURCE --resume LOAD_ID` "
                "(`debl status` names it).") from exc

    return wrapper


def printable(text: str, newlines: bool = False) -> str:
    """*text* as a terminal may show it: every character that is not printable (ESC and the
    other control characters, which would drive the terminal; a lone surrogate from a name
    that is not UTF-8) as its Python escape, ``\\x1b``; with *newlines*, line breaks kept.
    Names and errors come from files and sources DeBL does not control (docs/RELIABILITY.md,
    "Security")."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or (newlines and c == "\n") else repr(c)[1:-1]
                   for c in text)


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
