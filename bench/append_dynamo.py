"""Append throughput on DynamoDB (moto, in process), as a ratio to a plain PutItem of the
same record row. moto's timings say nothing about real DynamoDB latency; the ratio shows
what the ledger's transaction and head condition cost on top of a write. The tables come
from template.yaml and moto is patched as in the tests (tests/aws.py)."""

from __future__ import annotations

import os
import zlib
from typing import Any

import pytest

from bench.append import run_threads, sample_row
from bench.harness import Result, report
from claros.canonical import canonical_bytes


def main(writers_list: tuple[int, ...], total: int) -> list[dict[str, Any]]:
    import boto3
    from moto import mock_aws

    from claros.store.dynamo import DynamoStore
    from tests.aws import STORE_TABLES, patch_moto_dynamodb, tables_from_template

    out = []
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                            "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
            mp.setitem(os.environ, name, value)
        patch_moto_dynamodb(mp)
        for writers in writers_list:
            with mock_aws():
                client = boto3.client("dynamodb", region_name="us-east-1")
                tables = tables_from_template(client)
                store = DynamoStore(
                    client, **{arg: tables[lid] for arg, lid in STORE_TABLES.items()}
                )
                records = tables["RecordsTable"]

                def plain(i: int, records: str = records, client: Any = client) -> None:
                    body = zlib.compress(canonical_bytes(sample_row(i)))
                    client.put_item(
                        TableName=records,
                        Item={"workspace": {"S": "plain"}, "rid": {"S": f"check#chk_{i:016x}"},
                              "seq": {"N": str(i)}, "body": {"B": body}},
                    )  # fmt: skip

                def append(i: int, store: DynamoStore = store) -> None:
                    store.append("bench", "check", f"chk_{i:016x}", sample_row(i))

                plain_s = run_threads(writers, total, plain)
                append_s = run_threads(writers, total, append)
                base = Result(f"moto PutItem, {writers} writers", plain_s, total)
                ledger = Result(f"moto ledger append, {writers} writers", append_s, total)
                out.append(report(f"DynamoDB (moto) append, {writers} writers", [ledger], base))
    return out
