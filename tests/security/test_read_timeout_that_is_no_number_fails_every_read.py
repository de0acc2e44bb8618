"""Fault (THREATS.md, 5 and 6): a read timeout that is no number of seconds.

``claros guard --read-timeout nan`` (or ``CLAROS_TIMEOUT=nan``, ``inf``) started as if
all was well: ``nan > 0`` and ``nan <= 0`` are both false, so the check let it through.
Every read for a check then failed ("deadline must not be NaN"), silently: with
``--fail-open`` every write whose mapping needs a fact was forwarded unchecked (seen:
the third refund ran), without it every such write was blocked, and ``inf`` let a read
that hangs hold the call for ever. A timeout is a number of seconds above 0 and finite:
anything else is refused when the guard starts (exit 2, one line saying which), and a
hook denies the call saying which setting it cannot use (as for ``CLAROS_ASK_WAIT``).
"""

from __future__ import annotations

import pytest

from tests.guard.conftest import Workspace
from tests.guard.test_cli_errors import claros, refused
from tests.guard.test_hooks import decision, hook_process, pre
from tests.security.test_query_counts_one_page_of_the_history import PAGED_SHOP


@pytest.mark.parametrize("seconds", ["nan", "inf", "-inf", "0"])
def test_the_guard_refuses_a_read_timeout_that_is_no_number_of_seconds(seconds: str) -> None:
    done = claros(
        "guard", "--app", "shop", "--fail-open", f"--read-timeout={seconds}", "--", *PAGED_SHOP,
        env={"CLAROS_URL": "http://127.0.0.1:9", "CLAROS_KEY": "ck_agent_test"},
        timeout=30,
    )  # fmt: skip
    refused(done, "--read-timeout a number of seconds > 0")


@pytest.mark.parametrize("seconds", ["nan", "inf"])
def test_the_guard_refuses_a_claros_timeout_that_is_no_number_of_seconds(seconds: str) -> None:
    done = claros(
        "guard", "--app", "shop", "--", *PAGED_SHOP,
        env={"CLAROS_URL": "http://127.0.0.1:9", "CLAROS_KEY": "ck_agent_test",
             "CLAROS_TIMEOUT": seconds},
        timeout=30,
    )  # fmt: skip
    refused(done, "the Claros timeout must be a number of seconds > 0")


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["CLAROS_READ_TIMEOUT", "CLAROS_TIMEOUT"])
async def test_a_hook_refuses_a_timeout_that_is_no_number_of_seconds(
    workspace: Workspace, name: str
) -> None:
    answer, stderr = await hook_process(
        workspace, "pre", pre("Write", {"file_path": "/tmp/x", "content": "x"}), **{name: "nan"}
    )
    verdict, reason, _ = decision(answer)
    assert verdict == "deny" and f"{name}='nan' is not a number of seconds" in str(reason), (
        answer,
        stderr,
    )
