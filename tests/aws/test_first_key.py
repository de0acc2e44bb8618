"""The first admin key, as docs/deploy.md says to make it: `claros keys create --stack NAME
...`, run as a subprocess (the installed `claros` command) against a moto server holding a
stack with the template's tables and outputs; and `--data DIR` locally (SQLite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from claros.auth import authenticate
from tests.aws import load_template, template_tables

CLAROS = Path(sys.executable).parent / "claros"
STACK = "claros-first"


def _tables_stack(endpoint: str) -> Any:
    """A stack with the template's three tables and its table outputs, in the server."""
    import boto3

    sam = load_template()
    resources = {
        name: {"Type": "AWS::DynamoDB::Table", "Properties": _plain(props)}
        for name, props in template_tables(sam).items()
    }
    outputs = {
        k: sam["Outputs"][k] for k in ("LedgerTableName", "RecordsTableName", "StateTableName")
    }
    cloudformation = boto3.client("cloudformation", endpoint_url=endpoint)
    cloudformation.create_stack(
        StackName=STACK,
        TemplateBody=json.dumps({"Resources": resources, "Outputs": outputs}),
    )
    return boto3.client("dynamodb", endpoint_url=endpoint)


def _plain(props: dict[str, Any]) -> dict[str, Any]:
    # moto cannot take the ledger table's resource policy (it holds intrinsics).
    return {k: v for k, v in props.items() if k != "ResourcePolicy"}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLAROS), "keys", "create", *args],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip


def test_the_first_admin_key_comes_from_the_stack_name(moto_server: str) -> None:
    from claros.store.dynamo import DynamoStore

    client = _tables_stack(moto_server)
    env = {**os.environ, "AWS_ENDPOINT_URL": moto_server}
    done = _run(
        [
            "--stack",
            STACK,
            "--workspace",
            "acme",
            "--kind",
            "admin",
            "--person",
            "you@acme.example",
        ],
        env,
    )
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip().splitlines()[-1]
    assert key.startswith("ck_")
    tables = {
        o["OutputKey"]: o["OutputValue"]
        for o in __import__("boto3")
        .client("cloudformation", endpoint_url=moto_server)
        .describe_stacks(StackName=STACK)["Stacks"][0]["Outputs"]
    }
    store = DynamoStore(
        client, tables["LedgerTableName"], tables["RecordsTableName"], tables["StateTableName"]
    )
    principal = authenticate(store, f"Bearer {key}")
    assert (principal.workspace, principal.kind, principal.person) == (
        "acme",
        "admin",
        "you@acme.example",
    )


def test_an_unknown_stack_is_one_line_and_exit_2(moto_server: str) -> None:
    _tables_stack(moto_server)
    env = {**os.environ, "AWS_ENDPOINT_URL": moto_server}
    done = _run(["--stack", "no-such-stack", "--kind", "admin", "--person", "a@b.example"], env)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("claros keys: cannot read the stack 'no-such-stack'"), line


def test_a_stack_that_is_not_claros_is_named(moto_server: str) -> None:
    import boto3

    boto3.client("cloudformation", endpoint_url=moto_server).create_stack(
        StackName="other",
        TemplateBody=json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}),
    )
    env = {**os.environ, "AWS_ENDPOINT_URL": moto_server}
    done = _run(["--stack", "other", "--kind", "admin", "--person", "a@b.example"], env)
    assert done.returncode == 2
    assert "is not a Claros stack (no LedgerTableName" in done.stderr


def test_the_first_key_locally(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    done = _run(
        ["--data", str(tmp_path / "data"), "--kind", "admin", "--person", "you@acme.example"], env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("ck_")
    assert (tmp_path / "data" / "claros.db").is_file()
    both = _run(["--data", str(tmp_path), "--stack", STACK], env)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
