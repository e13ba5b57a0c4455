"""How settings are spelt (debl/config/names.py, README "Configuration"): every spelling of every
setting derived from one table; the old spellings working with one warning that names the new;
a misspelt or misplaced setting refused with the nearest one named; and the repository itself
using the current spellings only. Pure unit tests: nothing is started."""

from __future__ import annotations

import ast
import os
import re
import tomllib
import warnings
from pathlib import Path
from typing import Any

import pytest

from debl.config import names as config_names
from debl.config import SPELLINGS, Config, load_config
from debl.config.names import OldSpellingWarning, Setting, Spellings
from debl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _another_value(setting: Setting) -> Any:
    """A valid value of *setting* other than its default (the first candidate Config takes)."""
    default = Config().setting(setting.name)
    kind = setting.type
    if "bool" in kind:
        candidates: list[Any] = [not default]
    elif "Path" in kind:
        candidates = [Path("/tmp/debl-spelling-test")]
    elif "int" in kind:
        candidates = [default + 1, default + 2]
    elif "float" in kind:
        candidates = [(default or 0.0) + 1.5]
    else:
        candidates = [(default or "x") + "2", "3g", "MyISAM", "copied", "serial"]
    for value in candidates:
        try:
            Config(**{setting.key: value})
        except ConfigError:
            continue
        return value
    raise AssertionError(f"no valid sample value for {setting.name}")


def _from_env(tmp_path: Path, env: dict[str, str]) -> Config:
    """The config of *env* alone (an empty debl.toml, whatever the working directory holds)."""
    (tmp_path / "empty.toml").write_text("")
    return load_config(env={"DEBL_CONFIG": str(tmp_path / "empty.toml"), **env})


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"%s"' % value


