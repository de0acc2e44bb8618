"""GET /api/evidence/export on both stores: streamed by the local server, joined in a
Lambda answer, written to S3 (moto) in AWS; and verified offline by ``claros verify``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from claros.api.app import build_resolver
from claros.evidence.lines import EXPORT_FORMAT
from claros.ledger import PublicKey, verify_signature
from claros.wiring import Services
from claros_guard.verify import main as verify
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body
from tests.events import load_event


def _checks(http: httpx.Client, key: str, n: int) -> None:
    for i in range(n):
        body = check_body(agent={"name": "t", "call_id": str(i)}, arguments={"amount": i})
        assert http.post("/v1/check", json=body, headers=bearer(key)).status_code == 200


def _lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def test_export_holds_everything_signed_as_a_whole(
    http: httpx.Client, keys: Keys, services: Services, tmp_path: Path
) -> None:
    _checks(http, keys.agent, 7)  # checkpoint_every = 5: one at seq 5, then the head's
    got = http.get("/api/evidence/export", headers=bearer(keys.audit))
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "application/x-ndjson"
    assert got.headers["transfer-encoding"] == "chunked"  # streamed, not built in memory
    assert 'filename="claros-evidence-acme-' in got.headers["content-disposition"]
    lines = _lines(got.content)
    header = lines[0]
    assert header["type"] == "header" and header["format"] == EXPORT_FORMAT
    assert (header["workspace"], header["first_seq"], header["last_seq"]) == (WORKSPACE, 1, 7)
    kinds = [line.get("type", "entry") for line in lines]
    assert kinds == ["header", "public_key", "checkpoint", "checkpoint", *["entry"] * 7,
                     "signature"]  # fmt: skip
    # A fresh checkpoint at the head was signed for the export: every entry is covered.
    assert [c["seq"] for c in lines if c.get("type") == "checkpoint"] == [5, 7]
    assert [cp.seq for cp in services.store.checkpoints(WORKSPACE)] == [5, 7]
    entries = [line for line in lines if "type" not in line]
    assert [e["seq"] for e in entries] == list(range(1, 8))
    assert set(entries[0]) == {"workspace", "seq", "kind", "ref_id", "ts", "payload_sha256",
                               "prev_hash", "hash", "event"}  # fmt: skip
    # Each event is the record's canonical JSON: its bytes hash to payload_sha256.
    for raw in got.content.splitlines()[4:-1]:
        event = raw[raw.index(b',"event":') + 9 : -1]
        assert hashlib.sha256(event).hexdigest() == json.loads(raw)["payload_sha256"]
    body, last = got.content.rsplit(b"\n", 2)[0] + b"\n", lines[-1]
    digest = hashlib.sha256(body).digest()
    assert last["sha256"] == digest.hex()
    [key] = [PublicKey.from_json({k: v for k, v in x.items() if k != "type"})
             for x in lines if x.get("type") == "public_key"]  # fmt: skip
    assert verify_signature(key, digest, last["signature"])
    path = tmp_path / "export.jsonl"
    path.write_bytes(got.content)
    assert verify(["--export", str(path)]) == 0


def test_export_of_an_empty_ledger_verifies(http: httpx.Client, keys: Keys, tmp_path: Path) -> None:
    got = http.get("/api/evidence/export", headers=bearer(keys.admin))
    assert got.status_code == 200, got.text
    header = _lines(got.content)[0]
    assert (header["entries"], header["first_seq"], header["last_seq"]) == (0, None, 0)
    (tmp_path / "e.jsonl").write_bytes(got.content)
    assert verify(["--export", str(tmp_path / "e.jsonl")]) == 0


def test_a_lambda_answer_holds_the_whole_export(services: Services, keys: Keys) -> None:
    """Without a transport that streams (Lambda) and without a bucket, the lines are joined
    into the body: one code path, whatever runs it."""
    app = build_resolver(services, ["export"])
    event = load_event("export-export-evidence", keys.admin)
    response = app.resolve(event, None)
    assert response["statusCode"] == 200, response
    lines = response["body"].splitlines()
    assert json.loads(lines[0])["type"] == "header" and json.loads(lines[-1])["type"] == "signature"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_export_goes_to_s3_in_aws(
    services: Services, keys: Keys, moto_aws: None, tmp_path: Path
) -> None:
    import boto3

    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="claros-exports")
    aws = Services(services.settings.replace(export_bucket="claros-exports"),
                   services.store, services.signer)  # fmt: skip
    app = build_resolver(aws, ["check", "export"])
    for i in range(3):
        check = load_event("check-check", keys.agent)
        check["body"] = json.dumps(check_body(agent={"name": "t", "call_id": f"s{i}"}))
        assert app.resolve(check, None)["statusCode"] == 200
    response = app.resolve(load_event("export-export-evidence", keys.admin), None)
    assert response["statusCode"] == 200, response
    answer = json.loads(response["body"])
    assert answer["url"].startswith("https://") and "X-Amz-Signature=" in answer["url"]
    assert answer["key"].startswith("exports/acme/") and answer["expires_in"] == 3600
    stored = s3.get_object(Bucket="claros-exports", Key=answer["key"])
    assert stored["ContentDisposition"] == f'attachment; filename="{answer["name"]}"'
    data = stored["Body"].read()
    assert len(data) == answer["bytes"] and answer["last_seq"] == 3
    (tmp_path / answer["name"]).write_bytes(data)
    assert verify(["--export", str(tmp_path / answer["name"])]) == 0


def test_s3_upload_in_parts_and_aborts_on_failure(moto_aws: None) -> None:
    import boto3

    from claros.evidence.export import S3Exports

    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="bucket-b")
    exports = S3Exports(s3, "bucket-b", part_bytes=0)  # the smallest part S3 takes: 5 MiB
    lines = [b"x" * 1023 + b"\n"] * 11_000  # about 11 MB: three parts
    done = exports.upload("k", "n.jsonl", lines)
    assert done["bytes"] == 1024 * 11_000
    assert s3.get_object(Bucket="bucket-b", Key="exports/k")["Body"].read() == b"".join(lines)

    def failing() -> Any:
        yield b"a\n" * 3_000_000
        raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError):
        exports.upload("broken", "n.jsonl", failing())
    assert s3.list_multipart_uploads(Bucket="bucket-b").get("Uploads", []) == []
    assert "Contents" not in s3.list_objects_v2(Bucket="bucket-b", Prefix="exports/broken")


def test_export_of_a_pruned_log_verifies(
    http: httpx.Client, keys: Keys, services: Services, tmp_path: Path
) -> None:
    from claros.checkpoints import entry_at
    from claros.evidence.retention import prune_through

    _checks(http, keys.agent, 7)
    fifth = entry_at(services.store, WORKSPACE, 5)
    assert fifth is not None
    done = prune_through(services, fifth, 200)  # as a prune does (its own entry: seq 8)
    assert done["entries_deleted"] == 5
    got = http.get("/api/evidence/export", headers=bearer(keys.admin))
    header = _lines(got.content)[0]
    assert (header["first_seq"], header["pruned_through"], header["entries"]) == (6, 5, 3)
    (tmp_path / "p.jsonl").write_bytes(got.content)
    assert verify(["--export", str(tmp_path / "p.jsonl")]) == 0


def test_an_export_cut_short_fails(http: httpx.Client, keys: Keys, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    _checks(http, keys.agent, 3)
    data = http.get("/api/evidence/export", headers=bearer(keys.admin)).content
    cut = b"".join(data.splitlines(keepends=True)[:-2])
    (tmp_path / "cut.jsonl").write_bytes(cut)
    assert verify(["--export", str(tmp_path / "cut.jsonl")]) == 1
    out = capsys.readouterr().out
    assert "tail cut off: signed checkpoint at seq 3 but the log ends at seq 2" in out
    assert "the export is not signed" in out
