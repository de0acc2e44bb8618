"""The keys list says what auth would do with each key (issue 13, "Keys and people"): a
key of a removed member, a demoted admin's admin key and audit keys, a key minted from a
revoked key are listed as refused, with auth's own reason, on the API (both stores) and by
``python -m claros.auth list``."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import httpx

from claros.auth import KeyRefused, create_key, key_principal
from claros.people import find_key
from claros.store.base import GLOBAL, DocWrite
from claros.wiring import Services
from tests.api.conftest import ADMIN, PERSON, WORKSPACE, Keys, bearer


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def listed(http: httpx.Client, key: str) -> dict[str, dict[str, str]]:
    page = http.get("/api/keys?limit=50", headers=bearer(key))
    assert page.status_code == 200, page.text
    return {k["key_id"]: k for k in page.json()["keys"]}


def assert_list_is_auth(services: Services, keys: dict[str, dict[str, str]]) -> None:
    """Every listed key: active exactly when auth lets it in, else auth's own reason."""
    for kid, view in keys.items():
        doc = find_key(services.store, WORKSPACE, kid)
        try:
            key_principal(services.store, doc.key, note_use=False)
        except KeyRefused as refused:
            assert view["status"] in ("refused", "revoked", "expired"), view
            if view["status"] == "refused":
                assert view["refused"] == refused.message, view
                assert view["refused_for"] == refused.problem, view
        else:
            assert view["status"] == "active" and "refused" not in view, view


def test_removed_members_keys_are_listed_as_refused(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    minted = http.post("/app/keys", json={"label": "laptop"}, headers=bearer(keys.person))
    assert minted.status_code == 201, minted.text
    before = listed(http, keys.admin)
    assert before[key_id(keys.agent)]["status"] == "active"
    gone = http.delete(f"/api/members/{PERSON}", headers=bearer(keys.admin))
    assert gone.status_code == 200, gone.text
    after = listed(http, keys.admin)
    for key in (keys.agent, keys.person, minted.json()["key"]):
        view = after[key_id(key)]
        assert (view["status"], view["refused_for"]) == ("refused", "member"), view
        assert "no longer a member" in view["refused"]
    assert after[key_id(keys.admin)]["status"] == "active"
    assert after[key_id(keys.service)]["status"] == "active"
    assert_list_is_auth(services, after)


def test_demoted_admins_admin_and_audit_keys_are_listed_as_refused(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    boss = create_key(services.store, WORKSPACE, "admin", person="boss@acme.test")
    demoted = http.put(f"/api/members/{ADMIN}", json={"role": "member"}, headers=bearer(boss))
    assert demoted.status_code == 200, demoted.text
    after = listed(http, boss)
    assert after[key_id(keys.admin)]["refused_for"] == "admin"
    assert after[key_id(keys.audit)]["refused_for"] == "audit"
    assert "no longer a workspace admin" in after[key_id(keys.admin)]["refused"]
    assert after[key_id(boss)]["status"] == "active"
    assert_list_is_auth(services, after)


def test_key_minted_from_a_revoked_key_is_listed_as_refused_before_it_is_marked(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    minted = http.post("/app/keys", json={"label": "laptop"}, headers=bearer(keys.person)).json()
    # Marked revoked on the person key alone, as a revocation cut short leaves it: the
    # minted key is refused all the same (its lineage), and the list says so.
    doc = find_key(services.store, WORKSPACE, key_id(keys.person))
    revoked = {**doc.value, "revoked_at": 1, "revoked_by": ADMIN}
    services.store.write_docs([DocWrite(GLOBAL, "key", doc.key, revoked, doc.rev)])
    after = listed(http, keys.admin)
    assert after[key_id(keys.person)]["status"] == "revoked"
    view = after[key_id(minted["key"])]
    assert (view["status"], view["refused_for"]) == ("refused", "revoked"), view
    assert key_id(keys.person) in view["refused"]
    assert_list_is_auth(services, after)


def test_a_member_sees_their_own_keys_refused_after_a_re_add(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    assert http.delete(f"/api/members/{PERSON}", headers=bearer(keys.admin)).status_code == 200
    back = http.post("/api/members", json={"email": PERSON}, headers=bearer(keys.admin))
    assert back.status_code == 201, back.text
    own = listed(http, back.json()["key"])
    assert own[key_id(back.json()["key"])]["status"] == "active"
    old = own[key_id(keys.person)]
    assert old["status"] == "refused" and "removed from the workspace since" in old["refused"]
    assert_list_is_auth(services, own)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    return subprocess.run(
        [sys.executable, "-m", "claros.auth", *args],
        capture_output=True, text=True, env=environ, timeout=60,
    )  # fmt: skip


def test_cli_list_shows_what_auth_would_do(tmp_path: Path) -> None:
    data = str(tmp_path / "data")

    def make(*args: str) -> str:
        done = run("create", "--data", data, "--workspace", "acme", *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    ann = make("--kind", "admin", "--person", "ann@acme.test")
    audit = make("--kind", "audit", "--person", "ann@acme.test")
    make("--kind", "admin", "--person", "bo@acme.test")
    demoted = run("demote", "--data", data, "--workspace", "acme", "ann@acme.test")
    assert demoted.returncode == 0, demoted.stderr
    out = run("list", "--data", data, "--workspace", "acme")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines()[1:]}
    assert rows[key_id(ann)].endswith(
        "refused: this admin key's person is no longer a workspace admin"
    )
    assert rows[key_id(audit)].endswith(
        "refused: this audit key's maker is no longer a workspace admin"
    )
    assert sum(row.endswith(" active") for row in rows.values()) == 1  # bo's admin key
