"""Shared fixtures. Each section belongs to one area; add new sections below, not inside."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

# ======================================================================================
# Stores and AWS (moto): aws_env, moto_aws, moto_server, dynamodb_client, dynamo_tables,
# dynamo_store, sqlite_store, store (both, parametrized), kms_ed25519.
# Helpers live in tests/aws.py. Get DynamoDB clients from ``dynamodb_client``: it patches
# moto to serialize requests and roll transactions back per item (see tests/aws.py).
# ======================================================================================
from claros.store.base import Store
from claros.store.sqlite import SqliteStore
from tests.aws import (
    STORE_TABLES,
    lighten_aws_setup,
    patch_moto_dynamodb,
    patch_moto_kms_ed25519,
    tables_from_template,
)

AWS_REGION = "us-east-1"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy credentials and region; no real AWS config file is read."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", AWS_REGION)
    monkeypatch.setenv("AWS_REGION", AWS_REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    lighten_aws_setup(monkeypatch)


@pytest.fixture
def moto_aws(aws_env: None) -> Iterator[None]:
    """Every AWS call in the test goes to moto, in process."""
    from moto import mock_aws

    with mock_aws():
        yield


@pytest.fixture
def moto_server(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto as a server on a local port, its endpoint URL: for AWS calls made by another
    process (a CLI, a function's handler as Lambda runs it), from an empty account, with
    DynamoDB patched as ``dynamodb_client``'s (it runs in this process's threads)."""
    import urllib.request

    from moto.server import ThreadedMotoServer

    patch_moto_dynamodb(monkeypatch)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        # moto's backends are the process's: start each test from an empty account.
        reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(reset, timeout=30).close()
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
def dynamodb_client(moto_aws: None, monkeypatch: pytest.MonkeyPatch) -> Any:
    import boto3

    patch_moto_dynamodb(monkeypatch)
    return boto3.client("dynamodb", region_name=AWS_REGION)


@pytest.fixture
def dynamo_tables(dynamodb_client: Any) -> dict[str, str]:
    """The template's tables, created in moto: {logical id: table name}."""
    return tables_from_template(dynamodb_client)


