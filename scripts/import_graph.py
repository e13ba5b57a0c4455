"""DeBL's import graph: its figures, and the rules of its layers that import-linter cannot check.

    python scripts/import_graph.py [--arrows] [--check]

The layers themselves (docs/ARCHITECTURE.md: foundation <- pipeline and query side <-
application, the pipeline and the query side apart, the library without click) are contracts of
import-linter in ``pyproject.toml``, checked by ``lint-imports --no-cache``
(tests/test_import_graph.py runs it). This script reads the layers from there and keeps what
import-linter cannot express.

Parses every ``.py`` file under ``debl/``, ``loaders/`` and ``coordinator/`` with ``ast`` (nothing
is imported or run), puts each module in its layer (the contract's modules, a module being in the
layer of the one that is itself or holds it) and prints: the number of modules per layer; the
arrows (imports of DeBL's own modules), within a layer and between each pair of layers; the
modules **in no layer** of the contract (a contract of import-linter checks only the modules it
names), and those left out of the contract on click; the **hidden** arrows
(``importlib.import_module`` / ``__import__``, and imports inside a function without a ``# lazy
import: <why>`` comment on the line or directly above it); the import **cycles** (modules that
import each other, directly or around a circle, by any import: one inside a function or under
``if TYPE_CHECKING:`` counts too, as it ties the two modules' code together all the same; a
package and a module in it included, which import-linter's ``acyclic_siblings`` does not look
at); the largest modules with their lines; and the modules over ``MAX_LINES`` lines (one module
per role, under 500 lines: docs/ARCHITECTURE.md). These are the figures docs/ARCHITECTURE.md
refers to instead of quoting them. ``--arrows`` also lists every arrow between layers;
``--check`` exits 1 if any module is in no layer or outside the contract on click, or any
hidden arrow or cycle exists (tests/test_import_graph.py runs the same check).

Pitfalls: an import inside ``if``/``try`` at module level is a module-level import, not a hidden
one. Only imports of DeBL's own modules are arrows; a hidden import of a third-party module
(pyspark, matplotlib) is still counted as hidden unless it carries the comment, because the
point of the comment is to say what the deferral buys (start-up time, measured).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("debl", "loaders", "coordinator")

CLI = ("debl.cli", "debl.__main__", "debl.commands")  # the modules that may import click
# The package that holds the application's modules and the foundation's: in no layer of the
# contract (it holds both), so it must import nothing; counted with the foundation.
CONTAINER = "debl"
# The middle layer of the contract, by package: the pipeline and the query side.
SIDES = {"loaders": "pipeline", "coordinator": "query"}


def contract_layers(pyproject: Path = ROOT / "pyproject.toml") -> tuple[tuple[str, str], ...]:
    """(module, layer) for each module named in import-linter's layers contract: its top
    layer is the application, its bottom one the foundation, the pipeline and the query side
    between them. An arrow may only point to a lower rank, or within one layer; the pipeline
    and the query side share rank 1 and may not import each other."""
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    top, middle, bottom = next(c["layers"] for c in contracts if c["type"] == "layers")
    found = []
    for text, layer in ((top, "application"), (middle, None), (bottom, "foundation")):
        for name in (n.strip() for n in re.split(r"[|:]", text)):
            found.append((name, layer or SIDES[name]))
    return tuple(found)


def click_sources(pyproject: Path = ROOT / "pyproject.toml") -> tuple[str, ...]:
    """The modules of import-linter's contract that forbids click."""
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    return tuple(next(c["source_modules"] for c in contracts if c["type"] == "forbidden"
                      and c["forbidden_modules"] == ["click"]))


LAYERS = contract_layers()
RANK = {"foundation": 0, "pipeline": 1, "query": 1, "application": 2}
LAZY_MARK = "lazy import:"
MAX_LINES = 500  # a module's lines, at most (docs/ARCHITECTURE.md)
LARGEST_SHOWN = 5


@dataclass(frozen=True)
class Arrow:
    """``importer`` imports ``imported`` at ``path:line``; ``hidden`` when the import is
    dynamic or sits inside a function without the lazy-import comment."""

    importer: str
    imported: str
    path: str
    line: int
    hidden: bool = False


