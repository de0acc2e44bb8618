"""Fault: a mapping saved before the where-key and context-key checks runs as saved, and
nothing says so.

Since those checks, a mapping whose query has a ``where`` key that is no field path of
the rows (``"customer "``: it matches no row, so "a customer's third refund" counts 0 on
every call), or whose two lookups give the judge one context key (the judge sees one of
them), is refused when it is saved. One saved earlier is read as saved, so registrations
and checks go on (tests/security/test_object_argument_empties_the_history.py), and the
rule on it never fired, with no word to the admin who saves or reads the rule.

Now the rule's warnings (when it is saved, and on the web app's Rules page) name each
check its tool's saved mapping fails, and say to save the mapping again.
"""

from __future__ import annotations

from typing import Any

import httpx

from claros.mapping.tools import MAPPINGS
from claros.rules.terms import rule_hash
from claros.store.base import DocWrite
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, put_rule
from tests.api.fake_guard import FakeApp
from tests.api.test_fetching_facts import apps, put_mapping  # noqa: F401 - apps: a fixture
from tests.security.shop_rules import THIRD_REFUND

QUERY = {"tool": "refund_list", "arguments": {"customer": "$customer"},
         "where": {"customer": "$customer"}, "op": "count", "var": "refunds_before"}  # fmt: skip
LOOKUP = {"key": "order", "tool": "order_read", "arguments": {"id": "$"}, "context": ["customer"]}


def _saved_as(services: Services, mapping: dict[str, Any]) -> None:
    """The saved mapping replaced by ``mapping``, as an earlier version saved it."""
    [doc] = services.store.query_docs(WORKSPACE, MAPPINGS, limit=10)
    value = {**doc.value, "mapping": mapping, "hash": rule_hash(mapping)}
    services.store.write_docs([DocWrite(WORKSPACE, MAPPINGS, doc.key, value, doc.rev)])


def test_a_where_key_saved_before_its_check_is_warned(
    http: httpx.Client,
    keys: Keys,
    services: Services,
    apps: dict[str, FakeApp],  # noqa: F811 - the fixture
) -> None:
    mapping = {"app": "shop", "tool": "refund_create", "queries": [QUERY]}
    assert put_mapping(http, keys.admin, mapping).status_code == 200
    _saved_as(services, {**mapping, "queries": [{**QUERY, "where": {"customer ": "$customer"}}]})
    saved = put_rule(http, keys.admin, **{k: v for k, v in THIRD_REFUND.items()})
    warned = " | ".join(saved.get("warnings") or [])
    assert "where key 'customer ' is not a field path" in warned, (
        f"no warning of the saved mapping's where key: {saved.get('warnings')}"
    )
    assert "save it again" in warned, warned


def test_two_lookups_saved_with_one_context_key_are_warned(
    http: httpx.Client,
    keys: Keys,
    services: Services,
    apps: dict[str, FakeApp],  # noqa: F811 - the fixture
) -> None:
    mapping = {"app": "shop", "tool": "refund_create", "lookups": [LOOKUP]}
    assert put_mapping(http, keys.admin, mapping).status_code == 200
    _saved_as(services, {**mapping, "lookups": [LOOKUP, {**LOOKUP, "key": "ref.order"}]})
    saved = put_rule(http, keys.admin, id="judged", when=None, message="Ask the judge.")
    warned = " | ".join(saved.get("warnings") or [])
    assert "gives the judge 'order.customer'" in warned, (
        f"no warning of the saved mapping's context keys: {saved.get('warnings')}"
    )


def test_a_mapping_that_passes_today_s_checks_is_not_warned(
    http: httpx.Client,
    keys: Keys,
    apps: dict[str, FakeApp],  # noqa: F811 - the fixture
) -> None:
    mapping = {"app": "shop", "tool": "refund_create", "queries": [QUERY]}
    assert put_mapping(http, keys.admin, mapping).status_code == 200
    saved = put_rule(http, keys.admin, **{k: v for k, v in THIRD_REFUND.items()})
    assert "warnings" not in saved, saved["warnings"]


def test_a_suspended_mapping_is_said_once(
    http: httpx.Client,
    keys: Keys,
    services: Services,
    apps: dict[str, FakeApp],  # noqa: F811 - the fixture
) -> None:
    """A suspended mapping is not read (its checks are refused): the warning says it is
    suspended, once, whatever it holds."""
    mapping = {"app": "shop", "tool": "refund_create", "queries": [QUERY]}
    assert put_mapping(http, keys.admin, mapping).status_code == 200
    _saved_as(services, {**mapping, "queries": [{**QUERY, "where": {"customer ": "$customer"}}]})
    [doc] = services.store.query_docs(WORKSPACE, MAPPINGS, limit=10)
    value = {**doc.value, "status": "suspended", "suspended": {"reason": "refund_list changed"}}
    services.store.write_docs([DocWrite(WORKSPACE, MAPPINGS, doc.key, value, doc.rev)])
    saved = put_rule(http, keys.admin, **{k: v for k, v in THIRD_REFUND.items()})
    warnings = saved.get("warnings") or []
    assert [w for w in warnings if "is suspended: refund_list changed" in w] == warnings, warnings
    assert len(warnings) == 1, warnings
