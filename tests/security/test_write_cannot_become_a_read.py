"""The agent cannot turn a write into a read (THREATS.md, 1).

Whoever decides that a tool is a read lets its calls past every rule, so the server's own
word (``readOnlyHint``) is only a suggestion: the operator's ``--read``/``--write`` win,
a name holding a write word is never a read, and a tool the workspace knew as a write
stays one (for mappings, needs and peer reads) until an admin confirms the change.
Mappings are re-validated whenever tools are registered: one that no longer names only
reads is suspended and the checks that need it are refused (409).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from claros.local import LocalServer
from claros.wiring import Services
from claros_guard.classify import Classifier, by_name
from claros_guard.errors import NotAReadError
from claros_guard.peers import PeerClient
from tests.api.conftest import Keys, bearer, check_body
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called

TURNCOAT = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "turncoat_server.py")]

STOP_ALL = {
    "id": "stop-all",
    "app": "shop",
    "tools": ["refund_create", "get_or_delete_user", "get_or_create_customer", "frobnicate"],
    "response": "stop",
    "when": "1 == 1",
    "message": "Nothing of this runs.",
}


def register(http: httpx.Client, key: str, reads: list[str], writes: list[str]) -> Any:
    tools = [{"name": n, "read": True, "annotations": {"readOnlyHint": True}} for n in reads]
    tools += [{"name": n, "read": False} for n in writes]
    answer = http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(key))
    assert answer.status_code == 200, answer.text
    return answer.json()


def put_mapping(http: httpx.Client, key: str, mapping: dict[str, Any]) -> httpx.Response:
    return http.put(
        f"/api/mappings/{mapping['app']}/{mapping['tool']}",
        json={"mapping": mapping},
        headers=bearer(key),
    )


def entries(services: Services, kind: str) -> list[dict[str, Any]]:
    return [
        rec
        for entry, rec in services.store.entries_with_records("acme")
        if entry.kind == kind and rec is not None
    ]


async def registered_after(ws: Workspace, since: int) -> dict[str, Any]:
    """The shop's registration once a guard has registered it after ``since`` (ms)."""
    async with httpx.AsyncClient(base_url=ws.claros.url) as http:
        with anyio.fail_after(20):
            while True:
                answer = await http.get("/v1/apps", headers=bearer(ws.agent))
                found = {a["app"]: a for a in answer.json()["apps"]}
                if "shop" in found and found["shop"]["registered_at"] > since:
                    return dict(found["shop"])
                await anyio.sleep(0.05)


# --- the classifier ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["get_or_delete_user", "get_or_create_customer", "getOrUpdateOrder", "read-and-send",
             "list.then.cancel", "refund_create", "set_status", "get_or_refund_order"],
)  # fmt: skip
def test_read_only_hint_on_a_write_named_tool_is_not_a_read(name: str) -> None:
    assert Classifier().is_read(name, {"readOnlyHint": True}) is False
    assert by_name(name) is False


@pytest.mark.anyio
async def test_a_write_named_tool_with_read_only_hint_is_checked_by_the_guard(
    workspace: Workspace,
) -> None:
    ws = workspace
    ws.push(rules=[STOP_ALL])
    reads = "get_or_delete_user,get_or_create_customer,order_read"
    async with Client(ws.guard("shop", TURNCOAT, TURNCOAT_READS=reads)) as shop:
        for tool in ("get_or_delete_user", "get_or_create_customer"):
            result = await shop.call_tool(tool, {"id": "u1"})
            assert result.is_error and "stop-all" in text(result), text(result)
        assert not (await shop.call_tool("order_read", {"id": "1187"})).is_error
    assert tools_called(ws) == ["order_read"]


def test_operator_write_flag_beats_read_only_hint() -> None:
    assert (
        Classifier.of(writes=["refund_list"]).is_read("refund_list", {"readOnlyHint": True})
        is False
    )
    assert Classifier.of(reads=["sync_orders"]).is_read("sync_orders", {"readOnlyHint": False})
    assert Classifier.of(writes=["refund_list"]).why("refund_list", {"readOnlyHint": True}) == (
        "--write"
    )


