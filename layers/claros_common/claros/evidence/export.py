"""The evidence export: every entry with its record, the signed checkpoints and the public
keys, signed as a whole (format: docs/evidence-format.md).

JSON Lines, in this order, so a verifier checks it in one pass with bounded memory (it
knows every key and checkpoint before the entries go past):

1. a header line;
2. one line per public key, then one per checkpoint (a fresh one is signed at the head
   first, so every entry is covered), then one per rule or mapping version kept below a
   prune's cut (``kept``: checked against the prune entries that list them);
3. one line per entry, its record as ``event`` in the stream's shape, read page by page;
4. a last line signing the sha256 of all bytes before it with the workspace's key.

The writer is a generator: it holds one page of entries at a time, whatever the size.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

from claros.checkpoints import sign_checkpoint
from claros.clock import now_ms
from claros.evidence.lines import EXPORT_FORMAT, entry_line, kept_line, typed_line
from claros.ledger import Checkpoint, Entry, PublicKey
from claros.store.base import KeptRecord
from claros.wiring import Services

__all__ = ["PAGE", "ExportPlan", "S3Exports", "export_lines", "export_name", "prepare_export"]

PAGE = 5000  # entries read per store call


class ExportPlan:
    """What an export will hold, fixed before its first byte: entries up to ``last_seq``.
    (A plain class: a dataclass cost the export function ~1 ms of CPU to define at cold
    start.)"""

    def __init__(
        self,
        workspace: str,
        exported_at: int,
        first_seq: int | None,
        last_seq: int,
        head_hash: str | None,
        public_keys: list[PublicKey] | None = None,
        checkpoints: list[Checkpoint] | None = None,
        kept: list[KeptRecord] | None = None,
        signing_key: str = "",
    ) -> None:
        self.workspace, self.exported_at = workspace, exported_at
        self.first_seq, self.last_seq, self.head_hash = first_seq, last_seq, head_hash
        self.public_keys: list[PublicKey] = [] if public_keys is None else public_keys
        self.checkpoints: list[Checkpoint] = [] if checkpoints is None else checkpoints
        # Rule and mapping versions kept below a prune's cut (their entries are gone).
        self.kept: list[KeptRecord] = [] if kept is None else kept
        # The key that signs the export's last line: the active key when the plan was
        # made, listed among ``public_keys``. A rotate-key while the export streams makes
        # another key active, one the export does not list: the export is signed with this
        # one all the same.
        self.signing_key = signing_key

    def header(self) -> dict[str, Any]:
        first = self.first_seq
        return {
            "format": EXPORT_FORMAT,
            "workspace": self.workspace,
            "exported_at": self.exported_at,
            "first_seq": first,
            "last_seq": self.last_seq,
            "head_hash": self.head_hash,
            "entries": self.last_seq - first + 1 if first is not None else 0,
            "pruned_through": first - 1 if first is not None and first > 1 else None,
            "public_keys": len(self.public_keys),
            "checkpoints": len(self.checkpoints),
            "kept_records": len(self.kept),
            "records": "each entry's event is its record's canonical JSON, the bytes "
            "payload_sha256 hashes",
            "signature": "the last line signs the sha256 of every byte before it (Ed25519)",
        }


def prepare_export(services: Services, workspace: str, *, now: int | None = None) -> ExportPlan:
    """Fix what the export holds and sign a checkpoint at the head if it has none yet.

    Runs before any byte is sent, so a failure here is still a proper HTTP error."""
    store, signer = services.store, services.signer
    head = store.head(workspace)
    if head is not None:
        latest = store.latest_checkpoint(workspace)
        if latest is None or latest.seq < head.seq:
            sign_checkpoint(store, signer, head, services.anchor)
    # The key that signs the export is listed in it, like every key that signed anything.
    signing = signer.active_key(workspace)
    store.add_public_key(signing)
    last = head.seq if head is not None else 0
    first = next(iter(store.entries(workspace, limit=1)), None)
    return ExportPlan(
        workspace=workspace,
        exported_at=now if now is not None else now_ms(),
        first_seq=first.seq if first is not None and first.seq <= last else None,
        last_seq=last,
        head_hash=head.hash if head is not None else None,
        public_keys=store.public_keys(workspace),
        checkpoints=[cp for cp in store.checkpoints(workspace) if cp.seq <= last],
        kept=store.kept_records(workspace, first.seq - 1) if first and first.seq > 1 else [],
        signing_key=signing.key_id,
    )


def _entries(services: Services, plan: ExportPlan) -> Iterator[tuple[Entry, bytes | None]]:
    since = (plan.first_seq or 1) - 1
    while since < plan.last_seq:
        limit = min(PAGE, plan.last_seq - since)
        n = 0
        for entry, raw in services.store.entries_with_raw_records(
            plan.workspace, since=since, limit=limit
        ):
            yield entry, raw
            since, n = entry.seq, n + 1
        if n < limit:
            return  # the log ends early; the checkpoint at the head makes that show


def export_lines(services: Services, plan: ExportPlan) -> Iterator[bytes]:
    """The export, line by line; the last line signs the sha256 of all the others."""
    digest = hashlib.sha256()

    def out(line: bytes) -> bytes:
        digest.update(line)
        return line

    yield out(typed_line("header", plan.header()))
    for key in plan.public_keys:
        yield out(typed_line("public_key", key.to_json()))
    for cp in plan.checkpoints:
        yield out(typed_line("checkpoint", cp.to_json()))
    for kept in plan.kept:
        yield out(kept_line(kept))
    for entry, raw in _entries(services, plan):
        yield out(entry_line(entry, raw))
    sha = digest.digest()
    if plan.signing_key:
        key_id = plan.signing_key
        signature = services.signer.sign_with(plan.workspace, key_id, sha)
    else:  # a plan made without one: the active key (listed, unless it rotated meanwhile)
        key_id, signature = services.signer.sign(plan.workspace, sha)
    yield typed_line(
        "signature",
        {
            "sha256": sha.hex(),
            "algorithm": "Ed25519",
            "key_id": key_id,
            "signature": base64.b64encode(signature).decode(),
        },
    )


def export_name(workspace: str, exported_at: int) -> str:
    day = dt.datetime.fromtimestamp(exported_at / 1000, tz=dt.UTC).strftime("%Y-%m-%d")
    return f"claros-evidence-{workspace}-{day}.jsonl"


class S3Exports:
    """In AWS an export can outgrow a Lambda response (6 MB): it is written to S3 as a
    multipart upload, part by part, and answered with a presigned URL."""

    PREFIX = "exports/"

    def __init__(
        self, s3: Any, bucket: str, *, part_bytes: int = 8 * 1024 * 1024, expires_s: int = 3600
    ) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.part_bytes = max(part_bytes, 5 * 1024 * 1024)  # S3's smallest part but the last
        self.expires_s = expires_s

    def upload(self, key: str, name: str, lines: Iterable[bytes]) -> dict[str, Any]:
        key = self.PREFIX + key
        started = self.s3.create_multipart_upload(
            Bucket=self.bucket,
            Key=key,
            ContentType="application/x-ndjson",
            ContentDisposition=f'attachment; filename="{name}"',
        )
        upload_id = started["UploadId"]
        parts: list[dict[str, Any]] = []
        size = 0
        try:
            buffer: list[bytes] = []
            held = 0
            for line in lines:
                buffer.append(line)
                held += len(line)
                if held >= self.part_bytes:
                    parts.append(self._part(key, upload_id, len(parts) + 1, b"".join(buffer)))
                    size, buffer, held = size + held, [], 0
            if buffer or not parts:
                parts.append(self._part(key, upload_id, len(parts) + 1, b"".join(buffer)))
                size += held
            self.s3.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        except BaseException:
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise
        url = self.s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=self.expires_s
        )
        return {"url": url, "expires_in": self.expires_s, "key": key, "bytes": size, "name": name}

    def _part(self, key: str, upload_id: str, number: int, body: bytes) -> dict[str, Any]:
        done = self.s3.upload_part(
            Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
        )
        return {"PartNumber": number, "ETag": done["ETag"]}