@dataclass(frozen=True)
class Graph:
    modules: dict[str, Path]  # dotted name -> file
    arrows: tuple[Arrow, ...]  # imports of DeBL's own modules
    hidden: tuple[Arrow, ...]  # every hidden import, DeBL's or not
    lines: dict[str, int]

    def unplaced(self, layers: tuple[tuple[str, str], ...] = LAYERS) -> list[str]:
        """The modules in no layer of the contract: import-linter checks none of their
        arrows."""
        return sorted(m for m in self.modules if _place(m, layers) is None and not (
            m == CONTAINER and not _imports(ast.parse(self.modules[m].read_text()), m, True)))

    def outside_click_contract(self, sources: tuple[str, ...] | None = None) -> list[str]:
        """The modules, the CLI's apart, that the contract forbidding click does not cover."""
        sources = click_sources() if sources is None else sources
        return sorted(m for m in self.modules if m != CONTAINER
                      and not _within(m, CLI) and not _within(m, sources))

    def cycles(self) -> list[tuple[str, ...]]:
        """The import cycles: each set of modules that reach one another through arrows
        (a strongly connected component of two or more), its modules sorted; sorted."""
        edges: dict[str, set[str]] = {}
        for a in self.arrows:
            edges.setdefault(a.importer, set()).add(a.imported)
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        found: list[tuple[str, ...]] = []

        def visit(module: str) -> None:  # Tarjan's algorithm
            index[module] = low[module] = len(index)
            stack.append(module)
            for other in sorted(edges.get(module, ())):
                if other not in index:
                    visit(other)
                    low[module] = min(low[module], low[other])
                elif other in stack:
                    low[module] = min(low[module], index[other])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))

        for module in sorted(set(edges) | set(self.modules)):
            if module not in index:
                visit(module)
        return sorted(found)

    def largest(self) -> tuple[str, int]:
        name = max(self.lines, key=lambda m: (self.lines[m], m))
        return name, self.lines[name]

    def by_size(self) -> list[tuple[str, int]]:
        """Every module with its lines, the largest first (ties by name)."""
        return sorted(self.lines.items(), key=lambda item: (-item[1], item[0]))

    def over(self, limit: int = MAX_LINES) -> list[tuple[str, int]]:
        """The modules of more than *limit* lines, the largest first."""
        return [(name, n) for name, n in self.by_size() if n > limit]

    def layer_arrows(self) -> dict[tuple[str, str], int]:
        """Arrows counted by (importer's layer, imported's layer); a module importing another
        in several statements counts once."""
        counts: dict[tuple[str, str], int] = {}
        for importer, imported in {(a.importer, a.imported) for a in self.arrows}:
            pair = (layer_of(importer), layer_of(imported))
            counts[pair] = counts.get(pair, 0) + 1
        return counts


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _place(module: str, layers: tuple[tuple[str, str], ...]) -> str | None:
    return next((layer for prefix, layer in layers if _within(module, (prefix,))), None)


def layer_of(module: str) -> str:
    layer = "foundation" if module == CONTAINER else _place(module, LAYERS)
    if layer is None:
        raise ValueError(f"{module} is in no layer: add it to one of the layers contract in "
                         "pyproject.toml")
    return layer


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The DeBL module that ``import name`` (or ``from name import ...``) loads: *name* itself
    or its longest known parent package; None for third-party modules."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _explained(source_lines: list[str], node: ast.stmt) -> bool:
    """A lazy-import comment on the import's own line or in the comment block directly above."""
    if LAZY_MARK in source_lines[node.lineno - 1]:
        return True
    i = node.lineno - 2
    while i >= 0 and source_lines[i].strip().startswith("#"):
        if LAZY_MARK in source_lines[i]:
            return True
        i -= 1
    return False


