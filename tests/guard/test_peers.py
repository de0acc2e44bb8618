"""Guards answering each other's needs over Unix sockets: two real guard processes, and the
socket protocol itself in process (keys, squatters, refusals, permissions)."""

from __future__ import annotations

import stat
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from claros_guard.errors import NotAReadError, PeerError
from claros_guard.peers import PeerClient, PeerServer, socket_path
from claros_guard.wire import LineChannel
from tests.guard.conftest import Workspace, example, lab
from tests.guard.test_examples import text, tools_called, wait_registered

pytestmark = pytest.mark.anyio

CREDIT_MAPPING: dict[str, Any] = {
    "app": "accounting",
    "tool": "credit_note_create",
    "lookups": [
        {
            "key": "order",
            "app": "shop",
            "tool": "order_read",
            "arguments": {"id": "$"},
            "pick": "total",
            "var": "order_total",
        }
    ],
}
CREDIT_RULE = {
    "id": "credit-over-order",
    "app": "accounting",
    "tools": ["credit_note_create"],
    "when": "amount > order_total",
    "response": "stop",
    "message": "More than the order.",
}


async def test_two_guards_answer_each_others_needs(workspace: Workspace) -> None:
    ws = workspace
    async with (
        Client(ws.guard("shop", example("shop"))) as shop,
        Client(ws.guard("accounting", example("accounting"))) as accounting,
    ):
        await wait_registered(ws, "shop")
        await wait_registered(ws, "accounting")
        ws.push(rules=[CREDIT_RULE], mappings=[CREDIT_MAPPING])
        over = await accounting.call_tool("credit_note_create", {"order": "1188", "amount": 100})
        within = await accounting.call_tool("credit_note_create", {"order": "1187", "amount": 20})
        assert not (await shop.call_tool("order_read", {"id": "1190"})).is_error
    assert over.is_error and "credit-over-order" in text(over)
    assert not within.is_error
    # The shop's guard ran order_read for the accounting guard; the shop's agent read 1190.
    assert [(c["app"], c["tool"], c["arguments"]) for c in ws.calls()] == [
        ("shop", "order_read", {"id": "1188"}),
        ("shop", "order_read", {"id": "1187"}),
        ("accounting", "credit_note_create", {"order": "1187", "amount": 20, "currency": "EUR"}),
        ("shop", "order_read", {"id": "1190"}),
    ]
    stop_row, allow_row = ws.records("check")
    assert stop_row["vars"] == {"order_total": 90} and allow_row["vars"] == {"order_total": 200}


async def test_without_the_other_apps_guard_the_write_is_blocked(workspace: Workspace) -> None:
    ws = workspace
    async with Client(ws.guard("shop", example("shop"))):
        await wait_registered(ws, "shop")
    async with Client(ws.guard("accounting", example("accounting"))) as accounting:
        await wait_registered(ws, "accounting")
        ws.push(rules=[CREDIT_RULE], mappings=[CREDIT_MAPPING])
        blocked = await accounting.call_tool("credit_note_create", {"order": "1187", "amount": 5})
    assert blocked.is_error
    assert "no guard of shop is running on this machine" in text(blocked)
    assert "The call was not run" in text(blocked)
    assert tools_called(ws) == []
    assert ws.records("check") == []  # undecided: nothing is logged
    async with Client(ws.guard("accounting", example("accounting"), "--fail-open")) as accounting:
        forwarded = await accounting.call_tool("credit_note_create", {"order": "1187", "amount": 5})
        with anyio.fail_after(10):
            while not ws.records("unchecked"):
                await anyio.sleep(0.05)
    assert not forwarded.is_error
    assert tools_called(ws) == ["credit_note_create"]
    (unchecked,) = ws.records("unchecked")
    assert "no guard of shop" in unchecked["reason"] and unchecked["status"] == "ok"


