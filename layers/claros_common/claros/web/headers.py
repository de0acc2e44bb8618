"""Every page's response headers, in a module of their own: the export function sends
them with the printable report without importing the pages (claros.web.pages imports the
HTML helpers, the views and importlib.resources, a cold start's cost it does not need)."""

from __future__ import annotations

__all__ = ["PAGE_HEADERS"]

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