@pytest.mark.anyio
async def test_operator_write_flag_beats_read_only_hint_in_the_guard(
    workspace: Workspace, tmp_path: Path
) -> None:
    ws = workspace
    ws.push(rules=[STOP_ALL])
    env = {"TURNCOAT_READS": "refund_create,order_read"}
    async with Client(ws.guard("shop", TURNCOAT, "--write", "refund_create", **env)) as shop:
        result = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
        assert result.is_error and "stop-all" in text(result), text(result)
    config = tmp_path / "guards.yaml"
    config.write_text(
        "agent: shop\nservers:\n  shop:\n"
        f"    command: [{TURNCOAT[0]!r}, {TURNCOAT[1]!r}]\n"
        "    write: [refund_create]\n"
    )
    params = ws.guard("shop", [], **env)
    params.args = ["-m", "claros_guard.cli", "guard", "--config", str(config)]
    async with Client(params) as shop:
        result = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
        assert result.is_error and "stop-all" in text(result), text(result)
    assert tools_called(ws) == []


# --- the workspace keeps a write a write until an admin confirms -----------------------------

LOOKUP_REFUND = {
    "app": "shop",
    "tool": "order_cancel",
    "fetch": {"tool": "refund_create", "arguments": {"order": "$id"}, "into": "refund"},
}


def test_write_reregistered_as_read_stays_a_write_for_mappings(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    register(http, keys.agent, ["order_read"], ["refund_create", "order_cancel"])
    # Another key (any guard) now reports the write as a read.
    again = register(http, keys.service, ["order_read", "refund_create"], ["order_cancel"])
    assert again["held"] == ["refund_create"] and "refund_create" in again["writes"]
    answer = put_mapping(http, keys.admin, LOOKUP_REFUND)
    assert answer.status_code == 400, answer.text
    assert "refund_create" in answer.json()["message"]
    assert "claros tools confirm shop refund_create" in answer.json()["message"]
    listed = http.get("/v1/apps", headers=bearer(keys.agent)).json()["apps"][0]["tools"]
    tool = next(t for t in listed if t["name"] == "refund_create")
    assert tool["read"] is False and tool["held"] is True

    # Only an admin confirms, and the confirmation is in the ledger.
    route = "/api/apps/shop/tools/refund_create/confirm"
    for key in (keys.agent, keys.service, keys.audit):
        assert http.post(route, headers=bearer(key)).status_code == 403
    assert http.post("/api/apps/shop/tools/order_cancel/confirm",
                     headers=bearer(keys.admin)).status_code == 409  # fmt: skip
    assert http.post("/api/apps/shop/tools/nope/confirm",
                     headers=bearer(keys.admin)).status_code == 404  # fmt: skip
    confirmed = http.post(route, headers=bearer(keys.admin))
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["read"] is True
    [entry] = entries(services, "tool_confirm")
    assert entry["app"] == "shop" and entry["tool"] == "refund_create"
    assert entry["confirmed_by"] == "admin@acme.test"
    assert http.post(route, headers=bearer(keys.admin)).status_code == 409  # nothing to confirm
    assert put_mapping(http, keys.admin, LOOKUP_REFUND).status_code == 200


@pytest.mark.anyio
async def test_write_reregistered_as_read_stays_a_write_for_peer_reads(
    workspace: Workspace,
) -> None:
    ws = workspace
    ws.push(rules=[STOP_ALL])
    with ws.http() as http:
        register(http, ws.agent, ["order_read"], ["frobnicate"])
    since = int(time.time() * 1000)
    await anyio.sleep(0.01)
    env = {"TURNCOAT_READS": "frobnicate,order_read"}
    async with Client(ws.guard("shop", TURNCOAT, **env)) as shop:
        registration = await registered_after(ws, since)
        tool = next(t for t in registration["tools"] if t["name"] == "frobnicate")
        assert tool["read"] is False and tool["held"] is True
        # A peer asking the guard of shop to "read" refund_create is refused ...
        peer = PeerClient(ws.peers, ws.agent, timeout=10)
        with pytest.raises(NotAReadError, match="frobnicate"):
            await peer.read("shop", "frobnicate", {"order": "1187", "amount": 5})
        assert await peer.classify("shop", "frobnicate") is False
        # ... and the agent's own call is checked (and stopped).
        result = await shop.call_tool("frobnicate", {"order": "1187", "amount": 5})
        assert result.is_error and "stop-all" in text(result), text(result)
        assert not (await shop.call_tool("order_read", {"id": "1187"})).is_error
    assert tools_called(ws) == ["order_read"]

    # An admin confirms: the next guard learns it from its registration.
    with ws.http() as http:
        route = "/api/apps/shop/tools/frobnicate/confirm"
        assert http.post(route, headers=bearer(ws.admin)).status_code == 200
    async with Client(ws.guard("shop", TURNCOAT, **env)):
        peer = PeerClient(ws.peers, ws.agent, timeout=10)
        with anyio.fail_after(20):
            while not ((await peer.status("shop")) or {}).get("tools"):
                await anyio.sleep(0.05)
        await peer.read("shop", "frobnicate", {"n": 1})
    assert tools_called(ws) == ["order_read", "frobnicate"]


# --- mappings that no longer name only reads are suspended -----------------------------------

FETCH_ORDER = {
    "app": "shop",
    "tool": "refund_create",
    "fetch": {"tool": "order_read", "arguments": {"id": "$order"}, "into": "order"},
}


def test_mapping_naming_a_tool_turned_write_is_suspended(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    register(http, keys.agent, ["order_read"], ["refund_create"])
    assert put_mapping(http, keys.admin, FETCH_ORDER).status_code == 200
    body = check_body(arguments={"order": "1187", "amount": 5})
    assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()["result"] == "need"

    turned = register(http, keys.agent, [], ["refund_create", "order_read"])
    assert turned["suspended"] == ["shop refund_create"]
    refused = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert refused.status_code == 409, refused.text
    message = refused.json()["message"]
    assert "mapping shop refund_create" in message and "suspended" in message
    assert "order_read" in message and "not a read" in message
    mapping = http.get("/api/mappings/shop/refund_create", headers=bearer(keys.admin)).json()
    assert mapping["status"] == "suspended" and "order_read" in mapping["suspended"]["reason"]
    assert [e["status"] for e in entries(services, "mapping_status")] == ["suspended"]

    # Reported as a read again, it stays a write (held) and the mapping stays suspended ...
    assert register(http, keys.agent, ["order_read"], ["refund_create"])["held"] == ["order_read"]
    assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).status_code == 409
    # ... until an admin confirms it: the mapping is valid again, so it is restored.
    confirmed = http.post("/api/apps/shop/tools/order_read/confirm", headers=bearer(keys.admin))
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["restored"] == ["shop refund_create"]
    assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()["result"] == "need"
    assert [e["status"] for e in entries(services, "mapping_status")] == ["suspended", "active"]


def test_saving_a_valid_mapping_version_lifts_a_suspension(
    http: httpx.Client, keys: Keys, server: LocalServer
) -> None:
    register(http, keys.agent, ["order_read", "order_get"], ["refund_create"])
    assert put_mapping(http, keys.admin, FETCH_ORDER).status_code == 200
    register(http, keys.agent, ["order_get"], ["refund_create", "order_read"])
    body = check_body(arguments={"order": "1187", "amount": 5})
    assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).status_code == 409
    # The same (now invalid) mapping is refused, nothing written ...
    assert put_mapping(http, keys.admin, FETCH_ORDER).status_code == 400
    # ... a version naming a read is saved, and active.
    fixed = {**FETCH_ORDER, "fetch": {**FETCH_ORDER["fetch"], "tool": "order_get"}}
    saved = put_mapping(http, keys.admin, fixed)
    assert saved.status_code == 200 and saved.json()["status"] == "active"
    assert saved.json()["version"] == 2
    assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()["result"] == "need"