@pytest.fixture
def dynamo_store(dynamodb_client: Any, dynamo_tables: dict[str, str]) -> Iterator[Store]:
    from claros.store.dynamo import DynamoStore

    store = DynamoStore(
        dynamodb_client, **{arg: dynamo_tables[lid] for arg, lid in STORE_TABLES.items()}
    )
    yield store
    store.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = SqliteStore(tmp_path / "claros.db")
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "dynamodb"], ids=["sqlite", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Store:
    """Each test that takes ``store`` runs on both stores."""
    names = {"dynamodb": "dynamo_store", "sqlite": "sqlite_store"}
    if request.param not in names:  # "dynamo" once ran SQLite in three attack files
        raise ValueError(f"store is 'sqlite' or 'dynamodb', not {request.param!r}")
    name = names[request.param]
    found: Store = request.getfixturevalue(name)
    return found


@pytest.fixture
def kms_ed25519(moto_aws: None, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A moto KMS client that makes ECC_NIST_EDWARDS25519 keys as AWS KMS does."""
    import boto3

    patch_moto_kms_ed25519(monkeypatch)
    return boto3.client("kms", region_name=AWS_REGION)


# --- end of stores and AWS ------------------------------------------------------------


# ======================================================================================
# Web app and `claros login`: no test reads or writes the developer's own saved sign-in
# (~/.config/claros/credentials.json), which client commands fall back on.
# ======================================================================================
@pytest.fixture(autouse=True)
def _isolated_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))


# --- end of web app and claros login ---------------------------------------------------


# ======================================================================================
# Logging: a handler made during a test keeps the stream it was given. Powertools' Logger
# (each function's handler, built in-process by tests/stack.py) writes to sys.stdout as it
# was when it was made, which under pytest is that test's capture; once the test ends the
# stream is closed, and every later log line of a "claros" logger in that process (the
# local server's access log, the ask webhook's thread) printed "--- Logging error ---"
# into whatever the next test captured. A handler left on a closed stream writes to the
# process's own stderr from then on (kept, not removed: Powertools' next Logger expects
# the handler it made on its logger to be there).
# ======================================================================================
@pytest.fixture(autouse=True)
def _no_log_handler_on_a_closed_stream() -> Iterator[None]:
    yield
    for logger in (logging.getLogger(), logging.getLogger("claros")):
        for handler in logger.handlers:
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and getattr(stream, "closed", False):
                handler.stream = sys.__stderr__  # not setStream: it flushes the closed one


# --- end of logging ----------------------------------------------------------------------


# ======================================================================================
# HTTP clients: every httpx client (the tests' own, and the guard's and the CLI's run in a
# test's process) made a new TLS context with certifi's CA bundle, ~25 ms of CPU, though
# the servers the tests talk to are plain http. In the tests' processes the default
# context (verify=True, no client certificate) is made once per CA setting and shared:
# a context is only read once made. Subprocesses make their own, as in production.
# ======================================================================================
@pytest.fixture(scope="session", autouse=True)
def _one_default_tls_context() -> Iterator[None]:
    from httpx._transports import default

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(default, "create_ssl_context", shared_default_tls(default.create_ssl_context))
        yield


def shared_default_tls(make: Callable[..., Any]) -> Callable[..., Any]:
    """``make`` (httpx's create_ssl_context), its default context kept per CA setting (the
    environment variables it reads); any other context is made as before, each time."""
    made: dict[tuple[str | None, str | None], Any] = {}

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None or not trust_env:
            return make(verify=verify, cert=cert, trust_env=trust_env)
        setting = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if setting not in made:
            made[setting] = make(verify=verify, cert=cert, trust_env=trust_env)
        return made[setting]

    return create_ssl_context


# --- end of HTTP clients -----------------------------------------------------------------


# ======================================================================================
# Parallel runs (pytest-xdist, `make test` runs `-n ... --dist loadgroup`): the tests of a
# file that share a fixture wider than one test (module, class or package scope: a
# server, a browser, a built wheel, a seeded ledger) go to one worker, in file order, so
# that fixture is built once and what one test leaves for the next is still there. Every
# other test is spread one by one. Session fixtures are built once per worker: each must
# be safe to build in several processes at once (see npm_servers in tests/guard).
#
# xdist tells its scheduler a test's group through the test's node id: its worker appends
# "@group" to it. pytest 9.2 keeps node ids in a new field that xdist 3.8 does not write
# (pytest-xdist issue 1386), so there the groups are silently dropped and a file's tests
# are spread over the workers, each building the module fixtures again (two sdist builds
# in one checkout, a browser world without the previous tests' entries). pyproject.toml
# keeps pytest below 9.2, and the check below stops a run whose groups would be lost.
# ======================================================================================
@pytest.hookimpl(wrapper=True)  # marks before xdist's worker hook reads them, checks after
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group"):
            continue
        shared = any(
            defs[-1].scope in ("module", "class", "package")
            for defs in info.name2fixturedefs.values()
            if defs
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    items[:] = _long_tests_first(items)
    yield
    _check_groups_reach_the_scheduler(config, items)


def _long_tests_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests spread one by one, the long ones first: marked ``slow``, then property
    tests (hypothesis runs each hundreds or thousands of times), then the rest, each kind
    in file order. xdist's scheduler hands out a file's group whole (largest groups first),
    then single tests in this order; in file order, the slowest single tests (the 64-thread
    chain, the cost table's moto stack, the benches' smoke runs) came last, and the run
    ended with one worker busy on them and the others done. Grouped tests keep their
    place: they share a fixture wider than one test, and moving one would build it twice
    in a run without workers. Only the order changes: every test still runs."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("slow"):
            return 0
        return 1 if getattr(getattr(item, "obj", None), "is_hypothesis_test", False) else 2

    singles = [i for i in items if not i.get_closest_marker("xdist_group")]
    grouped = [i for i in items if i.get_closest_marker("xdist_group")]
    return sorted(singles, key=rank) + grouped  # sorted() is stable: file order within a kind


_GROUP_LOST = pytest.StashKey[str]()


def _check_groups_reach_the_scheduler(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker under --dist loadgroup, a grouped test whose id lacks its "@group"
    suffix is failed before its fixtures are built: it would pass or fail by scheduling
    luck. (An error raised here would be lost: xdist reports only that the worker died.)"""
    if not (hasattr(config, "workerinput") and config.getoption("loadgroup", False)):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") and item.nodeid.rfind("@") <= item.nodeid.rfind(
            "]"
        ):
            item.stash[_GROUP_LOST] = (
                "--dist loadgroup: xdist did not give this test its group, so its file's "
                "tests are spread over the workers; this pytest and pytest-xdist do not work "
                "together (pytest-xdist issue 1386): install the versions pyproject.toml's "
                "dev extra allows"
            )


@pytest.hookimpl(tryfirst=True)  # before any fixture is set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    lost = item.stash.get(_GROUP_LOST, None)
    if lost is not None:
        pytest.fail(lost, pytrace=False)


# --- end of parallel runs --------------------------------------------------------------
