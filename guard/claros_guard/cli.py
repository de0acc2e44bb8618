"""The `claros` command.

    claros serve [--data DIR] [--host H] [--port P]   the local Claros server
    claros rules push FILE [--made-by M]             send rules (YAML or JSON)
    claros mappings push FILE                        send mappings (YAML or JSON)
    claros mappings propose APP TOOL [--write FILE]  a mapping draft from Claros
    claros tools confirm APP TOOL                    confirm a held tool is a read (admin)
    claros guard --app NAME [...] -- COMMAND...     wrap an MCP server, check its writes
    claros hooks install [--project|--user]          add the Claude Code hooks
    claros hook pre|post                             run a Claude Code hook
    claros verify [--export FILE] [--checkpoints F]  re-check the ledger or an export here
    claros login [--url URL]                         sign this machine in (saves a key)
    claros keys create [--stack S|--data D] ...      make a key in the store (server extra)

Server-side commands import the server package only when they run, so the client side
(guard, hooks, verify) installs and starts without it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


class UsageError(Exception):
    """A command line or setting that cannot be used: one line on stderr, exit 2."""


PORTS = "a whole number from 0 to 65535"


def port_number(text: str) -> int:
    """A TCP port (0: any free one); ValueError naming the range otherwise."""
    try:
        port = int(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a port ({PORTS})") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{port} is not a port ({PORTS})")
    return port


def _port_arg(text: str) -> int:
    try:
        return port_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _serve_port(args: argparse.Namespace) -> int:
    if args.port is not None:
        return int(args.port)
    text = os.environ.get("CLAROS_PORT") or "8787"  # read here, never while parsing
    try:
        return port_number(text)
    except ValueError as exc:
        raise UsageError(f"CLAROS_PORT: {exc}") from None


def _serve(args: argparse.Namespace) -> int:
    import logging  # here, not at the top: a hook run must not pay for what serve uses
    import sqlite3

    try:
        from claros.config import ConfigError, Settings
        from claros.local import serve
        from claros.store.base import StoreError
        from claros.wiring import build_services
    except ImportError as exc:  # pragma: no cover - depends on the install
        print(f"claros serve needs the server extra (pip install 'getclaros[server]'): {exc}",
              file=sys.stderr)  # fmt: skip
        return 2
    from claros_guard.errors import ConfigError as LevelError
    from claros_guard.logs import log_level

    port = _serve_port(args)
    data = args.data if args.data is not None else os.environ.get("CLAROS_DATA") or ".claros"
    try:
        settings = Settings.from_env().replace(data_dir=data)
        # WARNING leaves out the line per request (the access log) and its cost.
        level = log_level()
    except (ConfigError, LevelError) as exc:
        raise UsageError(str(exc)) from None
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(message)s")
    try:
        services = build_services(settings)
    except (StoreError, OSError, sqlite3.Error) as exc:
        why = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        raise UsageError(f"cannot use the data directory {data}: {why}") from None
    try:
        serve(services, args.host, port)
    except OSError as exc:
        print(f"claros serve: cannot listen on {args.host}:{port}: {exc}", file=sys.stderr)
        return 2
    return 0


def _keys(args: argparse.Namespace) -> int:
    try:
        from claros.auth import main as keys_main
    except ImportError as exc:  # pragma: no cover - depends on the install
        print(f"claros keys needs the server extra (pip install 'getclaros[server]'): {exc}",
              file=sys.stderr)  # fmt: skip
        return 2
    return keys_main(list(args.rest), prog="claros keys")


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


def _propose(args: argparse.Namespace) -> int:
    from claros_guard.client import Client, ClientError
    from claros_guard.propose import propose

    try:
        with Client(args.url, args.key) as client:
            return propose(client, args.app, args.tool, args.write)
    except ClientError as exc:
        print(f"claros mappings propose: {exc}", file=sys.stderr)
        return 2


def _tools_confirm(args: argparse.Namespace) -> int:
    from claros_guard.api import segment
    from claros_guard.client import ApiError, Client, ClientError

    path = f"/api/apps/{segment(args.app)}/tools/{segment(args.tool)}/confirm"
    try:
        with Client(args.url, args.key) as client:
            answer = client.json("POST", path)
    except ClientError as exc:
        raise UsageError(str(exc)) from None
    except ApiError as exc:
        print(f"FAIL: {args.app} {args.tool}: {exc.message}", file=sys.stderr)
        return 1
    if not isinstance(answer, dict) or answer.get("read") is not True:
        raise UsageError(f"POST {path} did not answer like Claros: {answer!r:.80}")
    restored = answer.get("restored") or []
    print(f"OK: {args.app} {args.tool} is a read (confirmed by {answer.get('confirmed_by')})")
    for mapping in restored:
        print(f"OK: mapping {mapping} is active again")
    return 0


def _add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="the Claros server (default $CLAROS_URL)")
    parser.add_argument("--key", help="an admin key (default $CLAROS_KEY)")


class _Version(argparse.Action):
    """`--version`: the installed version, looked up only when asked for (see VERSION)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from claros_guard import VERSION

        print(f"claros {VERSION}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="claros", description="Claros: guard agents' writes.")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the local Claros server (SQLite, key file)")
    serve.add_argument("--data", help="the data directory (default $CLAROS_DATA or .claros)")
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)"
    )
    serve.add_argument(
        "--port", type=_port_arg, help=f"{PORTS}; 0 picks a free one (default $CLAROS_PORT or 8787)"
    )
    serve.set_defaults(run=_serve)

    keys = sub.add_parser(
        "keys",
        help="make a key in the store: the first admin key (server extra)",
        add_help=False,  # `claros keys --help` is the key command's own help
    )
    keys.add_argument("rest", nargs=argparse.REMAINDER)
    keys.set_defaults(run=_keys)

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
    mpropose = mappings_sub.add_parser(
        "propose",
        help="ask Claros for a mapping draft for a write tool (an admin key)",
        description="Claros proposes which facts the tool needs and which read tools give "
        "them, from the registered tools and the rules on it; push the file to save it.",
    )
    mpropose.add_argument("app")
    mpropose.add_argument("tool")
    mpropose.add_argument("--write", metavar="FILE", help="write the draft to FILE (new)")
    _add_connection(mpropose)
    mpropose.set_defaults(run=_propose)

    tools = sub.add_parser("tools", help="manage how the workspace counts tools (reads, writes)")
    tools_sub = tools.add_subparsers(dest="tools_command", required=True, metavar="COMMAND")
    confirm = tools_sub.add_parser(
        "confirm",
        help="confirm that a tool Claros holds as a write is a read (an admin key)",
        description="A tool registered as a write that a guard now reports as a read stays a "
        "write until an admin confirms the change; this confirms it (a ledger entry).",
    )
    confirm.add_argument("app")
    confirm.add_argument("tool")
    _add_connection(confirm)
    confirm.set_defaults(run=_tools_confirm)

    from claros_guard import verify

    verify.add_parser(sub)

    from claros_guard import commands

    commands.register(sub)

    from claros_guard import login

    login.add_parser(sub)
    return parser