@pytest.mark.parametrize("setting", SPELLINGS.settings, ids=lambda s: s.name)
def test_every_spelling_of_a_setting_is_derived_from_the_one_table(setting, tmp_path):
    """``section.field`` is ``[section] field`` in debl.toml, ``DEBL_SECTION_FIELD`` in the
    environment, ``config.section.field`` and ``setting("section.field")`` in code,
    ``section_field=`` as a keyword; each sets (or reads) the same value, and a child's
    environment carries it back. Config's own settings are top-level."""
    section, field = setting.section, setting.field
    if section is None:
        assert (setting.name, setting.key, setting.toml) == (field, field, field)
    else:
        assert setting.name == f"{section}.{field}" and setting.key == f"{section}_{field}"
        assert setting.toml == f"[{section}] {field}"
    assert setting.env == "DEBL_" + setting.name.replace(".", "_").upper()
    value = _another_value(setting)
    path = tmp_path / "debl.toml"
    path.write_text((f"{field} = {_toml(value)}\n" if section is None
                     else f"[{section}]\n{field} = {_toml(value)}\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no current spelling warns
        from_toml = load_config(path, env={})
        from_env = _from_env(tmp_path, {setting.env: str(value)})
        from_code = Config(**{setting.key: value})
    holder = from_code if section is None else getattr(from_code, section)
    expected = value.absolute() if isinstance(value, Path) else value
    only_this = {name: v.absolute() if isinstance(v, Path) else v
                 for name, v in Config(**{setting.key: expected}).settings().items()}
    for config in (from_toml, from_env):
        assert config.setting(setting.name) == expected
        assert config.settings() == only_this  # and nothing else changed
    assert getattr(holder, field) == from_code.setting(setting.name) == value
    assert from_code.setting(setting.key) == value  # the keyword names it too
    assert load_config(env=from_code.child_env()).setting(setting.name) == expected


def test_five_settings_of_five_sections_spelt_every_way(tmp_path):
    """The README's examples, each read back the way code reads it."""
    path = tmp_path / "debl.toml"
    path.write_text("service_timeout = 30\n[mysql]\nlink_table = \"links2\"\n"
                    "[loading]\nchunk_size = 1048576\n[coordinator]\nraw_after = 5\n"
                    "[gen_hf]\nrun_buckets = 3\n")
    from_toml = load_config(path, env={})
    from_env = load_config(env={"DEBL_CONFIG": str(path), "DEBL_SPARK_WORKERS": "2",
                                "DEBL_MYSQL_LINK_TABLE": "links3"})
    from_code = Config(service_timeout=30.0, mysql_link_table="links2",
                       loading_chunk_size=1 << 20, coordinator_raw_after=5.0,
                       gen_hf_run_buckets=3)
    for config in (from_toml, from_code):
        assert (config.service_timeout, config.mysql.link_table, config.loading.chunk_size,
                config.coordinator.raw_after, config.gen_hf.run_buckets) == \
            (30.0, "links2", 1 << 20, 5.0, 3)
    assert (from_env.spark.workers, from_env.mysql.link_table, from_env.gen_hf.run_buckets) == \
        (2, "links3", 3)


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Each old spelling is warned of once per process: start from none warned."""
    monkeypatch.setattr(config_names, "_warned", set())


OLD = [s for s in SPELLINGS.settings if s.old != s.key]


@pytest.mark.parametrize("setting", OLD, ids=lambda s: s.old)
def test_an_old_spelling_works_and_warns_once_naming_the_new(setting, tmp_path,
                                                             fresh_warnings):
    """Kept for users' files and scripts (README, "Configuration"): the old key top-level in
    debl.toml, after DEBL_, as a keyword; one warning per spelling and process."""
    value = _another_value(setting)
    path = tmp_path / "debl.toml"
    path.write_text(f"{setting.old} = {_toml(value)}\n")
    cases = [
        (lambda: load_config(path, env={}), f"{setting.old} (top-level in {path})",
         setting.toml),
        (lambda: _from_env(tmp_path, {"DEBL_" + setting.old.upper(): str(value)}),
         "DEBL_" + setting.old.upper(), setting.env),
        (lambda: Config(**{setting.old: value}), f"{setting.old}=", f"{setting.key}="),
    ]
    expected = value.absolute() if isinstance(value, Path) else value
    for make, old, new in cases:
        with pytest.warns(OldSpellingWarning) as caught:
            config = make()
        assert [str(w.message).split(":")[0] for w in caught] == \
            [f"{old} is the old spelling of {setting.name}"]
        assert f"write {new} " in str(caught[0].message)
        assert caught[0].filename == __file__  # it points at the line that used it
        assert config.setting(setting.name) in (value, expected)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            make()  # said once


def test_the_command_line_says_an_old_spelling_in_one_line(tmp_path, monkeypatch, capsys,
                                                            fresh_warnings):
    import click

    from debl.commands.common import config_of
    (tmp_path / "debl.toml").write_text("chunk_size = 4096\n")
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("DEBL_")]:
        monkeypatch.delenv(name)
    config = config_of(click.Context(click.Command("any")))
    assert config.loading.chunk_size == 4096
    err = capsys.readouterr().err
    assert err.startswith("warning: chunk_size (top-level in debl.toml) is the old spelling of "
                          "loading.chunk_size: write [loading] chunk_size ")
    assert err.count("\n") == 1


def test_where_the_new_spelling_is_the_old_nothing_is_said(tmp_path):
    path = tmp_path / "debl.toml"
    path.write_text("[mysql]\nport = 4001\n[hbase]\ntable = \"t\"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = load_config(path, env={"DEBL_MYSQL_DATABASE": "d", "DEBL_HDFS_ROOT": "/r"})
        assert (config.mysql.port, config.mysql.database, config.hdfs.root, config.hbase.table) \
            == (4001, "d", "/r", "t")
        assert Config(mysql_port=1, spark_workers=0).mysql.port == 1


@pytest.mark.parametrize("toml, env, keyword, message", [
    # the case: [coordinator] ack_timeout once set loading.coordinator_ack_timeout
    ("[coordinator]\nack_timeout = 5\n", None, None,
     "unknown setting [coordinator] ack_timeout: did you mean [loading] coordinator_ack_timeout "
     "(loading.coordinator_ack_timeout)?"),
    ("[loading]\nraw_after = 1\n", None, None,
     "unknown setting [loading] raw_after: did you mean [coordinator] raw_after"),
    ("[mysql]\nprot = 1\n", None, None, "unknown setting [mysql] prot: did you mean [mysql] port"),
    ("[raw]\ncache_bytes = 1\n", None, None,
     "unknown setting [raw] cache_bytes: did you mean [coordinator] raw_cache_bytes"),
    ("[coordinator]\nraw_aftr = 1\n", None, None, "did you mean [coordinator] raw_after"),
    ("chunk_sise = 1\n", None, None, "unknown setting chunk_sise: did you mean "
                                     "[loading] chunk_size"),
    (None, "DEBL_MYSQL_PROT", None, "unknown setting DEBL_MYSQL_PROT: did you mean "
                                    "DEBL_MYSQL_PORT (mysql.port)?"),
    (None, "DEBL_LOADING_RAW_AFTER", None, "did you mean DEBL_COORDINATOR_RAW_AFTER"),
    (None, "DEBL_GEN_HF_RUN_BUCKET", None, "did you mean DEBL_GEN_HF_RUN_BUCKETS"),
    (None, None, "coordinator_raw_aftr", "unknown setting coordinator_raw_aftr=: did you mean "
                                         "coordinator_raw_after= (coordinator.raw_after)?"),
    (None, None, "loading_poll_interval", "did you mean coordinator_poll_interval="),
])
def test_a_misspelt_or_misplaced_setting_names_the_nearest_one_and_the_rule(
        toml, env, keyword, message, tmp_path):
    path = tmp_path / "debl.toml"
    path.write_text(toml or "")
    with pytest.raises(ConfigError) as raised:
        if keyword:
            Config(**{keyword: 1})
        else:
            load_config(path, env={env: "1"} if env else {})
    assert message in str(raised.value)
    # the rule, with examples, is in every such message
    assert "a setting is section.field: [section] field in debl.toml, DEBL_SECTION_FIELD" \
        in str(raised.value)
    assert "DEBL_COORDINATOR_RAW_AFTER=5" in str(raised.value)


def test_a_table_that_is_no_section_is_refused(tmp_path):
    path = tmp_path / "debl.toml"
    path.write_text("[nothing]\n")
    with pytest.raises(ConfigError, match=r"\[nothing\] is not a section.*mysql, hdfs"):
        load_config(path, env={})


def test_the_table_refuses_a_spelling_two_settings_would_share():
    """``gen_hf_run_buckets`` is looked up, never split: a table where two settings would
    share a keyword (``a.b_c`` and ``a_b.c``) is refused when it is built."""
    with pytest.raises(ValueError, match="share a spelling"):
        Spellings([Setting("a", "b_c", "int"), Setting("a_b", "c", "int")])
    with pytest.raises(ValueError, match="keyword of another setting"):
        Spellings([Setting("loading", "z", "int"), Setting("coordinator", "loading_z", "int")])


# ------------------------------------------------------------------ the repository's own uses

_OLD_KEYWORDS = {s.old for s in OLD}
_OLD_ENV = {"DEBL_" + s.old.upper() for s in OLD}
_ENV = re.compile(r"(?<![A-Za-z0-9_])DEBL_[A-Z0-9_]+")


def _python_files() -> list[Path]:
    return sorted(p for d in ("debl", "loaders", "coordinator", "tests", "scripts")
                  for p in (ROOT / d).rglob("*.py"))


def _old_uses_in_python(path: Path) -> list[str]:
    """Old keywords given to ``Config(...)`` / ``replace(...)`` and names given to
    ``setting("...")`` that are not a setting's name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if called in ("Config", "replace"):
            found += [f"{path.name}:{node.lineno} {called}({kw.arg}=)" for kw in node.keywords
                      if kw.arg in _OLD_KEYWORDS]
        if called == "setting" and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value not in SPELLINGS.by_name:
            found.append(f"{path.name}:{node.lineno} setting({node.args[0].value!r})")
    return found


def test_the_repository_uses_the_current_spellings_only():
    """Old spellings work for users, but DeBL's own code, tests, scripts and docs do not use
    them: a keyword of Config()/replace(), a DEBL_ variable, a name given to setting()."""
    old = [use for path in _python_files() for use in _old_uses_in_python(path)]
    texts = [*_python_files(), *(ROOT / "scripts").glob("*.sh"), *(ROOT / "docs").glob("*.md"),
             ROOT / "README.md", *(ROOT / ".ci").glob("*")]
    old += [f"{path.relative_to(ROOT)}:{n} {m.group(0)}" for path in texts if path.is_file()
            for n, line in enumerate(_without_the_old_spellings_paragraph(path), 1)
            for m in _ENV.finditer(line) if m.group(0) in _OLD_ENV]
    assert old == []


def _without_the_old_spellings_paragraph(path: Path) -> list[str]:
    """*path*'s lines, the README's paragraph that names the old spellings blanked."""
    lines = path.read_text().splitlines()
    if path.name == "README.md":
        start = next(i for i, line in enumerate(lines)
                     if line.startswith("**The old spellings still work"))
        end = lines.index("", start)
        lines[start:end] = [""] * (end - start)
    return lines


def test_the_scan_finds_planted_old_spellings(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("c = Config(raw_after=None, mysql_port=1)\n"
                       "d = c.replace(chunk_size=1)\n"
                       "e = dataclasses.replace(c, link_table='x')\n"
                       "f = c.setting('raw_after'), c.setting('coordinator.raw_after')\n")
    assert _old_uses_in_python(planted) == [
        "m.py:1 Config(raw_after=)", "m.py:2 replace(chunk_size=)", "m.py:3 replace(link_table=)",
        "m.py:4 setting('raw_after')"]
    old_env = "DEBL_" + "RAW_AFTER"  # not spelt whole here: the scan reads this file too
    assert [m.group(0) for m in _ENV.finditer(f"export {old_env}=off _DEBL_SPARK_OWNER=1")] \
        == [old_env]


def _toml_blocks() -> list[tuple[str, str]]:
    blocks = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, block in enumerate(re.findall(r"```toml\n(.*?)```", path.read_text(), re.S)):
            blocks.append((f"{path.name}#{n}", block))
    return blocks


@pytest.mark.parametrize("where, block", _toml_blocks(), ids=[w for w, _ in _toml_blocks()])
def test_every_toml_example_in_the_docs_loads_without_a_warning(where, block, tmp_path):
    tomllib.loads(block)  # parses
    path = tmp_path / "debl.toml"
    path.write_text(block)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(path, env={})
