"""Nyala's layers (README.md), checked on the source: arrows point down only.

Every module under ``src/nyala`` is parsed (not imported) and each ``import`` of a ``nyala``
module is compared against the layer table below.  Layer 0 must also stay pure: no I/O,
no clock, no threads, no global randomness.  Imports under ``if TYPE_CHECKING:`` are for
annotations only and are exempt from the purity ban, not from the direction rule.

Inside every package the arrows point one way too: the modules and subpackages of a package
(its ``__init__`` included) must not import each other in a circle, counting imports for
annotations only, so that any module of a package can be used without dragging in the rest.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# Longest prefix wins.  The root package ``nyala`` is the public facade (it may expose the
# client), so lower layers import ``nyala._version`` or ``nyala.errors`` instead of it.
LAYERS: dict[str, int] = {
    "nyala._version": 0,
    "nyala.errors": 0,
    "nyala.common": 0,
    "nyala.proto": 0,
    "nyala.schema": 0,
    "nyala.consensus.core": 0,
    "nyala.placement": 0,
    "nyala.catalog": 0,
    "nyala.files": 1,
    "nyala.wal": 1,
    "nyala.storage": 1,
    "nyala.rpc": 1,
    "nyala.services": 1,
    "nyala.metrics": 1,
    "nyala.web": 1,
    "nyala.consensus.runtime": 2,
    "nyala.consensus": 2,
    "nyala.server": 2,
    "nyala.tserver": 2,
    "nyala.master": 2,
    "nyala.client": 3,
    "nyala.tools": 3,
    "nyala.spark": 3,
    "nyala.testing": 4,
    "nyala": 5,
}

PURE_BANNED = {
    "asyncio", "socket", "os", "threading", "time", "random", "subprocess", "ssl",
    "selectors", "multiprocessing", "concurrent", "signal", "shutil", "tempfile",
    "pathlib", "duckdb", "uvloop",
}  # fmt: skip

# Packages that may import the test kit (the local cluster is built from it).
TESTING_USERS = ("nyala.tools",)


def layer_of(module: str) -> tuple[str, int]:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return best, LAYERS[best]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(tree: ast.AST, package: str) -> list[tuple[str, bool]]:
    """All imported module names, each with whether it sits under ``if TYPE_CHECKING``."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            guarded = typing_only or is_type_checking_block(child)
            if isinstance(child, ast.Import):
                found.extend((alias.name, guarded) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    # ``from pkg import name`` imports the submodule when one exists, else pkg itself.
                    found.append((sub if is_module(sub) else base, guarded))
            visit(child, guarded)

    visit(tree, False)
    return found


def all_modules() -> list[Path]:
    return sorted(p for p in (SRC / "nyala").rglob("*.py") if "proto" not in p.relative_to(SRC).parts[1:2])


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down_and_layer_zero_is_pure(path: Path) -> None:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    own_prefix, own_layer = layer_of(name)
    tree = ast.parse(path.read_text(), str(path))
    problems: list[str] = []
    for imported, typing_only in imports(tree, package):
        top = imported.split(".")[0]
        if top == "nyala":
            if imported in LAYERS or any(imported.startswith(p + ".") for p in LAYERS):
                target_prefix, target_layer = layer_of(imported)
            else:
                continue
            if target_prefix == "nyala" and own_prefix != "nyala" and imported == "nyala":
                problems.append("imports the facade 'nyala'; import the submodule instead")
            elif target_layer > own_layer and not (
                target_prefix == "nyala.testing" and own_prefix.startswith(TESTING_USERS)
            ):
                problems.append(f"layer {own_layer} imports {imported} (layer {target_layer})")
            elif {own_prefix, target_prefix} == {"nyala.tserver", "nyala.master"}:
                problems.append(f"{own_prefix} must not import {imported}")
        elif own_layer == 0 and top in PURE_BANNED and not typing_only:
            problems.append(f"pure layer 0 imports {imported}")
    assert not problems, f"{name}: " + "; ".join(problems)


def test_layer_table_covers_every_package() -> None:
    packages = {module_name(p.parent / "__init__.py") for p in all_modules()}
    for pkg in packages:
        prefix, _ = layer_of(pkg)
        assert prefix != "nyala" or pkg == "nyala", f"{pkg} is not in the layer table"


# Circles inside a package that remain: each is an object handing itself to a helper it
# creates, which names its creator's type for annotations.  Untie one, then remove it here:
# the test fails on any other circle, and on an entry here that is no longer one.
TOLERATED_CYCLES: set[frozenset[str]] = {
    frozenset({"nyala.client.async_client", "nyala.client.table"}),
    frozenset({"nyala.master.server", "nyala.master.service"}),
    frozenset({"nyala.testing.sim.cluster", "nyala.testing.sim.node"}),
}


def member_of(package: str, module: str) -> str | None:
    """The module or subpackage of ``package`` that is or holds ``module`` (None: outside it)."""
    if module == package:
        return package
    if not module.startswith(package + "."):
        return None
    return package + "." + module[len(package) + 1 :].split(".")[0]


def package_graphs() -> dict[str, dict[str, set[str]]]:
    """Per package, which of its members imports which (annotation-only imports included)."""
    imported: dict[str, set[str]] = {}
    packages: set[str] = set()
    for path in all_modules():
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        if path.name == "__init__.py":
            packages.add(name)
        imported[name] = {m for m, _ in imports(ast.parse(path.read_text(), str(path)), package)}
    graphs: dict[str, dict[str, set[str]]] = {p: {} for p in packages}
    for package, graph in graphs.items():
        for module, targets in imported.items():
            source = member_of(package, module)
            if source is None:
                continue
            for target in targets:
                member = member_of(package, target)
                if member is not None and member != source:
                    graph.setdefault(source, set()).add(member)
    return graphs


def cycles(graph: dict[str, set[str]]) -> Iterator[frozenset[str]]:
    """The strongly connected components of more than one member (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    yield from found


def test_no_import_cycle_inside_a_package() -> None:
    found: dict[frozenset[str], list[str]] = {}
    for graph in package_graphs().values():
        for cycle in cycles(graph):
            found[cycle] = sorted(f"{a} -> {b}" for a in cycle for b in graph.get(a, ()) if b in cycle)
    new = {cycle: edges for cycle, edges in found.items() if cycle not in TOLERATED_CYCLES}
    assert not new, "import cycles inside a package: " + "; ".join(", ".join(e) for e in new.values())
    untied = TOLERATED_CYCLES - found.keys()
    assert not untied, f"no longer cycles, remove them from TOLERATED_CYCLES: {sorted(map(sorted, untied))}"