def _parser_for(words: list[str]) -> argparse.ArgumentParser:
    """The whole parser; for ``claros verify``, one with that command only: verifying a
    big export is timed from the first byte, and importing every other command's modules
    (the MCP SDK, httpx) costs more than verifying 50,000 entries."""
    if words[:1] != ["verify"]:
        return build_parser()
    from claros_guard import verify

    parser = argparse.ArgumentParser(prog="claros", description="Claros: guard agents' writes.")
    verify.add_parser(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def _name(args: argparse.Namespace) -> str:
    words = [args.command]
    for sub in ("rules_command", "mappings_command", "tools_command", "hooks_command", "kind"):
        if isinstance(getattr(args, sub, None), str):
            words.append(getattr(args, sub))
    return " ".join(words)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if len(words) == 2 and words[0] == "hook" and words[1] in ("pre", "post"):
        # Claude Code runs a hook for every tool call: straight to it, without the parser
        # (which imports every command's module); most calls then pass in milliseconds.
        from claros_guard.hook_gate import run_hook

        return run_hook(words[1])
    if words[:1] == ["keys"]:  # the key command parses its own options, --help included
        return _keys(argparse.Namespace(rest=words[1:]))
    args = _parser_for(words).parse_args(words)
    try:
        code = int(args.run(args))
    except UsageError as exc:
        print(f"claros {_name(args)}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: one line, the traceback only when asked for
        if os.environ.get("CLAROS_LOG", "").upper() == "DEBUG":
            raise
        what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        print(
            f"claros {_name(args)}: unexpected error: {what} (CLAROS_LOG=DEBUG shows where)",
            file=sys.stderr,
        )
        # A PreToolUse hook exiting 2 blocks the call (fail closed); a post hook never
        # blocks.
        return 0 if args.command == "hook" and args.kind == "post" else 2
    if argv is None and args.command == "verify":
        # This process ends now. Its last collection, at exit, would walk every object
        # it holds (~8 ms after a large export, the time a user waits for the prompt):
        # nothing left needs one, so none is made.
        import gc

        gc.freeze()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
