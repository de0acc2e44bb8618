"""A form's one-use token stops a second send (a reload) from acting twice. When the action
fails, the form is given back: sending it again (after going back and fixing the input, or
after the store recovers) does the action, instead of "this form was already sent" for an
action that never happened."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from claros.config import Settings
from claros.signing import FileSigner
from claros.store.base import StorageUnavailableError, Store
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body, put_rule
from tests.web.conftest import Browserish

_ONCE = r'action="{action}".*?name="once" value="([^"]+)"'


class _FailingStore:
    """The store, failing the next append when told to (a full disk, for one moment)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.fail_next_append = False

    def append_many(self, *args: Any, **kwargs: Any) -> Any:
        if self.fail_next_append:
            self.fail_next_append = False
            raise StorageUnavailableError("disk full (injected); nothing was written")
        return self.store.append_many(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture
def failing(store: Store) -> _FailingStore:
    return _FailingStore(store)


@pytest.fixture
def services(failing: _FailingStore, settings: Settings) -> Services:
    """The web tests' services (their server, keys and sign-in), on the failing store."""
    return Services(settings, failing, FileSigner(settings.data_dir))  # type: ignore[arg-type]


def _once(page: str, action: str) -> str:
    [once] = re.findall(_ONCE.format(action=re.escape(action)), page, flags=re.S)
    return str(once)


def test_an_answer_that_failed_for_a_moment_can_be_sent_again(
    http: httpx.Client,
    sign_in: Callable[[str], Browserish],
    keys: Keys,
    person_key: str,
    failing: _FailingStore,
    services: Services,
) -> None:
    put_rule(http, keys.admin)
    asked = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent)).json()
    assert asked["result"] == "ask", asked
    ask_id = asked["ask"]["ask_id"]
    dana = sign_in(person_key)
    action = f"/app/asks/{ask_id}/answer"
    form = {"decision": "approve", "note": "", "once": _once(dana.get("/app").text, action)}
    failing.fail_next_append = True
    failed = dana.post_form(action, form)
    assert failed.status_code == 503 and "disk full" in failed.text
    # The person goes back and sends the same form: the answer lands now.
    again = dana.post_form(action, form)
    assert again.status_code == 303, again.text
    assert again.headers["location"] == f"/app?answered={ask_id}&decision=approved#asks"
    # And the form is spent once it has acted: a reload does not answer twice.
    reload = dana.post_form(action, form)
    assert reload.status_code == 409 and "already sent" in reload.text
    answers = [e for e in services.store.entries(WORKSPACE) if e.kind == "approval"]
    assert len(answers) == 1


def test_a_refused_member_form_can_be_fixed_and_sent_again(
    sign_in: Callable[[str], Browserish], keys: Keys, services: Services
) -> None:
    admin = sign_in(keys.admin)
    once = _once(admin.get("/app/keys").text, "/app/members")
    typo = admin.post_form("/app/members", {"email": "kim.example.test", "once": once})
    assert typo.status_code == 400 and "not an email address" in typo.text
    fixed = admin.post_form("/app/members", {"email": "kim@example.test", "once": once})
    assert fixed.status_code == 201, fixed.text
    assert "Added kim@example.test as a member." in fixed.text
    reload = admin.post_form("/app/members", {"email": "kim@example.test", "once": once})
    assert reload.status_code == 409 and "already sent" in reload.text
