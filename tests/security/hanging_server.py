"""A real local server whose ``POST /v1/unchecked`` stops half-way: it takes the
request's Idempotency-Key, prints ``holding`` and never finishes, so a test can kill -9
the process mid-request.

    python -m tests.security.hanging_server DATA_DIR   (prints "port N" once listening)
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import claros.api.outcome as outcome_routes
from claros.config import Settings
from claros.local import LocalServer
from claros.signing import FileSigner
from claros.store.sqlite import SqliteStore
from claros.wiring import Services


def _hang(*args: Any, **kwargs: Any) -> Any:
    print("holding", flush=True)
    threading.Event().wait()  # until the test kills the process


def main() -> None:
    data = Path(sys.argv[1])
    settings = Settings(data_dir=data, checkpoint_every=1000, checkpoint_max_age_s=3600)
    outcome_routes.record_unchecked = _hang  # type: ignore[attr-defined]  # looked up per call
    services = Services(settings, SqliteStore(data / "claros.db"), FileSigner(data))
    server = LocalServer(services, "127.0.0.1", 0)
    print(f"port {server.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
