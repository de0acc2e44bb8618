"""The HTTP API's Lambda authorizer: on every route but the public ones and the web app's
pages, configured as the code declares its routes, so that `sam deploy --guided` asks
nothing per route; and its real handler (functions/authorizer/app.py), run in the moto
stack against the stack's own tables with the events API Gateway sends it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from claros.api.app import FUNCTIONS, build_resolver
from claros.api.http import PAGES, PERMISSIONS, PUBLIC, WEB
from claros.auth import create_key, hash_key
from claros.config import Settings
from claros.store.base import GLOBAL, DocWrite, Store
from claros.web.sessions import SECURE_COOKIE, open_session
from claros.wiring import build_services
from tests.aws import load_template
from tests.events import authorizer_event
from tests.stack import ADMIN, PERSON, WS, Functions, Json, Keys, translate

pytestmark = [
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..ApiGatewayV2..:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..CloudWatch..Alarm:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..SQS..QueuePolicy:UserWarning"),
]

REPO = Path(__file__).resolve().parents[2]


def _declared() -> None:
    """Every function's routes declared (fills PERMISSIONS, PUBLIC, WEB and PAGES)."""
    with tempfile.TemporaryDirectory() as data:
        services = build_services(Settings.from_env({"CLAROS_DATA": data}))
        try:
            build_resolver(services, FUNCTIONS)
        finally:
            services.close()


def _expected_authorizer(route: tuple[str, str]) -> str:
    if route in PUBLIC or route in PAGES:
        return "NONE"
    if route in WEB:
        return "ClarosKeyOrSession"
    return "ClarosKey"


# --- the template ---------------------------------------------------------------------
def test_every_route_has_the_authorizer_its_declaration_calls_for(aws_env: None) -> None:
    _declared()
    cfn, _ = translate(load_template())
    body = cfn["Resources"]["HttpApi"]["Properties"]["Body"]
    seen: dict[tuple[str, str], str] = {}
    for path, methods in body["paths"].items():
        for method, spec in methods.items():
            [security] = spec["security"]
            [name] = security
            seen[(method.upper(), path)] = name
    declared = set(PERMISSIONS) | set(PUBLIC)
    assert set(seen) == declared
    wrong = {
        r: (seen[r], _expected_authorizer(r)) for r in seen if seen[r] != _expected_authorizer(r)
    }
    assert not wrong, wrong
    # The public routes are the reviewed few; the pages check the session themselves.
    assert {r for r, name in seen.items() if name == "NONE"} == set(PUBLIC) | PAGES
    assert ("POST", "/v1/check") in {r for r, n in seen.items() if n == "ClarosKey"}


def test_the_authorizers_are_request_v2_simple_and_cached_where_they_can_be(
    aws_env: None,
) -> None:
    cfn, _ = translate(load_template())
    schemes = cfn["Resources"]["HttpApi"]["Properties"]["Body"]["components"]["securitySchemes"]
    key = schemes["ClarosKey"]["x-amazon-apigateway-authorizer"]
    either = schemes["ClarosKeyOrSession"]["x-amazon-apigateway-authorizer"]
    for config in (key, either):
        assert config["type"] == "request"
        assert config["authorizerPayloadFormatVersion"] == "2.0"
        assert config["enableSimpleResponses"] is True
        assert "AuthorizerFunction" in str(config["authorizerUri"])
    # Cached by the Authorization header, for AuthorizerCacheSeconds.
    assert key["identitySource"] == ["$request.header.Authorization"]
    assert key["authorizerResultTtlInSeconds"] == {"Ref": "AuthorizerCacheSeconds"}
    # A request carries a key or a cookie, and API Gateway refuses (401, without asking
    # the authorizer) any request missing one of the identity sources: so none, uncached.
    assert either["identitySource"] == [] and either["authorizerResultTtlInSeconds"] == 0
    # API Gateway may invoke the authorizer (SAM's permissions, one per authorizer).
    permissions = {
        k: r for k, r in cfn["Resources"].items() if r["Type"] == "AWS::Lambda::Permission"
    }
    for name in ("ClarosKey", "ClarosKeyOrSession"):
        permission = permissions[f"HttpApi{name}AuthorizerPermission"]["Properties"]
        assert permission["FunctionName"] == {"Fn::GetAtt": ["AuthorizerFunction", "Arn"]}
        assert permission["Principal"] == "apigateway.amazonaws.com"


