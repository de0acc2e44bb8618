"""THREATS.md §1: the agent cannot approve its own ask, directly or through any credential
it can obtain. Each test performs one attack with only what an agent holds (its key, its
environment) against the real local server, on both stores; the guard and hook ones run
``claros guard`` and ``claros hook`` as real subprocesses."""

# The API tests' fixtures are imported here, not through a conftest shared by the other
# attack files; the tests then take them as arguments, which ruff calls a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from claros.auth import create_key
from claros.local import LocalServer
from claros.store.base import GLOBAL
from claros.wiring import Services
from tests.api.conftest import (  # noqa: F401 - fixtures used here
    ADMIN,
    PERSON,
    WORKSPACE,
    Keys,
    bearer,
    check_body,
    put_rule,
)
from tests.guard.http_fakes import JSON, Answer, HttpFake, Request, relay

ROOT = Path(__file__).resolve().parents[2]
SHOP = [sys.executable, str(ROOT / "examples" / "shop_server.py")]
OWNER = "olga@acme.test"


def _ask(http: httpx.Client, keys: Keys, key: str | None = None) -> dict[str, object]:
    """A check by ``key`` (the agent's by default) that a rule owned by its person asks."""
    put_rule(http, keys.admin)  # ask, owned by PERSON
    body = check_body(arguments={"amount": 80, "order_total": 100})
    answer = http.post("/v1/check", json=body, headers=bearer(key or keys.agent))
    assert answer.status_code == 200 and answer.json()["result"] == "ask", answer.text
    return dict(answer.json())


def _ask_id(asked: dict[str, object]) -> str:
    ask = asked["ask"]
    assert isinstance(ask, dict)
    return str(ask["ask_id"])


def _answer(http: httpx.Client, ask_id: str, **headers: str) -> httpx.Response:
    return http.post(f"/api/asks/{ask_id}/answer", json={"decision": "approve"}, headers=headers)


def _key_count(services: Services) -> int:
    return len(services.store.query_docs(GLOBAL, "key", limit=1000))


def _still_open(http: httpx.Client, keys: Keys, ask_id: str) -> None:
    view = http.get(f"/v1/asks/{ask_id}", headers=bearer(keys.agent))
    assert view.status_code == 200 and view.json()["status"] == "open", view.text


# --- the web app: sessions and minted keys ------------------------------------------------


def test_agent_key_cannot_mint_a_key_through_web_sign_in(
    http: httpx.Client, keys: Keys, services: Services, server: LocalServer
) -> None:
    ask_id = _ask_id(_ask(http, keys))
    before = _key_count(services)
    signin = http.post("/app/signin", json={}, headers={**bearer(keys.agent), "origin": server.url})
    assert signin.status_code == 403, signin.text
    assert "agent key" in signin.json()["message"] and "person key" in signin.json()["message"]
    assert "set-cookie" not in signin.headers
    # The form a browser posts is refused the same way.
    form = http.post(
        "/app/signin",
        data={"key": keys.agent, "next": "/app"},
        headers={"origin": server.url, "accept": "text/html"},
    )
    assert form.status_code == 403 and "set-cookie" not in form.headers
    # And straight at the key route with the bearer key: no key minted.
    minted = http.post("/app/keys", json={}, headers=bearer(keys.agent))
    assert minted.status_code == 403 and "mint" in minted.json()["message"], minted.text
    assert _key_count(services) == before
    _still_open(http, keys, ask_id)


def test_service_key_cannot_sign_in_or_mint(
    http: httpx.Client, keys: Keys, services: Services, server: LocalServer
) -> None:
    before = _key_count(services)
    signin = http.post(
        "/app/signin", json={}, headers={**bearer(keys.service), "origin": server.url}
    )
    assert signin.status_code == 403 and "service key" in signin.json()["message"]
    assert http.post("/app/keys", json={}, headers=bearer(keys.service)).status_code == 403
    assert _key_count(services) == before


