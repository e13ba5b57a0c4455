"""DeBL's import graph, checked against its layers (docs/ARCHITECTURE.md).

    python scripts/import_graph.py [--arrows] [--check]

Parses every ``.py`` file under ``debl/``, ``loaders/`` and ``coordinator/`` with ``ast`` (nothing
is imported or run), puts each module in its layer by its path (``LAYERS`` below: the first
matching prefix wins) and prints: the number of modules per layer; the arrows (imports of
DeBL's own modules), within a layer and between each pair of layers; the **upward** arrows (a
module importing one of a higher layer); the **sideways** arrows (between the pipeline and the
query side, which stand side by side on the foundation and know nothing of each other); the
**hidden** arrows (``importlib.import_module`` / ``__import__``, and imports inside a function
without a ``# lazy import: <why>`` comment on the line or directly above it); the import
**cycles** (modules that import each other, directly or around a circle, by any import: one
inside a function or under ``if TYPE_CHECKING:`` counts too, as it ties the two modules' code
together all the same); the largest modules with their lines; and the modules over
``MAX_LINES`` lines (one module per role, under 500 lines: docs/ARCHITECTURE.md). These are the
figures docs/ARCHITECTURE.md refers to instead of quoting them. ``--arrows`` also lists every
arrow between layers; ``--check`` exits 1 if any upward, sideways or hidden arrow or any cycle
exists (tests/test_import_graph.py runs the same check).

Pitfalls: an import inside ``if``/``try`` at module level is a module-level import, not a hidden
one. Only imports of DeBL's own modules are arrows; a hidden import of a third-party module
(pyspark, matplotlib) is still counted as hidden unless it carries the comment, because the
point of the comment is to say what the deferral buys (start-up time, measured).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("debl", "loaders", "coordinator")

# Layer of a module, by its dotted name: the first prefix that matches (a prefix matches the
# module itself and everything under it). Ranks: an arrow may only point to a lower rank, or
# within one layer. The pipeline and the query side share rank 1 and may not import each other.
LAYERS: tuple[tuple[str, str], ...] = (
    # application: what a user runs; drives the layers below
    ("debl.cli", "application"),
    ("debl.__main__", "application"),
    ("debl.commands", "application"),
    ("debl.stack", "application"),
    ("debl.bench", "application"),
    ("debl.report", "application"),
    ("debl.workload", "application"),  # LinkBench's generator and query client, and its targets
    ("debl.ui", "application"),  # the live status page (`debl ui`)
    ("debl.status", "application"),  # what `debl status` and `debl ui` read of the catalog
    # pipeline and query side
    ("loaders", "pipeline"),
    ("coordinator", "query"),
    # foundation: everything else in debl/ (config, model, errors, buckets, bucket_file, the
    # service clients mysql/spark/hdfs, catalog, store/)
    ("debl", "foundation"),
)
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

    def upward(self) -> list[Arrow]:
        return [a for a in self.arrows
                if RANK[layer_of(a.importer)] < RANK[layer_of(a.imported)]]

    def sideways(self) -> list[Arrow]:
        return [a for a in self.arrows
                if {layer_of(a.importer), layer_of(a.imported)} == {"pipeline", "query"}]

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


def layer_of(module: str) -> str:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise ValueError(f"{module} is in no layer: add it to LAYERS")


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
    found = []

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
            resolved = {_resolve(t, modules) for t in targets} - {None}
            if is_hidden:
                hidden.append(Arrow(name, ", ".join(sorted(resolved)) or targets[0], rel,
                                    node.lineno, True))
            for target in sorted(resolved):
                if target != name:
                    arrows.append(Arrow(name, target, rel, node.lineno, is_hidden))
    return Graph(modules, tuple(arrows), tuple(hidden), lines)


def _show(title: str, arrows: list[Arrow]) -> None:
    print(f"{title}: {len(arrows)}")
    for a in arrows:
        print(f"  {a.path}:{a.line}  {a.importer} ({layer_of(a.importer)}) -> "
              f"{a.imported} ({layer_of(a.imported)})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arrows", action="store_true", help="list every arrow between layers")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 on any upward, sideways or hidden arrow, or any import cycle")
    args = parser.parse_args(argv)
    graph = build()
    counts = {}
    for name in graph.modules:
        counts[layer_of(name)] = counts.get(layer_of(name), 0) + 1
    print(f"modules: {len(graph.modules)} ("
          + ", ".join(f"{layer} {counts.get(layer, 0)}" for layer in RANK) + ")")
    by_layer = graph.layer_arrows()
    within = sum(n for (a, b), n in by_layer.items() if a == b)
    print(f"arrows: {sum(by_layer.values())} (within a layer {within}; "
          + ", ".join(f"{a} -> {b} {n}" for (a, b), n in sorted(by_layer.items()) if a != b)
          + ")")
    upward, sideways = graph.upward(), graph.sideways()
    _show("upward arrows", upward)
    _show("sideways arrows (pipeline <-> query)", sideways)
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
    bad = upward or sideways or graph.hidden or cycles
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
