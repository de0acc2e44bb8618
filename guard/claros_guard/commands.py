"""The guard's subcommands of ``claros``: ``guard``, ``hooks install`` and ``hook pre|post``.

Kept apart from ``cli.py`` so that the parser stays light: each command imports what it
runs (the MCP SDK, anyio) only when it runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["NAME_HELP", "add_guard_arguments", "register"]

NAME_HELP = "letters, digits and _.:/@+-"


def add_guard_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app", help=f"the Claros app the wrapped server is ({NAME_HELP})")
    parser.add_argument("--url", help="the Claros server (default $CLAROS_URL)")
    parser.add_argument("--key", help="the Claros key (default $CLAROS_KEY)")
    parser.add_argument(
        "--fail-open",
        action="store_true",
        help="when Claros or a read fails, forward the write (reported as "
        "unchecked) instead of blocking it",
    )
    parser.add_argument(
        "--read",
        action="append",
        default=[],
        metavar="TOOL",
        help="treat TOOL as a read (after its readOnlyHint)",
    )
    parser.add_argument(
        "--write",
        action="append",
        default=[],
        metavar="TOOL",
        help="treat TOOL as a write (after its readOnlyHint)",
    )
    parser.add_argument(
        "--ask-wait",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long a call waits for an approval (default 120)",
    )
    parser.add_argument(
        "--read-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a read for a check may take (default 30)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="how long a request to Claros may take (default $CLAROS_TIMEOUT or 10)",
    )
    parser.add_argument(
        "--upstream-url", metavar="URL", help="wrap a Streamable HTTP server instead of a command"
    )
    parser.add_argument(
        "--config", metavar="FILE", help="wrap the servers a YAML file lists (see docs/guard.md)"
    )
    parser.add_argument(
        "upstream_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND",
        help="the MCP server to wrap, after --",
    )


def _guard(args: argparse.Namespace) -> int:
    from claros_guard.guard import main

    return main(args)


def _hooks_install(args: argparse.Namespace) -> int:
    from claros_guard.errors import ConfigError
    from claros_guard.hooks import hook_command, install

    try:
        path, added = install("user" if args.user else "project")
    except ConfigError as exc:
        print(f"claros hooks install: {exc}", file=sys.stderr)
        return 2
    if added:
        runner = hook_command("pre").removesuffix(" pre")
        print(f"OK: the {', '.join(added)} hooks in {path} run `{runner} pre|post`")
        if runner.startswith("npx "):
            print("(claros is not on PATH here: the hooks reach it through npx getclaros)")
    else:
        print(f"OK: {path} has the Claros hooks already (nothing changed)")
    print(
        "The hooks use CLAROS_URL and CLAROS_KEY from Claude Code's environment, "
        "else the key claros login saved."
    )
    return 0


def _hook(args: argparse.Namespace) -> int:
    from claros_guard.hook_gate import run_hook

    return run_hook(args.kind)


def register(sub: Any) -> None:
    """Add the commands to ``claros``'s subparsers."""
    guard = sub.add_parser(
        "guard",
        help="wrap an MCP server: check its writes with Claros",
        description="Serve the wrapped MCP server to the agent on stdio, checking every "
        "write with Claros first. Example: claros guard --app shop -- python shop_server.py",
    )
    add_guard_arguments(guard)
    guard.set_defaults(run=_guard)

    hooks = sub.add_parser("hooks", help="Claude Code hooks")
    hooks_sub = hooks.add_subparsers(dest="hooks_command", required=True, metavar="COMMAND")
    install = hooks_sub.add_parser("install", help="add the Claros hooks to Claude Code's settings")
    where = install.add_mutually_exclusive_group()
    where.add_argument(
        "--project", action="store_true", help="this project's .claude/settings.json (the default)"
    )
    where.add_argument("--user", action="store_true", help="~/.claude/settings.json")
    install.set_defaults(run=_hooks_install)

    hook = sub.add_parser("hook", help="run a Claude Code hook (reads its JSON on stdin)")
    hook.add_argument("kind", choices=["pre", "post"])
    hook.set_defaults(run=_hook)
