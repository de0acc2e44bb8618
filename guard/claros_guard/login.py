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
import json
import math
import os
import socket
import stat
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import httpx

from claros.clock import utc_now
from claros_guard.files import FileProblem, check_replaceable, parse_json, read_text, write_file

__all__ = [
    "DEFAULT_URL",
    "CredentialsError",
    "add_parser",
    "credentials_path",
    "key_problem",
    "load_credentials",
    "login",
    "resolve_connection",
    "save_credentials",
    "url_problem",
]

DEFAULT_URL = "http://127.0.0.1:8787"
CLIENT = "claros-cli"


# --- the credentials file ---------------------------------------------------------------
def credentials_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "claros" / "credentials.json"


class CredentialsError(Exception):
    """The saved sign-in is there but cannot be used; the message says to sign in again."""


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a Claros server's address, or None when it can."""
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # each raises ValueError when malformed
        httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        return f"{url!r} is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not host:
        return f"{url!r} is not an http:// or https:// URL"
    if any(c.isspace() for c in url):
        return f"{url!r} is not a valid URL (it holds white space)"
    return None


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a Claros key (they are printable ASCII), or None when it can."""
    if key.isascii() and key.isprintable() and key.strip() == key:
        return None
    return "the Claros key is not printable ASCII with no spaces around it, as Claros keys are"


def _foreign(what: str, place: Path) -> str | None:
    """Why ``place`` may not be this user's own: another user's, or others may write it
    (a directory with the sticky bit, like /tmp, keeps others' hands off this user's
    files). None when it is this user's alone."""
    info = place.stat()
    if info.st_uid != os.getuid():
        return f"{what} belongs to another user (uid {info.st_uid})"
    sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
    if info.st_mode & 0o022 and not sticky:
        return f"others may write {what} (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _planted(path: Path) -> str | None:
    """Why the file at ``path`` may not be this user's own sign-in: it, or the directory
    it is in, belongs to someone else or others may write it (they could have put it
    there, naming their server). None when it is this user's alone."""
    return _foreign("it", path) or _foreign("its directory", path.parent)


def _saved(path: Path) -> dict[str, Any] | None:
    """The saved sign-in; None when there is none; CredentialsError when it is damaged or
    may not be this user's own."""
    try:
        if not path.exists() and not path.is_symlink():
            return None
        planted = _planted(path)
        if planted:
            raise CredentialsError(
                f"the saved sign-in at {path} is not used: {planted}; remove it and run "
                "claros login again"
            )
        data = parse_json(read_text(path, "it"), "it")
    except (OSError, FileProblem) as exc:
        problem = str(exc) if isinstance(exc, FileProblem) else f"cannot read it: {exc.strerror}"
        raise CredentialsError(
            f"the saved sign-in at {path} is damaged ({problem}): run claros login again"
        ) from None
    why: str | None = None
    if not isinstance(data, dict):
        why = "it does not hold a JSON object"
    elif not isinstance(data.get("key"), str) or key_problem(data["key"]) or not data["key"]:
        why = "its key is missing or not a Claros key"
    elif not isinstance(data.get("url", ""), str):
        why = "its url is not text"
    elif data.get("url") and url_problem(data["url"]):
        why = f"its url {url_problem(data['url'])}"
    if why or not isinstance(data, dict):
        raise CredentialsError(
            f"the saved sign-in at {path} is damaged ({why}): run claros login again"
        )
    return dict(data)


def load_credentials(path: Path | None = None) -> dict[str, Any] | None:
    """The saved sign-in, or None when there is none (or it is unreadable or malformed)."""
    try:
        return _saved(path or credentials_path())
    except CredentialsError:
        return None


def _private_dirs(directory: Path) -> None:
    """``directory`` and each missing parent made 0700 (``mkdir(parents=True)`` gives
    parents 0777 less the umask: under umask 000 others could swap the directory)."""
    missing = []
    for parent in (directory, *directory.parents):
        if parent.exists():
            break
        missing.append(parent)
    for parent in reversed(missing):
        parent.mkdir(mode=0o700, exist_ok=True)


def save_credentials(data: Mapping[str, Any], path: Path | None = None) -> Path:
    """Write the file readable by its owner only (0600, in a 0700 directory), atomically.
    OSError when it cannot be written (its path being a directory, a fifo, ...)."""
    path = path or credentials_path()
    _private_dirs(path.parent)
    text = json.dumps(dict(data), indent=2, sort_keys=True) + "\n"
    try:
        write_file(path, text, mode=0o600)
    except FileProblem as exc:
        raise OSError(str(exc)) from exc
    return path


def _origin(url: str) -> tuple[str, str] | None:
    try:
        parts = urlsplit(url.rstrip("/"))
        return parts.scheme.lower(), parts.netloc.lower()
    except ValueError:  # e.g. "http://[x": never the saved server's origin
        return None


