"""A small, escape-by-default HTML kit (no template engine, no build step).

Every value put into markup goes through ``esc`` unless it is ``Safe`` (markup this module
or a page wrote). ``render`` fills ``{name}`` placeholders the same way, so user content
(rule titles, notes, arguments) can never become markup.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import unicodedata
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
    "visible",
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


# Characters drawn as nothing or that reorder the text around them (format characters:
# zero-width spaces and joiners, bidirectional overrides and isolates, tag characters; line
# and paragraph separators; control characters but tab and line breaks). An agent writes
# the arguments an approver reads: with these, what a page shows would not be what the
# call says, so a page shows each as a marked escape instead.
_MAYBE_HIDDEN = re.compile(r"[^\t\n\r\x20-\x7e]")
_HIDDEN_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Cc"})


def _shown(match: re.Match[str]) -> str:
    char = match.group(0)
    if unicodedata.category(char) not in _HIDDEN_CATEGORIES:
        return char
    point = ord(char)
    code = f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"
    name = unicodedata.name(char, "CONTROL CHARACTER")
    return render(
        '<span class="hidden-char" title="U+{point} {name}: drawn as nothing or reorders the '
        'text">{code}</span>',
        point=f"{point:04X}",
        name=name,
        code=code,
    )


def visible(value: object) -> Safe:
    """``value`` as text, escaped, with every character that hides or reorders text shown
    as its ``\\uXXXX`` escape, marked and named (what an agent wrote, as it is)."""
    return Safe(_MAYBE_HIDDEN.sub(_shown, esc(value)))


def json_block(value: Mapping[str, Any] | list[Any] | Any) -> Safe:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return render('<pre class="json">{text}</pre>', text=visible(text))