async def test_the_answering_guard_caches_lookups_for_60_s_and_never_fetches(
    workspace: Workspace,
) -> None:
    """What a hook does (one PeerClient read per process): the guard of shop reads a lookup
    once for every asker within 60 s, but a fetch, read just before the write, each time."""
    ws = workspace
    async with Client(ws.guard("shop", example("shop"))):
        await wait_registered(ws, "shop")
        for kind in ("lookup", "lookup", "fetch", "fetch", "query"):
            # A new client each time, as each `claros hook pre` is a new process.
            client = PeerClient(ws.peers, ws.agent, timeout=10)
            answer = await client.read("shop", "order_read", {"id": "1187"}, kind=kind)
            assert answer["structuredContent"]["total"] == 200
        # A failed lookup is not kept: asked again, the server is asked again.
        for _ in range(2):
            failed = await client.read("shop", "order_read", {"id": "nope"}, kind="lookup")
            assert failed.get("isError") is True
    reads = [(c["tool"], c["arguments"].get("id")) for c in ws.calls()]
    assert reads == [
        ("order_read", "1187"),  # the first lookup; the second came from the cache
        ("order_read", "1187"),  # fetch
        ("order_read", "1187"),  # fetch
        ("order_read", "1187"),  # query
        ("order_read", "nope"),
        ("order_read", "nope"),
    ]


async def test_a_need_for_another_apps_write_blocks_even_with_fail_open(
    workspace: Workspace,
) -> None:
    ws = workspace
    mapping = {
        "app": "accounting",
        "tool": "credit_note_create",
        "lookups": [
            {
                "key": "order",
                "app": "lab",
                "tool": "lookup_thing",
                "arguments": {"id": "$"},
                "pick": "size",
                "var": "size",
            }
        ],
    }
    async with (
        Client(ws.guard("lab", lab())),
        Client(ws.guard("accounting", example("accounting"))),
    ):
        await wait_registered(ws, "lab")
        await wait_registered(ws, "accounting")
        ws.push(mappings=[mapping])
    # Now the lab's guard is run by someone who says lookup_thing writes: its registration
    # suspends the mapping (Claros refuses the check, 409), and --fail-open (for outages)
    # does not forward the write over it.
    async with (
        Client(ws.guard("lab", lab(), "--write", "lookup_thing")),
        Client(ws.guard("accounting", example("accounting"), "--fail-open")) as accounting,
    ):
        blocked = await accounting.call_tool("credit_note_create", {"order": "1187", "amount": 5})
    # (Were the call to beat the lab guard's registration, the lab guard would refuse the
    # read itself: blocked either way.)
    suspended = "mapping accounting credit_note_create (version 1) is suspended"
    refused = "lookup_thing is not a read tool of lab"
    assert blocked.is_error and (suspended in text(blocked) or refused in text(blocked))
    assert "The call was not run" in text(blocked)
    assert tools_called(ws) == []
    assert ws.records("unchecked") == [] and ws.records("check") == []


class Source:
    """A guard's read side, without a server behind it."""

    name = "shop"

    def __init__(self) -> None:
        self.reads: list[tuple[str, dict[str, Any]]] = []
        self.kinds: list[str] = []

    def is_read_tool(self, tool: str) -> bool:
        return tool.endswith("_read")

    async def read_for_peer(
        self, tool: str, arguments: dict[str, Any], *, kind: str
    ) -> dict[str, Any]:
        if tool == "secret_read":
            raise NotAReadError("secret_read is not a read after all")
        self.reads.append((tool, arguments))
        self.kinds.append(kind)
        return {"content": [], "structuredContent": {"id": arguments.get("id"), "total": 5}}

    def peer_status(self) -> dict[str, Any]:
        return {"app": self.name, "agent": "cursor", "tools": 2}


@asynccontextmanager
async def serving(source: Source, directory: Path, key: str) -> AsyncIterator[PeerServer]:
    server = PeerServer(source, directory, key)
    async with anyio.create_task_group() as tg:
        await tg.start(server.run)
        with anyio.fail_after(5):
            await server.listening.wait()
        yield server
        tg.cancel_scope.cancel()


@pytest.fixture
def peers() -> Path:
    return Path(tempfile.mkdtemp(prefix="cp")) / "claros"


