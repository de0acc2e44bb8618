"""A user's cold start: a function's entry module imported (``functions/<name>/app.py``,
its handler built) and then its first request, each in a fresh interpreter, against the
same at another git revision (``BENCH_FIRST_BEFORE``, default ``main``: a rev whose layer
reads the same store), interleaved in one run, as Lambda runs it (bench/lambda_site.py:
the layer's packages and the runtime's boto3 alone, Lambda's environment, and a sampled
trace header, so the Tracer records the request). An import that only moved its cost
into the first request shows here: bench/coldstart.py times the import alone. A rev
whose Tracer patches every library it knows also traces each SQLite call of its first
request: a cost of this bench's store, not of DynamoDB's (compare the import column).

The store is SQLite (a fresh copy of one seeded data directory for every run: an admin
key, an agent key, a rule whose ``when`` is parsed by a check), so the figures are the
functions' own code, the same for both revisions; the DynamoDB client (boto3) is a cost
the route split does not change. Requests: ``POST /v1/check`` (check), ``GET /api/rules``
(admin), ``GET /app`` (web; at a rev before the web function, admin), ``GET /v1/me``
(check: what a guard asks first), ``GET /v1/ledger/checkpoints`` (evidence: a function that
validates no body) and the authorizer's answer for a guard's key (with the
template's read-only ``CLAROS_ROLE_WRITES`` in both trees, so its row shows the code's
change alone: before that setting, the authorizer's first request also tried to note the
key's use).

``python -m bench first_request``; BENCH_COLDSTART_ROUNDS rounds (default 5).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import lambda_site
from bench.coldstart import REPO, _before, _env, _load, compile_all

# (name, function, method, path, body, key): the requests timed.
REQUESTS: tuple[tuple[str, str, str, str, dict[str, object] | None, str], ...] = (
    (
        "check POST /v1/check",
        "check",
        "POST",
        "/v1/check",
        {
            "app": "shop",
            "tool": "refund",
            "arguments": {"amount": 120, "currency": "EUR"},
            "agent": {"name": "bench", "call_id": "c1", "via": {"guard": "claros-guard"}},
        },
        "agent",
    ),  # fmt: skip
    ("check GET /v1/me", "check", "GET", "/v1/me", None, "agent"),
    ("admin GET /api/rules", "admin", "GET", "/api/rules", None, "admin"),
    ("web GET /app", "web", "GET", "/app", None, "admin"),
    ("evidence GET checkpoints", "evidence", "GET", "/v1/ledger/checkpoints", None, "agent"),
    # The authorizer's answer for a guard's key (what API Gateway asks before a check).
    ("authorizer, agent key", "authorizer", "POST", "/v1/check", None, "agent"),
)

_SEED = """
import json, sys
from claros.auth import Principal, create_key
from claros.rules.model import RuleSpec
from claros.rules.service import put_rule
from claros.wiring import build_services
services = build_services()
admin = create_key(services.store, "bench", "admin", person="ada@example.com", label="bench")
agent = create_key(services.store, "bench", "service", label="bench")
who = Principal(workspace="bench", kind="admin", person="ada@example.com", key_id="bench")
spec = RuleSpec(id="big-refund", workflow_id="refunds", app="shop", tools=["refund"],
                title="Big refunds", when="amount > 100", response="ask")
put_rule(services, who, spec)
sys.stdout.write(json.dumps({"admin": admin, "agent": agent}))
"""

_TIMED = """
import json, sys, time
t = time.perf_counter(); c = time.process_time()
import app
imported, imported_cpu = time.perf_counter() - t, time.process_time() - c
class Context:
    function_name = "bench"; memory_limit_in_mb = 1024; aws_request_id = "r1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:1:function:bench"
    def get_remaining_time_in_millis(self): return 30000
