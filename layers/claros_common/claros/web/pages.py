"""The pages, as HTML strings: layout, sign-in, Home, Rules, Evidence, device sign-in.

Everything dynamic goes through ``claros.web.html`` (escaped unless ``Safe``). Pages are
plain forms and links; ``/app/static/claros.js`` only adds copy buttons.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from claros.auth import Principal
from claros.web.html import (
    NOTHING,
    Safe,
    attrs,
    badge,
    join,
    json_block,
    relative,
    render,
    time_tag,
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
    "signin_page",
    "static_file",
]

# Every page's headers (the app's, and the report's printable page): never cached, never
# framed by another site, no script or style but this app's own.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}

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


# --- Home -------------------------------------------------------------------------------
def _arguments(arguments: Mapping[str, Any]) -> Safe:
    if not arguments:
        return Safe("")
    rows = join(
        render(
            "<div><dt>{k}</dt><dd>{v}</dd></div>",
            k=k,
            v=v if isinstance(v, str | int | float) else json_block(v),
        )
        for k, v in list(arguments.items())[:12]
    )
    return render('<dl class="args">{rows}</dl>', rows=rows)


def _ask_card(ask: Mapping[str, Any], chrome: Chrome, now: int) -> Safe:
    messages = join(
        render("<li>{m}</li>", m=m.get("message", "")) for m in ask.get("messages") or []
    )
    agent = ask.get("agent") or {}
    disabled = bool(ask.get("own_key"))
    own = (
        notice(
            "You signed in with the key that asked, or one made from it: it cannot answer "
            "this ask. Sign in with your person key to answer.",
            "warn",
        )
        if disabled
        else Safe("")
    )
    money = _money(ask.get("amount"), ask.get("currency"))
    return render(
        '<article class="card ask" aria-labelledby="{id}-t">'
        '<header class="ask-head"><h3 id="{id}-t"><span class="app">{app}</span> · '
        '<span class="tool">{tool}</span></h3>{badge}{amount}</header>'
        '<ul class="messages">{messages}</ul>'
        '<p class="meta">For {obo} · by {agent} · opened {opened} · expires {expires}</p>'
        "{args}{own}"
        '<form method="post" action="/app/asks/{id}/answer" class="answer">{csrf}'
        '<div class="field"><label for="{id}-note">Note <span class="opt">(optional)</span>'
        '</label><input id="{id}-note" name="note" type="text" maxlength="2000" {dis}></div>'
        '<div class="actions">'
        '<button class="btn btn-primary" type="submit" name="decision" value="approve" {dis}>'
        'Approve</button><button class="btn btn-danger" type="submit" name="decision" '
        'value="deny" {dis}>Deny</button></div></form></article>',
        id=ask["ask_id"],
        app=ask.get("app"),
        tool=ask.get("tool"),
        badge=badge("ask"),
        amount=render('<span class="amount">{m}</span>', m=money) if money else Safe(""),
        messages=messages,
        obo=ask.get("on_behalf_of") or "nobody",
        agent=agent.get("name") or "an agent",
        opened=relative(int(ask["opened_at"]), now),
        expires=relative(int(ask["expires_at"]), now),
        args=_arguments(ask.get("arguments") or {}),
        own=own,
        csrf=csrf_field(chrome),
        dis=attrs(disabled=disabled),
    )


def _meter(agent: AgentSummary) -> Safe:
    value = agent.coverage
    if value is None:
        why = (
            "no writes counted yet"
            if agent.reports_outcomes
            else "unknown: this agent's guard does not send outcomes"
        )
        return render('<p class="coverage muted">Coverage {why}</p>', why=why)
    pct = round(value * 100)
    return render(
        '<div class="coverage"><div class="coverage-label"><span>Coverage</span>'
        "<strong>{pct}%</strong></div>"
        '<meter min="0" max="100" value="{pct}" aria-label="Coverage {pct} percent">'
        "{pct}%</meter>"
        '<p class="hint">{checked} checked · {unchecked} ran unchecked · {stop} ran after a '
        "stop</p></div>",
        pct=pct,
        checked=agent.checked,
        unchecked=agent.unchecked,
        stop=agent.ran_after_stop,
    )


def _agent_card(agent: AgentSummary, now: int) -> Safe:
    pills = join(
        render('<li>{badge}<span class="n">{n}</span></li>', badge=badge(result), n=n)
        for result, n in sorted(agent.counts.items())
    )
    flagged = join(
        render(
            '<li>{badge} <span class="call">{app} · {tool}</span> {rules}'
            '<span class="amount">{money}</span> <span class="when">{when}</span>'
            "{approved} {outcome}</li>",
            badge=badge(str(item.get("result"))),
            approved=_approved(item.get("approval")),
            outcome=_outcome(item.get("outcome")),
            app=item.get("app"),
            tool=item.get("tool"),
            rules=join(
                render('<span class="rule">{t}</span>', t=r.get("title")) for r in item["rules"]
            ),
            money=_money(item.get("amount"), item.get("currency")),
            when=relative(int(item["ts"]), now),
        )
        for item in agent.flagged
    )
    flagged_list = (
        render('<h4>Stopped, asked or nudged on</h4><ul class="flagged">{f}</ul>', f=flagged)
        if agent.flagged
        else empty("Nothing stopped, asked or nudged.")
    )
    return render(
        '<article class="card agent"><h3>{name}</h3><ul class="pills">{pills}</ul>'
        "{meter}{flagged}</article>",
        name=agent.name,
        pills=pills,
        meter=_meter(agent),
        flagged=flagged_list,
    )


def _answered(asks: Sequence[Mapping[str, Any]]) -> Safe:
    if not asks:
        return empty("You have not answered any ask yet.")
    rows = join(
        render(
            "<tr><td>{app} · {tool}</td><td>{decision}</td><td>{by}</td><td>{authority}</td>"
            '<td class="note">{note}</td><td>{when}</td></tr>',
            app=a.get("app"),
            tool=a.get("tool"),
            decision=badge(str(a.get("status"))),
            by=a.get("decided_by") or "",
            authority=a.get("authority") or "",
            note=a.get("note") or "",
            when=time_tag(a.get("decided_at")),
        )
        for a in asks
    )
    return render(
        '<div class="table-wrap"><table><thead><tr><th scope="col">Call</th>'
        '<th scope="col">Answer</th><th scope="col">By</th><th scope="col">As</th>'
        '<th scope="col">Note</th><th scope="col">When</th></tr></thead>'
        "<tbody>{rows}</tbody></table></div>",
        rows=rows,
    )


def _timeline(body: Mapping[str, Any]) -> Safe:
    items = body.get("items") or []
    if not items:
        return empty("No checks for you yet.")
    rows = join(
        render(
            "<tr><td>{when}</td><td>{agent}</td><td>{app} · {tool}</td><td>{result}</td>"
            '<td>{severity}</td><td class="num">{money}</td><td>{outcome}</td></tr>',
            when=time_tag(i.get("ts")),
            outcome=_outcome(i.get("outcome")),
            agent=i.get("agent") or "",
            app=i.get("app"),
            tool=i.get("tool"),
            result=join([badge(str(i.get("result"))), _approved(i.get("approval"))]),
            severity=i.get("severity") or "",
            money=_money(i.get("amount"), i.get("currency")),
        )
        for i in items
    )
    more = (
        render(
            '<p class="pager"><a class="btn btn-quiet" href="/app?before={n}#timeline">'
            "Older checks</a></p>",
            n=body["next"],
        )
        if body.get("next")
        else Safe("")
    )
    return render(
        '<div class="table-wrap"><table><thead><tr><th scope="col">When</th>'
        '<th scope="col">Agent</th><th scope="col">Call</th><th scope="col">Result</th>'
        '<th scope="col">Severity</th><th scope="col" class="num">Amount</th>'
        '<th scope="col">Outcome</th></tr></thead>'
        "<tbody>{rows}</tbody></table></div>{more}",
        rows=rows,
        more=more,
    )


def home_page(
    chrome: Chrome,
    *,
    asks: Sequence[Mapping[str, Any]],
    answered: Sequence[Mapping[str, Any]],
    agents: Sequence[AgentSummary],
    timeline: Mapping[str, Any],
    now: int,
    flash: Safe = NOTHING,
    asks_open: int | None = None,
    asks_more: str = "",
) -> str:
    ask_cards = (
        join(_ask_card(a, chrome, now) for a in asks)
        if asks
        else empty("Nothing is waiting for you.")
    )
    if asks_more:  # a cut list says so and links to the rest (the Asks page)
        ask_cards = join([ask_cards, render(
            '<p class="more" role="status">Showing {n} of {t} open asks. '
            '<a href="{href}">See them all in Asks</a></p>',
            n=len(asks), t=asks_open if asks_open is not None else "more", href=asks_more,
        )])  # fmt: skip
    agent_cards = (
        render('<div class="grid">{c}</div>', c=join(_agent_card(a, now) for a in agents))
        if agents
        else empty(
            Safe(
                f"No agent has acted for you in the last {COVERAGE_DAYS} days. Sign a machine "
                "in with <code>claros login</code>."
            )
        )
    )
    body = join(
        [
            section(
                "asks",
                "Waiting for you",
                ask_cards,
                extra=_count(len(asks) if asks_open is None else asks_open),
            ),  # fmt: skip
            section("agents", "Your agents", agent_cards),
            section("answered", "Recently answered", _answered(answered)),
            section("timeline", "Your timeline", _timeline(timeline)),
            section("keys", "Agent keys", _agent_key_form(chrome)),
        ]
    )
    person = chrome.principal.person if chrome.principal else ""
    return layout(
        "Home",
        body,
        chrome,
        lede=f"Asks, agents and checks for {person}.",
        flash=flash,
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

    tool_rows = [
        (str(a["app"]), t)
        for a in apps
        for t in sorted(a.get("tools") or [], key=lambda t: (not t.get("held"), t.get("name")))
    ]
    return render_page(
        "rules.html",
        chrome,
        title="Rules",
        lede="Each rule's versions as written, with hash, owner, response and who confirmed them.",
        flash=flash,
        rules=rules,
        warned=warnings or {},
        mappings=mappings,
        tool_rows=tool_rows,
        needs=mapping_needs,
        failed=failed,
        dump=dump or (lambda value: json.dumps(dict(value), indent=2, ensure_ascii=False)),
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


def _agent_key_form(chrome: Chrome) -> Safe:
    return render(
        '<div class="card"><p>An agent key lets an agent act for you: its checks, asks and '
        "timeline are yours. Put it in the agent's environment as <code>CLAROS_KEY</code> (or "
        "sign the machine in with <code>claros login</code>, which makes one for you). "
        "It is shown once.</p>"
        '<form method="post" action="/app/keys" class="inline">{csrf}{once}'
        '<div class="field"><label for="agent-label">Label <span class="opt">(optional)'
        '</span></label><input id="agent-label" name="label" maxlength="100" '
        'placeholder="Laptop, Claude Code"></div>'
        '<button class="btn" type="submit">Make an agent key</button></form></div>',
        csrf=csrf_field(chrome),
        once=one_use_field(),
    )


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


def error_page(chrome: Chrome, status: int, message: str) -> str:
    from claros.web.templating import render_page

    title = _TITLES.get(status, "Something went wrong")
    return render_page("error.html", chrome, title=title, message=message)
