"""The pages, as HTML strings: layout, sign-in, Home, Rules, Evidence, device sign-in.

Everything dynamic goes through ``claros.web.html`` (escaped unless ``Safe``). Pages are
plain forms and links; ``/app/static/claros.js`` only adds copy buttons.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import quote

from claros.auth import Principal
from claros.web.html import (
    NOTHING,
    Safe,
    badge,
    join,
    json_block,
    relative,
    render,
    short_hash,
    time_tag,
)
from claros.web.views import COVERAGE_DAYS, AgentSummary

__all__ = [
    "STATIC",
    "Chrome",
    "audit_key_page",
    "device_page",
    "error_page",
    "home_page",
    "layout",
    "rules_page",
    "signin_page",
    "static_file",
]

STATIC = {"claros.css": "text/css; charset=utf-8", "claros.js": "text/javascript; charset=utf-8"}


@cache
def static_file(name: str) -> bytes:
    return (resources.files("claros.web") / "static" / name).read_bytes()


@cache
def _version() -> str:
    digest = hashlib.sha256()
    for name in sorted(STATIC):
        digest.update(static_file(name))
    return digest.hexdigest()[:10]


@dataclass(frozen=True)
class Chrome:
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
    ("keys", "/app/keys", "Keys & people", "admin"),
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
    alert = notice(error, "danger") if error else (notice(note, "info") if note else Safe(""))
    body = render(
        '<div class="signin card">{alert}'
        '<form method="post" action="/app/signin" class="stack">'
        '<input type="hidden" name="next" value="{next}">'
        '<div class="field"><label for="key">Your key</label>'
        '<input id="key" name="key" type="password" required autofocus autocomplete="off" '
        'spellcheck="false" aria-describedby="key-hint" placeholder="ck_…">'
        '<p class="hint" id="key-hint">Your person key, made when you were added to the '
        "workspace (admins may use the admin key). Agent, service and audit keys cannot "
        "sign in. An admin makes a person key with "
        "<code>python -m claros.auth create --kind person --person you@example.com</code>; "
        "keep it out of your agents' environments.</p></div>"
        '<button class="btn btn-primary" type="submit">Sign in</button></form></div>',
        alert=alert,
        next=next_path,
    )
    return layout("Sign in", body, Chrome(None, None), lede="Claros keeps agents in check.")


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
    )


# --- Rules ------------------------------------------------------------------------------
def _versions(versions: Sequence[Mapping[str, Any]]) -> Safe:
    rows = join(
        render(
            "<tr><td>v{version}</td><td>{hash}</td><td>{made_by}</td><td>{by}</td>"
            "<td>{at}</td><td>{closed}</td></tr>",
            version=v.get("version"),
            hash=short_hash(v.get("hash")),
            made_by=badge((v.get("confirm") or {}).get("made_by"), "muted"),
            by=(v.get("confirm") or {}).get("confirmed_by") or "",
            at=time_tag((v.get("confirm") or {}).get("confirmed_at")),
            closed=_closed(v.get("closed")),
        )
        for v in reversed(list(versions))
    )
    return render(
        '<div class="table-wrap"><table class="versions"><caption>Versions</caption><thead><tr>'
        '<th scope="col">Version</th><th scope="col">Hash (sha256)</th>'
        '<th scope="col">Made by</th><th scope="col">Confirmed by</th>'
        '<th scope="col">Confirmed</th><th scope="col">Closed</th></tr></thead>'
        "<tbody>{rows}</tbody></table></div>",
        rows=rows,
    )


def _closed(closed: Mapping[str, Any] | None) -> Safe:
    if not closed:
        return render('<span class="muted">in force</span>')
    return render(
        '{at} by {by}<br><span class="muted">{reason}</span>',
        at=time_tag(closed.get("closed_at")),
        by=closed.get("closed_by") or "",
        reason=closed.get("reason") or "",
    )


def _rule_warnings(warnings: Sequence[str]) -> Safe:
    """Fields the rule reads that nothing provides (claros.rules.warnings)."""
    if not warnings:
        return Safe("")
    return render(
        '<div><dt>Warnings</dt><dd><ul class="warnings">{items}</ul></dd></div>',
        items=join(render('<li class="warn-text">{w}</li>', w=w) for w in warnings),
    )


def _rule_card(rule: Mapping[str, Any], warnings: Sequence[str] = ()) -> Safe:
    written: Mapping[str, Any] = rule.get("rule") or {}
    owners = written.get("owners") or []
    when = written.get("when")
    return render(
        '<article class="card rule" id="rule-{id}" aria-labelledby="rule-{id}-t">'
        '<header class="rule-head"><h3 id="rule-{id}-t">{title}</h3>'
        '<div class="badges">{response}{mode}{status}</div></header>'
        '<dl class="facts"><div><dt>Rule</dt><dd><code>{id}</code> v{version}</dd></div>'
        "<div><dt>Hash</dt><dd>{hash}</dd></div>"
        "<div><dt>Workflow</dt><dd>{workflow}</dd></div>"
        "<div><dt>App · tools</dt><dd>{app} · {tools}</dd></div>"
        "<div><dt>Owners</dt><dd>{owners}</dd></div>"
        "<div><dt>When</dt><dd>{when}</dd></div>"
        "<div><dt>Message</dt><dd>{message}</dd></div>{warnings}</dl>{versions}</article>",
        id=rule.get("id"),
        title=written.get("title") or rule.get("id"),
        response=badge(str(written.get("response"))),
        mode=badge("shadow", "info") if written.get("mode") == "shadow" else Safe(""),
        status=badge(str(rule.get("status"))),
        version=rule.get("version"),
        hash=short_hash(rule.get("hash")),
        workflow=written.get("workflow_id") or "",
        app=written.get("app") or "",
        tools=", ".join(written.get("tools") or []),
        owners=", ".join(owners) if owners else Safe('<span class="warn-text">no owner</span>'),
        when=render("<code>{w}</code>", w=when) if when else Safe("not judged (no expression)"),
        message=written.get("message") or "",
        versions=_versions(rule.get("versions") or []),
        warnings=_rule_warnings(warnings),
    )


def _mapping_needs(mapping: Mapping[str, Any]) -> str:
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


def _mapping_status(mapping: Mapping[str, Any]) -> Safe:
    status = badge(str(mapping.get("status")), "danger" if mapping.get("suspended") else None)
    reason = (mapping.get("suspended") or {}).get("reason")
    return render('{b}<p class="hint">{r}</p>', b=status, r=reason) if reason else status


def _mappings(mappings: Sequence[Mapping[str, Any]]) -> Safe:
    if not mappings:
        return empty("No mappings: tools are checked on their call's arguments alone.")
    rows = join(
        render(
            "<tr><td>{app}</td><td><code>{tool}</code></td><td>v{version}</td><td>{hash}</td>"
            "<td>{status}</td><td>{needs}</td><td>{by}<br>{at}</td>"
            "<td><details><summary>Mapping</summary>{json}</details></td></tr>",
            app=m.get("app"),
            tool=m.get("tool"),
            version=m.get("version"),
            hash=short_hash(m.get("hash")),
            status=_mapping_status(m),
            needs=_mapping_needs(m.get("mapping") or {}),
            by=m.get("saved_by") or "",
            at=time_tag(m.get("saved_at")),
            json=json_block(m.get("mapping") or {}),
        )
        for m in mappings
    )
    return render(
        '<div class="table-wrap"><table><thead><tr><th scope="col">App</th>'
        '<th scope="col">Tool</th><th scope="col">Version</th><th scope="col">Hash</th>'
        '<th scope="col">Status</th><th scope="col">Needs</th><th scope="col">Saved</th>'
        '<th scope="col">Details</th></tr></thead><tbody>{rows}</tbody></table></div>',
        rows=rows,
    )


def _tool_row(app: str, tool: Mapping[str, Any], chrome: Chrome) -> Safe:
    if tool.get("held"):
        what = render(
            '{b} <span class="hint">a guard reports it as a read; Claros keeps it a '
            "write until you confirm</span>",
            b=badge("held as write", "warn"),
        )
        action = render(
            '<form method="post" action="/app/apps/{app}/tools/{tool}/confirm" class="inline">'
            '{csrf}{once}<button class="btn" type="submit">Confirm it is a read</button></form>',
            app=quote(app, safe=""),
            tool=quote(str(tool.get("name")), safe=""),
            csrf=csrf_field(chrome),
            once=one_use_field(),
        )
    else:
        what = badge("read", "ok") if tool.get("read") else badge("write", "muted")
        action = Safe("")
    return render(
        "<tr><td>{app}</td><td><code>{name}</code></td><td>{what}</td><td>{action}</td></tr>",
        app=app,
        name=tool.get("name"),
        what=what,
        action=action,
    )


def _tools(apps: Sequence[Mapping[str, Any]], chrome: Chrome) -> Safe:
    """Each app's tools as the workspace counts them; a tool a guard now reports as a read
    but that was registered as a write is held until an admin confirms it here."""
    if not apps:
        return empty("No tools yet: a guard registers its server's tools when it starts.")
    rows = join(
        _tool_row(str(a["app"]), t, chrome)
        for a in apps
        for t in sorted(a.get("tools") or [], key=lambda t: (not t.get("held"), t.get("name")))
    )
    return render(
        '<div class="table-wrap"><table><thead><tr><th scope="col">App</th>'
        '<th scope="col">Tool</th><th scope="col">Counts as</th><th scope="col"></th>'
        "</tr></thead><tbody>{rows}</tbody></table></div>",
        rows=rows,
    )


def rules_page(
    chrome: Chrome,
    rules: Sequence[Mapping[str, Any]],
    mappings: Sequence[Mapping[str, Any]],
    apps: Sequence[Mapping[str, Any]] = (),
    warnings: Mapping[str, Sequence[str]] | None = None,
    *,
    flash: Safe = NOTHING,
) -> str:
    warned = warnings or {}
    cards = (
        join(_rule_card(r, warned.get(str(r.get("id")), ())) for r in rules)
        if rules
        else empty(Safe("No rules yet. Push some with <code>claros rules push rules.yaml</code>."))
    )
    body = join(
        [
            section("rules", "Rules", cards, extra=_count(len(rules))),
            section("mappings", "Mappings per tool", _mappings(mappings)),
            section("tools", "Tools: reads and writes", _tools(apps, chrome)),
        ]
    )
    return layout(
        "Rules",
        body,
        chrome,
        lede="Each rule's versions as written, with hash, owner, response and who confirmed them.",
        flash=flash,
    )


# --- device sign-in ---------------------------------------------------------------------
def device_page(
    chrome: Chrome,
    *,
    view: Mapping[str, Any] | None,
    code: str = "",
    error: str = "",
    now: int = 0,
) -> str:
    person = chrome.principal.person if chrome.principal else ""
    alert = notice(error, "danger") if error else Safe("")
    if view is None or view["status"] not in ("pending", "approved", "denied"):
        if view is not None:
            alert = notice(f"Code {view['user_code']} is {view['status']}.", "danger")
        body = render(
            '<div class="card narrow">{alert}<form method="get" action="/app/device" '
            'class="stack"><div class="field"><label for="code">Code from your terminal</label>'
            '<input id="code" name="code" required autofocus autocomplete="off" '
            'autocapitalize="characters" spellcheck="false" class="code-input" value="{code}" '
            'placeholder="BCDF-GHJK" aria-describedby="code-hint">'
            '<p class="hint" id="code-hint"><code>claros login</code> shows it.</p></div>'
            '<button class="btn btn-primary" type="submit">Continue</button></form></div>',
            alert=alert,
            code=code,
        )
        return layout("Sign in a device", body, chrome, lede="Approve a claros login.")
    if view["status"] != "pending":
        done = (
            notice("Approved. Go back to your terminal: it is signed in.", "ok")
            if view["status"] == "approved"
            else notice("Denied. The terminal gets no key.", "warn")
        )
        body = render('<div class="card narrow">{done}</div>', done=done)
        return layout("Sign in a device", body, chrome)
    body = render(
        '<div class="card narrow">{alert}<p class="bigcode" aria-label="Code">{code}</p>'
        '<dl class="facts"><div><dt>Program</dt><dd>{client}</dd></div>'
        "<div><dt>Machine</dt><dd>{name}</dd></div>"
        "<div><dt>From</dt><dd>{address}</dd></div>"
        "<div><dt>Started</dt><dd>{started}</dd></div>"
        "<div><dt>Expires</dt><dd>{expires}</dd></div></dl>"
        '<p class="warn-text">Approve only if you started this yourself, just now. The '
        "terminal gets a new agent key that acts for you ({person}).</p>"
        '<form method="post" action="/app/device" class="actions">{csrf}'
        '<input type="hidden" name="user_code" value="{code}">'
        '<button class="btn btn-primary" type="submit" name="decision" value="approve">'
        "Approve</button>"
        '<button class="btn btn-danger" type="submit" name="decision" value="deny">Deny</button>'
        "</form></div>",
        alert=alert,
        code=view["user_code"],
        client=view.get("client") or "",
        name=view.get("name") or "unnamed",
        address=view.get("address") or "",
        started=relative(int(view["created_at"]), now),
        expires=relative(int(view["expires_at"]), now),
        person=person,
        csrf=csrf_field(chrome),
    )
    return layout("Sign in a device", body, chrome, lede="A terminal asks to act for you.")


# --- keys made in the web app, and errors -----------------------------------------------
def one_use_field() -> Safe:
    """A form's one-use token: sending the same form twice (a reload) makes nothing twice."""
    return render('<input type="hidden" name="once" value="{v}">', v=secrets.token_urlsafe(16))


