"""DeBL's configuration: one frozen dataclass of typed sections, every setting in one place.

Values come, in increasing precedence, from the defaults (``debl.config.sections``, where every
setting is declared with its type and why), a TOML file (``debl.toml`` in
the working directory, or the path in ``DEBL_CONFIG``) and ``DEBL_*`` environment variables.
A setting is ``section.field`` (``SECTIONS``, by role), spelt alike everywhere: ``[mysql] port``,
``DEBL_MYSQL_PORT``, ``config.mysql.port``, ``Config(mysql_port=...)``; ``SPELLINGS`` is the
one table they are derived from (``debl.config.names``). Reading and checking the values is
``debl.config.values``'s.

Pitfalls:

- The MySQL password is never a command-line argument. It comes from ``mysql.password``
  (``DEBL_MYSQL_PASSWORD``) or else from ``Config.mysql_password_file``, which the local stack
  writes with mode 0600.
- SQL identifiers taken from config (database and table names, the MySQL user name) are
  validated once, when a Config is made, so the rest of the code may interpolate them into SQL.
"""

from __future__ import annotations

import dataclasses
import os
import urllib.parse
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from debl.config.names import Setting, Spellings
from debl.config.sections import (SECTIONS, ClientConfig, CoordinatorConfig, FreshConfig,
                                  GenHFConfig,
                                  HBaseConfig, HdfsConfig, LoadingConfig, MysqlConfig,
                                  SourceConfig, SourceDbConfig, SparkConfig, UIConfig)
from debl.config.values import check_seconds, read_settings, settings_env
from debl.errors import ConfigError

# The settings Config holds itself, not in a section.
_TOP_LEVEL = ("state_dir", "service_timeout", "fault_point")


