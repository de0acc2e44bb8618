"""THREATS.md §3: a compromised request-serving role gets a signing key of its own trusted.

A new key enters the chain as a ``public_key`` entry: once a checkpoint of a trusted key
covers that entry, a verify with pinned keys (``--checkpoints``, ``--keys``) trusts the new
key from that seq on (claros.ledger.ChainVerifier._check_pins). Every role that appends may
append any kind. So the check function's role appended a ``public_key`` entry for an
Ed25519 key it made itself, the checkpoint function (which signs a ``public_key`` entry as
soon as the stream shows it) signed over it with the workspace's KMS key, and from then on
whoever holds that private key signs checkpoints an auditor's pinned verify accepts: a
rewritten tail, re-signed, passes ("re-signing with a key the auditor did not pin" must be
detected, §4). The role had got what §3 says it never gets: something it can sign with.

Seen on the old code: the checkpoint function signed at the role's entry (checkpoints at
seqs [2, 4]), and the forged export with the role's checkpoint verified against the pinned
KMS key.

A key enters the list of the workspace's keys (``{workspace}#pubkey``, which only the
signer role writes) before its entry is appended (claros.checkpoints.rotate_key). The
checkpoint function now checks every ``public_key`` entry it would sign over against that
list, and refuses to sign a chain that introduces any other key (``ChainBrokenError``,
counted as ``CheckpointRefused``): no trusted checkpoint ever vouches for it.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import base64
from typing import Any

import pytest
from nacl.signing import SigningKey

from claros.ledger import (
    PUBLIC_KEY_KIND,
    ChainVerifier,
    Checkpoint,
    Entry,
    PublicKey,
    checkpoint_message,
    key_id_for,
)
from claros.store.base import Store
from tests.security.aws.test_aws_roles_cannot_rewrite import World, _seed, world
from tests.stack import STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS
_ = world  # the fixture, used by name


def _role_store(world: World, function: str) -> Store:
    """The store as the function's code builds it, every call made with its role."""
    return world.stack.store(world.as_role(function))


def _own_key() -> tuple[SigningKey, PublicKey]:
    private = SigningKey.generate()
    raw = bytes(private.verify_key)
    public = PublicKey(WS, key_id_for(raw), base64.b64encode(raw).decode(), 1)
    return private, public


def _checkpoints(store: Store) -> list[Checkpoint]:
    return store.checkpoints(WS, since=0, limit=1000)


def _pinned_verify(store: Store, extra: list[tuple[Entry, Any]], forged: Checkpoint) -> list[str]:
    """What an auditor's verify says of an export the role's key holder made: the chain as
    stored plus ``extra`` entries, the stored checkpoints plus ``forged``, with only the
    workspace's KMS key pinned (the first key, the one the first checkpoint was signed by)."""
    stored = [(e, store.get_record(WS, e.kind, e.ref_id)) for e in store.entries(WS)]
    keys = store.public_keys(WS)
    first = _checkpoints(store)[0]
    pinned = [k for k in keys if k.key_id == first.key_id]
    listed = keys + [k for k in [_intro_of(stored)] if k is not None]
    verifier = ChainVerifier(WS, [*_checkpoints(store), forged], listed, pinned=pinned)
    for entry, record in stored + extra:
        verifier.feed(entry, record)
    return [f.problem for f in verifier.finish().failures]


def _intro_of(items: list[tuple[Entry, Any]]) -> PublicKey | None:
    for entry, record in items:
        if entry.kind == PUBLIC_KEY_KIND:
            return PublicKey.from_json({**record, "workspace": WS})
    return None


def test_a_request_role_cannot_get_a_key_of_its_own_vouched_for(
    world: World, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    _seed(world)  # three checks, a checkpoint at seq 2
    store = world.stack.store(world.client)
    private, public = _own_key()
    # The check function's role appends the entry that introduces its key (seq 4).
    intro = _role_store(world, "CheckFunction").append(
        WS, PUBLIC_KEY_KIND, public.key_id, {**public.to_json(), "replaces": "none"}
    )
    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    signed = [cp.seq for cp in _checkpoints(store)]
    out = capsys.readouterr().out
    assert signed == [2], f"the checkpoint function signed over the role's key: {signed}"
    assert '"CheckpointRefused":[1.0]' in out, out[-2000:]
    assert f"introduces key {public.key_id}, which is not one of" in caplog.text

    # What the role's key holder does next: a check the agent never made, appended after
    # its entry and signed with its own key, handed to an auditor as the export.
    forged = Entry.build(WS, intro.seq + 1, "check", "chk_forged", intro.ts + 1,
                         {"result": "allow", "forged": True}, intro.hash)  # fmt: skip
    message = checkpoint_message(WS, forged.seq, forged.hash, forged.ts + 1)
    signature = base64.b64encode(private.sign(message).signature).decode()
    cp = Checkpoint(WS, forged.seq, forged.hash, forged.ts + 1, public.key_id, signature)
    problems = _pinned_verify(store, [(forged, {"result": "allow", "forged": True})], cp)
    assert any(public.key_id in p and "not pinned" in p for p in problems), problems


def test_a_rotation_still_introduces_its_key(world: World) -> None:
    """The key the operator's rotate-key lists first (``add_public_key``) is signed over
    as before: only a key missing from the signer's list is refused."""
    _seed(world)
    store = world.stack.store(world.client)
    _, public = _own_key()
    store.add_public_key(public)  # as rotate_key does, before the entry
    store.append(WS, PUBLIC_KEY_KIND, public.key_id, {**public.to_json(), "replaces": "k"})
    world.functions.invoke("checkpoint", world.stream())
    assert [cp.seq for cp in _checkpoints(store)] == [2, 4]


def test_an_entry_that_relabels_a_listed_key_is_refused(world: World) -> None:
    """The entry's key id is a listed key's, its public half another: refused too (the
    verifier would fail that entry, but the checkpoint must not vouch for it either)."""
    _seed(world)
    store = world.stack.store(world.client)
    _, listed = _own_key()
    store.add_public_key(listed)
    _, other = _own_key()
    body = {**listed.to_json(), "public_key": other.public_key, "replaces": "k"}
    _role_store(world, "CheckFunction").append(WS, PUBLIC_KEY_KIND, listed.key_id, body)
    world.functions.invoke("checkpoint", world.stream())
    assert [cp.seq for cp in _checkpoints(store)] == [2]
