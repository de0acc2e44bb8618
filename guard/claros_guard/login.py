"""``claros login``: sign this machine in by approving a code in the web app.

    claros login [--url URL]

Asks Claros for a device code (``POST /v1/device/code``), shows the short code and the
/app/device page to open, and polls (``POST /v1/device/token``) until a signed-in person
approves it. Claros then mints an agent key for that person; it is saved, mode 0600, in
``$XDG_CONFIG_HOME/claros/credentials.json`` (``~/.config/claros/credentials.json``), and
``claros guard``, ``claros hook`` and ``claros verify`` use it whenever ``CLAROS_KEY`` is
not set (``resolve_connection``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import httpx

__all__ = [
    "DEFAULT_URL",
    "add_parser",
    "credentials_path",
    "load_credentials",
    "login",
    "resolve_connection",
    "save_credentials",
]

DEFAULT_URL = "http://127.0.0.1:8787"
CLIENT = "claros-cli"


# --- the credentials file ---------------------------------------------------------------
def credentials_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "claros" / "credentials.json"


def load_credentials(path: Path | None = None) -> dict[str, Any] | None:
    """The saved sign-in, or None when there is none (or it is unreadable or malformed)."""
    path = path or credentials_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("key"), str):
        return None
    return data


def save_credentials(data: Mapping[str, Any], path: Path | None = None) -> Path:
    """Write the file readable by its owner only (0600, in a 0700 directory), atomically."""
    path = path or credentials_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(dict(data), handle, indent=2, sort_keys=True)
            handle.write("\n")
        tmp.chmod(0o600)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url.rstrip("/"))
    return parts.scheme.lower(), parts.netloc.lower()


def resolve_connection(
    url: str | None, key: str | None, env: Mapping[str, str] | None = None
) -> tuple[str | None, str | None]:
    """(url, key) a command uses: what it was given, else $CLAROS_URL and $CLAROS_KEY, else
    the saved sign-in. The saved key is only sent to the server it was made for."""
    env = os.environ if env is None else env
    url = url or env.get("CLAROS_URL") or None
    key = key or env.get("CLAROS_KEY") or None
    if url and key:
        return url, key
    saved = load_credentials(credentials_path(env))
    saved_url = str(saved.get("url") or "") if saved else ""
    if saved is None or not saved_url:
        return url, key
    url = url or saved_url
    if key is None and _origin(url) == _origin(saved_url):
        key = str(saved["key"])
    return url, key


# --- the device flow --------------------------------------------------------------------
class LoginError(Exception):
    """Why the sign-in did not happen; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _post(http: httpx.Client, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
    try:
        response = http.post(path, json=dict(body))
    except httpx.HTTPError as exc:
        raise LoginError(f"cannot reach Claros at {http.base_url}: {exc}", 2) from exc
    try:
        parsed = response.json()
    except ValueError:
        parsed = {"message": response.text[:200]}
    return response.status_code, parsed


def _start(http: httpx.Client) -> dict[str, Any]:
    name = socket.gethostname()[:128]
    status, body = _post(http, "/v1/device/code", {"client": CLIENT, "name": name})
    if status != 201 or not isinstance(body, dict) or "device_code" not in body:
        message = body.get("message") if isinstance(body, dict) else body
        raise LoginError(f"Claros refused to start a sign-in ({status}): {message}", 2)
    return body


def _wait(
    http: httpx.Client, started: Mapping[str, Any], sleep: Callable[[float], None]
) -> dict[str, Any]:
    interval = float(started.get("interval") or 5)
    deadline = time.monotonic() + float(started.get("expires_in") or 600)
    while time.monotonic() < deadline:
        sleep(interval)
        status, body = _post(http, "/v1/device/token", {"device_code": started["device_code"]})
        if status == 200 and isinstance(body, dict) and body.get("key"):
            return body
        error = body.get("error") if isinstance(body, dict) else None
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval = float(body.get("interval") or interval + 5)
            continue
        if error == "access_denied":
            raise LoginError("the sign-in was denied in the web app")
        if error == "expired_token":
            raise LoginError("the code expired before it was approved: run claros login again")
        message = body.get("message") if isinstance(body, dict) else body
        raise LoginError(f"Claros answered {status}: {message}", 2)
    raise LoginError("the code expired before it was approved: run claros login again")


def login(
    url: str,
    *,
    out: IO[str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    path: Path | None = None,
    transport: httpx.BaseTransport | None = None,
) -> Path:
    """Run the device flow against ``url`` and save the key; returns where it was saved."""
    out = out or sys.stdout
    url = url.rstrip("/")
    with httpx.Client(base_url=url, timeout=30, transport=transport) as http:
        started = _start(http)
        page = started.get("verification_uri_complete") or started.get("verification_uri")
        minutes = int(started.get("expires_in") or 600) // 60
        print(
            "To sign this machine in, open this page where you are signed in to Claros:\n\n"
            f"    {page}\n\n"
            f"and check that it shows the code {started['user_code']}\n\n"
            f"Waiting for you to approve it (the code expires in {minutes} minutes)...",
            file=out,
            flush=True,
        )
        got = _wait(http, started, sleep)
    saved = save_credentials(
        {
            "url": url,
            "key": got["key"],
            "kind": got.get("kind", "agent"),
            "workspace": got.get("workspace"),
            "person": got.get("person"),
            "saved_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        },
        path,
    )
    print(
        f"Signed in as {got.get('person')} in workspace {got.get('workspace')}. "
        f"The key is saved in {saved} (readable only by you).",
        file=out,
        flush=True,
    )
    return saved


def _run(args: argparse.Namespace) -> int:
    url = args.url or os.environ.get("CLAROS_URL")
    if not url:
        saved = load_credentials()
        url = str(saved.get("url")) if saved and saved.get("url") else DEFAULT_URL
    try:
        login(url)
    except LoginError as exc:
        print(f"claros login: {exc}", file=sys.stderr)
        return exc.code
    except OSError as exc:
        print(f"claros login: cannot save the key: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("claros login: stopped", file=sys.stderr)
        return 1
    return 0


def add_parser(sub: Any) -> None:
    """Register ``claros login`` on the CLI's subparsers."""
    parser = sub.add_parser(
        "login",
        help="sign this machine in: approve a code in the web app, get an agent key",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--url", help=f"the Claros server (default $CLAROS_URL, else {DEFAULT_URL})"
    )
    parser.set_defaults(run=_run)
