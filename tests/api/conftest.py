"""A real local server on a free port, over either store, with one key of each kind."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from claros.auth import MAX_AUDIT_DAYS, create_key
from claros.config import Settings
from claros.local import LocalServer
from claros.signing import FileSigner
from claros.store.base import Store
from claros.wiring import Services

WORKSPACE = "acme"
ADMIN = "admin@acme.test"
PERSON = "dana@acme.test"


@dataclass
class Keys:
    admin: str
    agent: str
    service: str
    audit: str
    person: str  # PERSON's own sign-in key (the agent key above is PERSON's agent's)
    other_workspace_admin: str

    def of(self, kind: str) -> str:
        return str(getattr(self, kind))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", checkpoint_every=5, checkpoint_max_age_s=3600)


@pytest.fixture
def services(store: Store, settings: Settings) -> Services:
    return Services(settings, store, FileSigner(settings.data_dir))


@pytest.fixture
def keys(services: Services) -> Keys:
    store = services.store
    return Keys(
        admin=create_key(store, WORKSPACE, "admin", person=ADMIN),
        agent=create_key(store, WORKSPACE, "agent", person=PERSON),
        service=create_key(store, WORKSPACE, "service"),
        # Audit keys expire (90 days by default); tests that move the clock a year on
        # (retention, prunes) still verify online with this one.
        audit=create_key(store, WORKSPACE, "audit", made_by=ADMIN, expires_days=MAX_AUDIT_DAYS),
        person=create_key(store, WORKSPACE, "person", person=PERSON),
        other_workspace_admin=create_key(store, "other", "admin", person="boss@other.test"),
    )


@pytest.fixture
def server(services: Services) -> Iterator[LocalServer]:
    srv = LocalServer(services, "127.0.0.1", 0).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def http(server: LocalServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def check_body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "app": "shop",
        "tool": "refund_create",
        "arguments": {"order": "1187", "amount": "$120.00"},
        "agent": {"name": "claude-code", "session": "s1", "call_id": "c1",
                  "via": {"guard": "claros-guard", "version": "0.1.0"}},
    }  # fmt: skip
    body.update(overrides)
    return body


def rule(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "id": "refund-half",
        "workflow_id": "refunds",
        "app": "shop",
        "tools": ["refund_create"],
        "title": "Refunds over half the order total need the owner's approval",
        "when": "amount > order_total / 2",
        "response": "ask",
        "owners": [PERSON],
        "message": "Refund is over half of the order",
    }
    body.update(overrides)
    return body


def put_rule(http: httpx.Client, key: str, made_by: str = "manual", **overrides: object) -> dict:
    spec = rule(**overrides)
    response = http.put(
        f"/api/rules/{spec['id']}", json={"rule": spec, "made_by": made_by}, headers=bearer(key)
    )
    assert response.status_code == 200, response.text
    return dict(response.json())
