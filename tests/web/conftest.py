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


@dataclass
class Browserish:
    """An httpx client holding a session cookie, posting forms as a browser does."""

    client: httpx.Client
    origin: str
    csrf: str

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        return self.client.get(path, headers=HTML, **kwargs)  # type: ignore[arg-type]

    def post_form(
        self, path: str, data: dict[str, str], *, csrf: str | None = None, origin: str | None = None
    ) -> httpx.Response:
        fields = dict(data)
        token = self.csrf if csrf is None else csrf
        if token:
            fields["csrf"] = token
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
        assert answer.status_code == 303, answer.text
        page = client.get("/app", headers=HTML)
        assert page.status_code == 200, page.text
        found = _CSRF.search(page.text)
        assert found, "no CSRF token on the page"
        return Browserish(client, server.url, found.group(1))

    yield make
    for client in clients:
        client.close()
