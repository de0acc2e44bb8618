"""The DynamoDB units the stack spends per check, per outcome, per Idempotency-Key, per
checkpoint and per authorizer call, counted on the real request paths: template.yaml
deployed into moto (tests/stack.py, as tests/aws runs it), each function's own handler
invoked, and every DynamoDB call it makes counted by bench/units.py (why not moto's own
``ConsumedCapacity``: see there).

What runs: a workspace with 20 rules on the checked tool (none fires); after uncounted
checks up to a multiple of ``CheckpointEvery`` (100), 50 checks, each followed by its
outcome (100 ledger entries, ending on the next multiple: one checkpoint); every other
outcome sent with an ``Idempotency-Key`` as the guard sends it (the difference is what the
key's rows cost); the stream batches of those 100 entries given to the checkpoint
function; one schedule tick (nothing left to sign); the authorizer asked for the agent's
key. A key's requests are as far apart as docs/cost.json's volume puts them
(``seconds_between_requests``). The first check of a fresh check function (it queries the
rules; later ones find them cached under the same stamp) is counted apart as
``check_cold``; the table's figures are the warm means. Ids and keys come from a seeded
generator, so every run writes the same bytes.

Then, at the store: how many DynamoDB requests an append makes when 1, 4 or 16
environments take turns appending to one workspace (``turns``: each a store of its own,
as Lambda's are, knowing the head only from its own last append), each a round trip of the
append's critical section, as a ratio to one environment's.

``python -m bench capacity`` prints the figures; ``python -m bench.capacity --write``
also stores them in docs/cost.json (``assumptions`` and ``measured``) and regenerates the
table in docs/deploy.md. tests/test_cost_table.py measures again and fails when
docs/cost.json holds other units than the code spends.
"""

from __future__ import annotations

import base64
import json
import os
import random
import secrets
import sys
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bench import cost
from bench.units import Call, Meter

RULES = 20
PAIRS = 50  # a check and its outcome are 2 entries: 100 entries, one checkpoint
EVERY = 100
ENVIRONMENTS = (1, 4, 16)  # appending in turns to one workspace (``turns``)
WS_TURNS = "turns"
START_MS = 1_796_004_000_000  # 2026-11-30T02:00:00Z, the sample events' time
# The units docs/cost.json takes from this measurement (its "assumptions").
UNIT_KEYS = (
    "check_wru", "check_rru", "outcome_wru", "outcome_rru", "idempotency_wru_per_check",
    "idempotency_rru_per_check", "checkpoint_wru", "checkpoint_rru", "authorizer_rru",
    "schedule_tick_rru",
)  # fmt: skip


def _rule(n: int) -> dict[str, Any]:
    return {
        "rule": {
            "id": f"refund-cap-{n:02d}",
            "workflow_id": "refunds",
            "app": "shop",
            "tools": ["refund_create"],
            "title": f"Refunds over {n} million are stopped (rule {n} of {RULES})",
            "when": f"amount > {n * 1_000_000}",
            "response": "stop",
            "message": "A refund this large needs a person, not an agent",
        },
        "made_by": "manual",
    }


def _sum(calls: list[Call]) -> tuple[float, float]:
    return sum(c.wcu for c in calls), sum(c.rcu for c in calls)


def _authorizer_event(check_event: dict[str, Any]) -> dict[str, Any]:
    """The REQUEST authorizer event (payload 2.0) API Gateway sends for a check."""
    event = dict(check_event)
    event.pop("body", None)
    event.pop("isBase64Encoded", None)
    event["type"] = "REQUEST"
    event["routeArn"] = (
        "arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/$default/POST/v1/check"
    )
    event["identitySource"] = [event["headers"]["authorization"]]
    return event


def seconds_between_requests() -> float:
    """How far apart one key's requests are at docs/cost.json's volume: its checks (and
    outcomes) a month spread over its ``active_keys``. Time matters to the units: a key's
    use is noted at most once a minute (claros.auth), so at a million checks a month over
    100 keys (one request of a key every ~130 s) every request notes it."""
    a = json.loads(cost.INPUTS.read_text())
    n, x = a["checks"], a["assumptions"]
    return float(x["month_seconds"] * x["active_keys"] / (n * x["requests_per_check"]))


