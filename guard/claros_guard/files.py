"""Files the client commands read and write, with errors that name the file.

* ``read_text`` / ``parse_json`` / ``parse_yaml``: a file that cannot be read, is not
  UTF-8, is not valid JSON or YAML, or is nested too deeply is a ``FileProblem`` saying
  so, never a traceback.
* ``plain_json``: what YAML made, as JSON can carry it (dates become ISO text); binary
  values, sets, NaN, structures deeper than ``MAX_DEPTH`` or larger than ``MAX_NODES``
  (a YAML alias bomb) are refused.
* ``write_file``: replace a file whole (a temporary file in the same directory, then a
  rename), refusing a path that is there and is not a regular file (a directory, a fifo,
  a device): nothing is half written, and nothing but a file is replaced. A symbolic link
  to a file is followed, so the file it names is replaced and the link kept.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import secrets
import stat
from pathlib import Path
from typing import Any

import yaml

from claros.yaml_keys import KeyTwice, unique_key_loader

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "FileProblem",
    "check_replaceable",
    "parse_json",
    "parse_yaml",
    "plain_json",
    "read_text",
    "write_file",
]

MAX_DEPTH = 100
MAX_NODES = 1_000_000


class FileProblem(Exception):
    """A file could not be read, parsed or written; the message names it."""


def read_text(path: str | Path, name: str | None = None) -> str:
    """The file's text; ``name`` is what messages call it (default: its path)."""
    name = name or str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FileProblem(f"cannot read {name}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(
            f"{name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from exc


def parse_json(text: str, name: str | Path, *, unique_keys: bool = False) -> Any:
    """The file's JSON; with ``unique_keys``, an object that says a key twice is a
    ``FileProblem`` (``json.loads`` keeps the last one, a reader of the file may take the
    first: a rules file must mean what its reviewer read)."""
    try:
        if unique_keys:
            return json.loads(text, object_pairs_hook=lambda pairs: _unique(pairs, name))
        return json.loads(text)
    except RecursionError:
        raise FileProblem(f"{name} is nested too deeply to be read") from None
    except FileProblem:
        raise
    except ValueError as exc:
        raise FileProblem(f"{name} is not valid JSON: {exc}") from exc


def _unique(pairs: list[tuple[str, Any]], name: str | Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise FileProblem(
                f"{name} says the key {key!r} twice in one object: readers disagree on which "
                "one counts (the last, for Claros), so nothing in it is sent"
            )
        out[key] = value
    return out


def parse_yaml(text: str, name: str | Path, *, unique_keys: bool = False) -> Any:
    """The file's YAML (safe); with ``unique_keys``, a mapping that says a key twice is a
    ``FileProblem``, as for :func:`parse_json` (a merge, ``<<: *base``, is not one)."""
    try:
        return yaml.load(text, Loader=unique_key_loader() if unique_keys else yaml.SafeLoader)  # noqa: S506
    except RecursionError:
        raise FileProblem(f"{name} is nested too deeply to be read") from None
    except KeyTwice as exc:
        raise FileProblem(
            f"{name} says the key {exc.key!r} twice in one mapping{exc.where}: readers "
            "disagree on which one counts (the last, for Claros), so nothing in it is sent"
        ) from None
    except yaml.YAMLError as exc:
        raise FileProblem(f"{name} is not valid YAML: {exc}") from exc


def _key(k: Any, name: str | Path, where: str) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, dt.date):
        return k.isoformat()
    if k is None or isinstance(k, bool | int | float):
        return json.dumps(k)  # as json.dumps writes such a key
    raise FileProblem(f"{name}: a key in {where or 'the file'} is {type(k).__name__}, not text")


def _scalar(v: Any, name: str | Path, where: str) -> Any:
    if v is None or isinstance(v, str | bool | int):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise FileProblem(f"{name}: {where} is {v}, not a number JSON can carry")
        return v
    if isinstance(v, dt.date):  # dt.datetime too: YAML reads unquoted dates as dates
        return v.isoformat()
    kinds: dict[type, str] = {bytes: "binary data", set: "a set"}
    kind = kinds.get(type(v), type(v).__name__)
    raise FileProblem(f"{name}: {where} is {kind}, which JSON cannot carry")


def plain_json(value: Any, name: str | Path) -> Any:
    """``value`` as JSON can carry it; FileProblem for what it cannot."""
    count = 0

    def walk(v: Any, where: str, depth: int) -> Any:
        nonlocal count
        count += 1
        if count > MAX_NODES:
            raise FileProblem(f"{name} holds more than {MAX_NODES:,} values (YAML aliases?)")
        if depth > MAX_DEPTH:
            raise FileProblem(f"{name} is nested more than {MAX_DEPTH} levels deep at {where}")
        if isinstance(v, dict):
            return {
                _key(k, name, where): walk(x, f"{where}.{k}" if where else str(k), depth + 1)
                for k, x in v.items()
            }
        if isinstance(v, list | tuple):
            return [walk(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(v)]
        return _scalar(v, name, where or "the whole file")

    return walk(value, "", 0)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a fifo"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_replaceable(path: str | Path) -> tuple[Path, int | None]:
    """(the file to replace, its permission bits or None when it is not there yet);
    FileProblem when ``path`` is there and is not a regular file."""
    target = Path(path)
    with contextlib.suppress(OSError):
        if target.is_symlink():
            target = target.resolve()
    try:
        st = target.stat()
    except FileNotFoundError:
        return target, None
    except OSError as exc:
        raise FileProblem(f"cannot write {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise FileProblem(f"{path} is {_kind(st.st_mode)}, not a file: it was left as it is")
    return target, stat.S_IMODE(st.st_mode)


def write_file(path: str | Path, text: str, *, mode: int | None = None) -> Path:
    """Replace ``path`` with ``text`` whole. ``mode``: the new file's permissions (default:
    the old file's, else 0666 less the umask). Returns the file written."""
    target, old_mode = check_replaceable(path)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        fd = os.open(tmp, flags, 0o600 if mode is not None else 0o666)
    except OSError as exc:
        raise FileProblem(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        keep = mode if mode is not None else old_mode
        if keep is not None:
            tmp.chmod(keep)
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise FileProblem(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target
