"""``python -m bench [append] [verify] [hooks] ...``: run the named benchmarks (default: all)."""

from __future__ import annotations

import sys
from typing import Any

from bench import (
    append,
    append_dynamo,
    append_sqlite,
    canonical,
    capacity,
    coldstart,
    decide,
    export,
    first_request,
    guard,
    hooks,
    pages,
    roundtrip,
    server,
    verify,
)


def append_group(
    writers: tuple[int, ...] | None = None, total: int | None = None
) -> list[dict[str, object]]:
    """Group commit against the append before it, SQLite and DynamoDB (moto): writer
    threads of one process, then writer processes (the pending queue)."""
    sqlite_args: dict[str, Any] = {}
    dynamo_args: dict[str, Any] = {}
    if writers is not None:
        sqlite_args["writers_list"] = dynamo_args["writers_list"] = writers
    if total is not None:
        sqlite_args["total"] = dynamo_args["total"] = total
    if writers is not None:
        dynamo_args["processes_list"] = tuple(w for w in writers if w > 1) or (2,)
    return append_sqlite.main(**sqlite_args) + append_dynamo.main(**dynamo_args)


BENCHES = {
    "append": append.main,
    "append_group": append_group,
    "canonical": canonical.main,
    "verify": verify.main,
    "decide": decide.main,
    "guard": guard.main,
    "export": export.main,
    "hooks": hooks.main,
    "server": server.main,
    "pages": pages.main,
    "coldstart": coldstart.main,
    "first_request": first_request.main,
    "capacity": capacity.main,
    "roundtrip": roundtrip.main,
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHES)}",
              file=sys.stderr)  # fmt: skip
        return 2
    for name in names:
        BENCHES[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