def _seed_randomness(mp: pytest.MonkeyPatch) -> None:
    """Ids, keys and request ids from a seeded generator: the same items, byte for byte,
    on every run (a compressed record's size depends on the ids in it), so the units
    cannot move with luck. Their lengths are what Claros makes."""
    rng = random.Random(16)

    def token_bytes(n: int | None = 32) -> bytes:
        return rng.randbytes(32 if n is None else n)

    def token_urlsafe(n: int | None = 32) -> str:
        return base64.urlsafe_b64encode(token_bytes(n)).rstrip(b"=").decode()

    mp.setattr(secrets, "token_bytes", token_bytes)
    mp.setattr(secrets, "token_hex", lambda n=32: token_bytes(n).hex())
    mp.setattr(secrets, "token_urlsafe", token_urlsafe)
    mp.setattr(uuid, "uuid4", lambda: uuid.UUID(bytes=rng.randbytes(16), version=4))


@contextmanager
def _moto_account() -> Iterator[pytest.MonkeyPatch]:
    """moto's account, with the bench's credentials and region (no profile or endpoint of
    the machine's) and moto's DynamoDB gaps filled (tests/aws); undone on leaving."""
    from moto import mock_aws

    from tests.aws import lighten_aws_setup, patch_moto_dynamodb

    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        # moto's CloudFormation warns of each resource it does not make (the HTTP API, the
        # alarms), Powertools of a request that published no metric: neither is counted.
        warnings.filterwarnings("ignore", message="Tried to parse AWS::", category=UserWarning)
        warnings.filterwarnings("ignore", message="No application metrics", category=UserWarning)
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
            mp.delenv(name, raising=False)
        for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                            "AWS_SESSION_TOKEN": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                            "AWS_CONFIG_FILE": os.devnull,
                            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                            # Metrics would print a line per request; nothing reads them.
                            "POWERTOOLS_METRICS_DISABLED": "true"}.items():  # fmt: skip
            mp.setenv(name, value)
        with mock_aws():
            # The tests' moto, set-up costs and all (botocore's data parsed once, no RSA key
            # pair for a symmetric key, moto's answers written with less work): the requests
            # and their answers are the same, so are the units counted.
            lighten_aws_setup(mp)
            patch_moto_dynamodb(mp)
            yield mp


def turns(environments: tuple[int, ...] = ENVIRONMENTS, rounds: int = 5) -> dict[int, float]:
    """DynamoDB requests per append when ``n`` environments take turns appending to one
    workspace, by ``n``: each environment its own store, as Lambda's are, so each knows
    the chain's head only from its own last append and finds the others' entries since.
    Every request is a round trip in the append's critical section."""
    import boto3

    from claros.store.dynamo import DynamoStore
    from tests.aws import STORE_TABLES, tables_from_template

    out: dict[int, float] = {}
    for n in environments:
        with _moto_account():
            client = boto3.client("dynamodb", region_name="us-east-1")
            made = tables_from_template(client)
            tables = {arg: made[lid] for arg, lid in STORE_TABLES.items()}
            stores = [DynamoStore(client, **tables) for _ in range(n)]
            for i, store in enumerate(stores):  # each knows a head: its own first append
                store.append(WS_TURNS, "check", f"first-{i}", {"i": i})
            requests = [0]

            def count(requests: list[int] = requests, **_: Any) -> None:
                requests[0] += 1

            client.meta.events.register("before-call.dynamodb.*", count)
            for r in range(rounds):
                for i, store in enumerate(stores):
                    store.append(WS_TURNS, "check", f"c{r}-{i}", {"round": r, "i": i})
            out[n] = requests[0] / (rounds * n)
    return out


