"""The lines of the evidence export and stream: one shape for every writer and reader.

An entry line is the entry's fields and its record, the record last and written as its
canonical JSON text, exactly the bytes ``payload_sha256`` hashed::

    {"workspace":"acme","seq":1,"kind":"check","ref_id":"chk_…","ts":1796…,
     "payload_sha256":"…","prev_hash":"…","hash":"…","event":{…canonical record…}}

so a reader compares a record by hashing the bytes after ``"event":`` (no parse, no
re-canonicalization). Lines of the export's other parts carry a ``type`` first
(``header``, ``public_key``, ``checkpoint``, ``kept``, ``signature``).

Pure code (no storage, no network): the server writes with it and ``claros verify`` reads
with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from claros import jsonutil
from claros.ledger import Entry

if TYPE_CHECKING:  # not imported to read: claros verify has no use for the Store protocol
    from claros.store.base import KeptRecord

__all__ = [
    "EXPORT_FORMAT",
    "LineError",
    "ParsedEntry",
    "entry_line",
    "is_entry_line",
    "kept_line",
    "parse_entry_line",
    "parse_typed_line",
    "typed_line",
]

EXPORT_FORMAT = "claros-evidence/1"
_EVENT = b',"event":'
_ENTRY_START = b'{"workspace":'
_quote = json.encoder.encode_basestring
_decode = json.JSONDecoder().raw_decode
# An entry line exactly as ``entry_line`` writes it, strings without escapes: read with one
# match (the common case by far); anything else goes through a JSON parser.
_STR = rb'"([^"\\\x00-\x1f]*)"'
_INT = rb"(0|[1-9][0-9]{0,18})"
_HEX = rb'"([0-9a-f]{64})"'
_WRITTEN = re.compile(
    rb'\{"workspace":' + _STR + rb',"seq":' + _INT + rb',"kind":' + _STR + rb',"ref_id":' + _STR
    + rb',"ts":' + _INT + rb',"payload_sha256":' + _HEX + rb',"prev_hash":' + _HEX
    + rb',"hash":' + _HEX + rb',"event":'
)  # fmt: skip


class LineError(ValueError):
    """A line that is not in the shape of the export or stream."""


def _prefix(entry: Entry) -> bytes:
    return (
        f'{{"workspace":{_quote(entry.workspace)},"seq":{entry.seq:d},'
        f'"kind":{_quote(entry.kind)},"ref_id":{_quote(entry.ref_id)},"ts":{entry.ts:d},'
        f'"payload_sha256":{_quote(entry.payload_sha256)},'
        f'"prev_hash":{_quote(entry.prev_hash)},"hash":{_quote(entry.hash)}'
    ).encode()


def entry_line(entry: Entry, record: bytes | None, *, with_record: bool = True) -> bytes:
    """One entry as a line (with ``\\n``). ``record`` is the record's canonical JSON as the
    store keeps it; None writes ``"event":null`` (the record is gone). ``with_record=False``
    leaves ``event`` out (for keys that may not read records)."""
    if not with_record:
        return _prefix(entry) + b"}\n"
    return b"".join((_prefix(entry), _EVENT, b"null" if record is None else record, b"}\n"))


def kept_line(kept: KeptRecord) -> bytes:
    """A rule or mapping version kept below a prune's cut (its entry is gone): where its
    entry was, and the record as ``event``."""
    return typed_line(
        "kept",
        {
            "seq": kept.seq,
            "kind": kept.kind,
            "ref_id": kept.ref_id,
            "event": jsonutil.loads(kept.raw),
        },
    )


def typed_line(type_: str, fields: Mapping[str, Any]) -> bytes:
    """A header, public key, checkpoint or signature line: ``type`` first, then fields."""
    return (jsonutil.dumps({"type": type_, **fields}) + "\n").encode()


class ParsedEntry(NamedTuple):
    entry: Entry
    # Whether the line carries the record at all (agent keys get entries without it).
    has_record: bool
    # The record's bytes as written (None: "event": null, the record is gone).
    raw: bytes | None


def _fields(data: Any) -> Entry:
    if not isinstance(data, dict):
        raise LineError(f"an entry line is a JSON object, not {type(data).__name__}")
    try:
        return Entry.from_json(data)
    except ValueError as exc:
        raise LineError(str(exc)) from None


def parse_entry_line(line: bytes) -> ParsedEntry:
    """An entry line, read fast when it is in the writer's layout (the record last, as its
    canonical text), and by a full JSON parse otherwise. ``LineError`` names what is wrong."""
    line = line.rstrip(b"\r\n")
    fast = _WRITTEN.match(line) if line.endswith(b"}") else None
    if fast is not None:
        ws, seq, kind, ref, ts, payload, prev, hash_ = fast.groups()
        try:
            entry = Entry(ws.decode(), int(seq), kind.decode(), ref.decode(), int(ts),
                          payload.decode(), prev.decode(), hash_.decode())  # fmt: skip
        except UnicodeDecodeError:
            pass
        else:
            raw = line[fast.end() : -1]
            return ParsedEntry(entry, True, None if raw == b"null" else raw)
    at = line.find(_EVENT)
    if line.startswith(_ENTRY_START) and at > 0 and line.endswith(b"}"):
        # ',"event":' cannot occur inside a JSON string (its quote would be escaped), so
        # the first one ends the entry's own fields.
        try:
            text = line[:at].decode("utf-8") + "}"
            head, end = _decode(text)
        except (ValueError, RecursionError):  # UnicodeDecodeError too; nested too deeply
            head, end = None, 0
        if end == len(text) and isinstance(head, dict) and "event" not in head:
            raw = line[at + len(_EVENT) : -1]
            return ParsedEntry(_fields(head), True, None if raw == b"null" else raw)
    try:
        data = jsonutil.loads(line)
    except (ValueError, RecursionError) as exc:
        raise LineError(f"not JSON: {exc}") from None
    entry = _fields(data)
    if "event" not in data:
        return ParsedEntry(entry, False, None)
    event = data["event"]
    # A record written in another layout: hand it over as JSON text; the verifier parses
    # it again only if its bytes do not hash right.
    return ParsedEntry(entry, True, None if event is None else jsonutil.dumps(event).encode())


def parse_typed_line(line: bytes) -> dict[str, Any]:
    try:
        data = jsonutil.loads(line)
    except (ValueError, RecursionError) as exc:
        raise LineError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise LineError(f"a line is a JSON object, not {type(data).__name__}")
    return data


def is_entry_line(line: bytes) -> bool:
    """Entry lines start with their workspace; every other line with its type."""
    return line.startswith(_ENTRY_START) or not line.startswith(b'{"type":')
