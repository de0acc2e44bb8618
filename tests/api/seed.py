"""A month of activity (October 2026) made through the real domain code, with a clock the
test sets (not a test module). The figures the evidence reports must give for it are
computed by hand in the tests that use it.

    Sep 30  rules: refund-half (ask, amount > 100, owner dana), refund-huge (stop,
            amount > 1000, owners dana and erin), refund-note (nudge, no owner) in
            workflow "refunds"; payout-stop (stop, amount > 500, owner erin) in "payouts".
            A check of 200 (an ask nobody answers): before the month.
    Oct     c1 50 allow, c2 60 allow; c3 200 ask, dana approves after 5 s; c4 300 ask,
            dana denies after 40 s; c5 150 ask, the admin approves after 20 s; c6 5000
            stop, c7 2000 stop; c8 payout 800 stop, c9 payout 100 allow; c10 refund_note 5
            nudge. Overrides: wrong_stop on c6, missed on c1 (refund-half), missed on c9
            (payout-stop). Outcomes of c1 and c6 (which ran after its stop); one write let
            through unchecked (shop refund_create).
    Nov 5   a check of 5000 (stop): after the month.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

import claros.clock
from claros.ask_answer import AnswerRequest
from claros.asks import answer_ask
from claros.auth import Principal, authenticate, create_key
from claros.checks import AgentInfo, CheckRequest, Via, record_check
from claros.outcomes import OutcomeRequest, UncheckedRequest, record_outcome, record_unchecked
from claros.overrides import OverrideRequest, record_override
from claros.rules.model import RuleSpec
from claros.rules.service import put_rule
from claros.wiring import Services

WS = "acme"
ADMIN = "admin@acme.test"
DANA = "dana@acme.test"
ERIN = "erin@acme.test"
SAM = "sam@acme.test"


def utc_ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, s: int = 0) -> int:
    return calendar.timegm((year, month, day, hour, minute, s)) * 1000


OCT_1 = utc_ms(2026, 10, 1)
NOV_1 = utc_ms(2026, 11, 1)


class Clock:
    """``time.time_ns`` as the test sets it: every ts Claros writes (records, entries,
    checkpoints) comes from it."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def time_ns(self) -> int:
        return self.ms * 1_000_000

    def at(self, ms: int) -> None:
        self.ms = ms

    def later(self, seconds: float) -> None:
        self.ms += int(seconds * 1000)


def install_clock(monkeypatch: pytest.MonkeyPatch, ms: int = OCT_1) -> Clock:
    """Claros's clock, for the rest of the test."""
    found = Clock(ms)
    monkeypatch.setattr(time, "time_ns", found.time_ns)
    # Ids follow this clock too, not the latest instant an earlier test reached (new_id
    # never goes back within a process): Activity reads a time range as a range of ids.
    monkeypatch.setattr(claros.clock, "_last", [0, 0])
    return found


@dataclass
class Seeded:
    admin_key: str
    checks: dict[str, str] = field(default_factory=dict)  # c1.. -> check_id
    asks: dict[str, str] = field(default_factory=dict)


def _rule(rule_id: str, workflow: str, app: str, tool: str, when: str, response: str,
          owners: list[str], title: str = "") -> RuleSpec:  # fmt: skip
    return RuleSpec(
        id=rule_id, workflow_id=workflow, app=app, tools=[tool], when=when, response=response,  # type: ignore[arg-type]
        owners=owners, title=title or f"{rule_id} ({response})",
    )  # fmt: skip


def _check(services: Services, who: Principal, app: str, tool: str, amount: int, n: str) -> Any:
    agent = AgentInfo(name="claude-code", call_id=n, via=Via(guard="claros-guard", version="1"))
    req = CheckRequest(app=app, tool=tool, arguments={"amount": amount, "currency": "EUR"},
                       agent=agent)  # fmt: skip
    return record_check(services, who, req)


