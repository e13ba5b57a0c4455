"""How DeBL's settings are spelt: every spelling derived from one table (``Spellings``, built by
debl.config from its sections), old spellings resolved with a warning, misspelt ones refused
with the nearest setting named.

The rule: a setting is ``section.field``, the section being Config's attribute and the field
the section's (``coordinator.raw_after``). It is written

- in ``debl.toml``: the table is the section, the key the field (``[coordinator] raw_after = 5``);
- in the environment: ``DEBL_``, then the name in capitals with the dot as an underscore
  (``DEBL_COORDINATOR_RAW_AFTER=5``);
- in code: read as ``config.coordinator.raw_after`` or ``config.setting("coordinator.raw_after")``,
  given as the keyword ``coordinator_raw_after=`` (``Config(...)``, ``config.replace(...)``),
  where a dot cannot go.

Config's own settings (``state_dir``, ``service_timeout``, ``fault_point``) have no section: a
top-level TOML key, ``DEBL_STATE_DIR``, ``config.state_dir``.

Old spellings: in older DeBL versions a TOML table named a prefix of the key, and three sections had
none (``mysql_port``, ``chunk_size``, ``raw_after``, ``link_table``). Such a key, written whole
(top-level in ``debl.toml``, after ``DEBL_``, as a keyword), still works, with an
``OldSpellingWarning`` that names the new spelling, once per spelling and process. Where the
new spelling is the old one (``DEBL_MYSQL_PORT``, ``mysql_port=``) nothing is said. A table
that named a prefix other than a section (``[raw] cache_bytes``, ``[coordinator] ack_timeout``,
which set ``loading.coordinator_ack_timeout``) is an error now, naming the setting it meant.

Pitfall: a keyword or an environment name cannot be split back at an underscore
(``gen_hf_run_buckets``): look it up in the table.
"""

from __future__ import annotations

import difflib
import os
import sys
import types
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from debl.errors import ConfigError

RULE = ("a setting is section.field: [section] field in debl.toml, DEBL_SECTION_FIELD in the "
        "environment, config.section.field in code and section_field= as a keyword (e.g. "
        "[coordinator] raw_after = 5, DEBL_COORDINATOR_RAW_AFTER=5, "
        "config.coordinator.raw_after, Config(coordinator_raw_after=5)); "
        "README, \"Configuration\"")

# The old keys: "<section>_<field>", except in these sections, whose fields were keys alone,
# and for these fields, keys of their own.
_OLD_UNPREFIXED_SECTIONS = ("loading", "gen_hf", "coordinator")
_OLD_UNPREFIXED_FIELDS = (("mysql", "link_table"),)


class OldSpellingWarning(FutureWarning):
    """A setting was given by its old spelling; the message names the new one. A FutureWarning
    (shown by default): the people who meet it are users, with a debl.toml or a script."""


@dataclass(frozen=True)
class Setting:
    """One setting: its section (None: Config's own), its field and its declared type (a
    string, annotations being postponed); each spelling is derived from them."""

    section: str | None
    field: str
    type: str

    @property
    def name(self) -> str:
        """``coordinator.raw_after``: the name messages and docs use, and ``setting()`` takes."""
        return self.field if self.section is None else f"{self.section}.{self.field}"

    @property
    def key(self) -> str:
        """``coordinator_raw_after``: the keyword of ``Config()`` and ``replace()``."""
        return self.name.replace(".", "_")

    @property
    def env(self) -> str:
        """``DEBL_COORDINATOR_RAW_AFTER``."""
        return "DEBL_" + self.key.upper()

    @property
    def toml(self) -> str:
        """``[coordinator] raw_after``, or the top-level key."""
        return self.field if self.section is None else f"[{self.section}] {self.field}"

    @property
    def old(self) -> str:
        """The key as older DeBL versions spelled it: ``raw_after``, ``mysql_port``,
        ``link_table``."""
        if (self.section is None or self.section in _OLD_UNPREFIXED_SECTIONS
                or (self.section, self.field) in _OLD_UNPREFIXED_FIELDS):
            return self.field
        return f"{self.section}_{self.field}"

    @property
    def off(self) -> str | None:
        """How the environment says None (switched off) for this setting: ``off`` for an
        optional duration (``coordinator.raw_after``); None when None means "not given"
        (a password, a user), which only leaving the variable out says."""
        return "off" if "float" in self.type and "None" in self.type else None

    def spelt(self, form: str) -> str:
        """This setting as written in *form*: ``toml``, ``env``, ``key`` (with ``=``), ``name``."""
        return {"toml": self.toml, "env": self.env, "key": self.key + "=",
                "name": repr(self.name)}[form]


_CONFIG_DIR = os.path.dirname(os.path.abspath(__file__))  # the debl.config package
_warned: set[tuple[str, str]] = set()  # (form, spelling): each old spelling warned of once


