"""The HTTP edge: a thread-safe resolver, body parsing with limits, auth per route.

Powertools keeps the current event on a class attribute (``BaseRouter.current_event``),
which is fine in Lambda (one request at a time) but would mix requests up in the local
server's threads. ``ClarosResolver`` keeps it per thread instead; the local server also
builds one resolver per thread.

Who calls: every route states the key kinds it accepts (``PERMISSIONS``). The caller is the
``Authorization: Bearer`` key; a route declared with ``web=True`` (every GET route unless it
says otherwise, and the web app's pages) also accepts a signed-in person's session cookie
when no Authorization header is sent; on a state-changing method the cookie must come with
the session's CSRF token and a same-site Origin (``claros.web.sessions``). The few routes a
person or a CLI reaches before holding any credential are declared with ``public()`` and
listed, with why, in ``PUBLIC``.
"""

from __future__ import annotations

import base64
import functools
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, runtime_checkable
from urllib.parse import quote, unquote

from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver, Response
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from claros import jsonutil
from claros.auth import Principal, authenticate, require
from claros.config import Settings
from claros.errors import BadRequestError, PayloadTooLargeError
from claros.web.sessions import request_principal
from claros.wiring import Services

if TYPE_CHECKING:
    # pydantic at run time only where a route validates a body (validate_object): the
    # functions whose routes never do are spared importing it (claros.config says why).
    from pydantic import BaseModel, ValidationError

    from claros.api.idempotency import KeyedAnswer

__all__ = [
    "ADMIN_ANSWERS",
    "CHECK_ANSWERS",
    "OUTCOME_ANSWERS",
    "PERMISSIONS",
    "PAGES",
    "PUBLIC",
    "WEB",
    "ClarosResolver",
    "Handler",
    "caller",
    "declare",
    "json_response",
    "parse_body",
    "public",
    "query_int",
    "routed",
    "template_only",
]

M = TypeVar("M", bound="BaseModel")

# Where each function keeps the answers it gave under an Idempotency-Key: a collection of
# its own, which only its role may write (template.yaml, WriteItsOwnDocsOnly). In one shared
# collection the outcome role rewrote a check's kept answer, and the guard's retry of that
# check was let through (tests/security/aws/test_outcome_role_plants_a_check_answer.py).
# Here, not in claros.api.idempotency, which the check and outcome functions import only
# when a request carries a key (a cold start's cost).
CHECK_ANSWERS = "idempotency_check"  # POST /v1/check
OUTCOME_ANSWERS = "idempotency_outcome"  # the outcome routes and POST /v1/unchecked
ADMIN_ANSWERS = "idempotency"  # the admin function's overrides

# Every answer is written with claros.jsonutil: its writer is imported with the HTTP edge
# (a function's init), not by the first answer (jsonutil imports it on first use for the
# processes that never write, the authorizer).
jsonutil.load_writer()


@runtime_checkable
class LambdaContextLike(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


Handler = Callable[..., Any]

# (method, path) -> the key kinds the route accepts. Filled as routes are declared; the
# permission test walks it so no route escapes the route x kind matrix.
PERMISSIONS: dict[tuple[str, str], frozenset[str]] = {}
# (method, path) -> why the route takes no credential at all. tests/web pins this set, so a
# new public route is a deliberate, reviewed change.
PUBLIC: dict[tuple[str, str], str] = {}
# (method, path) of the routes that also take a session cookie (``web``), and of the web
# app's pages a browser GETs (a signed-out browser is sent to sign-in by the page's own
# check). template.yaml gives each its HTTP API authorizer (tests/aws/test_template.py).
WEB: set[tuple[str, str]] = set()
PAGES: set[tuple[str, str]] = set()


class ClarosResolver(APIGatewayHttpResolver):
    def __init__(self, services: Services) -> None:
        super().__init__(serializer=jsonutil.dumps)
        self.services = services
        self._local = threading.local()
        # Set by the web app's routes (claros.api.web): the page for a path no route serves
        # (None: not one of its paths, the API's JSON 404 applies).
        self.page_not_found: Callable[[], Response[str] | None] | None = None

    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEventV2:
        return cast(APIGatewayProxyEventV2, self._local.__dict__.get("event"))

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEventV2) -> None:
        self._local.event = value

    @property
    def lambda_context(self) -> Any:
        return self._local.__dict__.get("lambda_context")

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._local.lambda_context = value

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        event = _routable(event)
        self._local.event = APIGatewayProxyEventV2(event)
        self._local.lambda_context = context
        return super().resolve(event, context)

    def _convert_matches_into_route_keys(self, match: re.Match[str]) -> dict[str, str]:
        # Path parameters are matched percent-encoded (so an app named "team/shop" travels
        # as one segment, team%2Fshop) and reach every handler decoded, once, here.
        return {name: unquote(value) for name, value in match.groupdict().items()}

    @property
    def acting_principal(self) -> Principal | None:
        return cast("Principal | None", self._local.__dict__.get("acting"))

    @contextmanager
    def acting_as(self, principal: Principal) -> Iterator[None]:
        """Resolve in-process requests as ``principal``, already authenticated by the caller
        (a web page showing another route's answer). Only code can set it, never a request;
        the route still checks the principal's kind."""
        self._local.acting = principal
        try:
            yield
        finally:
            self._local.acting = None