def _key_made(
    chrome: Chrome, *, what: str, key: str, label: str, about: Safe, back: tuple[str, str]
) -> str:
    """The page a new key is shown on, once: ``what`` is "Agent key" or "Audit key"."""
    field = what.lower().replace(" ", "-")
    body = render(
        '<div class="card narrow">{warn}<div class="field"><label for="{field}">{what}'
        '{label}</label><div class="copy-row"><input id="{field}" class="mono" readonly '
        'value="{key}"><button class="btn" type="button" data-copy="{field}">Copy</button>'
        '</div></div><p>{about}</p><p><a class="btn btn-quiet" href="{href}">{back}</a></p>'
        "</div>",
        warn=notice("Shown only now. Copy it somewhere safe: Claros keeps only its hash.", "warn"),
        field=field,
        what=what,
        label=f" ({label})" if label else "",
        key=key,
        about=about,
        href=back[0],
        back=back[1],
    )
    return layout(f"{what} made", body, chrome)


def agent_key_page(chrome: Chrome, *, key: str, label: str) -> str:
    person = chrome.principal.person if chrome.principal else ""
    about = render(
        "An agent using it acts for {person}. Set it as <code>CLAROS_KEY</code> where the "
        "agent runs <code>claros guard</code> or the Claude Code hooks.",
        person=person,
    )
    return _key_made(chrome, what="Agent key", key=key, label=label, about=about,
                     back=("/app", "Back to Home"))  # fmt: skip


def audit_key_page(chrome: Chrome, *, key: str, label: str) -> str:
    about = Safe(
        "It reads the log and its records, nothing else, and only while you are an admin. "
        "Give it to your auditor for <code>claros verify</code>."
    )
    return _key_made(chrome, what="Audit key", key=key, label=label, about=about,
                     back=("/app/evidence", "Back to Evidence"))  # fmt: skip


_TITLES = {
    400: "That did not work",
    401: "Sign in again",
    403: "Not allowed",
    404: "Not found",
    409: "Already changed",
    413: "Too large",
    429: "Slow down",
}


def error_page(chrome: Chrome, status: int, message: str) -> str:
    from claros.web.templating import render_page

    title = _TITLES.get(status, "Something went wrong")
    return render_page("error.html", chrome, title=title, message=message)
