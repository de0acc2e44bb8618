"""Proposed mappings over the real local server (SQLite): POST /api/mappings/proposals,
accepting one (the version's confirm record), the proposal page, and the model proposer
on Amazon Bedrock through botocore's Stubber."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import yaml
from botocore.exceptions import ReadTimeoutError
from botocore.stub import ANY, Stubber

from claros.local import LocalServer
from claros.mapping.mapper import DRAFT_SCHEMA, SYSTEM, BedrockMapper
from claros.wiring import Services
from tests.api.conftest import ADMIN, Keys, bearer
from tests.mapping.examples import EXAMPLES, registrations

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"
RULES = yaml.safe_load((EXAMPLES / "rules.yaml").read_text())["rules"]
MAPPINGS = {
    (m["app"], m["tool"]): m
    for m in yaml.safe_load((EXAMPLES / "mappings.yaml").read_text())["mappings"]
}
CREDIT = MAPPINGS[("accounting", "credit_note_create")]


@pytest.fixture(scope="module")
def regs() -> dict[str, list[dict[str, Any]]]:
    return registrations()


@pytest.fixture
def workspace(http: httpx.Client, keys: Keys, regs: dict[str, list[dict[str, Any]]]) -> None:
    """The example servers' tools, registered as their guards do, and the example rules."""
    for app, tools in regs.items():
        answer = http.post(f"/v1/apps/{app}/tools", json={"tools": tools},
                           headers=bearer(keys.agent))  # fmt: skip
        assert answer.status_code == 200, answer.text
    for rule in RULES:
        answer = http.put(f"/api/rules/{rule['id']}", json={"rule": rule},
                          headers=bearer(keys.admin))  # fmt: skip
        assert answer.status_code == 200, answer.text


def _propose(http: httpx.Client, key: str, app: str, tool: str) -> httpx.Response:
    return http.post("/api/mappings/proposals", json={"app": app, "tool": tool},
                     headers=bearer(key))  # fmt: skip


def test_proposal_for_the_credit_note_equals_the_example(
    http: httpx.Client, keys: Keys, workspace: None
) -> None:
    answer = _propose(http, keys.admin, "accounting", "credit_note_create")
    assert answer.status_code == 201, answer.text
    got = answer.json()
    assert got["mapping"] == CREDIT
    assert got["proposer"] == "claros-schema-proposer"
    assert got["id"].startswith("mp_") and got["proposed_by"] == ADMIN
    [part] = got["parts"]
    assert part["part"] == "lookups[0]" and 0 < part["confidence"] <= 1
    assert "shop.order_read" in part["reason"]


def test_registration_keeps_output_schemas(http: httpx.Client, keys: Keys, workspace: None) -> None:
    apps = {a["app"]: a for a in http.get("/v1/apps", headers=bearer(keys.admin)).json()["apps"]}
    item = next(t for t in apps["accounting"]["tools"] if t["name"] == "item_read")
    assert set(item["output_schema"]["properties"]) == {"item_code", "item_name", "item_group"}


def test_bad_proposals_are_refused_with_a_reason(
    http: httpx.Client, keys: Keys, workspace: None
) -> None:
    unknown_app = _propose(http, keys.admin, "payroll", "salary_pay")
    assert unknown_app.status_code == 404 and "payroll" in unknown_app.json()["message"]
    unknown_tool = _propose(http, keys.admin, "shop", "order_delete")
    assert unknown_tool.status_code == 404 and "order_delete" in unknown_tool.json()["message"]
    read = _propose(http, keys.admin, "shop", "order_read")
    assert read.status_code == 400 and "is a read tool" in read.json()["message"]
    bad = http.post("/api/mappings/proposals", json={"app": "shop"}, headers=bearer(keys.admin))
    assert bad.status_code == 400
    agent = _propose(http, keys.agent, "shop", "refund_create")
    assert agent.status_code == 403


