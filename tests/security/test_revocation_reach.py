"""Attacks on how far a revocation reaches, and on changes to keys and people that could
land without their evidence (issue 13, "Keys and people"), on both stores:

* a key minted from a revoked key (an agent key from a person's sign-in key, a key minted
  from an admin key) must be refused on the very next request, its web session too; each
  key the revocation reaches gets its own ``key_revoked`` entry;
* a crash between the writes of a member change (add, role change, removal) or of a
  revocation must never leave the change without its ledger entry, nor an entry without
  its change ("nothing half written");
* an evidence export streamed while ``rotate-key`` runs must still verify.

Each test was run on the code before the fix and seen to fail (the attack worked)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from claros.auth import KeyRefused, create_key, key_principal
from claros.checkpoints import rotate_key
from claros.evidence.export import export_lines, prepare_export
from claros.people import SERVER, Actor, add_person, change_role, remove_member, revoke_key
from claros.signing import FileSigner
from claros.store.base import DocWrite, NewRecord, Store
from claros.store.sqlite import SqliteStore
from claros.wiring import Services
from claros_guard.verify import main as verify
from tests.api.conftest import ADMIN, PERSON, WORKSPACE, Keys, bearer, check_body

JSON = {"accept": "application/json"}


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def mint_agent_key(http: httpx.Client, parent: str) -> str:
    """An agent key minted with ``parent`` (a person's or an admin's key), as the web app
    mints one: it records ``parent`` as its parent."""
    made = http.post("/app/keys", json={"label": "laptop"}, headers=bearer(parent))
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def revoked_entries(store: Store) -> list[dict[str, Any]]:
    return [
        record
        for entry, record in store.entries_with_records(WORKSPACE)
        if entry.kind == "key_revoked" and record is not None
    ]


def assert_refused(response: httpx.Response) -> None:
    """Refused with the API's JSON error shape (401 or 403, a reason), never served."""
    assert response.status_code in (401, 403), response.text
    body = response.json()
    assert isinstance(body.get("message"), str) and body["message"], body


