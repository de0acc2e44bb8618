"""A wrapped server that will not go quietly: a raw JSON-RPC server on stdio with one read
tool that starts a child of its own (in its process group, holding its stdio, as ``npx``
starts ``node``) and writes both pids to ``$STUBBORN_PIDS``.

``--on-eof ignore`` (default): stdin closed, it keeps running; ``--on-eof exit``: it exits
then, leaving its child behind. ``--on-term ignore``: it and its child ignore SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

CHILD = "import signal, time\n{ignore}\nwhile True: time.sleep(1)\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--on-eof", choices=["ignore", "exit"], default="ignore")
    parser.add_argument("--on-term", choices=["die", "ignore"], default="die")
    args = parser.parse_args()
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN)" if args.on_term == "ignore" else ""
    if ignore:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(ignore=ignore)])
    with open(os.environ["STUBBORN_PIDS"], "w", encoding="utf-8") as fh:  # noqa: PTH123
        json.dump({"server": os.getpid(), "child": child.pid, "group": os.getpgid(0)}, fh)
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        result: dict[str, object] = {}
        if message["method"] == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stubborn", "version": "1"},
            }
        elif message["method"] == "tools/list":
            tool = {"name": "clock_read", "inputSchema": {"type": "object"}}
            result = {"tools": [{**tool, "annotations": {"readOnlyHint": True}}]}
        elif message["method"] == "tools/call":
            result = {"content": [{"type": "text", "text": "tick"}]}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
        sys.stdout.write("\n")
        sys.stdout.flush()
    if args.on_eof == "exit":
        return
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