def test_the_authorizer_reads_only_the_state_table() -> None:
    sam = load_template()
    statements = sam["Resources"]["AuthorizerFunction"]["Properties"]["Policies"][0]["Statement"]
    [statement] = [s for s in statements if s["Effect"] == "Allow"]
    assert statement["Action"] == "dynamodb:GetItem"
    assert statement["Resource"] == {"Fn::GetAtt": ["StateTable", "Arn"]}


# samcli's template reader calls deprecated samtranslator and jsonschema APIs.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_sam_deploy_guided_finds_authentication_on_every_route(aws_env: None) -> None:
    """The check `sam deploy --guided` runs before it asks "<function> has no
    authentication. Is this okay?" (samcli.commands.deploy.auth_utils), on this template."""
    from samcli.commands.deploy.auth_utils import auth_per_resource
    from samcli.lib.providers.provider import Stack as SamStack

    sam = load_template()
    stacks = [SamStack("", "", "template.yaml", {}, sam)]
    found = auth_per_resource(stacks)
    assert found, "samcli found no API routes to check"
    assert [name for name, ok in found if not ok] == []
    # Without the API's Auth, every routed function would be asked about.
    bare = load_template()
    del bare["Resources"]["HttpApi"]["Properties"]["Auth"]
    for event in (
        e
        for r in bare["Resources"].values()
        for e in r.get("Properties", {}).get("Events", {}).values()
    ):
        event.get("Properties", {}).pop("Auth", None)
    unasked = auth_per_resource([SamStack("", "", "template.yaml", {}, bare)])
    assert [name for name, ok in unasked if not ok]


# --- the handler, in the moto stack ----------------------------------------------------


def _decide(functions: Functions, event: Json) -> Any:
    return functions.invoke("authorizer", event)


def test_a_valid_key_is_allowed_with_who_it_is(functions: Functions, keys: Keys) -> None:
    answer = _decide(functions, authorizer_event(authorization=f"Bearer {keys.agent}"))
    assert answer == {
        "isAuthorized": True,
        "context": {
            "workspace": WS,
            "kind": "agent",
            "person": PERSON,
            "keyId": hash_key(keys.agent)[:16],
        },
    }
    admin = _decide(functions, authorizer_event("GET /api/rules", f"Bearer {keys.admin}"))
    assert admin["isAuthorized"] is True and admin["context"]["kind"] == "admin"


def test_the_authorizer_writes_nothing(
    functions: Functions, keys: Keys, stack_store: Store
) -> None:
    """Its role may only read (GetItem), and its environment says so (CLAROS_ROLE_WRITES
    empty): it never tries to note a key's last use, which the functions behind it note.
    moto does not enforce IAM, so an attempt would show here as the last use written."""
    digest = hash_key(keys.agent)
    doc = stack_store.get_doc(GLOBAL, "key", digest)
    assert doc is not None
    stack_store.write_docs(  # last used long ago: a writer would note this use
        [DocWrite(GLOBAL, "key", digest, {**doc.value, "last_used_at": 1}, doc.rev)]
    )
    before = stack_store.get_doc(GLOBAL, "key", digest)
    assert _decide(functions, authorizer_event(authorization=f"Bearer {keys.agent}"))[
        "isAuthorized"
    ]
    assert stack_store.get_doc(GLOBAL, "key", digest) == before