event = json.loads({event!r})
t = time.perf_counter(); c = time.process_time()
answer = app.lambda_handler(event, Context())
wall, cpu = time.perf_counter() - t, time.process_time() - c
assert answer.get("statusCode", 200) < 300 and answer.get("isAuthorized", True), answer
sys.stdout.write("\\n" + repr((imported, wall, imported_cpu + cpu)))
"""


def _event(method: str, path: str, body: dict[str, object] | None, key: str) -> str:
    headers = {"authorization": f"Bearer {key}", "accept": "application/json"}
    if body is not None:
        headers["content-type"] = "application/json"
    http = {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1",
            "userAgent": "bench"}  # fmt: skip
    return json.dumps({
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
        "headers": headers, "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
        "requestContext": {"http": http, "requestId": "r1", "stage": "$default",
                           "accountId": "1", "apiId": "bench", "domainName": "bench",
                           "domainPrefix": "bench", "time": "", "timeEpoch": 0},
    })  # fmt: skip


def _store_env(data: Path, function: str = "") -> dict[str, str]:
    env = _env()
    env.update(CLAROS_STORE="sqlite", CLAROS_DATA=str(data), CLAROS_SIGNER="file")
    if function in ("authorizer", "evidence"):
        env["CLAROS_ROLE_WRITES"] = ""  # as template.yaml: their roles read only
    return env


def _run(
    body: str, cwd: Path, env: dict[str, str], site: lambda_site.Site | None
) -> tuple[float, float, float]:
    """(import, first request, CPU of both) seconds of ``body`` in a fresh interpreter: with
    ``site``, as Lambda runs a function (bench/lambda_site.py), a sampled trace header
    set, so the handler's Tracer records the request as it does there."""
    python = sys.executable
    if site is not None:
        python = site.python
        env = lambda_site.lambda_env(env, site, cwd)
        env["_X_AMZN_TRACE_ID"] = lambda_site.TRACE_HEADER
    done = subprocess.run(
        [python, "-c", body], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"a timed run failed in {cwd}:\n{done.stderr[-3000:]}")
    imported, first, cpu = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    return float(imported), float(first), float(cpu)


def main() -> None:
    rounds = max(1, int(os.environ.get("BENCH_COLDSTART_ROUNDS", "5")))
    rev = os.environ.get("BENCH_FIRST_BEFORE", "main")
    compile_all()
    with tempfile.TemporaryDirectory(prefix="first-request-") as where_:
        where = Path(where_)
        layer = _before(rev, where / "before")
        seeded = where / "seeded"
        seed = subprocess.run(
            [sys.executable, "-c", _SEED], cwd=REPO, env=_store_env(seeded),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if seed.returncode:
            raise SystemExit(f"seeding the store failed:\n{seed.stderr}")
        keys = json.loads(seed.stdout)
        site = lambda_site.build(where / "lambda")
        trees = {"now": ""}
        # A function the other rev does not have: its routes were served by another one
        # there (the web app by admin, before the split), so that one is what it ran.
        served_by: dict[str, str] = {}
        if layer is not None:
            trees[rev] = f"import sys; sys.path.insert(0, {str(layer)!r})\n"
            entry = (layer / "claros" / "api" / "entry.py").read_text(encoding="utf-8")
            if '"web":' not in entry:
                served_by["web"] = "admin"
        times: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for round_ in range(rounds + 1):  # the first round warms the disk cache, untimed
            for name, function, method, path, body, key in REQUESTS:
                event = _event(method, path, body, keys[key])
                for tree, prefix in trees.items():
                    data = where / f"data-{round_}-{len(times)}"
                    shutil.copytree(seeded, data)
                    runs_in = served_by.get(function, function) if tree != "now" else function
                    env, timed = _store_env(data, function), prefix + _TIMED.format(event=event)
                    got = _run(timed, REPO / "functions" / runs_in, env, site)
                    shutil.rmtree(data)
                    if round_:
                        times.setdefault((name, tree), []).append(got)
        how = "as Lambda runs it" if site else "in this venv, outside Lambda's environment"
        print(f"import + first request, {rounds} fresh interpreters each, interleaved, one "
              f"run, {how} (load average {_load()}); ms, median of the runs:")  # fmt: skip
        print(f"  {'':<24} {'tree':<8} {'import':>8} {'request':>8} {'total':>8} "
              f"{'min tot':>8} {'cpu':>8}")  # fmt: skip
        for name, *_ in REQUESTS:
            for tree in trees:
                runs = times[(name, tree)]
                imp = statistics.median(r[0] for r in runs) * 1000
                req = statistics.median(r[1] for r in runs) * 1000
                tot = statistics.median(r[0] + r[1] for r in runs) * 1000
                low = min(r[0] + r[1] for r in runs) * 1000
                cpu = min(r[2] for r in runs) * 1000
                print(f"  {name:<24} {tree:<8} {imp:8.1f} {req:8.1f} {tot:8.1f} {low:8.1f} "
                      f"{cpu:8.1f}")  # fmt: skip
        print(f"  load average {_load()}")


if __name__ == "__main__":
    main()