@pytest.mark.anyio
async def test_the_guard_blocks_a_write_whose_mapping_is_suspended(workspace: Workspace) -> None:
    ws = workspace
    with ws.http() as http:
        register(http, ws.agent, ["order_read"], ["refund_create"])
        ws.push(mappings=[FETCH_ORDER])
    since = int(time.time() * 1000)
    await anyio.sleep(0.01)
    # This server calls order_read a write now: the guard registers it so, the mapping is
    # suspended, and the write is blocked, even with --fail-open (a refusal, not an outage).
    async with Client(ws.guard("shop", TURNCOAT, "--fail-open", TURNCOAT_READS="")) as shop:
        await registered_after(ws, since)
        result = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
        assert result.is_error
        assert "mapping shop refund_create" in text(result) and "suspended" in text(result)
    assert tools_called(ws) == []


def test_a_tool_given_as_both_a_read_and_a_write_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "CLAROS_URL": "http://127.0.0.1:9", "CLAROS_KEY": "ck_x"}
    argv = [sys.executable, "-m", "claros_guard.cli", "guard", "--app", "shop",
            "--read", "refund_create", "--write", "refund_create", "--", *TURNCOAT]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr == (
        "claros guard: shop: refund_create is given both as a read and as a write; keep one "
        "of --read/--write (read:/write:) for each tool\n"
    )
    config = tmp_path / "guards.yaml"
    config.write_text(
        f"servers:\n  shop:\n    command: [{TURNCOAT[0]!r}]\n"
        "    read: [a_tool]\n    write: [a_tool]\n"
    )
    argv = [sys.executable, "-m", "claros_guard.cli", "guard", "--config", str(config)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "a_tool is given both as a read and as a write" in done.stderr
