"""docs/ARCHITECTURE.md is held to the tree: every Python module of DeBL and every
Java class of its JVM tasks is named exactly once in "Where each role lives", and nothing that
does not exist; every path the document names outside its measurements exists; "Lazy imports"
lists exactly the imports that carry the lazy-import comment; and no count of modules, classes,
layers or the like is typed outside a section of measurements, except those computed here.

Pure unit tests: the document, the sources (``ast``, through ``scripts/import_graph.py``) and
the Java files are read; nothing is imported or started. Each check also runs on a planted
document, so that a check which finds nothing is known to be able to find something.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.test_import_graph import import_graph  # scripts/import_graph.py, loaded once

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
JAVA = ROOT / "loaders" / "jvm" / "src" / "main" / "java" / "debl" / "jobs"
PACKAGES = ("debl", "loaders", "coordinator")


# ----------------------------------------------------------------------------- the document

def sections(text: str) -> dict[str, str]:
    """Each section's body by its heading (``## X`` and ``### X`` alike, code blocks skipped),
    with the headings it sits under joined by " / "."""
    found: dict[str, list[str]] = {}
    trail: list[str] = []
    current = ""
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = re.match(r"(#+) (.*)", line) if not fenced else None
        if heading:
            level = len(heading.group(1))
            trail = trail[:level - 1] + [heading.group(2)]
            current = " / ".join(trail)
            found[current] = []
        else:
            found.setdefault(current, []).append(line)
    return {name: "\n".join(lines) for name, lines in found.items()}


def measured(heading: str) -> bool:
    """A section of measurements (its own heading or one above says so): figures there are
    taken at a named commit with their command, and name the tree as it was."""
    return "measured" in heading.lower()


def expand(span: str) -> list[str]:
    """``dir/{a,b}.py`` -> ``dir/a.py``, ``dir/b.py``; anything else as it is."""
    brace = re.fullmatch(r"(.*)\{([^{}]+)\}(.*)", span)
    if not brace:
        return [span]
    head, alternatives, tail = brace.groups()
    return [name for alt in alternatives.split(",") for name in expand(head + alt + tail)]


def table_rows(body: str) -> list[list[str]]:
    """The cells of each row of the markdown tables in *body* (header and rule rows left out)."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in body.splitlines() if line.startswith("|")]
    return [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)] if rows else []


def named_in_roles(text: str) -> list[str]:
    """Every module and Java class "Where each role lives" names in its last column, in order,
    repeats kept: paths of Python modules, file names of Java classes."""
    body = next(b for h, b in sections(text).items() if h.endswith("Where each role lives"))
    names = []
    for row in table_rows(body):
        for span in re.findall(r"`([^`]+)`", row[-1]):
            names += [n for n in expand(span) if n.endswith((".py", ".java"))]
    return names


# ----------------------------------------------------------------------------- the tree

def modules(root: Path = ROOT) -> set[str]:
    """Every module of DeBL by its path: the ``.py`` files under debl/, loaders/ and
    coordinator/, a package's ``__init__.py`` only when it holds more than its docstring,
    imports and ``__all__`` (a package that re-exports has no role of its own)."""
    found = set()
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            if path.name == "__init__.py" and not _holds_code(path):
                continue
            found.add(str(path.relative_to(root)))
    return found


def _holds_code(path: Path) -> bool:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] \
                == ["__all__"]:
            continue
        return True
    return False


def java_classes(directory: Path = JAVA) -> set[str]:
    return {p.name for p in directory.glob("*.java")}


def role_problems(text: str, python: set[str], java: set[str]) -> list[str]:
    """What is wrong with "Where each role lives" against the tree: modules missing, named
    twice, or named but not there."""
    named = named_in_roles(text)
    problems = [f"{n} is named {named.count(n)} times" for n in sorted(set(named))
                if named.count(n) > 1]
    problems += [f"{n} is named but does not exist" for n in sorted(set(named) - python - java)]
    problems += [f"{n} is not named: give it a role" for n in sorted((python | java) - set(named))]
    return problems


# ----------------------------------------------------------------------------- the tests

def test_every_module_and_java_class_is_named_once_in_where_each_role_lives():
    assert role_problems(DOC.read_text(), modules(), java_classes()) == []


def test_the_role_check_finds_a_missing_a_doubled_and_a_gone_module():
    doc = ("## Where each role lives\n\n| role | modules |\n|---|---|\n"
           "| a | `debl/{model,model}.py`, `debl/gone.py` / `DistCh.java` |\n")
    assert role_problems(doc, {"debl/model.py", "debl/errors.py"}, {"DistCh.java"}) == [
        "debl/model.py is named 2 times", "debl/gone.py is named but does not exist",
        "debl/errors.py is not named: give it a role"]


def test_a_package_that_only_re_exports_is_no_module(tmp_path):
    for name, text in {"debl/__init__.py": '"""Doc."""\n',
                       "debl/store/__init__.py": '"""Doc."""\nfrom debl.store.base import X\n'
                                                 '__all__ = ["X"]\n',
                       "debl/catalog/__init__.py": "class Catalog:\n    pass\n",
                       "debl/store/base.py": ""}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    for package in ("loaders", "coordinator"):
        (tmp_path / package).mkdir()
    assert modules(tmp_path) == {"debl/catalog/__init__.py", "debl/store/base.py"}


