"""The ``claros`` command.

    claros serve [--data DIR] [--host H] [--port P]   the local Claros server
    claros rules push FILE [--made-by M]             send rules (YAML or JSON)
    claros mappings push FILE                        send mappings (YAML or JSON)
    claros guard --app NAME [...] -- COMMAND...     wrap an MCP server, check its writes
    claros hooks install [--project|--user]          add the Claude Code hooks
    claros hook pre|post                             run a Claude Code hook
    claros verify [--export FILE] [--checkpoints F]  re-check the ledger or an export here
    claros login [--url URL]                         sign this machine in (saves a key)

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


def _push(args: argparse.Namespace) -> int:
    from claros_guard.client import Client, ClientError
    from claros_guard.push import push_mappings, push_rules

    try:
        with Client(args.url, args.key) as client:
            if args.command == "rules":
                return push_rules(client, args.file, args.made_by)
            return push_mappings(client, args.file)
    except ClientError as exc:
        print(f"claros {args.command} push: {exc}", file=sys.stderr)
        return 2


def _add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="the Claros server (default $CLAROS_URL)")
    parser.add_argument("--key", help="an admin key (default $CLAROS_KEY)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="claros", description="Claros: guard agents' writes.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the local Claros server (SQLite, key file)")
    serve.add_argument("--data", default=os.environ.get("CLAROS_DATA", ".claros"))
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=int(os.environ.get("CLAROS_PORT", "8787")))
    serve.set_defaults(run=_serve)

    rules = sub.add_parser("rules", help="manage rules")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True, metavar="COMMAND")
    push = rules_sub.add_parser("push", help="send rules from a YAML or JSON file")
    push.add_argument("file")
    push.add_argument(
        "--made-by",
        choices=["expert", "override", "precedents", "manual"],
        default="manual",
        help="what made these rule versions (their confirm record)",
    )
    _add_connection(push)
    push.set_defaults(run=_push)

    mappings = sub.add_parser("mappings", help="manage mappings (which facts a tool needs)")
    mappings_sub = mappings.add_subparsers(dest="mappings_command", required=True,
                                           metavar="COMMAND")  # fmt: skip
    mpush = mappings_sub.add_parser("push", help="send mappings from a YAML or JSON file")
    mpush.add_argument("file")
    _add_connection(mpush)
    mpush.set_defaults(run=_push)

    from claros_guard import verify

    verify.add_parser(sub)

    from claros_guard import commands

    commands.register(sub)

    from claros_guard import login

    login.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
