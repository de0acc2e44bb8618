"""Streamed response bodies, for answers too large to build in memory (the export).

Powertools answers with a whole body. A route that streams calls :func:`streamed`: when
the transport can stream (the local server opens :func:`accepting` around the request),
the chunks are handed to it and written as they come (HTTP/1.1 chunked); otherwise (a
Lambda response) they are joined into the body, as any other answer. One code path: the
route does not know which transport runs it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from aws_lambda_powertools.event_handler.api_gateway import Response

__all__ = ["Pending", "accepting", "streamed"]

_state = threading.local()


class Pending:
    """The chunks of the current request's body, once a route has streamed one."""

    def __init__(self) -> None:
        self.chunks: Iterable[bytes] | None = None


@contextmanager
def accepting() -> Iterator[Pending]:
    """Around one request on a transport that can stream (per thread)."""
    pending = Pending()
    _state.pending = pending
    try:
        yield pending
    finally:
        _state.pending = None


def streamed(
    chunks: Iterable[bytes], content_type: str, headers: Mapping[str, str] | None = None
) -> Response[str]:
    pending: Pending | None = getattr(_state, "pending", None)
    if pending is None:
        body = b"".join(chunks).decode("utf-8")
        return Response(200, content_type, body, headers=dict(headers or {}))
    pending.chunks = chunks
    return Response(200, content_type, "", headers=dict(headers or {}))
