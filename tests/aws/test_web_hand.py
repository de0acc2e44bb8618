"""In AWS the web routes run in the admin function's Lambda, under an HTTPS host name: the
sign-in form answers the page that keeps the session's hand (``__Host-`` cookie), and a
form carried by the cookie acts only with the hand (claros.web.sessions). The handler is
the Lambda's own, over the moto stack (tests/stack.py)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import pytest

from claros.web.sessions import HAND_REFUSED, SECURE_COOKIE, csrf_token
from tests.events import load_event
from tests.stack import Functions, Keys, header

pytestmark = [
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..ApiGatewayV2..:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..CloudWatch..Alarm:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..SQS..QueuePolicy:UserWarning"),
]

_HAND = re.compile(r'id="claros-hand" data-hand="([^"]+)" data-next="([^"]*)"')


def _form(name: str, fields: dict[str, str], cookie: str | None = None) -> dict[str, Any]:
    """A browser's form post of ``name``'s route: no Authorization, this site's Origin."""
    event = load_event(name)
    headers = event["headers"]
    headers.pop("authorization", None)
    headers["accept"] = "text/html,application/xhtml+xml"
    headers["content-type"] = "application/x-www-form-urlencoded"
    headers["origin"] = f"https://{headers['host']}"
    if cookie:
        event["cookies"] = [cookie]  # API Gateway's payload 2.0 moves them here
    event["body"] = urlencode(fields)
    return event


def test_sign_in_keeps_the_hand_and_a_form_acts_only_with_it(
    functions: Functions, keys: Keys
) -> None:
    signed = functions.invoke(
        "web", _form("web-app-sign-in", {"key": keys.admin, "next": "/app/evidence"})
    )
    assert signed["statusCode"] == 200, signed
    assert header(signed, "content-type").startswith("text/html")
    found = _HAND.search(str(signed["body"]))
    assert found and found.group(2) == "/app/evidence"
    hand = found.group(1)
    [cookie] = [c for c in signed.get("cookies") or [] if c.startswith(f"{SECURE_COOKIE}=")]
    assert "Secure" in cookie and hand not in cookie
    session_id = cookie.split(";")[0].partition("=")[2]
    jar = f"{SECURE_COOKIE}={session_id}"
    acting = {"label": "Auditor", "csrf": csrf_token(session_id)}

    refused = functions.invoke("web", _form("web-app-audit-key", acting, jar))
    assert refused["statusCode"] == 403
    assert HAND_REFUSED in str(refused["body"])
    done = functions.invoke("web", _form("web-app-audit-key", {**acting, "hand": hand}, jar))
    assert done["statusCode"] == 201, done
