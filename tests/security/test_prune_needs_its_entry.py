"""Attack: delete the oldest history through the store's prune without the ledger saying so.

evidence.txt: a prune first signs a checkpoint at the last entry it drops and is recorded
(a ``prune`` entry naming its cut, claros.evidence.retention.prune); only then are the
older records deleted. A signed checkpoint alone is not that: it is signed at every
hundredth entry anyway. So a caller holding store access (a bug, a script, a role that
may call prune) must not be able to cut the chain at any checkpoint it likes, on either
store: the prune needs the ``prune`` entry after the cut that names exactly that cut.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from claros.ledger import Checkpoint, Entry
from claros.signing import FileSigner
from claros.store.base import PruneError, Store

WS = "acme"


def _sign(signer: FileSigner, store: Store, entry: Entry) -> None:
    ts = int(time.time() * 1000)
    message = Checkpoint(entry.workspace, entry.seq, entry.hash, ts, "", "").message()
    key_id, signature = signer.sign(entry.workspace, message)
    store.add_public_key(signer.active_key(entry.workspace))
    assert store.add_checkpoint(
        Checkpoint(entry.workspace, entry.seq, entry.hash, ts, key_id,
                   base64.b64encode(signature).decode())
    )  # fmt: skip


def _history(store: Store, signer: FileSigner) -> list[Entry]:
    """Six checks with their outcomes' worth of entries, signed at seq 4."""
    entries = [store.append(WS, "check", f"c{i}", {"result": "allow", "n": i}) for i in range(6)]
    _sign(signer, store, entries[3])
    return entries


def _untouched(store: Store, entries: list[Entry]) -> None:
    assert [e.seq for e in store.entries(WS)][: len(entries)] == [e.seq for e in entries]
    assert store.get_record(WS, "check", "c0") is not None


def test_prune_without_a_prune_entry_is_refused(store: Store, tmp_path: Path) -> None:
    entries = _history(store, FileSigner(tmp_path / "keys"))
    with pytest.raises(PruneError, match="no prune entry says through_seq 4"):
        store.prune(WS, 4)
    _untouched(store, entries)


def test_prune_with_an_entry_for_another_cut_is_refused(store: Store, tmp_path: Path) -> None:
    signer = FileSigner(tmp_path / "keys")
    entries = _history(store, signer)
    _sign(signer, store, entries[1])
    store.append(WS, "prune", "prn1", {"through_seq": 2})  # says 2, the caller asks 4
    with pytest.raises(PruneError, match="no prune entry says through_seq 4"):
        store.prune(WS, 4)
    _untouched(store, entries)


def test_a_prune_entry_inside_the_cut_does_not_count(store: Store, tmp_path: Path) -> None:
    # An entry that would itself be deleted cannot be what records the prune: it must
    # come after the cut (the chain keeps it, and the verifier reads it there).
    signer = FileSigner(tmp_path / "keys")
    early = store.append(WS, "prune", "prn0", {"through_seq": 5})
    entries = [early, *_history(store, signer)]  # signed at seq 5
    with pytest.raises(PruneError, match="no prune entry says through_seq 5"):
        store.prune(WS, 5)
    _untouched(store, entries)


def test_the_prune_entry_after_the_cut_lets_it_through(store: Store, tmp_path: Path) -> None:
    entries = _history(store, FileSigner(tmp_path / "keys"))
    store.append(WS, "prune", "prn1", {"through_seq": 4})
    result = store.prune(WS, 4)
    assert (result.entries_deleted, result.through_seq) == (4, 4)
    assert [e.seq for e in store.entries(WS)] == [5, 6, 7]
    assert store.get_record(WS, "check", "c0") is None
    assert store.get_record(WS, "check", entries[4].ref_id) is not None
