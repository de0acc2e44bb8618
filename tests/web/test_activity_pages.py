"""/app/activity and /app/checks/{id} over HTTP as a browser sends it (session cookie,
CSRF, one-use tokens): content, bad filters, 404, the override and answer forms."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from claros.auth import create_key
from claros.wiring import Services
from tests.api.seed import ADMIN, DANA, SAM, WS, Seeded, install_clock, seed_october, utc_ms
from tests.web.conftest import Browserish, sign_in  # noqa: F401 - the fixture

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)
ONCE = re.compile(r'name="once" value="([^"]+)"')


@pytest.fixture
def seeded(services: Services, monkeypatch: pytest.MonkeyPatch) -> Seeded:
    return seed_october(services, install_clock(monkeypatch))


@pytest.fixture
def admin(seeded: Seeded, sign_in: Callable[[str], Browserish]) -> Browserish:  # noqa: F811
    return sign_in(seeded.admin_key)


def test_activity_lists_every_check_with_counts(admin: Browserish, seeded: Seeded) -> None:
    page = admin.get("/app/activity")
    assert page.status_code == 200
    for check_id in seeded.checks.values():
        assert f'href="/app/checks/{check_id}"' in page.text
    assert "Every check of the workspace" in page.text
    assert re.search(r"badge-danger\">stop</span></a> <span class=\"n\">4<", page.text)
    assert "bank · payout" in page.text and SAM in page.text


def test_filters_live_in_the_url_and_come_back_in_the_form(
    admin: Browserish, seeded: Seeded
) -> None:
    page = admin.get("/app/activity", params={"app": "bank", "result": "stop", "tool": ""})
    assert page.status_code == 200
    assert seeded.checks["c8"] in page.text and seeded.checks["c9"] not in page.text
    assert 'name="app" value="bank"' in page.text
    assert '<option value="stop" selected>' in page.text


def test_a_bad_filter_gives_the_form_back_with_a_plain_message(admin: Browserish) -> None:
    page = admin.get("/app/activity", params={"result": "maybe", "app": "<b>shop</b>"})
    assert page.status_code == 400
    assert "result must be one of allow, nudge, ask, stop, not &#39;maybe&#39;" in page.text
    assert 'value="&lt;b&gt;shop&lt;/b&gt;"' in page.text  # escaped, never markup
    assert "<b>shop</b>" not in page.text
    bad_time = admin.get("/app/activity", params={"since": "last tuesday"})
    assert bad_time.status_code == 400 and "since must be a date" in bad_time.text
    bad_cursor = admin.get("/app/activity", params={"cursor": "zzz"})
    assert (
        bad_cursor.status_code == 400
        and "cursor is not one this server gave out" in bad_cursor.text
    )


def test_pages_follow_the_cursor(admin: Browserish, seeded: Seeded) -> None:
    first = admin.get("/app/activity", params={"limit": "5"})
    link = re.search(r'href="(/app/activity\?[^"]*cursor=[^"]+)" rel="next"', first.text)
    assert link, "no link to older checks"
    second = admin.get(link.group(1).replace("&amp;", "&"))
    assert second.status_code == 200
    assert "Back to the newest" in second.text
    assert seeded.checks["c1"] not in first.text


def test_the_check_page_shows_the_decision(admin: Browserish, seeded: Seeded) -> None:
    page = admin.get(f"/app/checks/{seeded.checks['c4']}")
    assert page.status_code == 200
    text = page.text
    for expected in (
        "shop · refund_create", "refund-half", "amount &gt; 100", "claros-guard", "agent_key",
        SAM, "denied", DANA, "owner", "Ledger entry", "verified",
        "/app/rules?rule=refund-half&amp;version=1#rule-refund-half", "300 EUR",
    ):  # fmt: skip
        assert expected in text, expected


def test_a_check_that_does_not_exist_is_a_404_page(admin: Browserish) -> None:
    page = admin.get("/app/checks/chk_nothing")
    assert page.status_code == 404
    assert "no check &#39;chk_nothing&#39;" in page.text and "<h1>" in page.text


def _once(page: str) -> str:
    found = ONCE.search(page)
    assert found
    return found.group(1)


def test_file_an_override_from_the_check_page(
    services: Services,
    seeded: Seeded,
    sign_in: Callable[[str], Browserish],  # noqa: F811
) -> None:
    erin = sign_in(create_key(services.store, WS, "person", person="erin@acme.test"))
    check_id = seeded.checks["c7"]
    page = erin.get(f"/app/checks/{check_id}")
    assert page.status_code == 404  # a member sees only their own checks: not Sam's
    admin = sign_in(seeded.admin_key)
    page = admin.get(f"/app/checks/{check_id}")
    once = _once(page.text)
    form = {"verdict": "wrong_stop", "note": "<i>known</i> customer", "once": once}
    # Without the CSRF token: refused, nothing filed.
    assert admin.post_form(f"/app/checks/{check_id}/override", form, csrf="").status_code == 403
    done = admin.post_form(f"/app/checks/{check_id}/override", form)
    assert done.status_code == 303
    assert done.headers["location"] == f"/app/checks/{check_id}?done=override#overrides"
    shown = admin.get(done.headers["location"]).text
    assert "Your override was filed" in shown and "&lt;i&gt;known&lt;/i&gt; customer" in shown
    # The same form again (a reload): refused, with the reason on the page.
    again = admin.post_form(f"/app/checks/{check_id}/override", form)
    assert again.status_code == 409 and "this form was already sent" in again.text
    docs = services.store.query_docs(WS, f"overrides:{check_id}")
    assert [d.value["by"] for d in docs] == [ADMIN]


def test_override_errors_come_back_on_the_page(admin: Browserish, seeded: Seeded) -> None:
    check_id = seeded.checks["c1"]  # an allow
    page = admin.get(f"/app/checks/{check_id}")
    missed = admin.post_form(
        f"/app/checks/{check_id}/override", {"verdict": "missed", "once": _once(page.text)}
    )
    assert missed.status_code == 400
    assert "A missed report names the rule that should have fired." in missed.text
    wrong = admin.post_form(
        f"/app/checks/{check_id}/override", {"verdict": "wrong_stop", "once": _once(missed.text)}
    )
    assert wrong.status_code == 400 and "wrong_stop is a verdict on a stop or ask" in wrong.text


def test_answer_the_ask_from_the_check_page(
    services: Services, seeded: Seeded, sign_in: Callable[[str], Browserish],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from claros.auth import authenticate
    from claros.checks import AgentInfo, CheckRequest, record_check

    sam_agent = authenticate(
        services.store, "Bearer " + create_key(services.store, WS, "agent", person=SAM)
    )
    install_clock(monkeypatch, utc_ms(2026, 11, 6))  # after the seed
    asked = record_check(services, sam_agent, CheckRequest(
        app="shop", tool="refund_create", arguments={"amount": 250},
        agent=AgentInfo(name="claude-code")))  # fmt: skip
    assert asked["result"] == "ask"
    dana = sign_in(create_key(services.store, WS, "person", person=DANA))
    # Dana owns refund-half, but Sam's check is not hers in Activity; the admin answers.
    admin = sign_in(seeded.admin_key)
    page = admin.get(f"/app/checks/{asked['check_id']}")
    assert page.status_code == 200 and "Approve" in page.text
    done = admin.post_form(
        f"/app/checks/{asked['check_id']}/answer",
        {"decision": "approve", "note": "fine", "once": _once(page.text)},
    )
    assert done.status_code == 303, done.text
    shown = admin.get(done.headers["location"]).text
    assert "You approved the ask." in shown and "fine" in shown and "approved" in shown
    # The ask was routed to her (she owns refund-half), so its check is hers to see whole
    # (tests/security/test_agent_hides_an_argument_from_the_approver.py); Activity still
    # lists only her own and her agents' checks.
    assert dana.get(f"/app/checks/{asked['check_id']}").status_code == 200
    assert asked["check_id"] not in dana.get("/app/activity").text


def test_a_member_sees_their_own_activity_and_cannot_name_another(
    services: Services,
    seeded: Seeded,
    sign_in: Callable[[str], Browserish],  # noqa: F811
) -> None:
    sam = sign_in(create_key(services.store, WS, "person", person=SAM))
    mine = sam.get("/app/activity")
    assert mine.status_code == 200
    assert "Your checks and your agents&#39;, newest first." in mine.text
    assert 'id="f-person"' not in mine.text  # no one else to pick
    assert seeded.checks["c6"] in mine.text
    dana = sign_in(create_key(services.store, WS, "person", person=DANA))
    other = dana.get("/app/activity", params={"person": SAM})
    assert other.status_code == 403
    assert "members see only their own checks and their agents&#39;" in other.text
    assert seeded.checks["c6"] not in other.text
