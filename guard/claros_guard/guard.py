"""``claros guard``: one event loop for the agent's stdio, the wrapped servers and the
peer sockets.

    claros guard --app NAME [--url URL] [--key KEY] [--fail-open] [--read TOOL]...
                 [--write TOOL]... [--ask-wait SECONDS] -- COMMAND [ARGS...]
    claros guard --app NAME --upstream-url URL ...
    claros guard --config guards.yaml            (see claros_guard.config)
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import anyio.abc

from claros_guard.api import HttpClarosApi
from claros_guard.app import AppSettings, GuardedApp, GuardSettings
from claros_guard.commands import NAME_HELP
from claros_guard.config import load_config
from claros_guard.errors import ClarosRefusedError, ClarosUnavailableError, ConfigError, GuardError
from claros_guard.keykind import KindCheckedApi, approving_key_in
from claros_guard.login import url_problem
from claros_guard.logs import log_level
from claros_guard.peers import PeerClient, PeerServer, ensure_private_dir, peer_dir
from claros_guard.reporter import Reporter
from claros_guard.session import AgentSession
from claros_guard.spool import Spool, state_dir
from claros_guard.stdio_peer import stdout_peer
from claros_guard.transport import UpstreamSpec, agent_stdio

__all__ = ["GuardPlan", "main", "plan_from_args", "serve"]

log = logging.getLogger("claros_guard")


@dataclass(frozen=True)
class GuardPlan:
    url: str | None
    key: str | None
    apps: tuple[AppSettings, ...]
    agent: str | None
    shared: GuardSettings
    peers: Path
    timeout: float = 10.0


def _seconds(name: str, default: float) -> float:
    text = os.environ.get(name) or str(default)
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):  # NaN too
        raise ConfigError(f"{name}={text!r} is not a number of seconds")
    return value


def positive_seconds(value: float) -> bool:
    """A timeout: a number of seconds above 0 and not infinite (NaN is neither: as a
    deadline it made every read fail, which --fail-open forwarded unchecked)."""
    return 0 < value < float("inf")


def _shared(args: argparse.Namespace, fail_open: bool, ask_wait: float) -> GuardSettings:
    if not ask_wait >= 0 or not positive_seconds(args.read_timeout):
        raise ConfigError(
            f"--ask-wait must be >= 0 and --read-timeout a number of seconds > 0 "
            f"(not {args.read_timeout:g})"
        )
    poll = _seconds("CLAROS_ASK_POLL", 1.0)
    start_wait = _seconds("CLAROS_START_WAIT", 5.0)
    return GuardSettings(
        fail_open=fail_open,
        ask_wait=ask_wait,
        poll_interval=poll,
        read_timeout=args.read_timeout,
        start_wait=start_wait,
    )


def _timeout(args: argparse.Namespace) -> float:
    value = args.timeout if args.timeout is not None else os.environ.get("CLAROS_TIMEOUT", "10")
    try:
        timeout = float(value)
    except ValueError as exc:
        raise ConfigError(f"CLAROS_TIMEOUT {value!r} is not a number of seconds") from exc
    if not positive_seconds(timeout):
        raise ConfigError(f"the Claros timeout must be a number of seconds > 0, not {value!r}")
    return timeout


def plan_from_args(args: argparse.Namespace) -> GuardPlan:
    command = list(args.upstream_command or [])
    if command and command[0] == "--":
        command = command[1:]
    if args.config:
        if command or args.upstream_url or args.app:
            raise ConfigError(
                "--config lists the servers: leave out --app, --upstream-url and the command"
            )
        config = load_config(args.config)
        return GuardPlan(
            url=args.url or config.url(),
            key=args.key or config.key(),
            apps=tuple(config.apps()),
            agent=config.agent,
            shared=_shared(args, config.fail_open or args.fail_open, config.ask_wait),
            peers=peer_dir(),
            timeout=_timeout(args),
        )
    if not args.app:
        raise ConfigError("name the app: --app NAME")
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}$", args.app):
        raise ConfigError(f"--app {args.app!r}: use {NAME_HELP}")
    if bool(command) == bool(args.upstream_url):
        raise ConfigError("give the server to wrap: `-- COMMAND [ARGS...]` or --upstream-url URL")
    problem = url_problem(args.upstream_url) if args.upstream_url else None
    if problem:
        raise ConfigError(f"--upstream-url: {problem}")
    spec = (
        UpstreamSpec(url=args.upstream_url)
        if args.upstream_url
        else UpstreamSpec(command=command[0], args=tuple(command[1:]))
    )
    app = AppSettings(args.app, spec, frozenset(args.read), frozenset(args.write))
    return GuardPlan(
        url=args.url or os.environ.get("CLAROS_URL"),
        key=args.key or os.environ.get("CLAROS_KEY"),
        apps=(app,),
        agent=args.app,
        shared=_shared(args, args.fail_open, args.ask_wait),
        peers=peer_dir(),
        timeout=_timeout(args),
    )


async def _listen_for_peers(server: PeerServer) -> None:
    try:
        await server.run()
    except (GuardError, OSError) as exc:
        log.error("%s: not answering other guards: %s", server.source.name, exc)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def _signals(stop: anyio.Event, apps: list[GuardedApp]) -> None:
    """The first signal stops the guard; a second one (a client escalating while the guard
    stops its servers) hurries the servers' stop. Handled until the guard has stopped
    them, so no signal kills the guard while a wrapped server still runs."""
    with anyio.open_signal_receiver(*STOP_SIGNALS) as received:
        async for _ in received:
            if not stop.is_set():
                stop.set()
                continue
            for app in apps:
                app.upstream.hurry.set()


async def _wind_down(apps: list[GuardedApp], reporter: Reporter) -> None:
    """Stop every wrapped server (each within about 4 s, sooner when hurried) while the
    reports that cannot go within 1 s go to the spool, which takes milliseconds."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(reporter.drain, 1.0)
        for app in apps:
            tg.start_soon(app.upstream.stop)


