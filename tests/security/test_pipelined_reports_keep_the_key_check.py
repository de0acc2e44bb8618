"""Attack: a guard started with a key that can approve (an admin's) sends its reports
anyway. The guard asks Claros what its key is before its first request and sends nothing
with such a key (claros_guard.keykind); its pipelined reports
(``HttpClarosApi.send_reports``, which do not go through the one-request path) must keep
that check. A fake Claros says the key is an admin's and records what reaches it."""

from __future__ import annotations

import json

import pytest

from claros_guard.api import outcome_report
from claros_guard.keykind import ApprovingKeyError, KindCheckedApi
from tests.guard.http_fakes import JSON, Answer, HttpFake, Request

pytestmark = pytest.mark.anyio


class AdminKeyClaros(HttpFake):
    def __init__(self) -> None:
        self.paths: list[str] = []
        super().__init__()

    def respond(self, request: Request) -> Answer:
        self.paths.append(request.path)
        if request.path == "/v1/me":
            return 200, JSON, json.dumps({"kind": "admin", "person": "boss@x.test"}).encode()
        return 201, JSON, b'{"check_id":"chk_x","status":"ok","seq":1}'


async def test_pipelined_reports_are_not_sent_with_an_approving_key() -> None:
    with AdminKeyClaros() as claros:
        api = KindCheckedApi(claros.url, "ck_" + "a" * 40)
        try:
            reports = [outcome_report(f"chk_{n}", "ok", None, "outcome") for n in range(3)]
            with pytest.raises(ApprovingKeyError, match="admin key"):
                await api.send_reports(reports)
        finally:
            await api.aclose()
    assert claros.paths == ["/v1/me"]  # no report reached Claros
