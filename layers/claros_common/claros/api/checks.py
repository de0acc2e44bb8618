"""JSON routes of Activity and one check (the admin function): ``GET /api/checks`` and
``GET /api/checks/{check_id}`` (docs/api.md). The web app's pages (``claros.api.web_activity``,
the web function) ask these routes in-process, so page and API show the same data."""

from __future__ import annotations

from typing import Any

from claros.activity import list_activity, parse_activity
from claros.api.http import ClarosResolver, json_response, routed
from claros.auth import Principal
from claros.check_view import check_detail

__all__ = ["READERS", "register"]

# Who reads checks: people (admins everything, members their own and their agents') and
# audit keys (they read the ledger's records). Agent and service keys do not browse them.
READERS = frozenset({"admin", "person", "audit"})


def register(app: ClarosResolver) -> None:
    store = app.services.store

    @routed(app, "GET", "/api/checks", READERS)
    def checks(principal: Principal) -> Any:
        query = dict(app.current_event.query_string_parameters or {})
        return json_response(list_activity(store, principal, parse_activity(query)))

    @routed(app, "GET", "/api/checks/{check_id}", READERS)
    def one_check(principal: Principal, check_id: str) -> Any:
        return json_response(check_detail(store, principal, check_id))
