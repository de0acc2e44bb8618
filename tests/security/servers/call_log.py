"""The call log the example servers share: each tool call appended as a JSON line to
``$EXAMPLE_CALL_LOG`` (when set), for tests to see what reached the app. A server run as a
script finds this module beside it (its directory is the first on ``sys.path``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any


def call_logger(app: str) -> Callable[[str, dict[str, Any]], None]:
    """``log(tool, arguments)`` for the calls of ``app``."""

    def log(tool: str, arguments: dict[str, Any]) -> None:
        path = os.environ.get("EXAMPLE_CALL_LOG")
        if path:
            with open(path, "a", encoding="utf-8") as fh:  # noqa: PTH123
                fh.write(json.dumps({"app": app, "tool": tool, "arguments": arguments}) + "\n")

    return log