def test_a_cold_authorizer_answers_without_the_json_writer(tmp_path: Path) -> None:
    """In a fresh interpreter, as Lambda starts it (functions/authorizer/app.py, the
    template's read-only CLAROS_ROLE_WRITES): its start and its first answer import no
    orjson (claros.jsonutil imports it by the first write; the authorizer only reads)."""
    data = tmp_path / "data"
    services = build_services(Settings.from_env({"CLAROS_DATA": str(data)}))
    try:
        key = create_key(services.store, WS, "service")
    finally:
        services.close()
    event = authorizer_event(authorization=f"Bearer {key}")
    probe = (
        "import json, sys\nimport app\n"
        f"answer = app.lambda_handler(json.loads({json.dumps(event)!r}), None)\n"
        "print(json.dumps([answer['isAuthorized'], 'orjson' in sys.modules]))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    env.update(CLAROS_DATA=str(data), CLAROS_ROLE_WRITES="")
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO / "functions" / "authorizer", env=env,
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout) == [True, False]


def test_a_revoked_key_is_refused(functions: Functions, keys: Keys, stack_store: Store) -> None:
    event = authorizer_event(authorization=f"Bearer {keys.agent}")
    assert _decide(functions, event)["isAuthorized"] is True
    digest = hash_key(keys.agent)
    doc = stack_store.get_doc(GLOBAL, "key", digest)
    assert doc is not None
    stack_store.write_docs(
        [DocWrite(GLOBAL, "key", digest, {**doc.value, "revoked_at": 1}, doc.rev)]
    )
    answer = _decide(functions, event)
    assert answer["isAuthorized"] is False
    assert answer["context"] == {"error": "unauthorized", "message": "unknown or revoked key"}


@pytest.mark.parametrize(
    ("authorization", "why"),
    [
        ("Bearer ck_" + "x" * 43, "unknown or revoked key"),
        ("Bearer not-a-key", "not a Claros key"),
        ("Basic dXNlcjpwYXNz", "Authorization must be 'Bearer <key>'"),
        (None, "no key: send Authorization: Bearer <key>"),
    ],
)
def test_a_bad_or_missing_credential_is_refused(
    functions: Functions, keys: Keys, authorization: str | None, why: str
) -> None:
    answer = _decide(functions, authorizer_event("GET /v1/me", authorization))
    assert answer == {"isAuthorized": False, "context": {"error": "unauthorized", "message": why}}


def test_a_web_session_cookie_is_allowed(
    functions: Functions, keys: Keys, stack_store: Store
) -> None:
    person_key = create_key(stack_store, WS, "person", person=ADMIN)
    session_id, _ = open_session(stack_store, person_key)
    cookies = [f"{SECURE_COOKIE}={session_id}"]
    answer = _decide(functions, authorizer_event("POST /app/keys", cookies=cookies))
    assert answer["isAuthorized"] is True
    assert answer["context"]["person"] == ADMIN and answer["context"]["kind"] == "person"
    # Authentication only: the cookie's POST without its CSRF token passes here; the
    # route refuses it (its answer is cached by credential across routes, so must not
    # depend on the route or the form).
    dead = _decide(functions, authorizer_event("GET /api/asks", cookies=[f"{SECURE_COOKIE}=nope"]))
    assert dead["isAuthorized"] is False
    assert "signed out" in dead["context"]["message"]


def test_the_route_still_refuses_what_the_authorizer_let_through(
    functions: Functions, keys: Keys, stack_store: Store
) -> None:
    """Second layer: a person key passes the authorizer (it stands) and /v1/check still
    refuses it (person keys never check calls), with the API's JSON error."""
    from tests.events import load_event

    person_key = create_key(stack_store, WS, "person", person=PERSON)
    assert _decide(functions, authorizer_event(authorization=f"Bearer {person_key}"))[
        "isAuthorized"
    ]
    status, body = functions.http("check", load_event("check-check", person_key))
    assert status == 403 and body["error"] == "forbidden", body
