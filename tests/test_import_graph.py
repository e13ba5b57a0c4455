"""The layers hold (docs/ARCHITECTURE.md): imports run one way, foundation <- pipeline and query
side <- application, the library without click (import-linter's contracts in pyproject.toml,
checked by ``lint-imports``), every module in a layer, no hidden import, no import cycle
(``scripts/import_graph.py``), and SQL only where the catalog and the stores keep it.

Pure unit tests: ``lint-imports`` and ``scripts/import_graph.py`` read the sources, nothing is
started. Both are also run on small planted trees, so that a check which finds nothing is known
to be able to find something.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts/import_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


import_graph = _load_script()


@pytest.fixture(scope="module")
def graph():
    return import_graph.build()


# `lint-imports --no-cache` (no cache directory left behind), on the packages under its cwd.
_LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _LINT_IMPORTS, "--no-cache"], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True,
                          text=True, timeout=300)


def test_the_import_contracts_hold():
    """No upward arrow, none between the pipeline and the query side, no click in the library:
    import-linter's contracts in pyproject.toml."""
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_the_contracts_find_planted_arrows(tmp_path):
    """The tree's contracts, on a tree of their modules with an upward arrow, a sideways one,
    click imported by the library and click reached through the CLI's modules."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    for name in [m for m, _ in import_graph.LAYERS] + list(import_graph.CLI) + ["debl"]:
        package = tmp_path.joinpath(*name.split("."))
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").touch()
    planted = {"debl/errors": "import loaders\n", "loaders": "from coordinator import x\n",
               "debl/status": "import click\n", "debl/ui": "from debl.commands import y\n",
               "debl/commands": "import click\n"}
    for package, text in planted.items():
        (tmp_path / package / "__init__.py").write_text(text)
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Contracts: 0 kept, 2 broken." in done.stdout
    for arrow in ("debl.errors -> loaders", "loaders -> coordinator", "debl.status -> click",
                  "debl.ui -> debl.commands"):
        assert arrow in done.stdout, done.stdout
    assert "debl.commands is not allowed" not in done.stdout  # the CLI imports click


def test_every_module_is_in_the_contracts_and_no_arrow_is_hidden(graph):
    """import-linter checks only the modules its contracts name: each module is in a layer,
    and each but the CLI's in the contract on click."""
    assert graph.unplaced() == []
    assert graph.outside_click_contract() == []
    assert list(graph.hidden) == []


def test_no_import_cycle_in_the_tree(graph):
    """No two modules import each other, even around a circle or for type hints only (the
    coordinator and its poller once did: docs/COORDINATOR.md, "The poller's hand-over")."""
    assert graph.cycles() == []


def test_every_module_has_a_layer_and_each_layer_has_its_packages(graph):
    layers = {name: import_graph.layer_of(name) for name in graph.modules}
    assert layers["debl.catalog"] == layers["debl.hdfs.client"] == layers["debl.store.mysql"] \
        == "foundation"
    assert layers["loaders.dist_ch"] == "pipeline" and layers["coordinator.raw"] == "query"
    assert {layers[m] for m in graph.modules if m.startswith("debl.bench")} == {"application"}
    assert layers["debl.commands.bench"] == layers["debl.stack.service"] == "application"
    assert layers["debl.status"] == "application"  # the status read: no coordinator in it


