"""The pages, as HTML strings: layout, sign-in, Home, Rules, Evidence, device sign-in.

Everything dynamic goes through ``claros.web.html`` (escaped unless ``Safe``). Pages are
plain forms and links; ``/app/static/claros.js`` adds copy buttons and local times, and
keeps the session's hand (claros.web.sessions) that every POST form sends.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from claros.auth import Principal
from claros.web.headers import PAGE_HEADERS
from claros.web.html import (
    NOTHING,
    Safe,
    badge,
    render,
)
from claros.web.views import COVERAGE_DAYS, AgentSummary

__all__ = [
    "PAGE_HEADERS",
    "STATIC",
    "Chrome",
    "audit_key_page",
    "device_page",
    "error_page",
    "home_page",
    "layout",
    "rules_page",
    "signed_in_page",
    "signin_page",
    "static_file",
]

STATIC = {"claros.css": "text/css; charset=utf-8", "claros.js": "text/javascript; charset=utf-8"}


# The static files beside this module (the package is installed as files, in the layer
# and in a wheel): importlib.resources would import tempfile, shutil, bz2 and lzma, a
# cold-start cost for every page (each links the files by their hash, ``_version``).
# Tools held as writes the Rules page lists with a confirm form each; an app's own page
# lists all of its own (an agent's guard can register 1,000 tools an app).
HELD_SHOWN = 50
_STATIC_DIR = Path(__file__).resolve().parent / "static"


@cache
def static_file(name: str) -> bytes:
    return (_STATIC_DIR / name).read_bytes()


@cache
def _version() -> str:
    digest = hashlib.sha256()
    for name in sorted(STATIC):
        digest.update(static_file(name))
    return digest.hexdigest()[:10]


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class Chrome(NamedTuple):
    """What every signed-in page's frame needs: who, their CSRF token, the current tab."""

    principal: Principal | None
    csrf: str | None
    active: str = ""


def csrf_field(chrome: Chrome) -> Safe:
    if not chrome.csrf:
        return Safe("")
    return render('<input type="hidden" name="csrf" value="{v}">', v=chrome.csrf)


# The main tabs, in order: (key, href, label, who sees it).
_TABS = (
    ("home", "/app", "Home", "all"),
    ("activity", "/app/activity", "Activity", "all"),
    ("asks", "/app/asks", "Asks", "all"),
    ("rules", "/app/rules", "Rules", "admin"),
    ("keys", "/app/keys", "Keys & people", "all"),  # a member's own keys, an admin's all
    ("evidence", "/app/evidence", "Evidence", "admin"),
)


def nav_tabs(chrome: Chrome | None) -> list[tuple[str, str, str]]:
    """The tabs the signed-in person may open (none when signed out)."""
    principal = chrome.principal if chrome is not None else None
    if principal is None:
        return []
    return [
        (key, href, label) for key, href, label, who in _TABS if who == "all" or principal.is_admin
    ]


def static_version() -> str:
    """Changes whenever claros.css or claros.js does, so browsers never keep a stale copy."""
    return _version()


def layout(
    title: str, body: Safe, chrome: Chrome, *, lede: str | Safe = "", flash: Safe = NOTHING
) -> str:
    """A page from markup written in Python (pages not yet moved to their own template)."""
    from claros.web.templating import render_page

    return render_page("base.html", chrome, title=title, body=body, lede=lede, flash=flash)


def notice(message: str | Safe, tone: str = "ok") -> Safe:
    role = "alert" if tone == "danger" else "status"
    return render(
        '<div class="notice notice-{tone}" role="{role}">{message}</div>',
        tone=tone,
        role=role,
        message=message,
    )


def section(section_id: str, title: str, body: Safe, *, extra: Safe = NOTHING) -> Safe:
    return render(
        '<section class="section" id="{id}" aria-labelledby="{id}-h">'
        '<div class="section-head"><h2 id="{id}-h">{title}</h2>{extra}</div>{body}</section>',
        id=section_id,
        title=title,
        body=body,
        extra=extra,
    )


def empty(text: str | Safe) -> Safe:
    return render('<p class="empty">{text}</p>', text=text)


def _count(n: int) -> Safe:
    return render('<span class="count" aria-label="{n} items">{n}</span>', n=n)


def _money(amount: Any, currency: Any) -> str:
    if amount is None:
        return ""
    return f"{amount} {currency}" if currency else str(amount)


