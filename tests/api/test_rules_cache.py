"""Checks decide on the rules as they are now, though each process keeps them parsed
between checks: every rule change (a new rule, an edit, a close) is seen by the next check,
in this process and in another one on the same store."""

from __future__ import annotations

from pathlib import Path

from claros.auth import authenticate, create_key
from claros.checks import AgentInfo, CheckRequest, record_check
from claros.config import Settings
from claros.rules import service
from claros.rules.model import RuleSpec
from claros.rules.service import active_rules, close_rule, put_rule
from claros.signing import FileSigner
from claros.store.base import DocWrite
from claros.store.sqlite import SqliteStore
from claros.wiring import Services
from tests.api.conftest import WORKSPACE

AGENT = AgentInfo(name="test-agent")


def _rule(when: str, rule_id: str = "refund-cap") -> RuleSpec:
    return RuleSpec(id=rule_id, workflow_id="refunds", app="shop", tools=["refund_create"],
                    title="refunds are capped", when=when, response="stop")  # fmt: skip


def _result(services: Services, key: str, amount: int) -> str:
    who = authenticate(services.store, f"Bearer {key}")
    req = CheckRequest(app="shop", tool="refund_create", arguments={"amount": amount}, agent=AGENT)
    return str(record_check(services, who, req)["result"])


def test_every_rule_change_reaches_the_next_check(services: Services) -> None:
    store = services.store
    admin = authenticate(store, f"Bearer {create_key(store, WORKSPACE, 'admin', person='a@x.io')}")
    agent = create_key(store, WORKSPACE, "agent", person="a@x.io")
    assert _result(services, agent, 500) == "allow"  # no rules, nothing cached yet
    put_rule(services, admin, _rule("amount > 100"))
    assert _result(services, agent, 500) == "stop"
    assert _result(services, agent, 500) == "stop"  # from the cache now
    put_rule(services, admin, _rule("amount > 1000"))  # an edit
    assert _result(services, agent, 500) == "allow"
    put_rule(services, admin, _rule("amount > 10", "refund-second"))  # a new rule
    assert _result(services, agent, 500) == "stop"
    close_rule(services, admin, "refund-second")
    assert _result(services, agent, 500) == "allow"


def test_a_change_made_by_another_process_is_seen(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    settings.data_dir.mkdir()
    # Two stores on one database: what two server processes (or Lambdas) share.
    here = Services(settings, SqliteStore(tmp_path / "data" / "claros.db"), FileSigner(tmp_path))
    there = Services(settings, SqliteStore(tmp_path / "data" / "claros.db"), FileSigner(tmp_path))
    try:
        admin_key = create_key(here.store, WORKSPACE, "admin", person="a@x.io")
        agent = create_key(here.store, WORKSPACE, "agent", person="a@x.io")
        admin = authenticate(there.store, f"Bearer {admin_key}")
        put_rule(there, admin, _rule("amount > 100"))
        assert _result(here, agent, 500) == "stop"  # cached here
        put_rule(there, admin, _rule("amount > 1000"))
        assert _result(here, agent, 500) == "allow"
        close_rule(there, admin, "refund-cap")
        assert active_rules(here.store, WORKSPACE) == []
    finally:
        here.close()
        there.close()


def test_two_stores_never_share_cached_rules(tmp_path: Path) -> None:
    stores = [SqliteStore(tmp_path / f"{n}.db") for n in ("one", "two")]
    try:
        for n, store in enumerate(stores):
            services = Services(Settings(data_dir=tmp_path), store, FileSigner(tmp_path))
            key = create_key(store, WORKSPACE, "admin", person="a@x.io")
            put_rule(services, authenticate(store, f"Bearer {key}"), _rule(f"amount > {n}"))
        whens = [active_rules(s, WORKSPACE)[0]["rule"]["when"] for s in stores]
        assert whens == ["amount > 0", "amount > 1"]
    finally:
        for store in stores:
            store.close()


def test_rules_without_a_stamp_are_read_every_time(services: Services) -> None:
    """A workspace whose rules were written before the stamp existed: no cache, so a rule
    doc changed without a stamp is still seen."""
    store = services.store
    admin = authenticate(store, f"Bearer {create_key(store, WORKSPACE, 'admin', person='a@x.io')}")
    put_rule(services, admin, _rule("amount > 100"))
    store.write_docs([DocWrite(WORKSPACE, service.STAMP_COLLECTION, service.STAMP_KEY, None)])
    assert active_rules(store, WORKSPACE)[0]["rule"]["when"] == "amount > 100"
    doc = store.get_doc(WORKSPACE, "rule", "refund-cap")
    assert doc is not None
    changed = {**doc.value, "rule": {**doc.value["rule"], "when": "amount > 5"}}
    store.write_docs([DocWrite(WORKSPACE, "rule", "refund-cap", changed, doc.rev)])
    assert active_rules(store, WORKSPACE)[0]["rule"]["when"] == "amount > 5"
