"""The agent writes arguments whose text shows one thing and says another.

Unicode has characters that are drawn as nothing (zero-width spaces and joiners, word
joiners, the "tag" characters that can spell a whole hidden sentence) and characters that
reorder what follows (bidirectional overrides and isolates: "Trojan Source"). An agent
writing ``refund_to: "DE89 3704 \\u202e4321\\u202c 0044"`` gets an approver's page that
reads DE89 3704 1234 0044 while the call carries 4321 (and the approval binds the call's
exact bytes). The pages put every argument on the page as typed, so the approver had no way
to see what she was approving. Now every such character in an argument (name or value),
on the ask cards and in the JSON of a check's page, is shown as a marked ``\\uXXXX``
escape named in its title, and never reaches the page raw.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import httpx
import pytest

from tests.api.conftest import Keys, bearer, check_body, put_rule
from tests.web.conftest import Browserish, sign_in  # noqa: F401 - the fixture

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

OLGA = "olga@acme.test"
SAM = "sam@acme.test"
HIDDEN = "\u202e\u200b\u2066\U000e0041\u00ad\ufeff"
IBAN = "DE89 3704 \u202e4321\u202c 0044"


def _invisible(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in ("Cf", "Zl", "Zp")]


def test_the_approver_sees_the_characters_that_reorder_or_hide_text(
    http: httpx.Client,
    keys: Keys,
    sign_in: Callable[[str], Browserish],  # noqa: F811
) -> None:
    made = http.post("/api/members", json={"email": OLGA}, headers=bearer(keys.admin))
    olga = str(made.json()["key"])
    sam = str(http.post("/api/members", json={"email": SAM}, headers=bearer(keys.admin))
              .json()["key"])  # fmt: skip
    agent = str(http.post("/app/keys", json={}, headers=bearer(sam)).json()["key"])
    put_rule(http, keys.admin, owners=[OLGA])
    arguments = {"amount": 80, "order_total": 100, "refund_to": IBAN,
                 "note" + HIDDEN: {"nested": "ok" + HIDDEN}}  # fmt: skip
    asked = http.post("/v1/check", json=check_body(arguments=arguments), headers=bearer(agent))
    assert asked.json()["result"] == "ask", asked.text

    browser = sign_in(olga)
    for path in ("/app/asks", "/app", f"/app/checks/{asked.json()['check_id']}"):
        page = browser.get(path)
        assert page.status_code == 200, path
        raw = _invisible(page.text)
        assert raw == [], f"{path}: {[f'U+{ord(c):04X}' for c in raw]} reach the page raw"
        assert "\\u202e" in page.text and "RIGHT-TO-LEFT OVERRIDE" in page.text, path
        assert "\\U000e0041" in page.text or "\\udb40\\udc41" in page.text, path