_PARAM = re.compile(r"\{(\w+)\}")


def _routable(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event with its path as the resolver routes it: percent-encoded, each parameter
    one segment.

    The local server passes the path as the client sent it. API Gateway has routed the
    request already: its ``routeKey`` names the route and ``pathParameters`` holds the
    values, decoded, while its ``rawPath`` may arrive decoded too, where a "/" inside a
    parameter can no longer be told from the path's own. So the path is rebuilt from the
    route and its parameters, each encoded; both then decode each parameter once."""
    out = dict(event)
    method, _, template = str(out.get("routeKey") or "").partition(" ")
    params = out.get("pathParameters")
    if not method or not template.startswith("/") or not isinstance(params, Mapping):
        return out
    try:
        path = _PARAM.sub(lambda m: quote(str(params[m.group(1)]), safe=""), template)
    except KeyError:
        return out
    if "{" in path:  # a greedy {proxy+} route: leave the path as it came
        return out
    context = dict(out.get("requestContext") or {})
    http = dict(context.get("http") or {})
    stage = str(context.get("stage") or "$default")
    if stage != "$default" and str(http.get("path") or "").startswith(f"/{stage}/"):
        path = f"/{stage}{path}"
    http["path"] = path
    context["http"] = http
    out["requestContext"] = context
    out["rawPath"] = path
    return out


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response[str]:
    return Response(status, "application/json", jsonutil.dumps(body), headers=headers)


def declare(method: str, path: str, kinds: frozenset[str] | set[str]) -> str:
    """Record the kinds a route accepts; returns the route as Powertools writes it."""
    kinds = frozenset(kinds)
    if (method, path) in PUBLIC:
        raise RuntimeError(f"{method} {path} is declared public")
    previous = PERMISSIONS.setdefault((method, path), kinds)
    if previous != kinds:
        raise RuntimeError(f"{method} {path} declared twice with different kinds")
    return path.replace("{", "<").replace("}", ">")


def caller(
    app: ClarosResolver,
    kinds: frozenset[str],
    *,
    web: bool,
    refusal: str | None = None,
    hand: bool = True,
) -> Principal:
    """Who is calling, and that their kind may: the bearer key; with ``web`` and no
    Authorization header, the session cookie (on state-changing methods CSRF-checked, and
    needing the session's hand unless ``hand`` is False: sign-out).
    ``refusal``: the route's reason for a 403 to other kinds ("<kind> keys <refusal>")."""
    acting = app.acting_principal
    if acting is not None:
        return require(acting, kinds, refusal)
    found = request_principal(app.services, app.current_event, web=web, hand=hand)
    return require(found, kinds, refusal)


def routed(
    app: ClarosResolver,
    method: str,
    path: str,
    kinds: frozenset[str] | set[str],
    *,
    web: bool | None = None,
    refusal: str | None = None,
) -> Callable[[Handler], Handler]:
    """Declare a route and the key kinds it accepts; the handler gets the Principal first.

    ``path`` is written the API Gateway way (``/v1/check/{check_id}/outcome``). ``web``:
    also accept a signed-in person's session cookie; by default GET routes do (reading
    what the person's key may read, e.g. an export link on a page) and others do not.
    ``refusal`` says why other kinds get a 403 ("agent keys never answer asks: ...")."""
    kinds = frozenset(kinds)
    rule = declare(method, path, kinds)
    by_session = method == "GET" if web is None else web
    if by_session:
        WEB.add((method, path))

    def decorate(fn: Handler) -> Handler:
        @functools.wraps(fn)
        def handler(**params: str) -> Any:
            return fn(caller(app, kinds, web=by_session, refusal=refusal), **params)

        app.route(rule, method)(handler)
        return fn

    return decorate


def public(
    app: ClarosResolver, method: str, path: str, *, reason: str
) -> Callable[[Handler], Handler]:
    """Declare a route that takes no credential (``reason`` says why); the handler gets
    only the path parameters. Keep these few: sign-in, device sign-in, static files."""
    if (method, path) in PERMISSIONS:
        raise RuntimeError(f"{method} {path} is declared with key kinds")
    PUBLIC[(method, path)] = reason
    rule = path.replace("{", "<").replace("}", ">")

    def decorate(fn: Handler) -> Handler:
        app.route(rule, method)(fn)
        return fn

    return decorate


def template_only(method: str, path: str, *, reason: str) -> None:
    """A route API Gateway sends to a function whose resolver has no route for it (a
    greedy ``{proxy+}`` catch-all: the not-found handler answers). Recorded as public
    (no credential at the gateway, ``reason`` says why) so the template tests see it."""
    if (method, path) in PERMISSIONS:
        raise RuntimeError(f"{method} {path} is declared with key kinds")
    PUBLIC[(method, path)] = reason


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def raw_body(event: APIGatewayProxyEventV2, settings: Settings) -> bytes:
    body = event.get("body") or ""
    data = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8")
    if len(data) > settings.max_body_bytes:
        raise PayloadTooLargeError(
            f"body is {len(data)} bytes; the limit is {settings.max_body_bytes}"
        )
    return data


def parse_json(event: APIGatewayProxyEventV2, settings: Settings) -> Any:
    data = raw_body(event, settings)
    if not data.strip():
        raise BadRequestError("the body is empty; send a JSON object")
    try:
        value = jsonutil.loads(data)
    except RecursionError as exc:
        raise BadRequestError(f"JSON nested deeper than {settings.max_depth} levels") from exc
    except ValueError as exc:
        raise BadRequestError(f"malformed JSON: {exc}") from exc
    # Each level opens with a bracket: a body with no more brackets than the limit (most,
    # a check's included) cannot nest deeper, and is not walked.
    brackets = data.count(b"[") + data.count(b"{")
    if brackets > settings.max_depth and _depth(value, settings.max_depth) > settings.max_depth:
        raise BadRequestError(f"JSON nested deeper than {settings.max_depth} levels")
    return value


def validation_details(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {"field": ".".join(str(p) for p in err["loc"]) or "(body)", "problem": err["msg"]}
        for err in exc.errors(include_url=False, include_input=False)
    ]


def parse_body(app: ClarosResolver, model: type[M]) -> M:
    return validate_object(parse_json(app.current_event, app.services.settings), model)


def validate_object(value: Any, model: type[M]) -> M:
    """A parsed body as ``model``, or a 400 naming each field that is wrong."""
    from pydantic import ValidationError  # loaded already: ``model`` is a pydantic model

    if not isinstance(value, dict):
        raise BadRequestError(f"the body must be a JSON object, not {type(value).__name__}")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        details = validation_details(exc)
        first = details[0]
        raise BadRequestError(
            f"invalid request: {first['field']}: {first['problem']}", details=details
        ) from exc


# The largest whole number a query parameter may carry unless its route says less: the
# largest integer JSON clients (JavaScript) hold exactly, far below SQLite's 2^63 - 1.
MAX_QUERY_INT = 2**53 - 1


def query_int(
    app: ClarosResolver, name: str, default: int, *, minimum: int = 0, maximum: int = MAX_QUERY_INT
) -> int:
    raw = (app.current_event.query_string_parameters or {}).get(name)
    if raw is None or raw == "":
        return default
    digits = raw[1:] if raw.startswith("-") else raw
    if not (digits.isascii() and digits.isdigit()):
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise BadRequestError(f"query parameter {name} must be a whole number, not {shown!r}")
    # A number too long to convert cheaply is out of range, whatever its digits.
    if len(digits) > 30 or not minimum <= (value := int(raw)) <= maximum:
        raise BadRequestError(f"query parameter {name} must be between {minimum} and {maximum}")
    return value


def _time_budget(context: Any) -> LambdaContextLike | None:
    """The context if it gives the request's time left. What ``isinstance`` with the
    runtime-checkable protocol tests (the method is there), without its per-call walk of
    the protocol's members (measured: ~5% of a "need" check's CPU)."""
    has = callable(getattr(context, "get_remaining_time_in_millis", None))
    return cast(LambdaContextLike, context) if has else None


def _key_header(app: ClarosResolver) -> dict[str, str]:
    from claros.api.idempotency import HEADER

    # Only the Idempotency-Key header is read: found in the event's own headers (the last
    # of any spelling, as the case-insensitive copy Powertools would build per call keeps).
    headers: dict[str, str] = {}
    for name, value in (app.current_event.get("headers") or {}).items():
        if name.lower() == HEADER:
            headers[HEADER] = value
    return headers


def once(
    app: ClarosResolver,
    principal: Principal,
    route: str,
    run: Callable[[], tuple[int, Any]],
    collection: str = ADMIN_ANSWERS,
) -> Response[str]:
    """Run a write at most once per ``Idempotency-Key`` (see claros.api.idempotency), its
    answer kept in ``collection``: the calling function's own, which no other role writes."""
    from claros.api.idempotency import run_idempotently

    event = app.current_event
    headers = _key_header(app)
    return run_idempotently(
        app.services.store, principal, route, headers, event.body, run,
        _time_budget(app.lambda_context), collection,
    )  # fmt: skip


def once_in_append(
    app: ClarosResolver,
    principal: Principal,
    route: str,
    run: Callable[[KeyedAnswer | None], tuple[int, Any]],
    collection: str = ADMIN_ANSWERS,
) -> Response[str]:
    """``once`` for a write that is one append of a record the store refuses twice: the
    key's record is written in that append (claros.api.idempotency.run_in_append)."""
    from claros.api.idempotency import run_in_append

    return run_in_append(
        app.services.store, principal, route, _key_header(app), app.current_event.body, run,
        _time_budget(app.lambda_context), collection,
    )  # fmt: skip


def principal_of(app: ClarosResolver) -> Principal:
    return authenticate(
        app.services.store,
        app.current_event.headers.get("authorization"),
        note_use=app.services.settings.notes_key_use,
    )