def _outcome(outcome: Any) -> Safe:
    """A check's outcome (whether the action then ran, ok or error, and its summary); empty
    while none was reported."""
    if not isinstance(outcome, Mapping) or not outcome.get("status"):
        return Safe("")
    status = str(outcome["status"])
    return render(
        '<span class="outcome">{badge} {summary}</span>',
        badge=badge(f"ran: {status}", "ok" if status == "ok" else "danger"),
        summary=outcome.get("summary") or "",
    )


def _approved(approval: Any) -> Safe:
    """On the repeat of an approved ask: who approved the write it completes."""
    if not isinstance(approval, Mapping):
        return Safe("")
    return render(' <span class="muted">approved by {who}</span>', who=approval.get("decided_by"))


# --- sign-in ----------------------------------------------------------------------------
def signin_page(*, next_path: str, error: str = "", note: str = "") -> str:
    from claros.web.templating import render_page

    return render_page(
        "signin.html",
        Chrome(None, None),
        title="Sign in",
        lede="Claros keeps agents in check.",
        next_path=next_path,
        error=error,
        note=note,
    )


def signed_in_page(*, next_path: str, hand: str) -> str:
    """The answer to a sign-in: claros.js keeps the session's hand in this origin's
    localStorage and goes on to ``next_path`` (already checked by ``safe_next``). Without
    JavaScript the page says so and links on: reading works, acting needs the hand."""
    from claros.web.templating import render_page

    return render_page(
        "signed_in.html", Chrome(None, None), title="Signing in", next_path=next_path, hand=hand
    )


# --- Home -------------------------------------------------------------------------------
def home_page(
    chrome: Chrome,
    *,
    asks: Sequence[Mapping[str, Any]],
    answered: Sequence[Mapping[str, Any]],
    agents: Sequence[AgentSummary],
    timeline: Mapping[str, Any],
    now: int,
    days: int = COVERAGE_DAYS,
    workspace_wide: bool = False,
    by_day: Sequence[tuple[int, Mapping[str, int]]] = (),
    near: Mapping[str, Mapping[str, Any]] | None = None,
    flash: Safe = NOTHING,
    asks_open: int | None = None,
    asks_more: str = "",
    answered_more: str = "",
    since: str = "",
) -> str:
    """Home (``templates/home.html``): asks, agents over the chosen window, charts, the
    person's answers and timeline."""
    from claros.web.charts import RESULTS, coverage_chart, days_chart, near_chart
    from claros.web.templating import render_page
    from claros.web.views import WINDOWS

    person = chrome.principal.person if chrome.principal else ""
    return render_page(
        "home.html",
        chrome,
        title="Home",
        lede=f"Asks, agents and checks for {person}.",
        flash=flash,
        asks=asks,
        answered=answered,
        agents=agents,
        timeline=timeline,
        now=now,
        days=days,
        windows=WINDOWS,
        workspace_wide=workspace_wide,
        agents_title="Agents in this workspace" if workspace_wide else "Your agents",
        results=RESULTS,
        days_chart=days_chart(by_day),
        near_chart=near_chart(near or {}),
        coverage_chart=coverage_chart(agents),
        once=secrets.token_urlsafe(16),
        asks_open=len(asks) if asks_open is None else asks_open,
        asks_more=asks_more,
        answered_more=answered_more,
        since=since,
        flagged_results=("stop", "ask", "nudge"),
    )


# --- Rules ------------------------------------------------------------------------------
def mapping_needs(mapping: Mapping[str, Any]) -> str:
    """What a mapping reads besides the call's arguments, in a few words."""
    parts = []
    if mapping.get("fetch"):
        parts.append(f"fetch {mapping['fetch'].get('tool')}")
    if mapping.get("derived"):
        parts.append(f"{len(mapping['derived'])} derived")
    if mapping.get("lookups"):
        parts.append(f"{len(mapping['lookups'])} lookups")
    if mapping.get("queries"):
        parts.append(f"{len(mapping['queries'])} queries")
    return ", ".join(parts) or "nothing"