def test_no_read_tools_anywhere_is_an_empty_proposal_with_the_reason(
    http: httpx.Client, keys: Keys
) -> None:
    tools = [{"name": "salary_pay", "read": False, "input_schema": {"type": "object"}}]
    assert http.post("/v1/apps/payroll/tools", json={"tools": tools},
                     headers=bearer(keys.agent)).status_code == 200  # fmt: skip
    got = _propose(http, keys.admin, "payroll", "salary_pay").json()
    assert got["mapping"] == {"app": "payroll", "tool": "salary_pay"} and got["parts"] == []
    assert "no read tool is registered" in got["reason"]


def test_accepting_an_edited_proposal_saves_a_version_that_says_it_was_proposed(
    http: httpx.Client, keys: Keys, workspace: None
) -> None:
    proposal = _propose(http, keys.admin, "accounting", "invoice_submit").json()
    edited = {**proposal["mapping"], "derived": {"net": "grand_total - discount"}}
    body = {"mapping": edited, "proposal": proposal["id"]}
    saved = http.put("/api/mappings/accounting/invoice_submit", json=body,
                     headers=bearer(keys.admin))  # fmt: skip
    assert saved.status_code == 200, saved.text
    confirm = saved.json()["confirm"]
    assert confirm["made_by"] == "proposed" and confirm["confirmed_by"] == ADMIN
    assert confirm["proposer"] == "claros-schema-proposer"
    assert confirm["proposal"] == proposal["id"] and isinstance(confirm["confirmed_at"], int)
    assert saved.json()["mapping"] == MAPPINGS[("accounting", "invoice_submit")]
    lines = http.get("/v1/ledger/entries", params={"since": 0}, headers=bearer(keys.admin))
    versions = [json.loads(x) for x in lines.text.splitlines() if '"mapping_version"' in x]
    assert versions[-1]["event"]["confirm"]["made_by"] == "proposed"


def test_a_proposal_is_accepted_only_for_its_own_tool(
    http: httpx.Client, keys: Keys, workspace: None
) -> None:
    proposal = _propose(http, keys.admin, "accounting", "credit_note_create").json()
    other = MAPPINGS[("shop", "refund_create")]
    wrong = http.put("/api/mappings/shop/refund_create",
                     json={"mapping": other, "proposal": proposal["id"]},
                     headers=bearer(keys.admin))  # fmt: skip
    assert wrong.status_code == 400 and "is for accounting credit_note_create" in wrong.text
    missing = http.put("/api/mappings/shop/refund_create",
                       json={"mapping": other, "proposal": "mp_nope"},
                       headers=bearer(keys.admin))  # fmt: skip
    assert missing.status_code == 404
    assert http.get("/api/mappings", headers=bearer(keys.admin)).json()["mappings"] == []


def test_the_proposal_page_shows_the_draft_and_saves_it(
    http: httpx.Client, keys: Keys, workspace: None
) -> None:
    html = {**bearer(keys.admin), "Accept": "text/html"}
    rules = http.get("/app/rules", headers=html).text
    assert 'href="/app/apps/accounting"' in rules
    tools = http.get("/app/apps/accounting", headers=html).text
    assert 'action="/app/mappings/propose"' in tools and "Propose mapping" in tools
    page = http.post("/app/mappings/propose", data={"app": "accounting",
                     "tool": "credit_note_create"}, headers=html)  # fmt: skip
    assert page.status_code == 200, page.text
    assert "Proposed mapping" in page.text and "shop.order_read" in page.text
    assert "pick: total" in page.text and "var: order_total" in page.text
    action = page.text.split('action="/app/mappings/proposals/', 1)[1].split('"', 1)[0]
    bad = http.post(f"/app/mappings/proposals/{action}", headers=html,
                    data={"mapping": "app: accounting\ntool: invoice_submit\n"})  # fmt: skip
    assert bad.status_code == 400 and "not accounting invoice_submit" not in bad.text
    assert "is for accounting invoice_submit" in bad.text
    text = yaml.safe_dump(CREDIT)
    saved = http.post(f"/app/mappings/proposals/{action}", headers=html,
                      data={"mapping": text}, follow_redirects=False)  # fmt: skip
    assert saved.status_code == 303, saved.text
    assert saved.headers["location"].startswith("/app/rules?saved=")
    state = http.get("/api/mappings/accounting/credit_note_create", headers=bearer(keys.admin))
    assert state.json()["confirm"]["made_by"] == "proposed"


