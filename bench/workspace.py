"""A workspace as a user runs it, for the benches that go over HTTP: a separate
``claros serve`` process (checkpoints signed inline, every 100 entries, the default), 20
rules on each of the shop's two writes, and a mapping with a fetch for one of them.

    app ``shop``        refund_create: 20 rules on ``amount`` and ``reason``, no mapping:
                        one check per write
    app ``shop-fetch``  the same shop server under another name; refund_create: 20 rules on
                        the refund and the order it names, which the mapping has the guard
                        read first (``order_read``): a check that answers "need", the read,
                        and the check again; a guard that has seen that need once reads
                        the order ahead and checks once

None of the rules fires on the calls the benches make, so every write is allowed (after
all 20 rules are evaluated).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from claros.auth import authenticate, create_key
from claros.config import Settings
from claros.mapping.model import MappingSpec
from claros.mapping.service import put_mapping
from claros.mapping.tools import save_registration
from claros.rules.model import RuleSpec
from claros.rules.service import put_rule
from claros.wiring import build_services

__all__ = ["RULES", "SHOP", "SHOP_FETCH", "Keys", "Served", "claros_command", "seed", "serve"]

WORKSPACE = "bench"
RULES = 20
SHOP, SHOP_FETCH = "shop", "shop-fetch"
_SHOP_TOOLS = [
    {"name": "order_read", "read": True, "annotations": {"readOnlyHint": True}},
    {"name": "customer_read", "read": True, "annotations": {"readOnlyHint": True}},
    {"name": "refund_list", "read": True, "annotations": {"readOnlyHint": True}},
    {"name": "refund_create", "read": False, "annotations": {"readOnlyHint": False}},
    {"name": "order_cancel", "read": False, "annotations": {"readOnlyHint": False}},
]


@dataclass(frozen=True)
class Keys:
    admin: str
    agent: str


def _rules() -> list[RuleSpec]:
    """Rules of the shapes people write: comparisons, membership, string tests, and/or."""
    refund = [
        "amount > 10000",
        "amount > 5000 and reason == ''",
        "amount >= 2500 and 'fraud' in reason",
        "amount < 0",
        "amount > 900 and reason != 'damaged'",
    ]
    fetched = [
        "amount > order.total",
        "order.status == 'cancelled'",
        "order.total > 50000 and order.currency == 'EUR'",
        "amount > 100 and order.status != 'delivered'",
        "order.total < 0",
    ]
    out = []
    for app, whens in ((SHOP, refund), (SHOP_FETCH, fetched)):
        for i in range(RULES):
            when = whens[i % len(whens)]
            if i >= len(whens):  # distinct rules, same cost: a threshold that never trips
                when = f"({when}) and {i} > 1000"
            out.append(
                RuleSpec(
                    id=f"{app}-{i:02d}",
                    workflow_id="bench",
                    app=app,
                    tools=["refund_create"],
                    title=f"bench rule {i} on {app}",
                    when=when,
                    response=("stop", "ask", "nudge")[i % 3],
                    owners=["admin@bench.example"] if i % 3 == 1 else [],
                    message=f"rule {i} fired",
                )
            )
    return out


def seed(data: Path, *, rules: bool = True) -> Keys:
    """A fresh data directory with the bench workspace: keys, shop tools, rules, mapping."""
    services = build_services(Settings(data_dir=data))
    try:
        store = services.store
        admin = create_key(store, WORKSPACE, "admin", person="admin@bench.example")
        agent = create_key(store, WORKSPACE, "agent", person="agent@bench.example")
        who = authenticate(store, f"Bearer {admin}")
        for app in (SHOP, SHOP_FETCH):
            save_registration(services, who, app, _SHOP_TOOLS)
        if rules:
            for spec in _rules():
                put_rule(services, who, spec)
            mapping = MappingSpec.model_validate(
                {"app": SHOP_FETCH, "tool": "refund_create",
                 "fetch": {"tool": "order_read", "arguments": {"id": "$order"}, "into": "order"}}
            )  # fmt: skip
            put_mapping(services, who, mapping)
        return Keys(admin, agent)
    finally:
        services.close()


def claros_command() -> list[str]:
    """The ``claros`` console script of this environment (what users run), else the module.
    ``BENCH_CLAROS`` names another one (an older install, to compare with)."""
    other = os.environ.get("BENCH_CLAROS")
    if other:
        return [other]
    script = Path(sys.executable).with_name("claros")
    if script.exists():
        return [str(script)]
    found = shutil.which("claros")
    return [found] if found else [sys.executable, "-m", "claros_guard.cli"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Served:
    url: str
    proc: subprocess.Popen[bytes]


@contextlib.contextmanager
def serve(data: Path, *, wrap: list[str] | None = None) -> Iterator[Served]:
    """``claros serve`` on ``data`` in its own process, until the block ends. ``wrap``
    (e.g. a profiler's command line) goes in front of it."""
    port = _free_port()
    env = {**os.environ, "CLAROS_LOG": "WARNING"}
    cmd = [*(wrap or []), *claros_command(), "serve", "--data", str(data), "--port", str(port)]
    log = (data / "serve.log").open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"claros serve exited: {(data / 'serve.log').read_text()}")
            try:
                httpx.get(f"{url}/v1/ledger/pubkey", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError("claros serve did not start within 60 s") from None
                time.sleep(0.1)
        yield Served(url, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