def rules_page(
    chrome: Chrome,
    rules: Sequence[Mapping[str, Any]],
    mappings: Sequence[Mapping[str, Any]],
    apps: Sequence[Mapping[str, Any]] = (),
    warnings: Mapping[str, Sequence[str]] | None = None,
    *,
    flash: Safe = NOTHING,
    failed: Any = None,
    dump: Callable[[Mapping[str, Any]], str] | None = None,
) -> str:
    """Each rule with its versions and push-time warnings, the mappings per tool, and each
    app's tools; a tool a guard now reports as a read but that was registered as a write
    is held until an admin confirms it here."""
    from claros.web.templating import render_page

    app_rows: list[dict[str, Any]] = []
    held_rows: list[tuple[str, Mapping[str, Any]]] = []
    for a in apps:
        tools = list(a.get("tools") or [])
        held = sorted((t for t in tools if t.get("held")), key=lambda t: str(t.get("name")))
        reads = sum(bool(t.get("read")) and not t.get("held") for t in tools)
        app_rows.append({
            "app": str(a["app"]), "tools": len(tools), "reads": reads,
            "writes": len(tools) - reads, "held": len(held),
            "registered_at": a.get("registered_at"),
        })  # fmt: skip
        held_rows.extend((str(a["app"]), t) for t in held)
    held_total = len(held_rows)
    return render_page(
        "rules.html",
        chrome,
        title="Rules",
        lede="Each rule's versions as written, with hash, owner, response and who confirmed them.",
        flash=flash,
        rules=rules,
        warned=warnings or {},
        mappings=mappings,
        app_rows=app_rows,
        # The tools waiting for the admin, a page of them: each app's page has them all.
        held_rows=held_rows[:HELD_SHOWN],
        held_total=held_total,
        needs=mapping_needs,
        failed=failed,
        dump=dump or (lambda value: json.dumps(dict(value), indent=2, ensure_ascii=False)),
    )


def app_page(chrome: Chrome, app: str, value: Mapping[str, Any]) -> str:
    """One app's registered tools, the held ones first, and a form that removes the app."""
    from claros.web.templating import render_page

    tools = sorted(
        (value.get("tools") or {}).values(), key=lambda t: (not t.get("held"), str(t.get("name")))
    )
    return render_page(
        "app.html", chrome, title=f"App {app}", app=app, tools=tools,
        lede=f"The tools {app}'s guard registered, and what Claros counts each as.",
    )  # fmt: skip


# --- device sign-in ---------------------------------------------------------------------
def device_page(
    chrome: Chrome,
    *,
    view: Mapping[str, Any] | None,
    code: str = "",
    error: str = "",
    now: int = 0,
) -> str:
    """Three stages: type the code; see who asks and approve or deny; done."""
    from claros.web.templating import render_page

    person = chrome.principal.person if chrome.principal else ""
    lede = "Approve a claros login."
    if view is None or view["status"] not in ("pending", "approved", "denied"):
        stage = "code"
        if view is not None:
            error = f"Code {view['user_code']} is {view['status']}."
    elif view["status"] != "pending":
        stage, lede = "done", ""
    else:
        stage, lede = "approve", "A terminal asks to act for you."
    return render_page(
        "device.html", chrome, title="Sign in a device", lede=lede, stage=stage, view=view,
        code=code, error=error, now=now, person=person,
    )  # fmt: skip


# --- keys made in the web app, and errors -----------------------------------------------
def one_use_field() -> Safe:
    """A form's one-use token: sending the same form twice (a reload) makes nothing twice."""
    return render('<input type="hidden" name="once" value="{v}">', v=secrets.token_urlsafe(16))


def _key_made(chrome: Chrome, *, kind: str, key: str, label: str, back: tuple[str, str]) -> str:
    """The page a new key is shown on, once: ``kind`` is "agent" or "audit"."""
    from claros.web.templating import render_page

    what = f"{kind.capitalize()} key"
    return render_page(
        "key_made.html", chrome, title=f"{what} made", kind=kind, what=what,
        field=f"{kind}-key", key=key, label=label,
        person=chrome.principal.person if chrome.principal else "",
        back_href=back[0], back_label=back[1],
    )  # fmt: skip


def agent_key_page(chrome: Chrome, *, key: str, label: str) -> str:
    return _key_made(chrome, kind="agent", key=key, label=label, back=("/app", "Back to Home"))


def audit_key_page(chrome: Chrome, *, key: str, label: str) -> str:
    return _key_made(
        chrome, kind="audit", key=key, label=label, back=("/app/evidence", "Back to Evidence")
    )


_TITLES = {
    400: "That did not work",
    401: "Sign in again",
    403: "Not allowed",
    404: "Not found",
    405: "Use the button",
    409: "Already changed",
    413: "Too large",
    429: "Slow down",
}


def error_page(
    chrome: Chrome, status: int, message: str, *, action: tuple[str, str] | None = None
) -> str:
    """An error's page; ``action``: (href, label) of the way on, else "Back to Home"."""
    from claros.web.templating import render_page

    title = _TITLES.get(status, "Something went wrong")
    href, label = action or ("/app", "Back to Home")
    return render_page("error.html", chrome, title=title, message=message, href=href, label=label)