def test_agent_key_cannot_approve_a_device_code(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    started = http.post("/v1/device/code", json={"client": "claros-cli", "name": "agent-box"})
    assert started.status_code == 201, started.text
    code = started.json()
    for key in (keys.agent, keys.service):
        approve = http.post(
            "/app/device",
            json={"user_code": code["user_code"], "decision": "approve"},
            headers=bearer(key),
        )
        assert approve.status_code == 403, approve.text
        assert "approve" in approve.json()["message"]
    polled = http.post("/v1/device/token", json={"device_code": code["device_code"]})
    assert polled.status_code == 400 and polled.json()["error"] == "authorization_pending"
    # The person's own sign-in key may approve it; the CLI then gets an agent key whose
    # record names its parent.
    person = create_key(services.store, WORKSPACE, "person", person=PERSON)
    approved = http.post(
        "/app/device",
        json={"user_code": code["user_code"], "decision": "approve"},
        headers=bearer(person),
    )
    assert approved.status_code == 200, approved.text
    got = http.post("/v1/device/token", json={"device_code": code["device_code"]})
    assert got.status_code == 200 and got.json()["kind"] == "agent"
    from claros.auth import hash_key

    doc = services.store.get_doc(GLOBAL, "key", hash_key(got.json()["key"]))
    assert doc is not None
    assert doc.value["parent"] == {"key_id": hash_key(person)[:16], "kind": "person",
                                   "person": PERSON}  # fmt: skip


def test_another_agent_key_of_the_person_cannot_answer_its_ask(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    """The second key the agent would get (from claros login or the web app) is an agent
    key too: it never answers an ask, its person's or anyone's."""
    ask_id = _ask_id(_ask(http, keys))
    second = create_key(services.store, WORKSPACE, "agent", person=PERSON, label="second")
    refused = _answer(http, ask_id, **bearer(second))
    assert refused.status_code == 403, refused.text
    assert "agent keys never answer asks" in refused.json()["message"]
    _still_open(http, keys, ask_id)


def test_key_minted_from_the_agent_key_cannot_answer_its_ask(
    http: httpx.Client, keys: Keys, services: Services, server: LocalServer
) -> None:
    """The attack of issue 11, end to end: sign in with the agent key, mint a key with the
    session's CSRF token, answer the agent's own ask with it. Every step is refused, and
    a key minted with the agent key as its parent is refused as well."""
    ask_id = _ask_id(_ask(http, keys))
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        signin = browser.post(
            "/app/signin", json={}, headers={**bearer(keys.agent), "origin": server.url}
        )
        assert signin.status_code == 403, signin.text
        csrf = signin.json().get("csrf", "")
        minted = browser.post(
            "/app/keys", json={}, headers={"X-CSRF-Token": csrf, "origin": server.url}
        )
        assert minted.status_code == 401, minted.text  # no session was made
    from claros.auth import ForbiddenError, authenticate

    agent = authenticate(services.store, f"Bearer {keys.agent}")
    with pytest.raises(ForbiddenError, match="agent keys never mint keys"):
        create_key(services.store, WORKSPACE, "person", person=PERSON, parent=agent)
    _still_open(http, keys, ask_id)


def test_a_key_derived_from_the_asking_key_cannot_answer_its_ask(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    """An admin key that makes a check mints a sign-in key for a member who owns the rule:
    that key, and anything minted from it, is derived from the asking key and may not
    answer the ask (a person key of the owner made by anyone else may)."""
    put_rule(http, keys.admin, owners=[OWNER])
    body = check_body(arguments={"amount": 80, "order_total": 100})
    asked = http.post("/v1/check", json=body, headers=bearer(keys.admin)).json()
    assert asked["result"] == "ask", asked
    ask_id = _ask_id(asked)
    from claros.auth import authenticate

    admin = authenticate(services.store, f"Bearer {keys.admin}")
    child = create_key(services.store, WORKSPACE, "person", person=OWNER, parent=admin)
    refused = _answer(http, ask_id, **bearer(child))
    assert refused.status_code == 403, refused.text
    assert "derived from the key that made the check" in refused.json()["message"]
    # A web session counts as derived from the key it was made with.
    signin = http.post("/app/signin", json={}, headers=bearer(child))
    assert signin.status_code == 200, signin.text
    cookie = signin.headers["set-cookie"].split(";")[0]
    by_session = http.post(
        f"/app/asks/{ask_id}/answer",
        json={"decision": "approve"},
        headers={
            "cookie": cookie,
            "x-csrf-token": signin.json()["csrf"],
            "x-claros-hand": signin.json()["hand"],
        },
    )
    assert by_session.status_code == 403, by_session.text
    assert "derived from the key that made the check" in by_session.json()["message"]
    own = create_key(services.store, WORKSPACE, "person", person=OWNER)
    answered = _answer(http, ask_id, **bearer(own))
    assert answered.status_code == 200 and answered.json()["authority"] == "owner"


# --- asks, overrides ------------------------------------------------------------------------


def test_service_key_cannot_answer_an_ask(http: httpx.Client, keys: Keys) -> None:
    ask_id = _ask_id(_ask(http, keys))
    refused = _answer(http, ask_id, **bearer(keys.service))
    assert refused.status_code == 403, refused.text
    refused = _answer(http, ask_id, **bearer(keys.agent))
    assert refused.status_code == 403, refused.text
    _still_open(http, keys, ask_id)


def test_agent_cannot_file_an_override_on_its_own_check(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin, response="stop")
    body = check_body(arguments={"amount": 80, "order_total": 100})
    check = http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()
    assert check["result"] == "stop", check
    for key in (keys.agent, create_key(services.store, WORKSPACE, "agent", person=PERSON)):
        filed = http.post(
            f"/api/checks/{check['check_id']}/override",
            json={"verdict": "wrong_stop", "note": "let me through"},
            headers=bearer(key),
        )
        assert filed.status_code == 403, filed.text
        assert "override" in filed.json()["message"]
    assert not [e for e in services.store.entries(WORKSPACE) if e.kind == "override"]
    person = create_key(services.store, WORKSPACE, "person", person=PERSON)
    filed = http.post(
        f"/api/checks/{check['check_id']}/override",
        json={"verdict": "wrong_stop"},
        headers=bearer(person),
    )
    assert filed.status_code == 201, filed.text


def test_other_keys_cannot_read_an_ask(http: httpx.Client, keys: Keys, services: Services) -> None:
    ask_id = _ask_id(_ask(http, keys))
    second = create_key(services.store, WORKSPACE, "agent", person=PERSON)
    for key in (second, keys.service):
        view = http.get(f"/v1/asks/{ask_id}", headers=bearer(key))
        assert view.status_code == 404, view.text
        assert ask_id in view.json()["message"]
    assert http.get(f"/v1/asks/{ask_id}", headers=bearer(keys.agent)).status_code == 200
    assert http.get(f"/v1/asks/{ask_id}", headers=bearer(keys.admin)).status_code == 200


def test_person_key_cannot_make_checks(http: httpx.Client, keys: Keys, services: Services) -> None:
    person = create_key(services.store, WORKSPACE, "person", person=PERSON)
    refused = http.post("/v1/check", json=check_body(), headers=bearer(person))
    assert refused.status_code == 403, refused.text
    assert "person key" in refused.json()["message"]
    tools = http.post("/v1/apps/shop/tools", json={"tools": []}, headers=bearer(person))
    assert tools.status_code == 403
    assert not [e for e in services.store.entries(WORKSPACE) if e.kind == "check"]


def test_a_person_key_signs_in_and_answers_its_agents_ask(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    ask_id = _ask_id(_ask(http, keys))
    person = create_key(services.store, WORKSPACE, "person", person=PERSON)
    signin = http.post("/app/signin", json={}, headers=bearer(person))
    assert signin.status_code == 200 and signin.json()["kind"] == "person", signin.text
    answered = _answer(http, ask_id, **bearer(person))
    assert answered.status_code == 200, answered.text
    assert answered.json()["authority"] == "self"
    assert answered.json()["decided_by"] == PERSON


# --- the guard and the hooks ------------------------------------------------------------------


def _env(server: LocalServer | HttpFake, key: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CLAROS_URL": server.url,
        "CLAROS_KEY": key,
        "CLAROS_PEER_DIR": tempfile.mkdtemp(prefix="cs"),
        "CLAROS_STATE_DIR": str(tmp_path / "state"),
        "CLAROS_LOG": "WARNING",
        "EXAMPLE_CALL_LOG": str(tmp_path / "calls.jsonl"),
    }


def _guard(server: LocalServer, key: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "guard", "--app", "shop", "--", *SHOP],
        input="", capture_output=True, text=True, timeout=60,
        env=_env(server, key, tmp_path),
    )  # fmt: skip


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_guard_refuses_an_admin_key(
    server: LocalServer, keys: Keys, services: Services, tmp_path: Path
) -> None:
    done = _guard(server, keys.admin, tmp_path)
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert line.startswith("claros guard: ") and "admin key" in line and "agent" in line
    assert not (tmp_path / "calls.jsonl").exists()  # the wrapped server never started
    assert not services.store.query_docs(WORKSPACE, "app", limit=10)


def test_guard_refuses_a_person_key(
    server: LocalServer, keys: Keys, services: Services, tmp_path: Path
) -> None:
    person = create_key(services.store, WORKSPACE, "person", person=PERSON)
    done = _guard(server, person, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "person key" in _one_line(done.stderr)


class LateClaros(HttpFake):
    """Claros that is down (503) for the guard's first question, then answers."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.asked: list[str] = []
        super().__init__()

    def respond(self, request: Request) -> Answer:
        self.asked.append(request.path)
        if len(self.asked) == 1:
            return 503, JSON, b'{"error":"unavailable","message":"starting"}'
        return relay(self.target, request)


def test_guard_started_while_claros_was_down_stops_once_it_learns_the_key_is_admin(
    server: LocalServer, keys: Keys, services: Services, tmp_path: Path
) -> None:
    """The guard starts through an outage, as it does for any; its first request that
    reaches Claros asks what the key is first, and with an admin key it stops (exit 2)
    before sending anything else: the tools are never registered."""
    with LateClaros(server.url) as late:
        env = {**_env(server, keys.admin, tmp_path), "CLAROS_URL": late.url,
               "CLAROS_START_WAIT": "0"}  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "claros_guard.cli", "guard", "--app", "shop", "--", *SHOP],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env,
        )  # fmt: skip
        try:
            proc.wait(timeout=60)  # stdin stays open: the agent has not gone away
        finally:
            if proc.poll() is None:
                proc.kill()
            _, stderr = proc.communicate()
    assert proc.returncode == 2, stderr
    assert late.asked[:2] == ["/v1/me", "/v1/me"], late.asked
    assert "/v1/apps/shop/tools" not in late.asked
    assert "claros guard: refusing to run with an admin key" in stderr, stderr
    assert not services.store.query_docs(WORKSPACE, "app", limit=10)


def _hook(
    server: LocalServer, kind: str, key: str, tmp_path: Path, tool: str = "Bash"
) -> subprocess.CompletedProcess[str]:
    event = {
        "session_id": "s1",
        "hook_event_name": "PreToolUse" if kind == "pre" else "PostToolUse",
        "tool_name": tool,
        "tool_input": {"command": "git push --force"},
        "tool_use_id": "toolu_1",
        "tool_response": {"stdout": "done"},
    }
    return subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "hook", kind],
        input=json.dumps(event), capture_output=True, text=True, timeout=60,
        env=_env(server, key, tmp_path),
    )  # fmt: skip


def test_hook_refuses_a_person_key(
    server: LocalServer, keys: Keys, services: Services, tmp_path: Path
) -> None:
    person = create_key(services.store, WORKSPACE, "person", person=PERSON)
    done = _hook(server, "pre", person, tmp_path)
    # Exit 2 is Claude Code's "block this call"; stdout (a decision) would be ignored.
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout.strip() == ""
    line = _one_line(done.stderr)
    assert line.startswith("claros hook pre: ") and "person key" in line
    assert not [e for e in services.store.entries(WORKSPACE) if e.kind == "check"]


def test_hook_refuses_an_admin_key(
    server: LocalServer, keys: Keys, services: Services, tmp_path: Path
) -> None:
    for kind in ("pre", "post"):
        done = _hook(server, kind, keys.admin, tmp_path)
        assert done.returncode == 2, (kind, done.stdout, done.stderr)
        assert "admin key" in _one_line(done.stderr)
    assert not [e for e in services.store.entries(WORKSPACE) if e.kind == "check"]
    # A read tool never reaches Claros, so the hook does not even ask what the key is.
    read = _hook(server, "pre", keys.admin, tmp_path, tool="Read")
    assert (read.returncode, read.stdout, read.stderr) == (0, "", "")


def test_hook_runs_with_an_agent_key(server: LocalServer, keys: Keys, tmp_path: Path) -> None:
    done = _hook(server, "pre", keys.agent, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_me_names_the_key_kind(http: httpx.Client, keys: Keys) -> None:
    for kind in ("agent", "service", "admin", "audit"):
        me = http.get("/v1/me", headers=bearer(keys.of(kind)))
        assert me.status_code == 200 and me.json()["kind"] == kind, me.text
    assert http.get("/v1/me").status_code == 401
    assert http.get("/v1/me", headers=bearer(keys.admin)).json()["person"] == ADMIN


# --- the error paths of the above -----------------------------------------------------------


def test_a_key_mints_keys_in_its_own_workspace_only(keys: Keys, services: Services) -> None:
    from claros.auth import ForbiddenError, authenticate

    other = authenticate(services.store, f"Bearer {keys.other_workspace_admin}")
    with pytest.raises(ForbiddenError, match="its own workspace"):
        create_key(services.store, WORKSPACE, "agent", person=PERSON, parent=other)
    from claros.auth import BadRequestError

    with pytest.raises(BadRequestError, match="a person key belongs to a person"):
        create_key(services.store, WORKSPACE, "person")


def test_a_session_opened_with_an_agent_key_before_is_refused(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    """A session an agent key opened before agent keys were refused at sign-in ends at its
    next request."""
    from claros.auth import hash_key
    from claros.store.base import DocWrite
    from claros.web import sessions

    session_id, _ = sessions.open_session(services.store, keys.person)
    digest = sessions.session_hash(session_id)
    doc = services.store.get_doc(GLOBAL, sessions.COLLECTION, digest)
    assert doc is not None
    value = {**doc.value, "key_hash": hash_key(keys.agent), "kind": "agent"}
    services.store.write_docs([DocWrite(GLOBAL, sessions.COLLECTION, digest, value, doc.rev)])
    page = http.get("/app", headers={"cookie": f"{sessions.COOKIE}={session_id}"})
    assert page.status_code == 401, page.text
    assert "person key" in page.json()["message"]


class OddClaros(HttpFake):
    """Answers GET /v1/me as ``me`` says; any other request is a test failure."""

    def __init__(self, me: Answer) -> None:
        self.me = me
        self.asked: list[str] = []
        super().__init__()

    def respond(self, request: Request) -> Answer:
        self.asked.append(request.path)
        return self.me if request.path == "/v1/me" else (500, JSON, b"{}")


@pytest.mark.parametrize(
    ("me", "reason"),
    [
        ((404, JSON, b'{"error":"not_found","message":"no route GET /v1/me"}'),
         "does not say what kind of key this is (GET /v1/me); update the server"),
        ((200, JSON, b'{"kind": 5}'), "did not say what kind of key this is"),
        ((401, JSON, b'{"error":"unauthorized","message":"unknown or revoked key"}'),
         "unknown or revoked key"),
    ],
    ids=["old-server", "no-kind", "revoked"],
)  # fmt: skip
def test_hook_blocks_when_claros_does_not_say_what_the_key_is(
    keys: Keys, tmp_path: Path, me: Answer, reason: str
) -> None:
    with OddClaros(me) as odd:
        env = _env(odd, keys.agent, tmp_path)
        event = {"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                 "tool_input": {"command": "ls"}, "tool_use_id": "toolu_2"}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "claros_guard.cli", "hook", "pre"],
            input=json.dumps(event), capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and reason in out["permissionDecisionReason"]
    assert odd.asked == ["/v1/me"]  # nothing else was sent with a key of unknown kind


def test_auth_cli_gives_a_new_member_their_person_key(tmp_path: Path) -> None:
    def create(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "claros.auth", "create", "--data", str(tmp_path / "d"),
             "--workspace", "acme", *args],
            capture_output=True, text=True, timeout=60, env={**os.environ},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [line for line in done.stdout.splitlines() if line.startswith("ck_")]

    first = create("--kind", "agent", "--person", "new@acme.test")
    assert len(first) == 2  # her person key, then the agent key (the last line)
    again = create("--kind", "agent", "--person", "new@acme.test")
    assert len(again) == 1  # a member already: only the agent key
    assert len(create("--kind", "person", "--person", "new@acme.test")) == 1
    refused = subprocess.run(
        [sys.executable, "-m", "claros.auth", "create", "--data", str(tmp_path / "d"),
         "--kind", "person"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "claros.auth: a person key belongs to a person: give --person"
    )
