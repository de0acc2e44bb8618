"""Pages from Jinja2 templates: one environment, one base layout, the filters pages share.

Autoescaping is on for every template, so anything an admin or an agent typed (rule
titles, notes, arguments) can only appear as text. Markup that Python code wrote is passed
as ``Safe`` (``claros.web.html``), which Jinja2 treats as already escaped.

Times are written in UTC inside ``<time datetime=...>``; ``claros.js`` rewrites them into
the viewer's local time and zone, and the UTC text stays for readers without scripts.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from claros.web import html

if TYPE_CHECKING:  # imported by the first page rendered: the admin function's JSON routes
    import jinja2  # and every other function's cold start do without it

__all__ = ["environment", "render_page", "render_fragment"]


def _money(amount: Any, currency: Any = None) -> str:
    """An amount with its currency, digits grouped and decimals as given ("1,250.50 EUR");
    a value that is no number is shown as it is."""
    if amount is None or amount == "":
        return ""
    try:
        number = Decimal(str(amount))
    except InvalidOperation:
        text = str(amount)
    else:
        text = f"{number:,}" if number.is_finite() else str(amount)
    return f"{text} {currency}" if currency else text


def _path_part(value: Any) -> str:
    """A value as one segment of a URL path (``/`` and every other reserved byte encoded)."""
    return quote(str(value), safe="")


def one_use() -> str:
    """A form's one-use token: sending the same form twice (a reload) does nothing twice
    (claros.api.web._form_once)."""
    return secrets.token_urlsafe(16)


@cache
def environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("claros.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=html.time_tag,
        relative=html.relative,
        short_hash=html.short_hash,
        badge=html.badge,
        json_block=html.json_block,
        visible=html.visible,
        money=_money,
        urlencode_path=_path_part,
    )
    env.globals["one_use"] = one_use
    return env


def render_fragment(template: str, **context: Any) -> html.Safe:
    """A template rendered as markup to put inside another page."""
    return html.Safe(environment().get_template(template).render(**context))


def render_page(template: str, chrome: Any, **context: Any) -> str:
    """A whole page: ``template`` extends ``base.html``; ``chrome`` is the signed-in frame
    (``claros.web.pages.Chrome``)."""
    from claros.web.pages import nav_tabs, static_version

    base: Mapping[str, Any] = {
        "chrome": chrome,
        "principal": chrome.principal if chrome is not None else None,
        "tabs": nav_tabs(chrome),
        "static_version": static_version(),
    }
    return environment().get_template(template).render(**base, **context)