# --- the model proposer (Bedrock Converse, through botocore's Stubber) ------------------


@pytest.fixture
def bedrock(services: Services) -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("bedrock-runtime", region_name="us-east-1",
                          aws_access_key_id="test", aws_secret_access_key="test")  # fmt: skip
    with Stubber(client) as stubber:
        services.mapper = BedrockMapper(client, MODEL)
        yield client, stubber
    services.mapper = None


def _answer(answer: dict[str, Any]) -> dict[str, Any]:
    use = {"toolUseId": "t1", "name": "mapping", "input": answer}
    return {
        "output": {"message": {"role": "assistant", "content": [{"toolUse": use}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }


EXPECTED = {
    "modelId": MODEL,
    "system": [{"text": SYSTEM}],
    "messages": ANY,
    "inferenceConfig": {"maxTokens": 2048, "temperature": 0},
    "toolConfig": {
        "tools": [{"toolSpec": {"name": "mapping", "description": ANY,
                                "inputSchema": {"json": DRAFT_SCHEMA}}}],
        "toolChoice": {"tool": {"name": "mapping"}},
    },
}  # fmt: skip


def test_the_model_proposal_is_shown_when_it_validates(
    http: httpx.Client, keys: Keys, workspace: None, bedrock: tuple[Any, Stubber]
) -> None:
    client, stubber = bedrock
    lookup = {**CREDIT["lookups"][0], "context": ["customer"]}
    answer = {"mapping": {"lookups": [lookup]},
              "parts": [{"part": "lookups[0]", "reason": "the shop holds the order",
                         "confidence": 0.9}]}  # fmt: skip
    stubber.add_response("converse", _answer(answer), EXPECTED)
    sent: list[dict[str, Any]] = []
    client.meta.events.register("provide-client-params.bedrock-runtime.Converse",
                                lambda params, **_: sent.append(params))  # fmt: skip
    got = _propose(http, keys.admin, "accounting", "credit_note_create").json()
    stubber.assert_no_pending_responses()
    assert got["proposer"] == MODEL and got["mapping"]["lookups"][0]["context"] == ["customer"]
    assert got["parts"] == [{"part": "lookups[0]", "reason": "the shop holds the order",
                             "confidence": 0.9}]  # fmt: skip
    prompt = json.loads(sent[0]["messages"][0]["content"][0]["text"].split("\n\n", 1)[1])
    # Metadata only: tool names, schemas, rules; never a record of the example servers.
    assert prompt["write_tool"]["name"] == "credit_note_create"
    assert {t["name"] for t in prompt["read_tools"]["shop"]} == {
        "order_read", "customer_read", "refund_list"}  # fmt: skip
    assert prompt["fields_rules_read"] == ["amount", "order_total"]
    assert "Ada Lovelace" not in json.dumps(prompt) and "ACC-PINV" not in json.dumps(prompt)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"mapping": {"lookups": "order"}}, "no mapping object and parts list"),
        (
            {
                "mapping": {"fetch": {"tool": "invoice_read", "arguments": {"name": "x $y"}}},
                "parts": [],
            },
            "not a valid mapping",
        ),  # fmt: skip
        (
            {
                "mapping": {"fetch": {"tool": "invoice_submit", "arguments": {"name": "$name"}}},
                "parts": [],
            },
            "'invoice_submit' of accounting is not a read tool",
        ),  # fmt: skip
        (
            {"mapping": {"lookups": [{**CREDIT["lookups"][0], "tool": "order_drop"}]}, "parts": []},
            "'order_drop' is not a registered tool of shop",
        ),  # fmt: skip
        (
            {"mapping": {}, "parts": [{"part": "fetch", "reason": "x", "confidence": 7}]},
            "confidence must be a number from 0 to 1",
        ),
    ],
    ids=["malformed", "invalid-value", "names-a-write", "unregistered", "bad-confidence"],
)
def test_a_refused_model_answer_is_discarded_for_the_schema_draft(
    http: httpx.Client,
    keys: Keys,
    workspace: None,
    bedrock: tuple[Any, Stubber],
    caplog: pytest.LogCaptureFixture,
    answer: dict[str, Any],
    why: str,
) -> None:
    _, stubber = bedrock
    stubber.add_response("converse", _answer(answer), EXPECTED)
    with caplog.at_level(logging.WARNING, logger="claros.mapper"):
        got = _propose(http, keys.admin, "accounting", "credit_note_create").json()
    assert got["proposer"] == "claros-schema-proposer" and got["mapping"] == CREDIT
    assert got["discarded"]["proposer"] == MODEL and why in got["discarded"]["reason"]
    assert any("discarded" in r.message and why in r.message for r in caplog.records)


