"""A small, escape-by-default HTML kit (no template engine, no build step).

Every value put into markup goes through ``esc`` unless it is ``Safe`` (markup this module
or a page wrote). ``render`` fills ``{name}`` placeholders the same way, so user content
(rule titles, notes, arguments) can never become markup.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "NOTHING",
    "Safe",
    "attrs",
    "badge",
    "esc",
    "join",
    "json_block",
    "relative",
    "render",
    "short_hash",
    "time_tag",
]


class Safe(str):
    """Markup that is already escaped (or that we wrote)."""

    __slots__ = ()

    def __html__(self) -> str:
        # Jinja2's autoescape leaves objects with __html__ as they are (claros.web.templating).
        return self


NOTHING = Safe("")


def esc(value: object) -> Safe:
    if isinstance(value, Safe):
        return value
    if value is None:
        return Safe("")
    return Safe(html.escape(str(value), quote=True))


def render(template: str, **values: object) -> Safe:
    """``template`` with each ``{name}`` replaced by the escaped value."""
    return Safe(template.format_map({name: esc(v) for name, v in values.items()}))


def join(parts: Iterable[object], sep: str = "") -> Safe:
    return Safe(sep.join(esc(p) for p in parts))


def attrs(**values: object) -> Safe:
    """HTML attributes; ``True`` writes the bare name, ``None`` and ``False`` leave it out.
    A trailing underscore is dropped (``class_``), other underscores become dashes."""
    out = []
    for name, value in values.items():
        key = name.rstrip("_").replace("_", "-")
        if value is None or value is False:
            continue
        out.append(key if value is True else f'{key}="{esc(value)}"')
    return Safe(" ".join(out))


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def time_tag(ms: int | None) -> Safe:
    if ms is None:
        return Safe("")
    when = _utc(int(ms))
    return render(
        '<time datetime="{iso}">{text}</time>',
        iso=when.isoformat(timespec="seconds").replace("+00:00", "Z"),
        text=when.strftime("%Y-%m-%d %H:%M UTC"),
    )


def relative(ms: int, now: int) -> str:
    """'in 12 min', '3 h ago' (for expiries and ages)."""
    delta = (int(ms) - now) // 1000
    ahead = delta >= 0
    seconds = abs(delta)
    if seconds < 60:
        text = f"{seconds} s"
    elif seconds < 3600:
        text = f"{seconds // 60} min"
    elif seconds < 86400:
        text = f"{seconds // 3600} h"
    else:
        text = f"{seconds // 86400} d"
    return f"in {text}" if ahead else f"{text} ago"


def short_hash(value: str | None, length: int = 12) -> Safe:
    if not value:
        return Safe("")
    return render(
        '<code class="hash" title="{full}">{short}</code>', full=value, short=value[:length]
    )


_BADGES = {
    "stop": "danger",
    "ask": "warn",
    "nudge": "info",
    "allow": "ok",
    "approved": "ok",
    "approve": "ok",
    "denied": "danger",
    "deny": "danger",
    "used": "muted",
    "expired": "muted",
    "open": "warn",
    "active": "ok",
    "closed": "muted",
}


def badge(text: str | None, tone: str | None = None) -> Safe:
    if not text:
        return Safe("")
    return render(
        '<span class="badge badge-{tone}">{text}</span>',
        tone=tone or _BADGES.get(text, "muted"),
        text=text,
    )


def json_block(value: Mapping[str, Any] | list[Any] | Any) -> Safe:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return render('<pre class="json">{text}</pre>', text=text)
