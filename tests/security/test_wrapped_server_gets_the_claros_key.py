"""The wrapped MCP server is handed the Claros key (THREATS.md §2).

``claros guard -- COMMAND`` ran the wrapped server (third-party code: an npm package, a
vendor's binary) with the guard's whole environment, ``CLAROS_KEY`` included (or whatever
``key_env`` names). With it that process could answer the peer handshake as a guard of
this key and have every other app's guard on the machine run its read tools for it (the
shop's server reading the accounting app's records), make checks and report outcomes in
the agent's name: the key is the only thing that keeps other processes out of the peers.

Now the wrapped server gets the guard's environment less every variable holding the key.

Seen to fail on the old code: ``the wrapped server was given the key in CLAROS_KEY``.
"""

# ruff: noqa: F811 - the tests take the guard tests' fixtures, imported below, by name

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp import Client

from tests.guard.conftest import (  # noqa: F401 - the fixtures these tests use
    Workspace,
    anyio_backend,
    claros,
    example,
    workspace,
)

pytestmark = pytest.mark.anyio

# The example shop server, after it wrote down the environment it was started with.
DUMP_THEN_SERVE = (
    "import json, os, runpy, sys; "
    "open(sys.argv[1], 'w').write(json.dumps(dict(os.environ))); "
    "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


async def test_the_wrapped_server_never_sees_the_key(workspace: Workspace, tmp_path: Path) -> None:
    ws = workspace
    seen = tmp_path / "env.json"
    command = [sys.executable, "-c", DUMP_THEN_SERVE, str(seen), *example("shop")[1:]]
    # The key in CLAROS_KEY, and once more under another name, as a config's key_env has it.
    params = ws.guard("shop", command, OTHER_NAME_FOR_IT=ws.agent)
    async with Client(params) as client:
        tools = await client.list_tools()
        assert tools.tools  # the server runs, as before
    env = json.loads(seen.read_text())
    holding = sorted(name for name, value in env.items() if ws.agent in value)
    assert not holding, f"the wrapped server was given the key in {', '.join(holding)}"
    assert env.get("CLAROS_URL") == ws.claros.url  # the rest of the environment is kept
