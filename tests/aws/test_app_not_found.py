"""In AWS an /app path no route names reaches the admin function through template.yaml's
``GET /app/{proxy+}`` catch-all, which answers with the web app's error page (HTML, in the
layout), not API Gateway's JSON 404; ``GET /app/signout`` gets the page that says how to
sign out. The handler is the Lambda's own, over the moto stack (tests/stack.py)."""

from __future__ import annotations

from typing import Any

import pytest

from claros.store.base import Store
from claros.web.sessions import SECURE_COOKIE, open_session
from tests.events import load_event
from tests.stack import Functions, Keys, header

pytestmark = [
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..ApiGatewayV2..:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..CloudWatch..Alarm:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..SQS..QueuePolicy:UserWarning"),
]


def _browser_get(proxy: str, cookie: str | None = None) -> dict[str, Any]:
    """The event API Gateway sends the catch-all for a browser's GET of /app/<proxy>."""
    event = load_event("web-app-not-found")
    event["pathParameters"] = {"proxy": proxy}
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/app/{proxy}"
    headers = event["headers"]
    headers.pop("authorization")
    headers["accept"] = "text/html,application/xhtml+xml"
    if cookie:
        headers["cookie"] = cookie
    return event


def test_an_unknown_app_path_gets_the_apps_404_page(functions: Functions) -> None:
    response = functions.invoke("web", _browser_get("no/such/page"))
    assert response["statusCode"] == 404
    assert header(response, "content-type").startswith("text/html")
    body = str(response["body"])
    assert "<!doctype html>" in body.lower() and 'href="/app/static/claros.css' in body
    assert "There is no such page." in body
    assert '"not_found"' not in body


def test_signed_in_the_404_page_keeps_the_tabs(
    functions: Functions, keys: Keys, stack_store: Store
) -> None:
    session_id, _ = open_session(stack_store, keys.admin)
    cookie = _session_cookie(session_id)
    response = functions.invoke("web", _browser_get("activty", cookie))
    assert response["statusCode"] == 404
    body = str(response["body"])
    assert "There is no such page." in body and 'href="/app/activity"' in body


def test_sign_out_by_get_gets_the_page_that_says_how(functions: Functions) -> None:
    response = functions.invoke("web", _browser_get("signout"))
    assert response["statusCode"] == 405 and header(response, "allow") == "POST"
    assert header(response, "content-type").startswith("text/html")
    assert "Sign out with the Sign out button" in str(response["body"])


def test_a_script_asking_json_gets_json_that_names_the_page(functions: Functions) -> None:
    status, body = functions.http("web", load_event("web-app-not-found"))
    assert status == 404 and body["error"] == "not_found"
    assert body["message"].startswith("no page /app/no-such-page")


def _session_cookie(session_id: str) -> str:
    # The event's host is API Gateway's, not localhost: the __Host- cookie.
    return f"{SECURE_COOKIE}={session_id}"
