"""The Rules page's forms: edit and close a rule, edit and close a mapping, over a real
local server with a signed-in admin (httpx posting forms as a browser does)."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape

import httpx
import yaml

from claros.wiring import Services
from tests.web.conftest import ADMIN, WORKSPACE, Browserish, Keys, bearer, put_rule

_ONCE = re.compile(
    r'action="([^"]+)" class="[^"]*">'
    r'(?:<input type="hidden" name="csrf" value="[^"]+">)?'
    r'<input type="hidden" name="once" value="([^"]+)">'
)


def _once(page: str, action: str) -> str:
    """The one-use token of the form posting to ``action`` on ``page``."""
    for found in _ONCE.finditer(page):
        if found.group(1) == action:
            return found.group(2)
    raise AssertionError(f"no form for {action} on the page")


def _text(rule_title: str = "Refunds over half need a second look") -> str:
    return yaml.safe_dump(
        {
            "id": "refund-half",
            "workflow_id": "refunds",
            "app": "shop",
            "tools": ["refund_create"],
            "title": rule_title,
            "when": "amount > order_total / 2",
            "response": "stop",
        },
        sort_keys=False,
    )


EDIT = "/app/rules/refund-half/edit"
CLOSE = "/app/rules/refund-half/close"


def test_an_admin_edits_a_rule_from_the_page(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    put_rule(http, keys.admin)
    admin = sign_in(keys.admin)
    page = admin.get("/app/rules").text
    # The edit form holds the rule as YAML, ready to change.
    assert "Edit rule" in page and "workflow_id: refunds" in page
    sent = admin.post_form(EDIT, {"text": _text(), "once": _once(page, EDIT)})
    assert sent.status_code == 303, sent.text
    assert sent.headers["location"].endswith("#rule-refund-half")
    after = admin.get(sent.headers["location"]).text
    assert "Saved rule refund-half as a new version." in after
    saved = http.get("/api/rules/refund-half", headers=bearer(keys.admin)).json()
    assert (
        saved["version"] == 2 and saved["rule"]["title"] == "Refunds over half need a second look"
    )
    # The same domain code as PUT /api/rules: made manual, confirmed by the signed-in admin,
    # the old version closed as replaced.
    assert saved["confirm"]["made_by"] == "manual" and saved["confirm"]["confirmed_by"] == ADMIN
    assert saved["versions"][0]["closed"]["reason"] == "replaced by an edit"
    # Both versions on the page, each with its text.
    assert "v2 as written" in after and "v1 as written" in after
    # The same text again: no new version, and the page says so.
    again = admin.post_form(EDIT, {"text": _text(), "once": _once(after, EDIT)})
    assert "is already this text" in admin.get(again.headers["location"]).text
    assert http.get("/api/rules/refund-half", headers=bearer(keys.admin)).json()["version"] == 2


def test_a_rule_edited_as_json_too(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    put_rule(http, keys.admin)
    admin = sign_in(keys.admin)
    page = admin.get("/app/rules").text
    text = '{"workflow_id": "refunds", "app": "shop", "tools": ["refund_create"], ' \
        '"title": "JSON edit", "response": "nudge"}'  # fmt: skip
    sent = admin.post_form(EDIT, {"text": text, "once": _once(page, EDIT)})
    assert sent.status_code == 303, sent.text
    # The id is the form's when the text leaves it out.
    assert (
        http.get("/api/rules/refund-half", headers=bearer(keys.admin)).json()["rule"]["title"]
        == "JSON edit"
    )


def test_bad_rule_text_gives_the_form_back_with_a_plain_message(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    put_rule(http, keys.admin)
    admin = sign_in(keys.admin)
    cases = {
        "title: [unclosed": "The rule is not valid YAML or JSON near line",
        "- just\n- a list": "The rule must be a set of fields",
        "": "The rule is empty",
        _text() + "colour: red\n": "Colour is not a field this accepts",
        _text().replace("response: stop", "response: maybe"): "Response must be one of",
        _text().replace("id: refund-half", "id: another"): "The rule's id is 'another'",
        _text().replace(
            "title: Refunds over half need a second look", "title: ''"
        ): "Title must not be empty",
    }
    for text, message in cases.items():
        page = admin.get("/app/rules").text
        got = admin.post_form(EDIT, {"text": text, "once": _once(page, EDIT)})
        assert got.status_code == 400, (text, got.text[:300])
        assert message in unescape(got.text), (text, message)
        # Never the validation library's wording.
        for pydantic in ("Input should be", "Extra inputs are not permitted", "String should"):
            assert pydantic not in got.text
        # The form is open again, holding what was typed (escaped).
        assert '<details class="edit" open>' in got.text
        if text:
            assert text.splitlines()[0].replace("'", "&#39;") in got.text
    # Nothing was saved.
    assert http.get("/api/rules/refund-half", headers=bearer(keys.admin)).json()["version"] == 1


def test_editing_an_unknown_rule_says_so(sign_in: Callable[[str], Browserish], keys: Keys) -> None:
    admin = sign_in(keys.admin)
    got = admin.post_form("/app/rules/nope/edit", {"text": "title: x"})
    assert got.status_code == 404 and "No rule 'nope'." in unescape(got.text)
    assert "<h1>Rules</h1>" in got.text


def test_a_rule_form_needs_its_csrf_token_and_works_once(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    put_rule(http, keys.admin)
    admin = sign_in(keys.admin)
    page = admin.get("/app/rules").text
    once = _once(page, EDIT)
    forged = admin.post_form(EDIT, {"text": _text(), "once": once}, csrf="")
    assert forged.status_code == 403
    assert admin.post_form(EDIT, {"text": _text(), "once": once}).status_code == 303
    twice = admin.post_form(EDIT, {"text": _text("Another title"), "once": once})
    assert twice.status_code == 409 and "This form was already sent" in twice.text
    assert http.get("/api/rules/refund-half", headers=bearer(keys.admin)).json()["version"] == 2


def test_a_member_cannot_edit_or_close_rules_in_the_web_app(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys, person_key: str
) -> None:
    put_rule(http, keys.admin)
    member = sign_in(person_key)
    assert member.post_form(EDIT, {"text": _text()}).status_code == 403
    assert member.post_form(CLOSE, {"reason": "no"}).status_code == 403
    assert (
        http.get("/api/rules/refund-half", headers=bearer(keys.admin)).json()["status"] == "active"
    )


def test_an_admin_closes_a_rule(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    put_rule(http, keys.admin)
    admin = sign_in(keys.admin)
    page = admin.get("/app/rules").text
    sent = admin.post_form(
        CLOSE, {"reason": "Refunds move to the new desk", "once": _once(page, CLOSE)}
    )
    assert sent.status_code == 303, sent.text
    after = admin.get(sent.headers["location"]).text
    assert "Closed rule refund-half" in after and "Refunds move to the new desk" in after
    # Closed: no close form any more.
    assert f'action="{CLOSE}"' not in after
    state = http.get("/api/rules/refund-half", headers=bearer(keys.admin)).json()
    assert state["status"] == "closed"
    assert state["versions"][0]["closed"]["closed_by"] == ADMIN
    # A second close (a form kept open in another tab) is refused with a plain message.
    stale = admin.post_form(CLOSE, {"reason": "", "once": _once(page, EDIT)})
    assert stale.status_code == 409 and "Rule 'refund-half' is closed already." in unescape(
        stale.text
    )
    too_long = admin.post_form(CLOSE, {"reason": "x" * 2001})
    assert too_long.status_code == 400 and "The reason is too long" in too_long.text


# --- mappings ---------------------------------------------------------------------------
MAPPING = {
    "app": "shop",
    "tool": "refund_create",
    "fetch": {"tool": "order_read", "arguments": {"id": "$order"}, "into": "order"},
}
MAP_EDIT = "/app/mappings/shop/refund_create/edit"
MAP_CLOSE = "/app/mappings/shop/refund_create/close"


def _mapped(http: httpx.Client, keys: Keys) -> None:
    tools = [{"name": "order_read", "read": True}, {"name": "refund_create", "read": False},
             {"name": "order_list", "read": True}]  # fmt: skip
    http.post(
        "/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(keys.agent)
    ).raise_for_status()
    saved = http.put(
        "/api/mappings/shop/refund_create", json={"mapping": MAPPING}, headers=bearer(keys.admin)
    )
    assert saved.status_code == 200, saved.text


def test_an_admin_edits_and_closes_a_mapping(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys, services: Services
) -> None:
    _mapped(http, keys)
    admin = sign_in(keys.admin)
    page = admin.get("/app/rules").text
    assert "Edit mapping" in page and "order_read" in page and "v1 as written" in page
    edited = {**MAPPING, "fetch": {**MAPPING["fetch"], "into": "o"}}  # type: ignore[dict-item]
    sent = admin.post_form(
        MAP_EDIT, {"text": yaml.safe_dump(edited), "once": _once(page, MAP_EDIT)}
    )
    assert sent.status_code == 303, sent.text
    after = admin.get(sent.headers["location"]).text
    assert "Saved the mapping for shop refund_create as a new version." in after
    assert "v2 as written" in after and "replaced by v2" in after
    # A mapping naming a tool that is no read: the form back, saying why.
    bad = {**MAPPING, "fetch": {**MAPPING["fetch"], "tool": "refund_create"}}  # type: ignore[dict-item]
    refused = admin.post_form(
        MAP_EDIT, {"text": yaml.safe_dump(bad), "once": _once(after, MAP_EDIT)}
    )
    assert refused.status_code == 400 and "is not a read tool" in refused.text
    assert '<details class="edit" open>' in refused.text
    # Close it.
    closed = admin.post_form(MAP_CLOSE, {"reason": "Orders moved", "once": _once(after, MAP_CLOSE)})
    assert closed.status_code == 303, closed.text
    shown = admin.get(closed.headers["location"]).text
    assert "Closed the mapping for shop refund_create" in shown and "Orders moved" in shown
    state = http.get("/api/mappings/shop/refund_create", headers=bearer(keys.admin)).json()
    assert state["status"] == "closed" and state["closed"]["closed_by"] == ADMIN
    kinds = [e.kind for e, _ in services.store.entries_with_records(WORKSPACE, since=0)]
    assert kinds.count("mapping_version") == 2 and kinds.count("mapping_version_close") == 1
    # Saving it again opens it as the next version.
    page = admin.get("/app/rules").text
    reopened = admin.post_form(
        MAP_EDIT, {"text": yaml.safe_dump(MAPPING), "once": _once(page, MAP_EDIT)}
    )
    assert reopened.status_code == 303
    state = http.get("/api/mappings/shop/refund_create", headers=bearer(keys.admin)).json()
    assert (state["status"], state["version"]) == ("active", 3) and "closed" not in state


def test_mapping_forms_refuse_bad_input_plainly(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    _mapped(http, keys)
    admin = sign_in(keys.admin)
    page = admin.get("/app/rules").text
    other = yaml.safe_dump({**MAPPING, "tool": "order_list"})
    got = admin.post_form(MAP_EDIT, {"text": other, "once": _once(page, MAP_EDIT)})
    assert got.status_code == 400 and "this form edits shop refund_create" in got.text
    got = admin.post_form(
        MAP_EDIT, {"text": "fetch: {tool: order_read, bogus: 1}", "once": _once(page, MAP_EDIT)}
    )
    assert got.status_code == 400 and "Input should" not in got.text and "fetch" in got.text
    missing = admin.post_form("/app/mappings/shop/nope/close", {"reason": ""})
    assert missing.status_code == 404 and "No mapping for shop nope." in missing.text