async def serve(plan: GuardPlan, *, stdio: bool = True) -> int:
    # Never with a key that can approve (claros_guard.keykind): asked before anything
    # starts; when Claros cannot say yet, before the first request that reaches it.
    api = KindCheckedApi(plan.url, plan.key, timeout=plan.timeout)
    try:
        await api.key_kind()
    except (ClarosUnavailableError, ClarosRefusedError) as exc:
        log.warning("cannot learn what kind of key this is yet: %s", exc)
    except BaseException:
        await api.aclose()
        raise
    ensure_private_dir(plan.peers)
    key = api.key
    peers = PeerClient(plan.peers, key, timeout=plan.shared.read_timeout)
    # Reports Claros cannot take go to disk, per key, and are sent from there later.
    reporter = Reporter(api, Spool(state_dir(), key))
    apps = {
        a.name: GuardedApp(
            replace(a, upstream=replace(a.upstream, withhold=key)),
            plan.shared,
            api=api,
            peers=peers,
            reporter=reporter,
        )
        for a in plan.apps
    }
    for app in apps.values():
        app.siblings = {name: other for name, other in apps.items() if other is not app}
        app.expects_agent = stdio and app.name == plan.agent
        if app.expects_agent:
            app.agent_client = stdout_peer(1)  # before agent_stdio claims the descriptors
    stop = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(reporter.run)
            tg.start_soon(_signals, stop, list(apps.values()))
            for app in apps.values():
                await tg.start(app.run)
                tg.start_soon(_listen_for_peers, PeerServer(app, plan.peers, key))
            if plan.agent and stdio:
                tg.start_soon(_serve_agent, apps[plan.agent], stop)
            await stop.wait()
            await _wind_down(list(apps.values()), reporter)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await api.aclose()
    return 0


async def _serve_agent(app: GuardedApp, stop: anyio.Event) -> None:
    try:
        async with agent_stdio() as (read, write):
            await AgentSession(app, read, write).run()
    finally:
        stop.set()


def main(args: argparse.Namespace) -> int:
    try:
        level = log_level()
    except ConfigError as exc:
        print(f"claros guard: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=level, format="claros guard: %(levelname)s %(message)s", stream=sys.stderr
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        plan = plan_from_args(args)
        if not plan.url or not plan.key:
            HttpClarosApi(plan.url, plan.key)  # raises the clear error
        return anyio.run(serve, plan)
    except ConfigError as exc:
        print(f"claros guard: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: one clear line, the traceback only when asked for
        approving = approving_key_in(exc)
        if approving is not None:
            print(f"claros guard: {approving}", file=sys.stderr)
            return 2
        log.debug("the guard stopped", exc_info=True)
        print(
            f"claros guard: stopped by an unexpected error: {exc!r} (CLAROS_LOG=DEBUG shows where)",
            file=sys.stderr,
        )
        return 1
