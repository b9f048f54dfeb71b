"""The core is pure: no I/O, clock, threads or global randomness, proven two ways."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src"
CORE = SRC / "nyala" / "consensus" / "core"
BANNED = {"asyncio", "socket", "os", "threading", "time", "random", "subprocess", "select", "selectors"}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Every imported module of a file, with whether it sits under ``if TYPE_CHECKING:``."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            guarded = typing_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, ast.Import):
                found.extend((a.name, guarded) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                found.append((child.module, guarded))
            visit(child, guarded)

    visit(ast.parse(path.read_text()), False)
    return found


def _module_path(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def test_core_and_the_nyala_modules_it_imports_name_no_banned_module() -> None:
    # Walk the core and, transitively, every nyala module it imports at run time.
    todo = sorted(CORE.rglob("*.py"))
    seen: set[Path] = set()
    problems = []
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module, typing_only in _imports(path):
            top = module.split(".")[0]
            if top in BANNED and not typing_only:
                problems.append(f"{path.relative_to(SRC)} imports {module}")
            if top == "nyala" and not typing_only and not module.startswith("nyala.proto"):
                target = _module_path(module)
                if target is not None:
                    todo.append(target)
    assert len(seen) > 10, "the walk must have covered the core's modules"
    assert not problems, problems


def test_importing_the_core_makes_no_nyala_module_import_a_banned_module() -> None:
    # Record, at run time, which module asks for which import while the core is imported.
    # Third-party internals (protobuf takes a lock from threading) are not the core's doing.
    probe = f"""
import builtins, sys
banned = {sorted(BANNED)!r}
seen = []
real_import = builtins.__import__
def spy(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {{}}).get("__name__", "")
    if importer.startswith("nyala") and name.split(".")[0] in banned:
        seen.append((importer, name))
    return real_import(name, globals, locals, fromlist, level)
builtins.__import__ = spy
import nyala.consensus.core
core = nyala.consensus.core
state = core.PersistentState.bootstrap(core.RaftConfig.of_voters(["a"]))
import random as _r
replica = core.RaftCore("g", "a", state, _r.Random(0))
for _ in range(40):
    replica.tick()
replica.propose(b"x") if replica.is_leader and replica.leader_state is core.LeaderState.RUNNING else None
print(repr(seen))
print("asyncio" in sys.modules, "socket" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    imports_seen, modules = out.stdout.strip().splitlines()
    assert imports_seen == "[]"
    assert modules == "False False", "importing the core must not load asyncio or socket at all"
