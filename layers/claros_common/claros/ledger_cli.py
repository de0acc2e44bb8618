"""``python -m claros.ledger``: operations on the server's own ledger.

    verify [--workspace W] [--data DIR]   re-check chain, records and checkpoint signatures
    prune [--workspace W] [--data DIR]    drop entries older than the workspace's retention,
                                          below a checkpoint signed first at the last one
    verify-report REPORT.json [--keys F]  check a signed monthly report (keys: the output
                                          of GET /v1/ledger/pubkey; default: this server's)
    rotate-key --workspace W [--data DIR] a new signing key (old public keys stay listed);
               [--key KMS_KEY_ID]         in AWS, finish a rotation that stopped, with its key

Exit 0 when everything holds, 1 on any failure (each printed with seq, kind and what is
wrong), 2 on usage or I/O errors: a bad CLAROS_* variable, a data directory with no Claros
database (never made here), a file that is not what it should be, an unknown workspace.
"""

from __future__ import annotations

import argparse
import base64
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from claros import jsonutil
from claros.auth import workspaces
from claros.canonical import CanonicalError
from claros.checkpoints import rotate_key
from claros.config import Settings
from claros.ledger import PublicKey
from claros.signing import RotationPendingError, SigningError
from claros.store.base import GLOBAL, Store, StoreError
from claros.tamper import verify_with_tampering
from claros.wiring import build_services, open_store, open_tamper_log

__all__ = ["main"]


def _workspaces(store: Store, only: str | None) -> list[str]:
    return [only] if only else list(workspaces(store))


def _no_ledger(workspace: str) -> int:
    print(f"claros.ledger: workspace {workspace!r} has no ledger", file=sys.stderr)
    return 2


def _verify(args: argparse.Namespace, settings: Settings) -> int:
    store = open_store(settings, create=False)
    tamper = open_tamper_log(settings, store)
    try:
        failed = False
        names = _workspaces(store, args.workspace)
        if not names:
            print("no workspaces yet: nothing to verify")
        for name in names:
            if store.head(name) is None and args.workspace:
                return _no_ledger(name)
            report = verify_with_tampering(store, tamper, name)
            status = "OK" if report.ok else "FAIL"
            print(
                f"{status}: workspace {name}: {report.entries} entries "
                f"(seq {report.first_seq or 0}..{report.last_seq or 0}), "
                f"{report.records_compared} records compared, "
                + (
                    f"{report.kept_records} rule and mapping versions kept below the prune, "
                    if report.kept_records
                    else ""
                )
                + f"{report.checkpoints_verified} checkpoints verified, "
                f"{report.unsigned_tail} entries after the last checkpoint"
            )
            for failure in report.failures:
                print(f"  {failure}")
            unlisted = getattr(report.failures, "unlisted", 0)
            if unlisted:
                print(f"  and {unlisted:,} more failures, not listed")
            failed = failed or not report.ok
        return 1 if failed else 0
    finally:
        store.close()


def _rotate(args: argparse.Namespace, settings: Settings) -> int:
    """A new active key, introduced by the old one: a ``public_key`` entry with the new
    public key, under a checkpoint the old key signs. The old public keys stay listed so
    old checkpoints still verify; later checkpoints are signed with the new key."""
    services = build_services(settings, create=False)
    try:
        store = services.store
        if store.get_doc(GLOBAL, "workspace", args.workspace) is None:
            print(f"claros.ledger: no workspace {args.workspace!r}", file=sys.stderr)
            return 2
        old, new = rotate_key(services, args.workspace, resume=args.key)
        print(f"workspace {args.workspace}: signing key {old.key_id} -> {new.key_id}")
        return 0
    except RotationPendingError as exc:
        print(
            f"claros.ledger: {exc}; once it does, finish with: python -m claros.ledger "
            f"rotate-key --workspace {args.workspace} --key {exc.resume}",
            file=sys.stderr,
        )
        return 2
    except SigningError as exc:
        print(f"claros.ledger: {exc}", file=sys.stderr)
        return 2
    finally:
        services.close()


def _prune(args: argparse.Namespace, settings: Settings) -> int:
    from claros.errors import ClarosError
    from claros.evidence.retention import prune, retention_days

    services = build_services(settings, create=False)
    try:
        names = _workspaces(services.store, args.workspace)
        if not names:
            print("no workspaces yet: nothing to prune")
        if args.workspace and services.store.head(args.workspace) is None:
            return _no_ledger(args.workspace)
        for name in names:
            try:
                if retention_days(services.store, name) is None:
                    print(f"workspace {name}: no retention is set: every record is kept")
                    continue
                done = prune(services, name)
            except ClarosError as exc:
                print(f"claros.ledger: workspace {name}: {exc.message}", file=sys.stderr)
                return 2
            print(f"workspace {name}: {done['message']}")
            if done["pruned"]:
                print(f"  {done['entries_deleted']} entries and {done['records_deleted']} "
                      f"records deleted; checkpoint at seq {done['through_seq']}")  # fmt: skip
        return 0
    finally:
        services.close()