def test_the_checker_finds_planted_arrows(tmp_path):
    """A dynamic import and an unexplained import inside a function are each found, an
    explained one is not; a module in no layer (nor in the contract on click) is found, and so
    is the package of them all once it imports something."""
    files = {
        "debl/__init__.py": "import debl.errors\n",
        "debl/errors.py": "",
        "debl/extra.py": "",
        "debl/format/link.py": "from loaders.load import run\n",  # foundation -> pipeline: upward
        "debl/commands/__init__.py": "",
        "debl/commands/go.py": ("import importlib\n"
                                "mod = importlib.import_module('coordinator.core')\n"),
        "loaders/__init__.py": "",
        "loaders/load.py": ("from coordinator.core import answer\n"  # sideways
                            "def run():\n"
                            "    from debl.format.link import parse\n"  # hidden
                            "    # lazy import: pyspark costs start-up time\n"
                            "    import pyspark\n"),
        "coordinator/__init__.py": "",
        "coordinator/core.py": "from debl.format.link import parse\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph.build(tmp_path)
    assert graph.unplaced() == ["debl", "debl.extra"]
    assert graph.outside_click_contract() == ["debl.extra"]
    assert sorted((a.path, a.line) for a in graph.hidden) == [
        ("debl/commands/go.py", 2), ("loaders/load.py", 3)]
    assert graph.largest() == ("loaders.load", 5)
    assert graph.over(4) == [("loaders.load", 5)]
    assert graph.over(1) == [("loaders.load", 5), ("debl.commands.go", 2)]
    assert graph.layer_arrows() == {("foundation", "pipeline"): 1, ("application", "query"): 1,
                                    ("pipeline", "query"): 1, ("pipeline", "foundation"): 1,
                                    ("query", "foundation"): 1, ("foundation", "foundation"): 1}


def test_the_checker_finds_planted_cycles(tmp_path):
    """A circle of three, and a pair tied by a type-checking import and a lazy one, are each
    found once; a module importing its neighbour one way is not a cycle."""
    files = {
        "coordinator/__init__.py": "",
        "coordinator/a.py": "from coordinator.b import x\n",
        "coordinator/b.py": "from coordinator.c import y\n",
        "coordinator/c.py": "import coordinator.a\n",
        "coordinator/owner.py": "from coordinator.helper import Helper\nimport coordinator.a\n",
        "coordinator/helper.py": ("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n"
                                  "    from coordinator.owner import Owner\n"),
        "loaders/__init__.py": "",
        "loaders/one.py": "def f():\n    # lazy import: a test\n    from loaders.two import g\n",
        "loaders/two.py": "from loaders.one import f\n",
        "debl/__init__.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph.build(tmp_path)
    assert graph.cycles() == [("coordinator.a", "coordinator.b", "coordinator.c"),
                              ("coordinator.helper", "coordinator.owner"),
                              ("loaders.one", "loaders.two")]


def test_the_script_prints_the_figures_the_docs_refer_to(graph, capsys):
    """docs/ARCHITECTURE.md quotes no counts: it names this command, whose lines must hold."""
    assert import_graph.main([]) == 0
    out = capsys.readouterr().out
    assert f"modules: {len(graph.modules)} (foundation " in out
    assert f"arrows: {sum(graph.layer_arrows().values())} (within a layer " in out
    assert f"import cycles: {len(graph.cycles())}" in out
    assert "largest modules (lines): " in out
    assert f"modules over {import_graph.MAX_LINES} lines: {len(graph.over())}" in out


def test_the_cli_starts_without_the_heavy_clients():
    """What the lazy imports buy (docs/ARCHITECTURE.md, "Lazy imports"): `debl --help` loads
    neither the HBase client, nor Spark, nor matplotlib, nor the coordinator."""
    code = ("import sys, debl.cli; print(' '.join(m for m in ('happybase', 'thriftpy2', 'pyspark',"
            " 'matplotlib', 'coordinator') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    assert loaded == []


def test_status_and_ui_read_the_catalog_without_the_coordinator():
    """`debl status` and `debl ui` read the catalog alone (``debl.status``): their modules are
    plain imports that bring neither the coordinator, nor the HBase store and client."""
    code = ("import sys, debl.commands.status, debl.commands.ui, debl.ui.server, debl.status; "
            "print(' '.join(m for m in sys.modules if m.split('.')[0] in "
            "('coordinator', 'happybase', 'thriftpy2') or m == 'debl.store.hbase'))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    assert loaded == []


def test_the_jvm_is_reached_through_its_one_door_only(graph):
    """Every call into Spark's JVM goes through ``loaders.jobs`` (docs/ARCHITECTURE.md, "The
    JVM tasks"): py4j's handles, and the job group set on the context, nowhere else."""
    door = re.compile(r"_jvm|_jsc|setJobGroup")
    found = {name: [n for n, line in enumerate(path.read_text().splitlines(), 1)
                    if door.search(line)]
             for name, path in graph.modules.items()}
    assert {name: lines for name, lines in found.items() if lines} == {
        "loaders.jobs": found["loaders.jobs"]}
    assert found["loaders.jobs"]  # the door itself is found: the check can find something


# SQL statements: the start of each statement kind DeBL writes.
_SQL = re.compile(r"^\s*(SELECT\s.+\sFROM\s|INSERT\s+INTO\s|UPDATE\s+\S+\s+SET\s|DELETE\s+FROM\s|"
                  r"REPLACE\s+INTO\s|CREATE\s+(TABLE|DATABASE|USER)\s|DROP\s+(TABLE|DATABASE)\s|"
                  r"ALTER\s+TABLE\s|TRUNCATE\s|LOAD\s+DATA\s|GRANT\s)", re.S | re.I)
# Where SQL lives: the catalog and the stores; and the exceptions, each with its reason.
_SQL_HOMES = ("debl.catalog", "debl.store.")
_SQL_EXCEPTIONS = {
    "debl.mysql": "the connection helper creates the namespace's database on first connect",
    "loaders.mysql_bulk": "the hot path: LOAD DATA LOCAL INFILE into a staging table and the "
                          "merge into the link table, raw pymysql (docs/LOADING.md)",
    "debl.stack.mariadb": "the local stack's own bootstrap (its servers' accounts) and a probe",
}


def _sql_sites(path: Path) -> list[int]:
    """Lines of string constants (f-strings included) that begin an SQL statement, and of
    ``.execute``/``.executemany`` calls; docstrings are prose, not statements."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings and _SQL.match(node.value):
            sites.append(node.lineno)
        elif isinstance(node, ast.JoinedStr):
            head = "".join(v.value for v in node.values
                           if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if _SQL.match(head):
                sites.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("execute", "executemany"):
            sites.append(node.lineno)
    return sorted(set(sites))


def test_sql_only_in_the_catalog_the_stores_and_the_named_exceptions(graph):
    found = {name: _sql_sites(path) for name, path in graph.modules.items()
             if not name.startswith(_SQL_HOMES)}
    found = {name: lines for name, lines in found.items() if lines}
    assert set(found) <= set(_SQL_EXCEPTIONS), {n: found[n] for n in found
                                                if n not in _SQL_EXCEPTIONS}
    assert not any(name.startswith("debl.bench") for name in found)
    # the homes do hold SQL: the detector finds statements where they are
    assert _sql_sites(ROOT / "debl/store/mysql.py") and _sql_sites(ROOT / "loaders/mysql_bulk.py")


@pytest.mark.parametrize("text, is_sql", [
    ('q = "SELECT id1 FROM t WHERE x = %s"', True),
    ('q = f"DELETE FROM `{table}`"', True),
    ('q = "REPLACE INTO debl_phases VALUES (%s)"', True),
    ('cur.execute(q)', True),
    ('help = "every file into MySQL: LOAD DATA, merge, index rebuild"', False),
    ('def f():\n    """SELECT x FROM y, in prose."""\n', False),
])
def test_the_sql_detector(tmp_path, text, is_sql):
    (tmp_path / "m.py").write_text(text + "\n")
    assert bool(_sql_sites(tmp_path / "m.py")) == is_sql