def seed_october(services: Services, clock: Clock, *, rule_title: str = "") -> Seeded:
    store = services.store
    keys = {
        "admin": create_key(store, WS, "admin", person=ADMIN),
        "dana": create_key(store, WS, "person", person=DANA),  # answers asks, files overrides
        "erin": create_key(store, WS, "person", person=ERIN),
        "sam": create_key(store, WS, "agent", person=SAM),
    }
    who = {name: authenticate(store, f"Bearer {key}") for name, key in keys.items()}
    seeded = Seeded(admin_key=keys["admin"])

    clock.at(utc_ms(2026, 9, 30, 9))
    for spec in (
        _rule("refund-half", "refunds", "shop", "refund_create", "amount > 100", "ask", [DANA],
              rule_title),
        _rule("refund-huge", "refunds", "shop", "refund_create", "amount > 1000", "stop",
              [DANA, ERIN]),
        _rule("refund-note", "refunds", "shop", "refund_note", "amount > 0", "nudge", []),
        _rule("payout-stop", "payouts", "bank", "payout", "amount > 500", "stop", [ERIN]),
    ):  # fmt: skip
        clock.later(1)
        put_rule(services, who["admin"], spec)
    clock.at(utc_ms(2026, 9, 30, 12))
    assert _check(services, who["sam"], "shop", "refund_create", 200, "c0")["result"] == "ask"

    plan = [
        ("c1", "shop", "refund_create", 50, "allow"),
        ("c2", "shop", "refund_create", 60, "allow"),
        ("c3", "shop", "refund_create", 200, "ask"),
        ("c4", "shop", "refund_create", 300, "ask"),
        ("c5", "shop", "refund_create", 150, "ask"),
        ("c6", "shop", "refund_create", 5000, "stop"),
        ("c7", "shop", "refund_create", 2000, "stop"),
        ("c8", "bank", "payout", 800, "stop"),
        ("c9", "bank", "payout", 100, "allow"),
        ("c10", "shop", "refund_note", 5, "nudge"),
    ]
    answers = {"c3": ("dana", "approve", 5), "c4": ("dana", "deny", 40),
               "c5": ("admin", "approve", 20)}  # fmt: skip
    for day, (name, app, tool, amount, expected) in enumerate(plan, start=2):
        clock.at(utc_ms(2026, 10, day, 10))
        answer = _check(services, who["sam"], app, tool, amount, name)
        assert answer["result"] == expected, (name, answer)
        seeded.checks[name] = answer["check_id"]
        if name in answers:
            person, decision, seconds = answers[name]
            seeded.asks[name] = answer["ask"]["ask_id"]
            clock.later(seconds)
            answer_ask(services, who[person], answer["ask"]["ask_id"],
                       AnswerRequest(decision=decision))  # type: ignore[arg-type]  # fmt: skip

    clock.at(utc_ms(2026, 10, 20, 9))
    record_override(services, who["admin"], seeded.checks["c6"],
                    OverrideRequest(verdict="wrong_stop", note="a known customer"))  # fmt: skip
    record_override(services, who["dana"], seeded.checks["c1"],
                    OverrideRequest(verdict="missed", rule_id="refund-half"))  # fmt: skip
    record_override(services, who["erin"], seeded.checks["c9"],
                    OverrideRequest(verdict="missed", rule_id="payout-stop"))  # fmt: skip
    clock.later(60)
    record_outcome(services, who["sam"], seeded.checks["c1"], OutcomeRequest(status="ok"))
    record_outcome(services, who["sam"], seeded.checks["c6"], OutcomeRequest(status="ok"))
    agent = AgentInfo(name="claude-code", via=Via(guard="claros-guard"))
    record_unchecked(services, who["sam"], UncheckedRequest(
        app="shop", tool="refund_create", agent=agent, reason="Claros unreachable"))  # fmt: skip

    clock.at(utc_ms(2026, 11, 5, 10))
    assert _check(services, who["sam"], "shop", "refund_create", 5000, "n1")["result"] == "stop"
    clock.at(NOV_1)
    return seeded