def _load_json(path: str) -> Any:
    """A JSON file, or a ValueError naming it (unreadable, not JSON, nested too deep)."""
    try:
        return jsonutil.loads(Path(path).read_bytes())
    except RecursionError as exc:
        raise ValueError(f"{path}: JSON nested too deeply to read") from exc
    except ValueError as exc:  # not JSON, not UTF-8, NaN
        raise ValueError(f"{path} is not JSON: {exc}") from exc


def _public_key(path: str, n: int, item: Any) -> PublicKey:
    where = f"{path}: key {n + 1}"
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object (save GET /v1/ledger/pubkey)")
    try:
        key = PublicKey.from_json(item)
    except KeyError as exc:
        raise ValueError(f"{where} has no {exc.args[0]!r}") from exc
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} has a malformed field: {exc}") from exc
    try:
        raw = base64.b64decode(key.public_key, validate=True)
    except ValueError as exc:
        raise ValueError(f"{where}: public_key is not base64") from exc
    if len(raw) != 32:
        raise ValueError(f"{where}: public_key is {len(raw)} bytes, not a 32-byte Ed25519 key")
    return key


def _report_keys(args: argparse.Namespace, settings: Settings, workspace: str) -> list[PublicKey]:
    if args.keys:
        data = _load_json(args.keys)
        listed = data.get("keys") if isinstance(data, dict) else data
        if not isinstance(listed, list):
            raise ValueError(f"{args.keys} lists no keys (save GET /v1/ledger/pubkey)")
        return [_public_key(args.keys, n, item) for n, item in enumerate(listed)]
    if settings.store == "sqlite" and not (Path(settings.data_dir) / "claros.db").is_file():
        raise ValueError(
            f"no Claros data in {settings.data_dir}: pass --keys FILE (GET /v1/ledger/pubkey)"
        )
    store = open_store(settings, create=False)
    try:
        return store.public_keys(workspace)
    finally:
        store.close()


def _verify_report(args: argparse.Namespace, settings: Settings) -> int:
    from claros.evidence.report import verify_signed_report

    doc = _load_json(args.report)
    report = doc.get("report") if isinstance(doc, dict) else None
    if not isinstance(report, dict):
        print(f"FAIL: {args.report} is not a signed Claros report (no report object)")
        return 1
    workspace = str(report.get("workspace"))
    keys = _report_keys(args, settings, workspace)
    try:
        problems = verify_signed_report(doc, keys)
    except (CanonicalError, RecursionError) as exc:
        print(f"FAIL: {args.report}: the report cannot be written as canonical JSON: {exc}")
        return 1
    for problem in problems:
        print(f"FAIL: {problem}")
    if problems:
        print(f"FAIL: {args.report}")
        return 1
    print(
        f"OK: {args.report}: workspace {workspace}, workflow {report.get('workflow_id')}, "
        f"month {report.get('month')}, signed by {doc['signature']['key_id']}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m claros.ledger",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="re-check chain, records and checkpoints")
    verify.add_argument("--workspace", help="only this workspace (default: every one)")
    verify.add_argument("--data", help="data directory (local mode; default $CLAROS_DATA)")
    verify.set_defaults(run=_verify)
    prune = sub.add_parser("prune", help="drop entries older than the retention (signed first)")
    prune.add_argument("--workspace", help="only this workspace (default: every one)")
    prune.add_argument("--data", help="data directory (local mode; default $CLAROS_DATA)")
    prune.set_defaults(run=_prune)
    report = sub.add_parser("verify-report", help="check a signed monthly report")
    report.add_argument("report", help="the report's JSON (GET /api/evidence/report)")
    report.add_argument("--keys", help="the workspace's public keys (GET /v1/ledger/pubkey)")
    report.add_argument("--data", help="data directory (local mode; default $CLAROS_DATA)")
    report.set_defaults(run=_verify_report)
    rotate = sub.add_parser("rotate-key", help="make a new signing key for a workspace")
    rotate.add_argument("--workspace", required=True)
    rotate.add_argument("--data", help="data directory (local mode; default $CLAROS_DATA)")
    rotate.add_argument(
        "--key",
        metavar="KMS_KEY_ID",
        help="AWS: the new key of a rotation that stopped before the checkpoint function "
        "signed its announcement (the id the stopped run printed); no new key is made",
    )
    rotate.set_defaults(run=_rotate)
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        if args.data:
            settings = settings.replace(data_dir=args.data)
        return int(args.run(args, settings))
    except (StoreError, OSError, ValueError) as exc:  # ConfigError is a ValueError
        print(f"claros.ledger: {exc}", file=sys.stderr)
        return 2
