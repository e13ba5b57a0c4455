"""Setting values for debl.config: read from ``debl.toml`` and ``DEBL_*`` (``read_settings``),
each turned into its setting's type, and checked: SQL identifiers, the MySQL user name, JVM
memory sizes, positive and non-negative numbers, durations (``check_seconds``: finite, at most
``MAX_SECONDS``); and written as ``DEBL_*`` for a child process (``settings_env``). Every error
is a ConfigError naming the setting by its name (``mysql.pool_size``). The settings
themselves, their defaults and their sections are debl.config's; their spellings
debl.config.names's.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from debl.config.names import Setting, Spellings
from debl.errors import ConfigError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# A MariaDB user name (at most 80 characters) that is safe inside '...' in the stack's
# CREATE USER / GRANT statements, which cannot take it as a bound parameter.
USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$")
ENGINES = ("InnoDB", "MyISAM", "Aria")


def check_identifier(value: str, what: str) -> str:
    """*value* if it is a plain SQL identifier (letters, digits, underscore; not starting with
    a digit; at most 64 characters), else ConfigError naming *what*: names DeBL puts into SQL
    are checked once, so that the rest of the code may interpolate them."""
    if not _IDENTIFIER.match(value):
        raise ConfigError(f"{what}={value!r} is not a plain SQL identifier "
                          "(letters, digits, underscore; not starting with a digit)")
    return value


# Each load's tables are named <name>_<load id> (debl.namespace: 22 characters), its staging
# table <link_table>_<load id>_staging.
MYSQL_NAME_MAX = 64  # MySQL's longest identifier
_NAME_ROOM = {"mysql.database": MYSQL_NAME_MAX - len("debl_gen_hf."),
              "mysql.link_table": MYSQL_NAME_MAX - len("_L20261125_172208_ab12")
              - len("_staging"),
              "hbase.table": MYSQL_NAME_MAX - len("_L20261125_172208_ab12")}


def check_name(key: str, value: str) -> None:
    """ConfigError unless the setting *key*'s (``mysql.database``) *value* is an identifier
    with room for the names DeBL derives from it."""
    check_identifier(value, key)
    # Names built from these must stay within MySQL's 64 characters: the hot path's
    # `<link_table>_staging`, the locks `debl_gen_hf.<database>`, `debl_schema.<db>`,
    # `debl_load.<db>`.
    longest = _NAME_ROOM.get(key, 64)
    if len(value) > longest:
        raise ConfigError(f"{key}={value!r} is longer than {longest} characters (DeBL "
                          "derives longer names from it)")


def check_positive(section: Any, name: str) -> None:
    """ConfigError unless the field *name* of the config section *section* is above 0 (NaN
    is not)."""
    if not getattr(section, name) > 0:
        raise ConfigError(f"{section.name_of(name)} must be positive, not "
                          f"{getattr(section, name)}")


def check_not_negative(section: Any, name: str) -> None:
    """ConfigError unless the field *name* of the config section *section* is 0 or above (NaN
    is not)."""
    if not getattr(section, name) >= 0:
        raise ConfigError(f"{section.name_of(name)} must be 0 or more, not "
                          f"{getattr(section, name)}")


# The longest duration a setting may give: 24.8 days, the most milliseconds a Java int holds
# (the HBase client and ZooKeeper take service_timeout in them); Python's waits (threading,
# sockets) overflow past about 9.2e9 s. One bound for every duration: no wait of DeBL is meant
# to last weeks, and a value past it is a typo.
MAX_SECONDS = 2_147_483


def check_seconds(key: str, value: float, zero: str | None = None) -> None:
    """ConfigError naming the setting *key* unless *value* is a duration: finite seconds above
    0, or from 0 when *zero* says what 0 means, at most ``MAX_SECONDS``. NaN passes every
    ``<`` check and inf overflows a wait later: neither is one."""
    if not (math.isfinite(value) and (value >= 0 if zero else value > 0)
            and value <= MAX_SECONDS):
        allowed = f"0 ({zero}) or more" if zero else "positive"
        raise ConfigError(f"{key} must be {allowed} seconds, at most {MAX_SECONDS:,} (24 days), "
                          f"not {value}")


_JVM_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def jvm_bytes(name: str, text: str) -> int:
    """A JVM memory size (``2g``, ``512m``, ``1t``, or a plain number of MiB, as Spark reads
    ``spark.*.memory``) in bytes; ConfigError naming the setting *name* for anything else."""
    value = str(text).strip().lower().removesuffix("b")
    digits = value[:-1] if value[-1:] in _JVM_UNITS else value
    if not digits.isdigit() or int(digits) == 0:
        raise ConfigError(f"{name} {text!r} is not a JVM memory size (e.g. 2g, 512m)")
    return int(digits) * _JVM_UNITS.get(value[-1:], 1 << 20)


def coerce(name: str, raw: Any, target: type | str) -> Any:
    kind = target if isinstance(target, str) else target.__name__
    if "float" in kind and "None" in kind and str(raw).strip().lower() == "off":
        return None  # an optional duration switched off (coordinator.raw_after)
    try:
        if "Path" in kind:
            return Path(raw)
        if kind == "bool":
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                return str(raw).lower() in ("1", "true", "yes", "on")
            raise ValueError(raw)
        if "int" in kind and "None" not in kind:
            return int(raw)
        if "float" in kind:
            return float(raw)
        return None if raw is None else str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={raw!r} is not a valid {kind}") from None


def read_settings(path: Path | str | None, env: Mapping[str, str],
                  spellings: Spellings) -> dict[Setting, Any]:
    """The settings of ``debl.toml`` (or *path*, or ``$DEBL_CONFIG``) and of ``DEBL_*`` in
    *env* (over the file's), each turned into its type. A TOML table is a section:
    ``[mysql] port``. ConfigError for an unknown or misplaced setting (naming the nearest one),
    a file that does not parse, an explicit file that does not exist, or a value of the wrong
    type; an old spelling warns (``debl.config.names``)."""
    values: dict[Setting, Any] = {}

    path = Path(path or env.get("DEBL_CONFIG") or "debl.toml")
    if path.exists():
        try:
            doc = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        for key, value in doc.items():
            if isinstance(value, dict) and key in spellings.sections:
                for name, raw in value.items():
                    values[spellings.from_toml(key, name, str(path))] = raw
            elif isinstance(value, dict):
                # a table that is no section ([raw] cache_bytes): each key names its nearest
                for name in value:
                    spellings.from_toml(key, name, str(path))
                raise ConfigError(f"{path}: [{key}] is not a section of settings (those are "
                                  f"{', '.join(spellings.sections)})")  # an empty table
            else:
                values[spellings.from_toml(None, key, str(path))] = value
    elif "DEBL_CONFIG" in env or (path.name != "debl.toml"):
        raise ConfigError(f"config file {path} does not exist")

    for key, raw in env.items():
        if key.startswith("DEBL_") and key != "DEBL_CONFIG":
            values[spellings.from_env(key)] = raw

    return {s: coerce(s.name, raw, s.type) for s, raw in values.items()}


def settings_env(values: Mapping[Setting, Any], **extra: str) -> dict[str, str]:
    """This process's environment with a ``DEBL_*`` variable for each setting in *values*, so
    that a child ``debl`` loads exactly them (the caller's own ``DEBL_*`` dropped), plus
    *extra* ones. The password travels in the environment, never in argv.

    Pitfall: a setting switched off is None, and leaving it out would give the child the
    default or whatever its ``debl.toml`` says (``coordinator.raw_after`` "off" would become 0,
    the raw route on): it travels as its ``off`` spelling, which ``coerce`` reads back as None.
    Any other None is a setting not given (a password, a user), left out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBL_")}
    for setting, value in values.items():
        if value is not None:
            env[setting.env] = str(value)
        elif setting.off is not None:
            env[setting.env] = setting.off
    env.update(extra)
    return env
