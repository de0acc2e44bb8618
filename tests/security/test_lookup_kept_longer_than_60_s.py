"""fetching-facts.txt, Lookups: "one read per distinct value, cached in the guard for 60 s".

Attack (on the freshness the spec promises): a lookup is cached twice, in the guard that
needs it (``NeedResolver``) and in the guard that runs the read (``GuardedApp.lookups``,
so one-shot hook processes and other guards share one read). Each kept what it got for
60 s from when it got it. A value the reading guard had kept 59 s (read for a sibling
app, another guard or a hook) was then kept another 60 s by the guard that asked: a
credit hold a person set on the customer at second 30 was not seen by a refund at second
110, decided on a record read 110 s before.

Now the guard that ran the read says how long its answer stays fresh, and the guard that
asked keeps it no longer: 60 s from the read, in all.

The guard's clock cannot be set from outside its process, so this runs the real classes
(two apps of one guard process, siblings, each with its resolver and cache) on one
injected clock, the wrapped server's read replaced by a counter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from claros_guard.app import AppSettings, GuardedApp, GuardSettings
from claros_guard.needs import LookupCache, NeedResolver
from claros_guard.peers import PeerClient
from claros_guard.reporter import Reporter
from claros_guard.transport import UpstreamSpec

pytestmark = pytest.mark.anyio

NEED = {
    "key": 'lookups[0]:"C-7"',
    "kind": "lookup",
    "tool": "customer_read",
    "arguments": {"id": "C-7"},
}


class Api:
    async def register_tools(self, app: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {}

    async def check(self, body: Any) -> dict[str, Any]:
        raise AssertionError("no check here")

    async def ask(self, ask_id: str) -> dict[str, Any]:
        raise AssertionError("no ask here")

    async def send_report(self, report: Any) -> None:
        raise AssertionError("no report here")


def guarded(name: str, tmp: Path, clock: Any) -> GuardedApp:
    api = Api()
    app = GuardedApp(
        AppSettings(name=name, upstream=UpstreamSpec(command="true"),
                    reads=frozenset({"customer_read"})),
        GuardSettings(),
        api=api,
        peers=PeerClient(tmp, "ck_test"),
        reporter=Reporter(api),
    )  # fmt: skip
    app.upstream.result = {"protocolVersion": "2025-11-25"}  # initialized
    app.upstream.tools = {"customer_read": {"name": "customer_read"}}
    app.registered.set()
    app.lookups = LookupCache(clock=clock)
    app.resolver = NeedResolver(app, clock=clock)
    return app


async def test_a_lookup_is_never_older_than_60_s(tmp_path: Path) -> None:
    now = [1000.0]

    def clock() -> float:
        return now[0]

    shop, accounting = guarded("shop", tmp_path, clock), guarded("accounting", tmp_path, clock)
    accounting.siblings["shop"] = shop
    customer = {"id": "C-7", "credit_hold": False}
    reads: list[float] = []

    async def call_read(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        reads.append(now[0])
        return {"content": [], "structuredContent": dict(customer)}

    shop.upstream.call_read = call_read  # type: ignore[method-assign]

    # Second 0: accounting's check looks the customer up in shop (read, kept by both).
    got = await accounting.resolver.resolve([{**NEED, "app": "shop"}])
    assert got[NEED["key"]]["credit_hold"] is False
    now[0] += 30
    customer["credit_hold"] = True  # a person puts the customer on hold
    now[0] += 29
    # Second 59: shop's own check needs the same customer; shop's cache still has it.
    assert (await shop.resolver.resolve([NEED]))[NEED["key"]]["credit_hold"] is False
    now[0] += 51
    # Second 110: 110 s after the read. The hold must be seen.
    late = await shop.resolver.resolve([NEED])
    assert late[NEED["key"]]["credit_hold"] is True, (
        f"decided on a record read {now[0] - reads[-1]:g} s before (reads at {reads})"
    )
    assert reads == [1000.0, 1110.0]
