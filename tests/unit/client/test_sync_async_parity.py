"""The synchronous client mirrors the asynchronous one: same public names, same signatures.

Each synchronous class wraps an async one (``Client`` -> ``AsyncClient``, ``Table`` ->
``AsyncTable``, ...), so a method added to one side and forgotten on the other, or a parameter
that drifts, is a bug this test names.  The differences that are there on purpose are listed
below, each with its reason; a listed difference that no longer exists fails the test too, so
the lists stay true.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any

import pytest

from nyala import client as nyala_client
from nyala.client import AsyncClient, AsyncScanner, AsyncSession, AsyncTable, Client, Scanner, Session, Table

PAIRS: list[tuple[type, type]] = [
    (Client, AsyncClient),
    (Table, AsyncTable),
    (Session, AsyncSession),
    (Scanner, AsyncScanner),
]

#: Sync name -> async name of the protocol methods that are each other's counterparts.
COUNTERPARTS = {"__enter__": "__aenter__", "__exit__": "__aexit__", "__iter__": "__aiter__"}
PROTOCOL = {*COUNTERPARTS, *COUNTERPARTS.values(), "__init__"}

SYNC_ONLY: dict[tuple[str, str], str] = {
    ("Client", "aio"): "the AsyncClient behind the client, for coroutines given to Client.run",
    ("Client", "run"): "runs a coroutine on the client's loop thread; async code is on its loop already",
    ("Table", "aio"): "the AsyncTable behind the table, for coroutines given to Client.run",
    ("Session", "aio"): "the AsyncSession behind the session, for coroutines given to Client.run",
    ("Scanner", "aio"): "the AsyncScanner behind the scanner, for coroutines given to Client.run",
}

ASYNC_ONLY: dict[tuple[str, str], str] = {
    ("AsyncClient", "connect"): "constructing needs an await; Client.__init__ (nyala.connect) connects itself",
    ("AsyncClient", "start"): "the awaited half of AsyncClient.connect; Client.__init__ does it",
    ("AsyncClient", "messenger"): "the admin tools' RPC messenger; sync code reaches it as Client.aio.messenger",
    ("AsyncTable", "scan_spec"): "checks scan arguments into a ScanSpec (not exported) for the library's scanners",
    ("AsyncScanner", "tablets"): "locates TabletLocations (not exported) for scan tokens",
    ("AsyncScanner", "table"): "the TableInfo scan tokens are made from; sync users have Table.info",
    ("AsyncScanner", "spec"): "the ScanSpec (not exported) scan tokens serialise",
}

#: (sync class, name) -> why their signatures differ (checked to still differ); none do now.
SIGNATURES_DIFFER: dict[tuple[str, str], str] = {}

#: The async type each sync type stands for in signatures.
SYNC_NAMES = {"AsyncClient": "Client", "AsyncTable": "Table", "AsyncSession": "Session", "AsyncScanner": "Scanner"}


def instance_attributes(cls: type) -> set[str]:
    """Public attributes that ``__init__`` assigns (``self.name = ...``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))  # type: ignore[misc]
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and not node.attr.startswith("_")
    }


def public_names(cls: type) -> set[str]:
    names = {n for n in dir(cls) if not n.startswith("_") or n in PROTOCOL - {"__init__"}}
    names -= {n for n in dir(object) if n not in PROTOCOL}
    return names | instance_attributes(cls)


def kind(cls: type, name: str) -> str:
    """ "value" for properties and attributes, "coroutine" or "function" for methods."""
    member = inspect.getattr_static(cls, name, None)
    if member is None or isinstance(member, property):
        return "value"
    function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        return "coroutine"
    return "function"


def normalised(signature: inspect.Signature) -> str:
    """The signature as text with every async type named by its sync counterpart.

    The async client types become the sync ones, and what an async iteration gives
    (``AsyncIterator[X]``, ``AsyncGenerator[X, None]``) becomes ``Iterator[X]``.
    """
    text = str(signature)
    for async_name, sync_name in SYNC_NAMES.items():
        text = re.sub(rf"\b{async_name}\b", sync_name, text)
    text = re.sub(r"\bAsyncGenerator\[(.*), None\]", r"Iterator[\1]", text)
    return re.sub(r"\bAsyncIterator\b", "Iterator", text)


def signature_of(cls: type, name: str) -> inspect.Signature:
    """The signature as callers see it: without ``self`` or ``cls``."""
    member = inspect.getattr_static(cls, name)
    if isinstance(member, staticmethod):
        return inspect.signature(member.__func__)
    function = member.__func__ if isinstance(member, classmethod) else member
    signature = inspect.signature(function)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def counterpart(sync_name: str) -> str:
    return COUNTERPARTS.get(sync_name, sync_name)


@pytest.mark.parametrize(("sync_cls", "async_cls"), PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_sync_and_async_classes_have_the_same_public_names(sync_cls: type, async_cls: type) -> None:
    sync_names = {counterpart(n) for n in public_names(sync_cls)}
    async_names = public_names(async_cls)
    only_sync = {(sync_cls.__name__, n) for n in sync_names - async_names}
    only_async = {(async_cls.__name__, n) for n in async_names - sync_names}
    assert only_sync == {k for k in SYNC_ONLY if k[0] == sync_cls.__name__}, "missing on the async side"
    assert only_async == {k for k in ASYNC_ONLY if k[0] == async_cls.__name__}, "missing on the sync side"


@pytest.mark.parametrize(("sync_cls", "async_cls"), PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_shared_methods_have_the_same_signatures_and_kinds(sync_cls: type, async_cls: type) -> None:
    differing: dict[str, tuple[str, str]] = {}
    for name in sorted(public_names(sync_cls)):
        async_name = counterpart(name)
        if (sync_cls.__name__, name) in SYNC_ONLY:
            continue
        sync_kind, async_kind = kind(sync_cls, name), kind(async_cls, async_name)
        # A coroutine on the async side is a blocking method on the sync side; the rest match.
        assert sync_kind == ("function" if async_kind == "coroutine" else async_kind), (name, sync_kind, async_kind)
        if sync_kind == "value":
            continue
        sync_signature = normalised(signature_of(sync_cls, name))
        async_signature = normalised(signature_of(async_cls, async_name))
        if sync_signature != async_signature:
            differing[name] = (sync_signature, async_signature)
    expected = {name for cls_name, name in SIGNATURES_DIFFER if cls_name == sync_cls.__name__}
    assert set(differing) == expected, differing


def test_constructors_and_connect_functions_take_the_same_arguments() -> None:
    # The sync client connects in its constructor; the async one in its connect classmethod.
    connect_async = normalised(signature_of(AsyncClient, "connect"))
    constructor = signature_of(Client, "__init__").replace(return_annotation="Client")
    assert normalised(constructor) == connect_async
    assert normalised(inspect.signature(nyala_client.connect)) == connect_async
    assert normalised(inspect.signature(nyala_client.connect_async)) == connect_async


def test_the_listed_differences_name_real_members() -> None:
    classes: dict[str, Any] = {cls.__name__: cls for pair in PAIRS for cls in pair}
    for cls_name, name in [*SYNC_ONLY, *ASYNC_ONLY, *SIGNATURES_DIFFER]:
        assert name in public_names(classes[cls_name]), f"{cls_name}.{name} is listed but does not exist"