def resolve_connection(
    url: str | None, key: str | None, env: Mapping[str, str] | None = None
) -> tuple[str | None, str | None]:
    """(url, key) a command uses: what it was given, else $CLAROS_URL and $CLAROS_KEY, else
    the saved sign-in. The saved key is only sent to the server it was made for.
    CredentialsError when the saved sign-in is needed and damaged."""
    env = os.environ if env is None else env
    url = url or env.get("CLAROS_URL") or None
    key = key or env.get("CLAROS_KEY") or None
    if url and key:
        return url, key
    saved = _saved(credentials_path(env))  # CredentialsError when it is damaged
    saved_url = str(saved.get("url") or "") if saved else ""
    if saved is None or not saved_url:
        return url, key
    url = url or saved_url
    origin = _origin(saved_url)
    if key is None and origin is not None and _origin(url) == origin:
        key = str(saved["key"])
    return url, key


def usable_connection(url: str | None, key: str | None) -> tuple[str, str]:
    """``resolve_connection``, then both present and well formed: (url without a trailing
    slash, key). CredentialsError says what is missing or wrong, and where to fix it."""
    url, key = resolve_connection(url, key)
    if not url:
        raise CredentialsError("no Claros URL: pass --url or set CLAROS_URL")
    if not key:
        raise CredentialsError("no Claros key: pass --key, set CLAROS_KEY or run claros login")
    problem = url_problem(url)
    if problem:
        raise CredentialsError(f"the Claros URL {problem}")
    problem = key_problem(key)
    if problem:
        raise CredentialsError(f"{problem}: check --key, CLAROS_KEY or the saved sign-in")
    return url.rstrip("/"), key


# --- the device flow --------------------------------------------------------------------
class LoginError(Exception):
    """Why the sign-in did not happen; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


REQUEST_TIMEOUT_S = 30.0  # one request of the flow, its whole answer
MAX_INTERVAL_S = 60.0  # between two polls, whatever the server says
MAX_WAIT_S = 3600.0  # for the approval, whatever the server says


def _seconds(url: str, body: Mapping[str, Any], name: str, default: float) -> float:
    """``body[name]`` as seconds (``default`` when absent); a value that is not a finite
    number means the URL is not Claros."""
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        shown = repr(value)[:40]
        raise LoginError(
            f"{url} did not answer like Claros: {name} is not a number of seconds ({shown})", 2
        )
    return float(value)


def _post(http: httpx.Client, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
    from claros_guard.client import bounded_request

    try:
        response = bounded_request(http, REQUEST_TIMEOUT_S, "POST", path, json=dict(body))
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
    url = str(http.base_url).rstrip("/")
    interval = min(max(_seconds(url, started, "interval", 5), 1.0), MAX_INTERVAL_S)
    life = min(max(_seconds(url, started, "expires_in", 600), 1.0), MAX_WAIT_S)
    deadline = time.monotonic() + life
    while time.monotonic() < deadline:
        sleep(interval)
        status, body = _post(http, "/v1/device/token", {"device_code": started["device_code"]})
        if status == 200 and isinstance(body, dict) and body.get("key"):
            return body
        error = body.get("error") if isinstance(body, dict) else None
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            assert isinstance(body, dict)
            asked = _seconds(url, body, "interval", interval + 5)
            interval = min(max(asked, 1.0), MAX_INTERVAL_S)
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
    problem = url_problem(url)
    if problem:
        raise LoginError(f"the Claros URL {problem}", 2)
    target = path or credentials_path()
    try:  # before anyone approves a code: the key must have somewhere to go, its own
        check_replaceable(target)
        foreign = None
        if target.exists():
            foreign = _planted(target)
        elif target.parent.exists():
            foreign = _foreign("its directory", target.parent)
    except (FileProblem, OSError) as exc:
        raise LoginError(f"cannot save the key: {exc}", 2) from None
    if foreign:
        raise LoginError(f"cannot save the key in {target}: {foreign}", 2)
    timeout = httpx.Timeout(30.0, connect=10.0)
    with httpx.Client(base_url=url, timeout=timeout, transport=transport) as http:
        started = _start(http)
        page = started.get("verification_uri_complete") or started.get("verification_uri")
        life = _seconds(url, started, "expires_in", 600)
        minutes = int(min(max(life, 1.0), MAX_WAIT_S)) // 60
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
            "saved_at": utc_now().isoformat(timespec="seconds"),
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


# `claros login --help`: for the person running it, so plain text and no module names.
DESCRIPTION = """\
Sign this machine in by approving a code in the web app.

    claros login [--url URL]

Asks Claros for a device code (POST /v1/device/code), shows the short code and the
/app/device page to open, and polls (POST /v1/device/token) until a signed-in person
approves it. Claros then mints an agent key for that person; it is saved, mode 0600, in
$XDG_CONFIG_HOME/claros/credentials.json (~/.config/claros/credentials.json), and
claros guard, claros hook and claros verify use it whenever CLAROS_KEY is not set.
"""


def add_parser(sub: Any) -> None:
    """Register ``claros login`` on the CLI's subparsers."""
    parser = sub.add_parser(
        "login",
        help="sign this machine in: approve a code in the web app, get an agent key",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--url", help=f"the Claros server (default $CLAROS_URL, else {DEFAULT_URL})"
    )
    parser.set_defaults(run=_run)
