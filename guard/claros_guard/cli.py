"""The ``claros`` command.

    claros serve [--data DIR] [--host H] [--port P]   the local Claros server

Server-side commands import the server package only when they run, so the client side
(guard, hooks, verify) installs and starts without it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _serve(args: argparse.Namespace) -> int:
    try:
        from claros.config import Settings
        from claros.local import serve
        from claros.wiring import build_services
    except ImportError as exc:  # pragma: no cover - depends on the install
        print(f"claros serve needs the server extra (pip install 'claros[server]'): {exc}",
              file=sys.stderr)  # fmt: skip
        return 2
    settings = Settings.from_env().model_copy(update={"data_dir": args.data})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        services = build_services(settings)
        serve(services, args.host, args.port)
    except OSError as exc:
        print(f"claros serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="claros", description="Claros: guard agents' writes.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the local Claros server (SQLite, key file)")
    serve.add_argument("--data", default=os.environ.get("CLAROS_DATA", ".claros"))
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=int(os.environ.get("CLAROS_PORT", "8787")))
    serve.set_defaults(run=_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