@dataclass(frozen=True, init=False, repr=False)
class Config:
    """Every setting of DeBL, in typed sections (``config.loading.chunk_size``). Picklable:
    Spark jobs carry it to executors. ``Config(**settings)`` and ``replace(**settings)`` take
    settings by keyword, the name's dot an underscore (``coordinator_raw_after=None``; an old
    keyword warns, an unknown one is a ConfigError naming the nearest), and sections whole
    (``mysql=MysqlConfig(...)``); ``setting(name)`` and ``settings()`` read them by name
    (``"coordinator.raw_after"``). Pitfall: ``dataclasses.replace`` works too, but a section
    given whole and one of its settings given at once apply the setting last."""

    # Where DeBL keeps its local state: the stack's data and logs, the Maven-resolved JVM
    # runtime (lib/), load rejects, bench runs. Relative to the working directory.
    state_dir: Path = Path(".debl")
    # The longest DeBL waits on a service that does not answer (a MySQL statement of the
    # query path or the catalog, an HDFS call, a Thrift call, the HBase client of the
    # JVM jobs), in seconds: past it the command fails with a message naming the service.
    # The hot path's LOAD DATA, merge and index build may run longer and are not bounded by it
    # (a server that dies still ends them at once: its socket closes). docs/RELIABILITY.md.
    service_timeout: float = 60.0
    # For fault campaigns only (docs/RELIABILITY.md): the name of a point in debl.faultpoints
    # where the process kills itself. Empty: none.
    fault_point: str = ""
    mysql: MysqlConfig = field(default_factory=MysqlConfig)
    hdfs: HdfsConfig = field(default_factory=HdfsConfig)
    hbase: HBaseConfig = field(default_factory=HBaseConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    loading: LoadingConfig = field(default_factory=LoadingConfig)
    source: SourceConfig = field(default_factory=SourceConfig)
    source_db: SourceDbConfig = field(default_factory=SourceDbConfig)
    fresh: FreshConfig = field(default_factory=FreshConfig)
    gen_hf: GenHFConfig = field(default_factory=GenHFConfig)
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    ui: UIConfig = field(default_factory=UIConfig)

    def __init__(self, **settings: Any) -> None:
        top = {name: settings.pop(name, _TOP_DEFAULTS[name]) for name in _TOP_LEVEL}
        sections = {name: settings.pop(name, None) or cls() for name, cls in SECTIONS.items()}
        changes: dict[str, dict[str, Any]] = {}
        for key, value in settings.items():
            found = SPELLINGS.from_key(key)  # Config's own were taken above
            assert found.section is not None
            changes.setdefault(found.section, {})[found.field] = value
        for section, values in changes.items():
            sections[section] = dataclasses.replace(sections[section], **values)
        for name, value in {**top, **sections}.items():
            object.__setattr__(self, name, value)
        check_seconds("service_timeout", self.service_timeout)

    def setting(self, name: str) -> Any:
        """The value of the setting *name* (``"mysql.port"``); ConfigError naming the nearest
        for an unknown name."""
        return self._value(SPELLINGS.from_name(name))

    def _value(self, setting: Setting) -> Any:
        holder = self if setting.section is None else getattr(self, setting.section)
        return getattr(holder, setting.field)

    def settings(self) -> dict[str, Any]:
        """Every setting by its name (``"mysql.port"``), in ``SPELLINGS`` order."""
        return {s.name: self._value(s) for s in SPELLINGS.settings}

    def child_env(self, **extra: str) -> dict[str, str]:
        """The environment of a child ``debl`` that loads exactly this config: a ``DEBL_*``
        variable for every setting (``settings_env``), plus *extra* variables."""
        return settings_env({s: self._value(s) for s in SPELLINGS.settings}, **extra)

    def __getattr__(self, name: str) -> Any:
        # Only reached for a missing attribute: say where a setting read by a key lives.
        found = SPELLINGS.by_key.get(name) or SPELLINGS.by_old.get(name)
        if found is not None:
            raise AttributeError(f"Config has no attribute {name!r}: the setting is "
                                 f"config.{found.name}")
        raise AttributeError(f"'Config' object has no attribute {name!r}")

    @property
    def lib_dir(self) -> Path:
        """The JVM runtime resolved by scripts/setup.sh: lib/stack, lib/spark, lib/debl-jobs.jar."""
        return self.state_dir / "lib"

    @property
    def mysql_password_file(self) -> Path:
        """Where the local stack keeps the generated ``debl`` password (mode 0600)."""
        return self.state_dir / "mysql" / "password"

    @property
    def mysql_secret(self) -> str:
        """The MySQL password: from config/env, else from the password file."""
        return _secret(self.mysql.password, self.mysql_password_file, "mysql.password",
                       "MySQL")

    @property
    def source_db_password_file(self) -> Path:
        """Where the local stack keeps the source database user's password (mode 0600)."""
        return self.state_dir / "source_db" / "password"

    @property
    def source_db_replication_password_file(self) -> Path:
        """Where the local stack keeps the replication user's password (mode 0600)."""
        return self.state_dir / "source_db" / "replication_password"

    @property
    def source_db_secret(self) -> str:
        """The source database user's password: from config/env, else from its file."""
        return _secret(self.source_db.password, self.source_db_password_file,
                       "source_db.password", "source database")

    @property
    def source_db_replication_secret(self) -> str:
        """The replication user's password: from config/env, else from its file."""
        return _secret(self.source_db.replication_password,
                       self.source_db_replication_password_file,
                       "source_db.replication_password", "source database replication")

    def source_db_url(self, with_password: bool = False) -> str:
        """``source_db.url``; *with_password*: with the password in it (quoted), for a client
        to connect with. Never log or print that one (`debl source db url` prints it only
        when asked, docs/RUNTIME.md, "The source database")."""
        if not with_password:
            return self.source_db.url
        db = self.source_db
        secret = urllib.parse.quote(self.source_db_secret, safe="")
        return f"mysql+pymysql://{db.user}:{secret}@{db.host}:{db.port}/{db.database}"

    def __repr__(self) -> str:  # keeps the passwords out of logs and tracebacks
        shown = {k: v for k, v in self.settings().items() if not k.endswith("password")}
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    def replace(self, **changes: Any) -> "Config":
        """A copy with *changes*: settings by keyword (``coordinator_raw_after=None``) or
        sections whole."""
        return dataclasses.replace(self, **changes)


def _secret(configured: str | None, path: Path, setting: str, what: str) -> str:
    """A password: the setting's value, else the first line of the file *path* that the local
    stack writes; ConfigError naming both when neither is there."""
    if configured is not None:
        return configured
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        env = "DEBL_" + setting.replace(".", "_").upper()
        raise ConfigError(f"no {what} password: set {env} or run `debl stack up`, which "
                          f"writes {path}") from None


_TOP_DEFAULTS = {f.name: f.default for f in fields(Config) if f.name in _TOP_LEVEL}
# The one table of settings, in the order of the sections above: every spelling of every
# setting (TOML, DEBL_*, keyword, name, old key) is derived from it, with its declared type.
SPELLINGS = Spellings([
    *(Setting(None, f.name, str(f.type)) for f in fields(Config) if f.name in _TOP_LEVEL),
    *(Setting(section, f.name, str(f.type))
      for section, cls in SECTIONS.items() for f in fields(cls)),
])


def load_config(path: Path | str | None = None, env: dict[str, str] | None = None) -> Config:
    """Read ``debl.toml`` (or *path*, or ``$DEBL_CONFIG``) and ``DEBL_*`` variables.

    An unknown or misplaced setting is an error naming the nearest one, so a misspelt setting
    never silently does nothing; an old spelling works, with an OldSpellingWarning naming the
    new one. Relative paths in the result are resolved against the working directory.
    """
    values = read_settings(path, os.environ if env is None else env, SPELLINGS)
    config = Config(**{s.key: value for s, value in values.items()})
    return config.replace(**{s.key: config._value(s).absolute() for s in SPELLINGS.settings
                             if isinstance(config._value(s), Path)})