def test_a_model_timeout_is_answered_by_the_schema_draft(
    http: httpx.Client, keys: Keys, workspace: None, bedrock: tuple[Any, Stubber]
) -> None:
    client, _ = bedrock

    def timeout(**_: Any) -> None:
        raise ReadTimeoutError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com")

    client.meta.events.register("before-call.bedrock-runtime.Converse", timeout)
    got = _propose(http, keys.admin, "accounting", "credit_note_create").json()
    assert got["mapping"] == CREDIT and got["proposer"] == "claros-schema-proposer"
    assert "Bedrock did not answer" in got["discarded"]["reason"]


def test_a_model_refusal_is_answered_by_the_schema_draft(
    http: httpx.Client, keys: Keys, workspace: None, bedrock: tuple[Any, Stubber]
) -> None:
    _, stubber = bedrock
    stubber.add_client_error("converse", "AccessDeniedException", "not allowed", 403)
    got = _propose(http, keys.admin, "accounting", "credit_note_create").json()
    assert got["mapping"] == CREDIT
    assert "AccessDeniedException" in got["discarded"]["reason"]


# --- the CLI, as a subprocess -------------------------------------------------------------


def _claros(server_url: str, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    env["HOME"] = env.get("HOME", "/nonexistent")
    return subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", *args, "--url", server_url, "--key", key],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip


def test_cli_proposes_writes_a_file_and_push_saves_it_as_proposed(
    server: LocalServer, http: httpx.Client, keys: Keys, workspace: None, tmp_path: Path
) -> None:
    target = tmp_path / "credit.yaml"
    done = _claros(server.url, keys.admin, "mappings", "propose", "accounting",
                   "credit_note_create", "--write", str(target))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK: proposal mp_") and str(target) in done.stdout
    text = target.read_text()
    assert "# lookups[0] (70%): 'order_total' is the total of order" in text
    [written] = yaml.safe_load(text)["mappings"]
    assert {k: v for k, v in written.items() if k != "proposal"} == CREDIT
    pushed = _claros(server.url, keys.admin, "mappings", "push", str(target))
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.startswith("OK: accounting credit_note_create v1 created")
    state = http.get("/api/mappings/accounting/credit_note_create", headers=bearer(keys.admin))
    assert state.json()["confirm"]["proposal"] == written["proposal"]
    again = _claros(server.url, keys.admin, "mappings", "propose", "accounting",
                    "credit_note_create", "--write", str(target))  # fmt: skip
    assert again.returncode == 2 and "exists" in again.stderr and target.read_text() == text


def test_cli_prints_the_draft_and_refuses_unknown_tools_in_one_line(
    server: LocalServer, keys: Keys, workspace: None
) -> None:
    done = _claros(server.url, keys.admin, "mappings", "propose", "accounting", "invoice_submit")
    assert done.returncode == 0, done.stderr
    assert "# not placed: net: no read tool provides 'net'" in done.stdout
    assert yaml.safe_load(done.stdout)["mappings"][0]["fetch"]["tool"] == "invoice_read"
    bad = _claros(server.url, keys.admin, "mappings", "propose", "accounting", "nope")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "'nope' is not a registered tool" in bad.stderr
    agent = _claros(server.url, keys.agent, "mappings", "propose", "accounting", "nope")
    assert agent.returncode == 2 and "Traceback" not in agent.stderr