def measure(pairs: int = PAIRS, every: int = EVERY) -> dict[str, Any]:
    """Run the stack's request paths in moto; the units per phase (see the module doc).
    ``pairs`` checks with their outcomes make ``2 * pairs`` entries, which must hold one
    multiple of ``every`` (the smoke test runs 5 pairs at every 10)."""
    if pairs < 2 or 2 * pairs % every:
        raise ValueError(f"{pairs} pairs make {2 * pairs} entries: not a multiple of {every}")
    import boto3

    from claros.auth import create_key
    from tests.api.seed import install_clock
    from tests.aws import load_template, patch_moto_kms_ed25519
    from tests.events import load_event
    from tests.stack import (
        ADMIN,
        PARAMETERS,
        PERSON,
        WS,
        Functions,
        catch_stream_batches,
        deploy,
        run_check,
    )

    with _moto_account() as mp:
        patch_moto_kms_ed25519(mp)
        delivered = catch_stream_batches(mp)
        clock = install_clock(mp, START_MS)
        _seed_randomness(mp)
        mp.setattr(boto3, "DEFAULT_SESSION", None)  # a session of this run, hooked
        boto3.setup_default_session()
        meter = Meter(boto3.session.Session().client("dynamodb"))
        meter.attach(boto3.DEFAULT_SESSION)

        pace = seconds_between_requests()
        params = {**PARAMETERS, "CheckpointEvery": str(every), "CheckpointMaxAge": "300"}
        stack = deploy(load_template(), parameters=params)
        store = stack.store(boto3.client("dynamodb"))
        admin = create_key(store, WS, "admin", person=ADMIN)
        agent = create_key(store, WS, "agent", person=PERSON)
        functions = Functions(stack, mp)
        create = load_event("admin-create-rule", admin)
        for n in range(1, RULES + 1):
            clock.later(1)
            status, body = functions.http("admin", {**create, "body": json.dumps(_rule(n))})
            assert status in (200, 201), body

        def check() -> str:
            clock.later(pace)
            return run_check(functions, agent)

        def outcome(check_id: str, idempotency_key: str | None) -> None:
            clock.later(pace)
            event = load_event("outcome-check-outcome", agent, check_id=check_id)
            if idempotency_key:
                event["headers"] = {**event["headers"], "idempotency-key": idempotency_key}
            status, body = functions.http("outcome", event)
            assert status == 201, body

        def stream(records: list[dict[str, Any]]) -> list[int]:
            signed: list[int] = []
            for at in range(0, len(records), 100):  # the stream's BatchSize
                batch = {"Records": records[at : at + 100]}
                signed += functions.invoke("checkpoint", batch)["signed"]
            return signed

        with meter.phase("check_cold"):  # a fresh check function: it reads the rules
            check()
        # Uncounted checks up to a multiple of CheckpointEvery, then their stream
        # batches through the checkpoint function (it signs that multiple): the counted
        # entries end on the next multiple, and the schedule finds no tail to sign.
        while (head := store.head(WS)) is None or head.seq % every:
            check()
        stream([r for _, e in delivered for r in e["Records"]])
        delivered.clear()

        for i in range(pairs):
            with meter.phase("check"):
                check_id = check()
            keyed = i % 2 == 1
            with meter.phase("outcome_keyed" if keyed else "outcome"):
                outcome(check_id, f"outcome-{i:04d}" if keyed else None)
        records = [r for _, e in delivered for r in e["Records"]]
        with meter.phase("checkpoint"):
            signed = stream(records)
        # The counted entries end on a multiple of CheckpointEvery: signed, counted.
        assert len(records) == 2 * pairs and len(signed) == 2 * pairs // every, signed
        with meter.phase("schedule_tick"):
            assert functions.invoke("checkpoint", load_event("checkpoint-schedule")) == {
                "signed": []
            }
        with meter.phase("authorizer"):
            event = _authorizer_event(load_event("check-check", agent))
            answer = functions.invoke("authorizer", event)
        assert answer["isAuthorized"] is True, answer
        return _figures(meter, pairs, len(records))