def _caller_stacklevel() -> int:
    """The stack level of the first frame outside the config modules and dataclasses, so that
    a warning points at the line that used the old spelling."""
    level = 1
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and (os.path.dirname(frame.f_code.co_filename) == _CONFIG_DIR
                                 or os.path.basename(frame.f_code.co_filename)
                                 == "dataclasses.py"):
        level, frame = level + 1, frame.f_back
    return level


class Spellings:
    """The table of settings and every spelling of each. Built once; an ambiguous table (two
    settings with one spelling) is refused when it is built."""

    def __init__(self, settings: Iterable[Setting]) -> None:
        self.settings = tuple(settings)
        self.sections = tuple(dict.fromkeys(s.section for s in self.settings if s.section))
        self.by_name = {s.name: s for s in self.settings}
        self.by_key = {s.key: s for s in self.settings}
        self.by_env = {s.env: s for s in self.settings}
        self.by_old = {s.old: s for s in self.settings}
        for table in (self.by_name, self.by_key, self.by_env, self.by_old):
            if len(table) != len(self.settings):
                raise ValueError("two settings share a spelling")
        for old, setting in self.by_old.items():
            if self.by_key.get(old, setting) is not setting:
                raise ValueError(f"the old key {old!r} is the keyword of another setting")

    def from_name(self, name: str) -> Setting:
        """The setting named *name* (``coordinator.raw_after``; its keyword form too)."""
        found = self.by_name.get(name) or self.by_key.get(name)
        return found or self._old_or_error(name, repr(name), "name", "config.setting()")

    def from_key(self, key: str) -> Setting:
        """The setting of the keyword *key* of ``Config()``/``replace()``."""
        found = self.by_key.get(key)
        return found or self._old_or_error(key, f"{key}=", "key", "Config()")

    def from_env(self, var: str) -> Setting:
        """The setting of the environment variable *var* (``DEBL_...``)."""
        found = self.by_env.get(var)
        return found or self._old_or_error(var[len("DEBL_"):].lower(), var, "env", "environment")

    def from_toml(self, table: str | None, key: str, where: str) -> Setting:
        """The setting of *key* in *table* (None: top-level) of the TOML file *where*. Only a
        top-level key may be an old spelling: a table is a section."""
        if table is None:
            found = self.by_name.get(key) if "." not in key else None
            if found is not None and found.section is None:
                return found
            if key in self.by_old:
                return self._old(key, f"{key} (top-level in {where})", "toml")
        elif f"{table}.{key}" in self.by_name:
            return self.by_name[f"{table}.{key}"]
        spelt = key if table is None else f"[{table}] {key}"
        raise ConfigError(f"{where}: unknown setting {spelt}"
                          + self._hint(table, key, "toml") + f" ({RULE})")

    def _old_or_error(self, old: str, spelt: str, form: str, where: str) -> Setting:
        if old in self.by_old:
            return self._old(old, spelt, form)
        section = next((s for s in sorted(self.sections, key=len, reverse=True)
                        if old.startswith(s + "_")), None)
        field = old[len(section) + 1:] if section else old
        raise ConfigError(f"{where}: unknown setting {spelt}" + self._hint(section, field, form)
                          + f" ({RULE})")

    def _old(self, old: str, spelt: str, form: str) -> Setting:
        setting = self.by_old[old]
        new = setting.spelt(form)
        if (form, spelt) not in _warned:
            _warned.add((form, spelt))
            warnings.warn(
                f"{spelt} is the old spelling of {setting.name}: write {new} (its spellings: "
                f"{setting.toml}, {setting.env}, config.{setting.name}, {setting.key}=); the "
                "old one still works, with this warning (README, \"Configuration\")",
                OldSpellingWarning, stacklevel=_caller_stacklevel())
        return setting

    def _hint(self, section: str | None, field: str, form: str) -> str:
        near = self.nearest(section, field)
        return f": did you mean {near.spelt(form)} ({near.name})?" if near else ""

    def nearest(self, section: str | None, field: str) -> Setting | None:
        """The setting a misspelt or misplaced one most likely meant, or None: the same field
        in another section; what a table meant as a prefix (``[coordinator] ack_timeout``:
        ``loading.coordinator_ack_timeout``); a close spelling, in the same section first."""
        elsewhere = [s for s in self.settings if s.field == field]
        if elsewhere:
            return elsewhere[0]
        old = field if section is None else f"{section}_{field}"
        if old in self.by_old:
            return self.by_old[old]
        if section in self.sections:
            fields = [s.field for s in self.settings if s.section == section]
            close = difflib.get_close_matches(field, fields, n=1)
            if close:
                return self.by_name[f"{section}.{close[0]}"]
        candidates = {**{s.old: s for s in self.settings}, **self.by_key}
        close = difflib.get_close_matches(old, list(candidates), n=1)
        return candidates[close[0]] if close else None
