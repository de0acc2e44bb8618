"""The operator runs ``python -m claros.ledger rotate-key`` against the stack, as
docs/deploy.md says; the rotation used to be unable to finish.

A new key is introduced by the old one: a ``public_key`` entry, under a checkpoint the old
key signs (claros.checkpoints.rotate_key). But each workspace key's policy lets the account
do everything **but sign** (``AccountAdministersButCannotSign``), and only the signer role,
which only Lambda may assume, signs. So an operator with every IAM permission made the new
KMS key, appended the ``public_key`` entry, and was then refused the old key's signature:
exit 2, the alias not moved, and a new key announced in the chain that never signs (run
again: another key, another entry). Seen on the old code:

    AssertionError: ('a key announced that never signs', ['check', 'check', 'check',
    'public_key'], 'claros.ledger: KMS could not sign for ... not authorized to perform
    kms:Sign on arn:aws:kms:...')

Now the checkpoint function signs a ``public_key`` entry as soon as the ledger's stream
shows it (with the key the alias still names, as it signs a prune's entry), the operator's
run waits for that checkpoint and only then moves the alias; a run that waits in vain
leaves the alias where it was and names the key to finish with (``--key``), which goes on
with the entry already written.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import claros.checkpoints
import claros.signing
from claros.ledger import Entry
from claros.ledger_cli import main as ledger
from claros.store.base import Store
from tests.iam import ACCOUNT, GatedKms
from tests.security.aws.test_aws_roles_cannot_rewrite import (
    World,
    _export_verifies,
    _ledger,
    _seed,
    world,
)
from tests.stack import STACK_WARNINGS, WS, run_check

pytestmark = STACK_WARNINGS

OPERATOR = f"arn:aws:iam::{ACCOUNT}:role/operator"
EVERYTHING = [{"Effect": "Allow", "Action": "*", "Resource": "*"}]  # AdministratorAccess
_ = world  # the fixture, used by name


@pytest.fixture
def operator(world: World, monkeypatch: pytest.MonkeyPatch) -> str:
    """The workspace's alias, once the checkpoint function made its key (``_seed``). The
    checkpoint function reads the alias again at each signature, not once a minute."""
    _seed(world)
    monkeypatch.setattr(claros.signing, "KEY_CACHE_S", 0.0)
    return world.stack.env("checkpoint")["CLAROS_KMS_ALIAS_PREFIX"] + WS


def rotate_key(world: World, *args: str) -> int:
    """``python -m claros.ledger rotate-key`` in the operator's shell: the stack's table
    variables, alias prefix and signer role, with AdministratorAccess (every function
    keeps its own KMS client)."""
    import claros.wiring

    gated = GatedKms(world.kms, EVERYTHING, OPERATOR)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in world.stack.env("checkpoint").items():
            patch.setenv(name, value)
        patch.setattr(claros.wiring, "_kms", lambda: gated)
        return ledger(["rotate-key", "--workspace", WS, *args])


def _aliased(world: World, alias: str) -> str:
    return str(world.kms.describe_key(KeyId=alias)["KeyMetadata"]["KeyId"])


def _kinds(world: World) -> list[str]:
    return [i["kind"]["S"] for i in _ledger(world)]


def _store(world: World) -> Store:
    return world.stack.store(world.client)


def _pin_old_keys(world: World, tmp_path: Path) -> Path:
    """The keys an auditor pinned before the rotation (GET /v1/ledger/pubkey)."""
    path = tmp_path / "keys.json"
    keys = [k.to_json() for k in _store(world).public_keys(WS)]
    path.write_text(json.dumps({"public_keys": keys}))
    return path


def _new_key_signs_and_the_pinned_auditor_follows(
    world: World, tmp_path: Path, keys: Path, new_key_id: str
) -> None:
    """After the rotation the checkpoint function signs with the new key, and an auditor
    who pinned only the old keys trusts it: the old key introduced it."""
    for _ in range(2):  # to the next multiple of CLAROS_LEDGER_CHECKPOINT_EVERY
        run_check(world.functions, world.keys.agent)
    world.functions.invoke("checkpoint", world.stream())
    last = world.checkpoints()[-1]
    assert last["key_id"] == new_key_id, last
    report = world.verify_report()
    assert report["ok"] is True and report["tampering"] == [], report
    export = _export_verifies(world, tmp_path)
    assert export == 0, export
    assert verify_export_pinned(world, tmp_path, keys) == 0


def verify_export_pinned(world: World, tmp_path: Path, keys: Path) -> int:
    from claros_guard.verify import main as verify

    return verify(["--export", str(tmp_path / "export.jsonl"), "--keys", str(keys)])


def test_an_operator_rotates_a_workspace_key(
    world: World,
    operator: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """One run: the stream brings the entry to the checkpoint function while it waits."""
    real_wait = claros.checkpoints.wait_for_checkpoint
    waited: list[int] = []

    def stream_arrives(store: Store, entry: Entry, wait_s: float) -> bool:
        waited.append(entry.seq)
        world.functions.invoke("checkpoint", world.stream())  # Lambda, meanwhile
        return real_wait(store, entry, 0.0)

    monkeypatch.setattr(claros.checkpoints, "wait_for_checkpoint", stream_arrives)
    keys = _pin_old_keys(world, tmp_path)
    old = _aliased(world, operator)
    before = _kinds(world)

    code = rotate_key(world)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert _kinds(world) == [*before, "public_key"]
    assert _aliased(world, operator) != old
    # The old key signed the checkpoint over the new key's announcement.
    old_id, new_id = out.split("signing key ")[1].strip().split(" -> ")
    cp = world.checkpoints()[-1]
    assert (cp["seq"], cp["key_id"]) == (waited[0], old_id), cp
    _new_key_signs_and_the_pinned_auditor_follows(world, tmp_path, keys, new_id)


def test_a_rotation_that_waited_in_vain_finishes_with_its_key(
    world: World,
    operator: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """No checkpoint in time: the old key stays active, and the run names the new key;
    finishing with it appends no second announcement and makes no other key."""
    monkeypatch.setattr(claros.checkpoints, "ROTATE_WAIT_S", 0.0)
    keys = _pin_old_keys(world, tmp_path)
    old = _aliased(world, operator)
    before = _kinds(world)

    assert rotate_key(world) == 2
    err = capsys.readouterr().err
    assert "no signed checkpoint covers it yet" in err, err
    assert _aliased(world, operator) == old  # the old key goes on signing
    assert _kinds(world) == [*before, "public_key"]
    new_kms_key = err.rsplit("--key ", 1)[1].strip()

    # Finishing before the checkpoint function signed: still pending, nothing added.
    assert rotate_key(world, "--key", new_kms_key) == 2
    assert "no signed checkpoint covers it yet" in capsys.readouterr().err
    assert _kinds(world) == [*before, "public_key"]

    world.functions.invoke("checkpoint", world.stream())  # the announcement, signed at once
    assert rotate_key(world, "--key", new_kms_key) == 0
    out = capsys.readouterr().out
    assert _aliased(world, operator) == new_kms_key
    assert _kinds(world) == [*before, "public_key"]  # the same entry, no other key
    new_id = out.split(" -> ")[1].strip()
    _new_key_signs_and_the_pinned_auditor_follows(world, tmp_path, keys, new_id)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("active", "is already workspace"),
        ("missing", "no KMS key"),
        ("other-workspace", "was not made for workspace"),
        ("symmetric", "is not an Ed25519 signing key"),
    ],
)
def test_finishing_with_a_key_that_cannot_be_the_workspaces_is_refused(
    world: World,
    operator: str,
    capsys: pytest.CaptureFixture[str],
    key: str,
    message: str,
) -> None:
    """--key names a key of this workspace made by a rotation; anything else is refused
    with the reason, exit 2, and nothing appended or moved."""
    old = _aliased(world, operator)
    made: dict[str, Any] = {
        "active": lambda: old,
        "missing": lambda: "1234abcd-12ab-34cd-56ef-1234567890ab",
        "other-workspace": lambda: world.kms.create_key(
            KeySpec="ECC_NIST_EDWARDS25519",
            KeyUsage="SIGN_VERIFY",
            Tags=[{"TagKey": "claros:workspace", "TagValue": "other"}],
        )["KeyMetadata"]["KeyId"],
        "symmetric": lambda: world.kms.create_key(
            Tags=[{"TagKey": "claros:workspace", "TagValue": WS}]
        )["KeyMetadata"]["KeyId"],
    }
    before = _kinds(world)
    assert rotate_key(world, "--key", made[key]()) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert _aliased(world, operator) == old
    assert _kinds(world) == before