# --- how far a revocation reaches ---------------------------------------------------------
def test_agent_key_minted_from_a_revoked_person_key_is_refused_at_once(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    agent = mint_agent_key(http, keys.person)
    assert http.post("/v1/check", json=check_body(), headers=bearer(agent)).status_code == 200
    done = http.post(f"/api/keys/{key_id(keys.person)}/revoke", headers=bearer(keys.admin))
    assert done.status_code == 200, done.text
    # The very next request with the child key: no cache, no grace period.
    refused = http.post("/v1/check", json=check_body(), headers=bearer(agent))
    assert_refused(refused)
    assert "revoked" in refused.json()["message"]
    assert_refused(http.get("/api/me/timeline", headers=bearer(agent)))
    # Each key the revocation reached has its own entry, naming why.
    by_id = {e["key_id"]: e for e in revoked_entries(services.store)}
    assert set(by_id) == {key_id(keys.person), key_id(agent)}
    assert by_id[key_id(agent)]["minted_from"] == key_id(keys.person)
    assert done.json()["also_revoked"] == [key_id(agent)]
    listed = {
        k["key_id"]: k for k in http.get("/api/keys", headers=bearer(keys.admin)).json()["keys"]
    }
    assert listed[key_id(agent)]["status"] == "revoked"
    # Keys not minted from it stand.
    assert http.post("/v1/check", json=check_body(), headers=bearer(keys.agent)).status_code == 200


def test_keys_minted_from_a_revoked_admin_key_are_refused_transitively(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    # The admin adds a member (their sign-in key is minted from the admin key), who mints
    # an agent key with it: a grandchild of the admin key.
    added = http.post("/api/members", json={"email": "eve@acme.test"}, headers=bearer(keys.admin))
    assert added.status_code == 201, added.text
    eve = added.json()["key"]
    grandchild = mint_agent_key(http, eve)
    other_admin = create_key(services.store, WORKSPACE, "admin", person="boss@acme.test")
    done = http.post(f"/api/keys/{key_id(keys.admin)}/revoke", headers=bearer(other_admin))
    assert done.status_code == 200, done.text
    assert_refused(http.post("/v1/check", json=check_body(), headers=bearer(grandchild)))
    assert_refused(http.get("/app/asks", headers={**JSON, **bearer(eve)}))
    assert {e["key_id"] for e in revoked_entries(services.store)} == {
        key_id(keys.admin),
        key_id(eve),
        key_id(grandchild),
    }


def test_web_session_of_a_key_minted_from_a_revoked_key_ends(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    # An admin key minted by promotion (its parent: the promoting admin's key) opens a
    # session; the server side revoking the promoting admin's key (what
    # ``python -m claros.auth revoke`` runs) ends it.
    http.post("/api/members", json={"email": "eve@acme.test"}, headers=bearer(keys.admin))
    promoted = http.put(
        "/api/members/eve%40acme.test", json={"role": "admin"}, headers=bearer(keys.admin)
    )
    assert promoted.status_code == 200, promoted.text
    with httpx.Client(base_url=str(http.base_url), timeout=30) as browser:
        signed = browser.post("/app/signin", json={"key": promoted.json()["key"]})
        assert signed.status_code == 200, signed.text
        assert browser.get("/app/keys", headers=JSON).status_code == 200
        revoke_key(services, Actor(WORKSPACE, SERVER), key_id(keys.admin))
        assert_refused(browser.get("/app/keys", headers=JSON))


def test_revocation_from_the_keys_page_reaches_minted_keys(http: httpx.Client, keys: Keys) -> None:
    agent = mint_agent_key(http, keys.person)
    with httpx.Client(base_url=str(http.base_url), timeout=30) as browser:
        signed = browser.post("/app/signin", json={"key": keys.admin})
        acting = {"csrf": signed.json()["csrf"], "hand": signed.json()["hand"]}
        done = browser.post(f"/app/keys/{key_id(keys.person)}/revoke", data=acting, headers=JSON)
        assert done.status_code == 303, done.text
        where = done.headers["location"]
        assert where == f"/app/keys?revoked={key_id(keys.person)}&also=1"
        # The page the form lands on says how far the revocation reached.
        page = browser.get(where, headers={"accept": "text/html"})
        assert page.status_code == 200, page.text
        assert "1 key minted from it was revoked with it." in page.text
    assert_refused(http.post("/v1/check", json=check_body(), headers=bearer(agent)))


# --- demoting and removing: what stops, what stands (docs/api.md, "Keys and people") ----
def _handed_over(http: httpx.Client, keys: Keys, services: Services) -> tuple[str, str, str]:
    """ADMIN adds eve (her sign-in key is minted from ADMIN's admin key) and mints an agent
    key of their own with the admin key; another admin, boss, will act on ADMIN."""
    added = http.post("/api/members", json={"email": "eve@acme.test"}, headers=bearer(keys.admin))
    assert added.status_code == 201, added.text
    own_agent = mint_agent_key(http, keys.admin)
    boss = create_key(services.store, WORKSPACE, "admin", person="boss@acme.test")
    return added.json()["key"], own_agent, boss


def test_removing_an_admin_stops_their_keys_but_not_the_keys_they_handed_over(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    eve, own_agent, boss = _handed_over(http, keys, services)
    gone = http.delete(f"/api/members/{ADMIN}", headers=bearer(boss))
    assert gone.status_code == 200, gone.text
    assert_refused(http.get("/api/rules", headers=bearer(keys.admin)))
    assert_refused(http.post("/v1/check", json=check_body(), headers=bearer(own_agent)))
    assert_refused(http.get("/v1/ledger/entries", headers=bearer(keys.audit)))
    # Eve's sign-in key is hers: it stands while she is a member.
    assert http.get("/app/asks", headers={**JSON, **bearer(eve)}).status_code == 200
    # Whoever fears ADMIN kept a copy revokes ADMIN's key: that reaches eve's too.
    done = http.post(f"/api/keys/{key_id(keys.admin)}/revoke", headers=bearer(boss))
    assert done.status_code == 200, done.text
    assert key_id(eve) in done.json()["also_revoked"]
    assert_refused(http.get("/app/asks", headers={**JSON, **bearer(eve)}))


def test_demoting_an_admin_stops_their_admin_and_audit_keys_only(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    eve, own_agent, boss = _handed_over(http, keys, services)
    demoted = http.put(f"/api/members/{ADMIN}", json={"role": "member"}, headers=bearer(boss))
    assert demoted.status_code == 200, demoted.text
    assert_refused(http.get("/api/rules", headers=bearer(keys.admin)))
    assert_refused(http.get("/v1/ledger/entries", headers=bearer(keys.audit)))
    # Their agent key acts for a member still; eve's key is eve's.
    assert http.post("/v1/check", json=check_body(), headers=bearer(own_agent)).status_code == 200
    assert http.get("/app/asks", headers={**JSON, **bearer(eve)}).status_code == 200


# --- nothing half written -----------------------------------------------------------------
class Crash(Exception):
    """The process dies here: nothing after this write happens."""


class CrashingStore:
    """A store that dies at its ``at``-th write (a doc write or an append), before that
    write lands: what a crash between two writes leaves behind."""

    def __init__(self, store: Store, at: int) -> None:
        self._store = store
        self.at = at
        self.writes = 0

    def _write(self) -> None:
        self.writes += 1
        if self.writes == self.at:
            raise Crash(f"crash at write {self.at}")

    def write_docs(self, writes: Sequence[DocWrite]) -> None:
        self._write()
        self._store.write_docs(writes)

    def append_many(
        self,
        workspace: str,
        records: Sequence[NewRecord],
        *,
        writes: Sequence[DocWrite] = (),
        ts: int | None = None,
    ) -> Any:
        self._write()
        return self._store.append_many(workspace, records, writes=writes, ts=ts)

    def append(self, workspace: str, kind: str, ref_id: str, record: Mapping[str, Any],
               **kw: Any) -> Any:  # fmt: skip
        self._write()
        return self._store.append(workspace, kind, ref_id, record, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def role_evidence(store: Store) -> dict[str, str]:
    """Each person's role as the ledger's member_role entries tell it (last one wins)."""
    said: dict[str, str] = {}
    for entry, record in store.entries_with_records(WORKSPACE):
        if entry.kind == "member_role" and record is not None:
            said[str(record["person"])] = str(record["role"])
    return said


def roles(store: Store) -> dict[str, str]:
    return {d.key: str(d.value["role"]) for d in store.query_docs(WORKSPACE, "member")}


def crash_everywhere(services: Services, change: Any) -> None:
    """Run ``change`` with a crash at its 1st, 2nd, ... write until it completes; after
    each crash, what the members are and what the ledger says they are must agree for
    every person the change touched, and every revoked key must have its entry."""
    for at in range(1, 20):
        before_roles, before_said = roles(services.store), role_evidence(services.store)
        crashing = CrashingStore(services.store, at)
        broken = Services(services.settings, crashing, services.signer)  # type: ignore[arg-type]
        try:
            change(broken)
        except Crash:
            pass
        else:
            return
        now_roles, now_said = roles(services.store), role_evidence(services.store)
        touched = {
            p for p in {*before_roles, *now_roles} if before_roles.get(p) != now_roles.get(p)
        }
        touched |= {p for p in {*before_said, *now_said} if before_said.get(p) != now_said.get(p)}
        for person in touched:
            assert now_roles.get(person, "removed") == now_said.get(person, "removed"), (
                f"crash at write {at}: {person} is {now_roles.get(person)!r} but the ledger "
                f"says {now_said.get(person)!r}"
            )
        revoked = {d["key_id"] for d in revoked_entries(services.store)}
        for doc in services.store.query_docs("_", "key", limit=1000):
            if doc.value.get("revoked_at") and doc.value.get("workspace") == WORKSPACE:
                assert doc.key[:16] in revoked, (
                    f"crash at write {at}: {doc.key[:16]} revoked, no entry"
                )
    raise AssertionError("the change never completed")


def _admin(services: Services) -> Actor:
    key = create_key(services.store, WORKSPACE, "admin", person=ADMIN)
    return Actor.of(key_principal(services.store, hashlib.sha256(key.encode()).hexdigest()))


def test_crash_while_adding_a_member_leaves_no_member_without_evidence(
    services: Services,
) -> None:
    actor = _admin(services)
    crash_everywhere(services, lambda s: add_person(s, actor, "eve@acme.test"))
    assert roles(services.store)["eve@acme.test"] == "member"
    assert role_evidence(services.store)["eve@acme.test"] == "member"


def test_crash_while_promoting_leaves_no_admin_without_evidence(services: Services) -> None:
    actor = _admin(services)
    add_person(services, actor, PERSON)
    crash_everywhere(services, lambda s: change_role(s, actor, PERSON, "admin"))
    assert role_evidence(services.store)[PERSON] == "admin"


def test_crash_while_demoting_or_removing_leaves_no_change_without_evidence(
    services: Services,
) -> None:
    actor = _admin(services)
    add_person(services, actor, PERSON)
    change_role(services, actor, PERSON, "admin")
    crash_everywhere(services, lambda s: change_role(s, actor, PERSON, "member"))
    crash_everywhere(services, lambda s: remove_member(s, actor, PERSON))
    assert PERSON not in roles(services.store)
    assert role_evidence(services.store)[PERSON] == "removed"


def test_crash_while_revoking_leaves_no_revoked_key_without_its_entry(
    services: Services,
) -> None:
    actor = _admin(services)
    eve = add_person(services, actor, "eve@acme.test")["key"]
    eve_principal = key_principal(services.store, hashlib.sha256(eve.encode()).hexdigest())
    for _ in range(12):  # more than one transaction's worth of keys minted from it
        create_key(services.store, WORKSPACE, "agent", person="eve@acme.test", parent=eve_principal)
    crash_everywhere(services, lambda s: revoke_key(s, actor, key_id(eve)))
    assert len(revoked_entries(services.store)) == 13


# --- an export while the signing key rotates ----------------------------------------------
def test_export_streamed_during_rotate_key_verifies(services: Services, tmp_path: Path) -> None:
    # A few entries; the export's generator is read as the HTTP response streams it.
    for n in range(3):
        made = create_key(services.store, WORKSPACE, "service", label=f"s{n}")
        revoke_key(services, Actor(WORKSPACE, SERVER), key_id(made))
    plan = prepare_export(services, WORKSPACE)
    lines = export_lines(services, plan)
    out = [next(lines), next(lines)]  # the header and a key are on their way
    # rotate-key in another process: its own signer over the same key directory.
    other = Services(services.settings, services.store, FileSigner(services.settings.data_dir))
    old, new = rotate_key(other, WORKSPACE)
    assert old.key_id != new.key_id
    out += list(lines)
    path = tmp_path / "export.jsonl"
    path.write_bytes(b"".join(out))
    assert verify(["--export", str(path)]) == 0


# --- the lineage check's own paths --------------------------------------------------------
def _legacy_child(store: Store, *, parent_revoked: bool) -> str:
    """A key minted from another before keys were listed per workspace: both key docs, no
    ``key_id`` list entries and no mark that the workspace was listed."""
    parent, child = "ck_" + "P" * 43, "ck_" + "C" * 43
    pd, cd = (hashlib.sha256(k.encode()).hexdigest() for k in (parent, child))
    base = {"workspace": WORKSPACE, "kind": "service", "person": None, "created_at": 1}
    parent_doc = {**base, **({"revoked_at": 2} if parent_revoked else {})}
    child_doc = {**base, "lineage": [pd[:16]], "parent": {"key_id": pd[:16], "kind": "admin"}}
    store.write_docs(
        [DocWrite("_", "key", pd, parent_doc, 0), DocWrite("_", "key", cd, child_doc, 0)]
    )
    return cd


def test_keys_minted_before_the_lists_are_checked_against_their_parent(store: Store) -> None:
    create_key(store, WORKSPACE, "service")  # the workspace, with no list of old keys
    assert key_principal(store, _legacy_child(store, parent_revoked=False)).kind == "service"


def test_a_legacy_key_minted_from_a_revoked_key_is_refused(store: Store) -> None:
    create_key(store, WORKSPACE, "service")
    with pytest.raises(KeyRefused, match="minted from key .*, which is revoked"):
        key_principal(store, _legacy_child(store, parent_revoked=True))


def test_a_lineage_naming_no_key_is_refused(store: Store) -> None:
    key = create_key(store, WORKSPACE, "service")
    digest = hashlib.sha256(key.encode()).hexdigest()
    doc = store.get_doc("_", "key", digest)
    assert doc is not None
    forged = {**doc.value, "lineage": ["00000000deadbeef"]}
    store.write_docs([DocWrite("_", "key", digest, forged, doc.rev)])
    with pytest.raises(KeyRefused, match="minted from key 00000000deadbeef"):
        key_principal(store, digest)


def test_a_function_that_cannot_list_old_keys_refuses_rather_than_fails(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_key(store, WORKSPACE, "service")
    child = _legacy_child(store, parent_revoked=False)
    import claros.people

    def read_only(_store: Store, _workspace: str) -> bool:
        raise RuntimeError("AccessDeniedException: this role may not write docs")

    monkeypatch.setattr(claros.people, "ensure_indexed", read_only)
    with pytest.raises(KeyRefused, match="minted from key"):
        key_principal(store, child)


def test_server_side_revoke_reaches_minted_keys(tmp_path: Path) -> None:
    """``python -m claros.auth revoke`` as a real subprocess on a real SQLite workspace."""
    data = tmp_path / "data"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        where = ["--data", str(data), "--workspace", WORKSPACE]
        command = [sys.executable, "-m", "claros.auth", *args, *where]
        return subprocess.run(command, capture_output=True, text=True, env=environ, timeout=60)

    made = run("create", "--kind", "person", "--person", PERSON)
    assert made.returncode == 0, made.stderr
    person = made.stdout.strip().splitlines()[-1]
    store = SqliteStore(data / "claros.db")
    try:
        parent = key_principal(store, hashlib.sha256(person.encode()).hexdigest())
        agent = create_key(store, WORKSPACE, "agent", person=PERSON, parent=parent)
        done = run("revoke", key_id(person))
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            f"revoked person key {key_id(person)}",
            f"revoked key {key_id(agent)}, minted from {key_id(person)}",
        ]
        with pytest.raises(KeyRefused, match="revoked"):
            key_principal(store, hashlib.sha256(agent.encode()).hexdigest())
        assert {e["key_id"] for e in revoked_entries(store)} == {key_id(person), key_id(agent)}
    finally:
        store.close()


def test_a_member_added_on_the_server_side_has_its_entry(tmp_path: Path) -> None:
    """``python -m claros.auth create`` adding a member (an agent key for someone new, an
    admin key) leaves its member_role entry, by the server side, like the web app does."""
    data = tmp_path / "data"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    for kind, person in (("agent", PERSON), ("admin", ADMIN), ("admin", PERSON)):
        where = ["--data", str(data), "--workspace", WORKSPACE]
        command = [sys.executable, "-m", "claros.auth", "create", *where, "--kind", kind]
        done = subprocess.run([*command, "--person", person], capture_output=True, text=True,
                              env=environ, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
    store = SqliteStore(data / "claros.db")
    try:
        said = [
            (r["person"], r["role"], r.get("previous"), r["changed_by"])
            for e, r in store.entries_with_records(WORKSPACE)
            if e.kind == "member_role" and r is not None
        ]
        assert said == [
            (PERSON, "member", None, SERVER),
            (ADMIN, "admin", None, SERVER),
            (PERSON, "admin", "member", SERVER),
        ]
        assert roles(store) == role_evidence(store) == {PERSON: "admin", ADMIN: "admin"}
    finally:
        store.close()