async def test_peer_protocol_reads_classifies_and_refuses_non_reads(peers: Path) -> None:
    source = Source()
    async with serving(source, peers, "ck_same") as server:
        assert stat.S_IMODE(peers.stat().st_mode) == 0o700
        assert stat.S_IMODE(server.path.stat().st_mode) == 0o600
        client = PeerClient(peers, "ck_same", timeout=5)
        result = await client.read("shop", "order_read", {"id": "7"})
        assert result["structuredContent"] == {"id": "7", "total": 5}
        await client.read("shop", "order_read", {"id": "8"}, kind="lookup")
        assert await client.classify("shop", "refund_create") is False
        assert (await client.status("shop") or {})["agent"] == "cursor"
        # Not a read: its own error, which --fail-open never forwards (unlike an outage).
        with pytest.raises(NotAReadError, match="refund_create is not a read tool of shop") as e:
            await client.read("shop", "refund_create", {"id": "7"})
        assert not e.value.blocks_unless_fail_open
        # A guard that finds out only when it runs the read says so the same way.
        with pytest.raises(NotAReadError, match="secret_read is not a read after all"):
            await client.read("shop", "secret_read", {})
        # A request from an older guard (no kind) is a fresh read; an unknown kind is refused.
        old = await client.request("shop", {"op": "read", "tool": "order_read", "arguments": {}})
        assert old["ok"] is True
        odd = {"op": "read", "tool": "order_read", "arguments": {}, "kind": "sql"}
        assert await client.request("shop", odd) == {
            "ok": False,
            "error": "unknown read kind 'sql'",
        }
        with pytest.raises(PeerError, match="did not read order_read: unknown read kind"):
            await client.read("shop", "order_read", {}, kind="sql")
    assert source.reads == [
        ("order_read", {"id": "7"}),
        ("order_read", {"id": "8"}),
        ("order_read", {}),
    ]
    assert source.kinds == ["fetch", "lookup", "fetch"]
    assert not server.path.exists()  # removed when the guard stops


async def test_peer_with_another_key_is_refused_and_a_squatter_is_not_believed(
    peers: Path,
) -> None:
    async with serving(Source(), peers, "ck_right") as server:
        # Another key never finds the socket (its name comes from the key) ...
        with pytest.raises(PeerError, match="no guard of shop is running"):
            await PeerClient(peers, "ck_wrong", timeout=5).read("shop", "order_read", {})
        # ... and, pointed at it anyway, cannot prove the key.
        wrong = PeerClient(peers, "ck_wrong", timeout=5)
        wrong.path_of = lambda app: server.path  # type: ignore[method-assign]
        with pytest.raises(PeerError, match="uses a different Claros key"):
            await wrong.read("shop", "order_read", {})

    # A process squatting on the socket, not knowing the key, is not believed.
    path = socket_path(peers, "shop", "ck_right")
    listener = await anyio.create_unix_listener(path, mode=0o600)

    async def squat(stream: Any) -> None:
        channel = LineChannel(stream)
        await channel.send({"claros": "claros-peer/1", "app": "shop", "nonce": "0" * 32})
        await channel.receive()
        await channel.send({"ok": True, "proof": "f" * 64})
        await channel.aclose()

    async with anyio.create_task_group() as tg, listener:
        tg.start_soon(listener.serve, squat)
        with pytest.raises(PeerError, match="does not hold this Claros key"):
            await PeerClient(peers, "ck_right", timeout=5).read("shop", "order_read", {})
        tg.cancel_scope.cancel()


async def test_a_second_guard_leaves_a_live_socket_alone(peers: Path) -> None:
    first, second = Source(), Source()
    async with serving(first, peers, "ck_k"):
        server = PeerServer(second, peers, "ck_k", retry_every=0.05)
        async with anyio.create_task_group() as tg:
            await tg.start(server.run)
            await PeerClient(peers, "ck_k", timeout=5).read("shop", "order_read", {"id": "1"})
            assert not server.listening.is_set()
            tg.cancel_scope.cancel()
    assert first.reads and not second.reads
