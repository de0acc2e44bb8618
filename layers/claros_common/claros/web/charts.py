"""Charts on Home as inline SVG, drawn on the server (no script, no request elsewhere).

Each chart is geometry computed here and drawn by ``templates/home.html``: an ``<svg
role="img">`` with a ``<title>`` and a ``<desc>`` saying the figures in words, and beside it
a visually hidden table with every number, for screen readers and for copying.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = ["RESULTS", "coverage_chart", "days_chart", "near_chart"]

RESULTS = ("allow", "nudge", "ask", "stop")  # stacked bottom to top
WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 400, 170, 30, 24, 8
BAR = 170  # the longest horizontal bar (near-misses, coverage), in the 400-wide box


def _nice(top: int) -> int:
    """A round axis maximum at or above ``top``."""
    if top <= 5:
        return 5
    step: int = 10 ** (len(str(top)) - 1)
    for mult in (1, 2, 5, 10):
        if top <= mult * step:
            return mult * step
    return top


def days_chart(days: Sequence[tuple[int, Mapping[str, int]]]) -> dict[str, Any]:
    """Checks per day, stacked by result."""
    totals = [sum(c.get(r, 0) for r in RESULTS) for _, c in days]
    top = _nice(max(totals, default=0))
    inner_w, inner_h = WIDTH - PAD_LEFT - 4, HEIGHT - PAD_BOTTOM - PAD_TOP
    slot = inner_w / max(len(days), 1)
    bars = []
    for i, ((ts, counts), total) in enumerate(zip(days, totals, strict=True)):
        x = PAD_LEFT + i * slot + slot * 0.15
        y = float(PAD_TOP + inner_h)
        segments = []
        for result in RESULTS:
            n = counts.get(result, 0)
            if not n:
                continue
            h = inner_h * n / top
            y -= h
            segments.append({"result": result, "n": n, "y": round(y, 1), "h": round(h, 1)})
        day = datetime.fromtimestamp(ts / 1000, UTC)
        bars.append(
            {
                "x": round(x, 1),
                "w": round(slot * 0.7, 1),
                "label": day.strftime("%b %-d"),
                "show_label": (len(days) - 1 - i) % 7 == 0,  # back from today
                "segments": segments,
                "total": total,
                "counts": {r: counts.get(r, 0) for r in RESULTS},
                "title": f"{day.strftime('%b %-d')}: {total} checks",
            }
        )
    ticks = [
        {"y": round(PAD_TOP + inner_h - inner_h * v / top, 1), "v": v} for v in (0, top // 2, top)
    ]
    busiest = max(range(len(totals)), key=lambda i: totals[i]) if totals and any(totals) else None
    desc = (
        f"{sum(totals)} checks over {len(days)} days; the busiest day, "
        f"{bars[busiest]['label']}, had {totals[busiest]}."
        if busiest is not None
        else f"No checks in the last {len(days)} days."
    )
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "baseline": PAD_TOP + inner_h,
        "left": PAD_LEFT,
        "bars": bars,
        "ticks": ticks,
        "desc": desc,
        "total": sum(totals),
    }


def _amounts_text(amounts: Mapping[str, str]) -> str:
    from claros.web.templating import _money

    return ", ".join(
        _money(v, c if c != "unknown" else "(no currency)") for c, v in amounts.items()
    )


def near_chart(near: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Near-misses by severity (high: stops, medium: asks, low: nudges) with amounts."""
    top = max((int(v["count"]) for v in near.values()), default=0) or 1
    rows: list[dict[str, Any]] = []
    for i, severity in enumerate(("high", "medium", "low")):
        count = int(near.get(severity, {}).get("count", 0))
        amounts = near.get(severity, {}).get("amounts") or {}
        rows.append(
            {
                "severity": severity,
                "count": count,
                "y": 8 + i * 34,
                "w": round(BAR * count / top, 1),
                "amounts": _amounts_text(amounts),
            }
        )
    total = sum(r["count"] for r in rows)
    desc = "; ".join(
        f"{r['severity']}: {r['count']}" + (f" ({r['amounts']})" if r["amounts"] else "")
        for r in rows
    )
    return {"rows": rows, "total": total, "desc": f"{total} near-misses. {desc}."}


def coverage_chart(agents: Sequence[Any]) -> dict[str, Any]:
    """Coverage per agent: checked writes ÷ (checked + ran unchecked), or unknown."""
    rows = []
    for i, agent in enumerate(agents):
        value = agent.coverage
        rows.append(
            {
                "name": agent.name,
                "y": 8 + i * 30,
                "pct": None if value is None else round(value * 100),
                "w": 0 if value is None else round(BAR * value, 1),
                "checked": agent.checked,
                "unchecked": agent.unchecked,
            }
        )
    desc = "; ".join(
        f"{r['name']}: {r['pct']}%" if r["pct"] is not None else f"{r['name']}: unknown"
        for r in rows
    )
    return {"rows": rows, "height": 10 + 30 * max(len(rows), 1), "desc": desc or "No agents."}