def _figures(meter: Meter, pairs: int, entries: int) -> dict[str, Any]:
    calls = meter.calls

    def mean(phase: str, invocations: int) -> tuple[float, float]:
        w, r = _sum(calls[phase])
        return round(w / invocations, 2), round(r / invocations, 2)

    checks, keyed = pairs, pairs // 2
    plain = pairs - keyed
    check_w, check_r = mean("check", checks)
    out_w, out_r = mean("outcome", plain)
    keyed_w, keyed_r = mean("outcome_keyed", keyed)
    cp_w, cp_r = _sum(calls["checkpoint"])
    scale = 100 / entries  # per 100 entries
    auth_w, auth_r = _sum(calls["authorizer"])
    tick_w, tick_r = _sum(calls["schedule_tick"])
    moto = [c.moto for phase in calls.values() for c in phase]
    units = {
        "check_wru": check_w, "check_rru": check_r, "outcome_wru": out_w, "outcome_rru": out_r,
        "idempotency_wru_per_check": round(keyed_w - out_w, 2),
        "idempotency_rru_per_check": round(keyed_r - out_r, 2),
        "checkpoint_wru": round(cp_w * scale, 2), "checkpoint_rru": round(cp_r * scale, 2),
        "authorizer_rru": auth_r, "schedule_tick_rru": tick_r,
    }  # fmt: skip
    cold_w, cold_r = _sum(calls["check_cold"])
    detail = {
        "counted_by": "bench/units.py, from each call's request and items: moto's "
        "ConsumedCapacity is a fixed figure, not the items' sizes",
        "rules": RULES,
        "check_cold_wru": cold_w,
        "check_cold_rru": cold_r,
        "schedule_tick_wru": tick_w,
        "moto_reported_calls": sum(m is not None for m in moto),
        "moto_silent_calls": sum(m is None for m in moto),
        # DynamoDB requests one invocation makes, one after the other: each is a round
        # trip of the request's latency (no call of a request runs beside another).
        "calls_per_request": {
            "check": round(len(calls["check"]) / checks, 2),
            "check_cold": len(calls["check_cold"]),
            "outcome": round(len(calls["outcome"]) / plain, 2),
            "outcome_keyed": round(len(calls["outcome_keyed"]) / keyed, 2),
            "checkpoint_per_100_entries": round(len(calls["checkpoint"]) * scale, 2),
            "authorizer": len(calls["authorizer"]),
            "schedule_tick": len(calls["schedule_tick"]),
        },
        "calls": {
            phase: sorted({f"{c.op} {_table_kind(c.tables)}" for c in found})
            for phase, found in sorted(calls.items())
        },
    }
    return {"units": {k: units[k] for k in UNIT_KEYS}, "measured": detail}


def _table_kind(tables: str) -> str:
    """The template's logical table names, not the physical ones moto made up."""
    out = []
    for name in tables.split(","):
        for kind in ("LedgerTable", "RecordsTable", "StateTable"):
            if kind in name:
                out.append(kind)
                break
        else:
            out.append(name)
    return ",".join(sorted(set(out)))


def _print(figures: dict[str, Any]) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"DynamoDB units on the stack's request paths, counted in moto (load average {load}):")
    for key, value in figures["units"].items():
        print(f"  {key:28} {value:g}")
    for key, value in figures["measured"].items():
        if key != "calls":
            print(f"  {key:28} {value}")
    for phase, ops in figures["measured"]["calls"].items():
        print(f"  {phase}: {', '.join(ops)}")


def write(figures: dict[str, Any]) -> None:
    data = json.loads(cost.INPUTS.read_text())
    data["assumptions"].update(figures["units"])
    data["measured"] = figures["measured"]
    cost.INPUTS.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    cost.main()


def main(
    argv: list[str] | None = None,
    pairs: int = PAIRS,
    every: int = EVERY,
    environments: tuple[int, ...] = ENVIRONMENTS,
) -> dict[str, Any]:
    figures = measure(pairs, every)
    _print(figures)
    per_append = turns(environments)
    print("DynamoDB requests per append, environments taking turns on one workspace:")
    for n, requests in per_append.items():
        ratio = requests / per_append[environments[0]]
        print(f"  {n:3d} environments {requests:6.2f}  ({ratio:.2f}x {environments[0]})")
    if argv and "--write" in argv:
        write(figures)
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
