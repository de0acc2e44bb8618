"""``claros guard --config guards.yaml``: several wrapped servers in one process.

MCP clients start one process per server entry and name tools after that entry
(Claude Code: ``mcp__<server>__<tool>``), so one process still serves at most one
server to its agent, unchanged, on stdio. The others are wrapped too: their tools are
registered with Claros and they answer other guards' reads (lookups on another server),
all on one event loop. ::

    claros:
      url: http://127.0.0.1:8787    # default $CLAROS_URL
      key_env: CLAROS_KEY           # the variable holding the key (the default)
    fail_open: false                # default false
    ask_wait: 120                   # seconds, default 120
    agent: shop                     # the server the agent talks to on stdio; omit it for
                                    # a process that only serves other guards
    servers:
      shop:
        command: [python, examples/shop_server.py]
        read: [order_read]          # like --read, --write
        write: []
      accounting:
        url: http://127.0.0.1:9000/mcp   # a Streamable HTTP server instead of a command
        env: {ACCOUNTING_DB: /data/acc.sqlite}

Server names are the Claros app names. Relative paths in ``command`` and ``cwd`` are the
wrapped server's business: it starts in ``cwd`` (default: the current directory).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from claros.names import NAME
from claros_guard.app import AppSettings
from claros_guard.errors import ConfigError
from claros_guard.files import FileProblem, parse_yaml, read_text
from claros_guard.login import url_problem
from claros_guard.transport import UpstreamSpec

__all__ = ["FileConfig", "load_config"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClarosSection(_Model):
    url: str | None = None
    key: str | None = None
    key_env: str = "CLAROS_KEY"


class ServerSection(_Model):
    command: list[str] | None = Field(None, min_length=1)
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    read: list[str] = Field(default_factory=list)
    write: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_way(self) -> ServerSection:
        if bool(self.command) == bool(self.url):
            raise ValueError("give the server a command or a url (one of them)")
        problem = url_problem(self.url) if self.url else None
        if problem:
            raise ValueError(f"url {problem}")
        return self


class FileConfig(_Model):
    claros: ClarosSection = Field(default_factory=ClarosSection)
    fail_open: bool = False
    ask_wait: float = Field(120.0, ge=0, le=3600)
    agent: str | None = None
    servers: dict[str, ServerSection] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> FileConfig:
        for name in self.servers:
            if not re.match(NAME, name):
                raise ValueError(f"server name {name!r} is not a valid app name")
        if self.agent is not None and self.agent not in self.servers:
            raise ValueError(f"agent names {self.agent!r}, which is not among the servers")
        return self

    def url(self) -> str | None:
        return self.claros.url or os.environ.get("CLAROS_URL")

    def key(self) -> str | None:
        return self.claros.key or os.environ.get(self.claros.key_env)

    def apps(self) -> list[AppSettings]:
        out = []
        for name, server in self.servers.items():
            spec = UpstreamSpec(
                command=server.command[0] if server.command else None,
                args=tuple(server.command[1:]) if server.command else (),
                url=server.url,
                env=tuple(server.env.items()),
                cwd=server.cwd,
            )
            out.append(AppSettings(name, spec, frozenset(server.read), frozenset(server.write)))
        return out


def load_config(path: str) -> FileConfig:
    try:
        data: Any = parse_yaml(read_text(path), path)
    except FileProblem as exc:
        raise ConfigError(str(exc)) from None
    try:
        config = FileConfig.model_validate(data)
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply to be read") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise ConfigError(f"{path}: {problems}") from exc
    if config.claros.key is not None:
        _key_kept_private(path)
    return config


def _key_kept_private(path: str) -> None:
    """A config that holds the key itself must be its owner's alone to read, as ssh asks of
    a private key: with the usual umask it is 0644, and every user of the machine could
    check, ask and report as this agent (THREATS.md, 2)."""
    try:
        mode = stat.S_IMODE(Path(path).stat().st_mode)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    if mode & 0o077:
        raise ConfigError(
            f"{path} holds a Claros key (claros.key) that others on this machine may read "
            f"(mode {mode:04o}): chmod 600 {path}, or keep the key in the environment "
            "(claros.key_env, CLAROS_KEY by default)"
        )