_PATH = re.compile(r"(?:debl|loaders|coordinator|scripts|tests|docs)/[\w./{},*-]*")


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    """Paths in backticks, outside sections of measurements, that do not exist."""
    gone = []
    for heading, body in sections(text).items():
        if measured(heading):
            continue
        for span in re.findall(r"`([^`\n]+)`", body):
            for word in span.split():
                if _PATH.fullmatch(word.rstrip(".,;:)")):
                    gone += [p for p in expand(word.rstrip(".,;:)"))
                             if not (root / p.rstrip("/")).exists() and "*" not in p]
    return gone


def test_every_path_the_document_names_exists():
    assert missing_paths(DOC.read_text()) == []


def test_the_path_check_finds_a_gone_path_but_not_in_a_measured_section():
    doc = ("## Roles\n\nsee `debl/catalog.py` and `debl/{errors,gone}.py`, `loaders/jvm`\n"
           "## Checking it\n### The layering, measured at its start\n`debl/bench.py` then\n")
    assert missing_paths(doc) == ["debl/catalog.py", "debl/gone.py"]


def lazy_imports(graph) -> set[tuple[str, str]]:
    """(file, imported module) for every import inside a function: each carries the
    lazy-import comment, else tests/test_import_graph.py fails on it as a hidden arrow."""
    found = set()
    for name, path in graph.modules.items():
        tree = ast.parse(path.read_text())
        for _, targets, in_function, dynamic in import_graph._imports(
                tree, name, path.name == "__init__.py"):
            if in_function and not dynamic:
                found |= {(str(path.relative_to(ROOT)), t) for t in targets}
    return found


def lazy_problems(text: str, imports: set[tuple[str, str]]) -> list[str]:
    """Lazy imports the "Lazy imports" table lacks, and rows naming a file for a module it
    does not import lazily. A row names the modules kept out in its first column (backticked,
    a parent package covers what is under it) and the files in its last."""
    body = next(b for h, b in sections(text).items() if h.endswith("Lazy imports"))
    rows = [(re.findall(r"`([\w.]+)`", row[0]), set(re.findall(r"`([\w/.]+\.py)`", row[-1])))
            for row in table_rows(body)]

    def covers(kept: str, target: str) -> bool:
        return target == kept or target.startswith(kept + ".")

    problems = [f"{f} imports {t} lazily: not in the table" for f, t in sorted(imports)
                if not any(f in files and any(covers(k, t) for k in kept)
                           for kept, files in rows)]
    problems += [f"{f} is listed for {', '.join(kept)}, which it does not import lazily"
                 for kept, files in rows for f in sorted(files)
                 if not any(file == f and any(covers(k, t) for k in kept)
                            for file, t in imports)]
    return problems


def test_the_lazy_imports_table_lists_every_lazy_import_and_no_other():
    assert lazy_problems(DOC.read_text(), lazy_imports(import_graph.build())) == []


def test_the_lazy_check_finds_a_missing_and_a_stale_row():
    doc = ("## Lazy imports\n\n| kept out | extra | in |\n|---|---|---|\n"
           "| `coordinator` | 1 s | `debl/a.py`, `debl/b.py` |\n")
    assert lazy_problems(doc, {("debl/a.py", "coordinator.Coordinator"),
                               ("debl/c.py", "pyspark.sql.SparkSession")}) == [
        "debl/c.py imports pyspark.sql.SparkSession lazily: not in the table",
        "debl/b.py is listed for coordinator, which it does not import lazily"]


_NUMBER = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_COUNT = re.compile(r"\b(\d[\d,]*|" + "|".join(_NUMBER) + r")[ -](?:[a-z]+ )?"
                    r"(modules?|classes|packages|layers|exceptions|arrows|roles|tests)\b", re.I)


def computed_counts() -> dict[str, int]:
    """The counts the document may state, each computed from the tree."""
    return {"layers": len(set(import_graph.RANK))}


def typed_counts(text: str, computed: dict[str, int]) -> list[str]:
    """Counts outside sections of measurements that are not computed, or that differ from
    the computed value."""
    wrong = []
    for heading, body in sections(text).items():
        if measured(heading):
            continue
        body = re.sub(r"```.*?```", "", body, flags=re.S)
        for match in _COUNT.finditer(body.replace("\n", " ")):
            number, noun = match.group(1).lower(), match.group(2).lower()
            value = _NUMBER.get(number) or int(number.replace(",", ""))
            if computed.get(noun) != value:
                wrong.append(f"{heading}: {match.group(0)!r}")
    return wrong


def test_no_count_is_typed_outside_the_measurements():
    """A count of modules goes stale with the next module: the document names the command
    that prints them (scripts/import_graph.py), or this test computes the count."""
    assert typed_counts(DOC.read_text(), computed_counts()) == []


def test_the_count_check_finds_a_typed_count_and_a_wrong_computed_one():
    doc = ("# A\n\nDeBL is four layers; the catalog is a 10-module package, three exceptions.\n"
           "## Checking it, measured\n\n| modules | 72 | 78 |, 245 tests\n")
    assert typed_counts(doc, {"layers": 4}) == ["A: '10-module'", "A: 'three exceptions'"]
    assert typed_counts(doc, {"layers": 3}) == [
        "A: 'four layers'", *typed_counts(doc, {"layers": 4})]
