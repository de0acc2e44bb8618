"""GET /api/evidence/stream, and the SIEM recipes of the product page run unchanged on its
output: the fetch with curl, grep and awk, then each tool's jq command (the real
/usr/bin/jq), its result posted by the page's curl to a stand-in intake that checks what
Splunk HEC, Datadog's Logs API v2 and Elastic's _bulk expect."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from claros.local import LocalServer
from claros.store.base import NewRecord
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "evidence-format.md"

# The commands as evidence.txt writes them (a test below finds each in the docs, verbatim).
FETCH = [
    "SEQ=$(cat .claros-seq 2>/dev/null || echo 0)",
    'curl -sD headers.txt -H "Authorization: Bearer $CLAROS_ADMIN_KEY" '
    '"$CLAROS/api/evidence/stream?since=$SEQ" > batch.jsonl',
    "grep -i '^x-claros-next' headers.txt | awk '{print $2}' | tr -d '\\r' > .claros-seq",
]
SPLUNK = (
    "jq -c '{event: ., sourcetype: \"claros:ledger\"}' batch.jsonl | curl -s "
    'https://splunk.example.com:8088/services/collector/event -H "Authorization: Splunk '
    '$HEC_TOKEN" --data-binary @-'
)
DATADOG = (
    'jq -s \'map(. + {ddsource: "claros", service: "claros"})\' batch.jsonl | curl -s '
    'https://http-intake.logs.datadoghq.com/api/v2/logs -H "DD-API-KEY: $DD_API_KEY" -H '
    '"Content-Type: application/json" --data-binary @-'
)
ELASTIC = (
    'jq -c \'{index: {_index: "claros", _id: "\\(.workspace)-\\(.seq)"}}, .\' batch.jsonl | '
    'curl -s https://elastic.example.com:9200/_bulk -H "Authorization: ApiKey $ES_KEY" -H '
    '"Content-Type: application/x-ndjson" --data-binary @-'
)
INTAKES = {
    "splunk": "https://splunk.example.com:8088",
    "datadog": "https://http-intake.logs.datadoghq.com",
    "elastic": "https://elastic.example.com:9200",
}


def _tools() -> None:
    missing = [tool for tool in ("jq", "curl", "bash") if shutil.which(tool) is None]
    assert not missing, f"install {', '.join(missing)} (Debian packages of the same names)"


def _lines(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in response.text.splitlines()]


def test_stream_pages_and_resumes(http: httpx.Client, keys: Keys) -> None:
    for i in range(6):
        body = check_body(agent={"name": "t", "call_id": str(i)})
        assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).status_code == 200
    admin = bearer(keys.admin)
    first = http.get("/api/evidence/stream?since=0&limit=4", headers=admin)
    assert first.status_code == 200 and first.headers["content-type"] == "application/x-ndjson"
    lines = _lines(first)
    assert [e["seq"] for e in lines] == [1, 2, 3, 4] and first.headers["x-claros-next"] == "4"
    assert all(e["event"]["check_id"] == e["ref_id"] for e in lines)
    assert list(lines[0]) == ["workspace", "seq", "kind", "ref_id", "ts", "payload_sha256",
                              "prev_hash", "hash", "event"]  # fmt: skip
    rest = http.get("/api/evidence/stream?since=4", headers=admin)
    assert [e["seq"] for e in _lines(rest)] == [5, 6] and rest.headers["x-claros-next"] == "6"
    done = http.get("/api/evidence/stream?since=6", headers=admin)
    assert done.text == "" and done.headers["x-claros-next"] == "6"
    for query in ("since=-1", "limit=0", "limit=10001", "since=x"):
        assert http.get(f"/api/evidence/stream?{query}", headers=admin).status_code == 400


def test_a_page_stops_near_its_byte_limit(
    http: httpx.Client, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Lambda answers at most 6 MB: a page stops early, and x-claros-next says where."""
    import claros.api.evidence as evidence

    for i in range(5):
        body = check_body(agent={"name": "t", "call_id": str(i)})
        assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).status_code == 200
    full = http.get("/api/evidence/stream", headers=bearer(keys.admin))
    sizes = [len(line) + 1 for line in full.content.splitlines()]
    monkeypatch.setattr(evidence, "MAX_PAGE_BYTES", sizes[0] + sizes[1] + sizes[2] // 2)
    page = http.get("/api/evidence/stream", headers=bearer(keys.admin))
    assert [e["seq"] for e in _lines(page)] == [1, 2] and page.headers["x-claros-next"] == "2"
    monkeypatch.setattr(evidence, "MAX_PAGE_BYTES", 10)  # one line always goes out
    page = http.get("/api/evidence/stream?since=2", headers=bearer(keys.admin))
    assert [e["seq"] for e in _lines(page)] == [3] and page.headers["x-claros-next"] == "3"


class _Intake(BaseHTTPRequestHandler):
    """Records what each intake receives."""

    received: list[tuple[str, dict[str, str], bytes]]

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def intake() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    received: list[tuple[str, dict[str, str], bytes]] = []
    handler = type("Intake", (_Intake,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def test_the_recipes_are_the_documented_ones() -> None:
    doc = DOC.read_text(encoding="utf-8")
    for command in [*FETCH, SPLUNK, DATADOG, ELASTIC]:
        assert command in doc, command


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_siem_pipelines_on_the_stream(
    server: LocalServer, services: Services, keys: Keys, tmp_path: Path,
    intake: tuple[str, list[tuple[str, dict[str, str], bytes]]],
) -> None:  # fmt: skip
    _tools()
    # 1,203 entries: more than one page (the stream's default page is 1,000 entries, as
    # many as Datadog takes in one request), with text that needs escaping.
    for n in range(0, 1203, 10):
        services.store.append_many(WORKSPACE, [
            NewRecord("check", f"chk_{i:05d}", {"check_id": f"chk_{i:05d}", "result": "allow",
                      "arguments": {"note": 'a "quoted" \\ café\nline', "amount": i / 4}})
            for i in range(n, min(n + 10, 1203))
        ])  # fmt: skip
    url, received = intake
    env = {"CLAROS": server.url, "CLAROS_ADMIN_KEY": keys.admin, "HEC_TOKEN": "hec-1",
           "DD_API_KEY": "dd-1", "ES_KEY": "es-1"}  # fmt: skip
    fetch = "\n".join(FETCH)
    _bash(fetch, tmp_path, env)
    first = (tmp_path / "batch.jsonl").read_bytes().splitlines()
    assert len(first) == 1000 and (tmp_path / ".claros-seq").read_text() == "1000\n"
    sent = [json.loads(line) for line in first]
    assert [e["seq"] for e in sent] == list(range(1, 1001))

    for name, page in (("splunk", SPLUNK), ("datadog", DATADOG), ("elastic", ELASTIC)):
        # Only the intake's address changes (to the stand-in); the jq half is the page's.
        command = page.replace(INTAKES[name], url)
        assert command.split(" | curl ", 1)[0] == page.split(" | curl ", 1)[0]
        _bash(command, tmp_path, env)
    by_path = {path: (headers, body) for path, headers, body in received}

    headers, body = by_path["/services/collector/event"]
    assert headers["authorization"] == "Splunk hec-1"
    events = [json.loads(line) for line in body.splitlines()]
    assert events == [{"event": e, "sourcetype": "claros:ledger"} for e in sent]

    headers, body = by_path["/api/v2/logs"]
    assert headers["dd-api-key"] == "dd-1" and headers["content-type"] == "application/json"
    logs = json.loads(body)
    assert isinstance(logs, list) and len(logs) == 1000  # Datadog takes up to 1,000
    assert logs == [{**e, "ddsource": "claros", "service": "claros"} for e in sent]

    headers, body = by_path["/_bulk"]
    assert headers["content-type"] == "application/x-ndjson"
    assert headers["authorization"] == "ApiKey es-1" and body.endswith(b"\n")  # _bulk needs it
    bulk = [json.loads(line) for line in body.splitlines()]
    assert bulk[0::2] == [{"index": {"_index": "claros", "_id": f"acme-{e['seq']}"}} for e in sent]
    assert bulk[1::2] == sent
    # What the SIEM keeps can be re-checked against the chain: seq, hash, prev_hash.
    assert all(b["prev_hash"] == a["hash"] for a, b in zip(sent, sent[1:], strict=False))

    _bash(fetch, tmp_path, env)  # the next run resumes where the last one stopped
    second = [json.loads(line) for line in (tmp_path / "batch.jsonl").read_bytes().splitlines()]
    assert [e["seq"] for e in second] == list(range(1001, 1204))
    assert (tmp_path / ".claros-seq").read_text() == "1203\n"
    assert second[0]["prev_hash"] == sent[-1]["hash"]
    _bash(fetch, tmp_path, env)
    assert (tmp_path / "batch.jsonl").read_bytes() == b""
    assert (tmp_path / ".claros-seq").read_text() == "1203\n"
