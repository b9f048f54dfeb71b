"""Nyala's layers (README.md), checked on the source: arrows point down only.

Every module under ``src/nyala`` is parsed (not imported) and each ``import`` of a ``nyala``
module is compared against the layer table below.  Layer 0 must also stay pure: no I/O,
no clock, no threads, no global randomness.  Imports under ``if TYPE_CHECKING:`` are for
annotations only and are exempt from the purity ban, not from the direction rule.
"""

from __future__ import annotations

import ast
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