def _imports(tree: ast.Module, module: str, is_package: bool):
    """(node, target names, inside a function) for every import statement, and the dynamic
    imports as (node, [first argument if a string literal], True)."""
    found: list[tuple[ast.AST, list[str], bool, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda))
            if isinstance(child, ast.Import):
                found.append((child, [a.name for a in child.names], in_function, False))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: resolve against this module's package
                    package = module if is_package else module.rpartition(".")[0]
                    for _ in range(child.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{base}".strip(".")
                names = [f"{base}.{a.name}" for a in child.names] or [base]
                found.append((child, names, in_function, False))
            elif isinstance(child, ast.Call):
                func = child.func
                dotted = (func.attr if isinstance(func, ast.Attribute) else
                          func.id if isinstance(func, ast.Name) else "")
                if dotted in ("import_module", "__import__"):
                    arg = child.args[0] if child.args else None
                    target = arg.value if isinstance(arg, ast.Constant) and \
                        isinstance(arg.value, str) else "<dynamic>"
                    found.append((child, [target], True, True))
            visit(child, inner)

    visit(tree, False)
    return found


def build(root: Path = ROOT) -> Graph:
    files = sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))
    modules = {module_name(p, root): p for p in files}
    arrows, hidden, lines = [], [], {}
    for name, path in modules.items():
        text = path.read_text()
        source_lines = text.splitlines()
        lines[name] = len(source_lines)
        tree = ast.parse(text, filename=str(path))
        rel = str(path.relative_to(root))
        for node, targets, in_function, dynamic in _imports(tree, name, path.name == "__init__.py"):
            is_hidden = dynamic or (in_function and not _explained(source_lines, node))
            resolved = {r for t in targets if (r := _resolve(t, modules)) is not None}
            if is_hidden:
                hidden.append(Arrow(name, ", ".join(sorted(resolved)) or targets[0], rel,
                                    node.lineno, True))
            for target in sorted(resolved):
                if target != name:
                    arrows.append(Arrow(name, target, rel, node.lineno, is_hidden))
    return Graph(modules, tuple(arrows), tuple(hidden), lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arrows", action="store_true", help="list every arrow between layers")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 on a module in no layer or outside the contract on click, "
                             "a hidden arrow, or an import cycle")
    args = parser.parse_args(argv)
    graph = build()
    unplaced = graph.unplaced()
    print(f"modules in no layer of pyproject.toml's layers contract: {len(unplaced)}")
    for name in unplaced:
        print(f"  {graph.modules[name].relative_to(ROOT)}")
    if unplaced:  # the figures below need every module's layer
        return 1
    outside = graph.outside_click_contract()
    print(f"modules outside pyproject.toml's contract on click: {len(outside)}")
    for name in outside:
        print(f"  {graph.modules[name].relative_to(ROOT)}")
    counts: dict[str, int] = {}
    for name in graph.modules:
        counts[layer_of(name)] = counts.get(layer_of(name), 0) + 1
    print(f"modules: {len(graph.modules)} ("
          + ", ".join(f"{layer} {counts.get(layer, 0)}" for layer in RANK) + ")")
    by_layer = graph.layer_arrows()
    within = sum(n for (a, b), n in by_layer.items() if a == b)
    print(f"arrows: {sum(by_layer.values())} (within a layer {within}; "
          + ", ".join(f"{a} -> {b} {n}" for (a, b), n in sorted(by_layer.items()) if a != b)
          + ")")
    print(f"hidden arrows: {len(graph.hidden)}")
    for a in graph.hidden:
        print(f"  {a.path}:{a.line}  {a.importer} -> {a.imported}")
    cycles = graph.cycles()
    print(f"import cycles: {len(cycles)}")
    for cycle in cycles:
        print(f"  {' <-> '.join(cycle)}")

    def sized(modules: list[tuple[str, int]]) -> str:
        return ", ".join(f"{graph.modules[name].relative_to(ROOT)} {n}" for name, n in modules)

    print(f"largest modules (lines): {sized(graph.by_size()[:LARGEST_SHOWN])}")
    over = graph.over()
    print(f"modules over {MAX_LINES} lines: {len(over)}" + (f" ({sized(over)})" if over else ""))
    if args.arrows:
        print("arrows between layers:")
        for importer, imported in sorted({(a.importer, a.imported) for a in graph.arrows}):
            if layer_of(importer) != layer_of(imported):
                print(f"  {importer} ({layer_of(importer)}) -> {imported} ({layer_of(imported)})")
    bad = outside or graph.hidden or cycles
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
