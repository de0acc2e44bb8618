"""Web app fixtures: the API tests' real local server and keys, plus signed-in clients."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from claros.auth import create_key
from claros.local import LocalServer
from claros.wiring import Services
from tests.api.conftest import (  # noqa: F401 - fixtures used by the web tests
    ADMIN,
    PERSON,
    WORKSPACE,
    Keys,
    bearer,
    check_body,
    http,
    keys,
    put_rule,
    rule,
    server,
    services,
    settings,
)

HTML = {"accept": "text/html,application/xhtml+xml"}
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_HAND = re.compile(r'id="claros-hand" data-hand="([^"]+)" data-next="([^"]*)"')


def signed_in_hand(page: httpx.Response) -> tuple[str, str]:
    """The hand and the next path from a form sign-in's answer (the page claros.js reads)."""
    assert page.status_code == 200, page.text
    found = _HAND.search(page.text)
    assert found, f"no hand on the sign-in answer: {page.text[:500]}"
    return found.group(1), found.group(2)


@dataclass
class Browserish:
    """An httpx client holding a session cookie, posting forms as a browser does (with the
    hand claros.js adds to every POST form)."""

    client: httpx.Client
    origin: str
    csrf: str
    hand: str = ""

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        return self.client.get(path, headers=HTML, **kwargs)  # type: ignore[arg-type]

    def post_form(
        self,
        path: str,
        data: dict[str, str],
        *,
        csrf: str | None = None,
        origin: str | None = None,
        hand: str | None = None,
    ) -> httpx.Response:
        fields = dict(data)
        token = self.csrf if csrf is None else csrf
        if token:
            fields["csrf"] = token
        held = self.hand if hand is None else hand
        if held:
            fields["hand"] = held
        headers = {**HTML, "origin": self.origin if origin is None else origin}
        return self.client.post(path, data=fields, headers=headers)


@pytest.fixture
def person_key(services: Services) -> str:  # noqa: F811 - the imported fixture
    """PERSON's own sign-in key (the agent key is the one that asks)."""
    return create_key(services.store, WORKSPACE, "person", person=PERSON, label="browser")


@pytest.fixture
def sign_in(server: LocalServer) -> Iterator[Callable[[str], Browserish]]:  # noqa: F811
    clients: list[httpx.Client] = []

    def make(key: str) -> Browserish:
        client = httpx.Client(base_url=server.url, timeout=30, follow_redirects=False)
        clients.append(client)
        answer = client.post(
            "/app/signin", data={"key": key, "next": "/app"}, headers={**HTML, "origin": server.url}
        )
        hand, _ = signed_in_hand(answer)
        page = client.get("/app", headers=HTML)
        assert page.status_code == 200, page.text
        found = _CSRF.search(page.text)
        assert found, "no CSRF token on the page"
        return Browserish(client, server.url, found.group(1), hand)

    yield make
    for client in clients:
        client.close()
