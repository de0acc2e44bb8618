"""Each function's cold start imports what it serves, nothing heavier: pinned here, in a
fresh interpreter per function, so a module-level import that drags the web pages, YAML,
the mapper or the rule parser into a function that never uses them fails a test instead
of slowly costing every cold start (bench/coldstart.py measures what it costs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Imported only on the paths that use them: jinja2 by the first page rendered, yaml by the
# rule editor and mapping proposals, the mapper and judges when the settings name a model;
# Powertools (cookies) where a session cookie is made, never in the authorizer.
PAGES = {"jinja2", "claros.web.templating", "claros.web.pages", "claros.api.web"}
YAML = {"yaml"}
MODELS = {"claros.mapping.mapper", "claros.bedrock", "claros.rules.judges"}
# Deciding a check: the rule parser, mappings and asks; only the check function decides.
DECIDING = {"claros.checks", "claros.rules.expr", "claros.mapping.model", "claros.asks"}
# Powertools' resolvers we do not use, which its event_handler package __init__ imports:
# claros.lazy_packages defers that __init__, so only event_handler.api_gateway is loaded.
RESOLVERS = {
    f"aws_lambda_powertools.event_handler.{name}"
    for name in (
        "appsync",
        "bedrock_agent",
        "bedrock_agent_function",
        "events_appsync",
        "graphql_appsync",
        "http_resolver",
        "lambda_function_url",
        "vpc_lattice",
    )
}
# Powertools' event classes we do not use, which its utilities.data_classes __init__
# imports: the lazy package answers api_gateway's five names from their own submodules.
EVENTS = {
    f"aws_lambda_powertools.utilities.data_classes.{name}"
    for name in (
        "cloud_watch_alarm_event",
        "code_pipeline_job_event",
        "event_bridge_event",
        "kinesis_firehose_event",
        "s3_batch_operation_event",
        "ses_event",
    )
}
# importlib.metadata's body (email, zipfile, csv): pydantic's plugin loader only imports
# it (PYDANTIC_DISABLE_PLUGINS); pydantic.networks (HttpUrl, claros.webhook_settings: the
# admin's PUT of the ask webhook) asks it for a name. With the handler built, urllib3
# (botocore, through the X-Ray SDK) loads it anyway.
METADATA = {"importlib.metadata._adapters", "pydantic.networks", "claros.webhook_settings"}
# importlib.resources imports tempfile, shutil, bz2 and lzma: the pages read their static
# files by path (claros.web.pages). statistics where the oversight medians are computed;
# calendar (and its locale) not at all (claros.evidence.report's month window: datetime).
ARCHIVES = {"importlib.resources", "tempfile", "shutil", "bz2", "lzma", "statistics", "calendar"}
# A mapping proposal (the proposer, the mapper and its Bedrock client): imported by the
# admin's routes that use a proposal. The Evidence page's computations (the AIUC-1 pack,
# the verified report): by that page. The rule models (RuleSpec, Confirm): where a rule is
# written, never by deciding a check (claros.rules.terms has what deciding needs).
PROPOSING = {"claros.mapping.proposals", "claros.mapping.propose", "claros.mapping.mapper"}
EVIDENCE_PAGE = {"claros.evidence.aiuc1", "claros.evidence.verified"}
RULE_MODELS = {"claros.rules.model"}
# pydantic: only where a route validates a body. Settings are not a model (claros.config:
# its rules' model is asked only about a value that is not plainly valid), the HTTP edge
# imports it where a body is validated, and the readers of check rows, outcomes and the
# retention import none (claros.agent_info, claros.coverage, the retention's request).
# The prune function's one body (PUT retention) imports it at that route's first call.
PYDANTIC = {"pydantic", "pydantic_core", "annotated_types", "claros.settings_model"}
# PyNaCl: the file signer's keys and verifying a checkpoint's signature import it where
# they run; no function imports it at start (the stack signs with KMS).
NACL = {"nacl"}
ROUTES = {
    "claros.api.check",
    "claros.api.outcome",
    "claros.api.evidence",
    "claros.api.checkpoint",
    "claros.api.admin",
    "claros.api.export",
    "claros.api.prune",
    "claros.api.proposals",
    "claros.api.people",
    "claros.api.checks",
    "claros.api.proposals_api",
    "claros.api.tampering",
    "claros.api.lambda_entry",
    "claros.api.app",
}

# Function -> modules its entry must leave unimported (besides other functions' routes).
NOT_IMPORTED: dict[str, set[str]] = {
    "check": PAGES | YAML | MODELS | RESOLVERS | EVENTS | PROPOSING | RULE_MODELS,
    "outcome": PAGES | YAML | MODELS | DECIDING | RESOLVERS | EVENTS,
    "evidence": PAGES | YAML | MODELS | DECIDING | RESOLVERS | EVENTS | PYDANTIC,
    "checkpoint": PAGES | YAML | MODELS | DECIDING | RESOLVERS | EVENTS | PYDANTIC,
    "export": {"jinja2", "claros.api.web", "claros.web.pages"}
    | YAML
    | MODELS
    | DECIDING - {"claros.asks"}
    | RESOLVERS
    | EVENTS
    | PYDANTIC,
    "prune": PAGES | YAML | MODELS | DECIDING | RESOLVERS | EVENTS | PYDANTIC,
    # The admin API: no pages (they are the web function's), no mapping proposer.
    "admin": PAGES | YAML | MODELS | RESOLVERS | EVENTS | PROPOSING | EVIDENCE_PAGE,
    # The web app: jinja2 at the first page; device sign-in's code at its routes' first.
    "web": {"jinja2", "claros.web.device"}
    | YAML
    | MODELS
    | RESOLVERS
    | EVENTS
    | PROPOSING
    | EVIDENCE_PAGE,
    # No JSON writer either: it only reads (claros.jsonutil imports orjson by the first
    # write; orjson imports dataclasses, inspect, uuid and platform). No ast: its lazy
    # package is the stdlib's, whose __init__ is not parsed (claros.lazy_packages).
    "authorizer": PAGES
    | YAML
    | MODELS
    | DECIDING
    | METADATA
    | PYDANTIC
    | {"aws_lambda_powertools", "orjson", "inspect", "dataclasses", "uuid", "ast"},
}
OWN = {
    "check": {"claros.api.check"},
    "outcome": {"claros.api.outcome"},
    "evidence": {"claros.api.evidence"},
    "checkpoint": {"claros.api.checkpoint"},
    "export": {"claros.api.export"},
    "prune": {"claros.api.prune"},
    "admin": {
        "claros.api.admin",
        "claros.api.tampering",
        "claros.api.people",
        "claros.api.checks",
        "claros.api.proposals_api",
    },
    "web": {"claros.api.web", "claros.api.proposals"},
    "authorizer": set(),
}


def _run(probe: str, cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    """``probe`` in a fresh interpreter in ``cwd``, with this environment less Claros's and
    Powertools' settings, and ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAROS_", "POWERTOOLS_"))}
    env.update(settings)
    return subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip


def _loaded_by(function: str, probe: str = "import app") -> set[str]:
    """sys.modules after importing functions/<function>/app.py (the handler built, as
    Lambda's init does), in a fresh interpreter with the template's store setting."""
    probe = f"import json, sys\n{probe}\nprint(json.dumps(sorted(sys.modules)))"
    done = _run(
        probe,
        REPO / "functions" / function,
        CLAROS_STORE="dynamodb",
        AWS_DEFAULT_REGION="us-east-1",
    )
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("function", sorted(NOT_IMPORTED))
def test_a_function_entry_imports_only_what_it_serves(function: str) -> None:
    loaded = _loaded_by(function)
    assert OWN[function] <= loaded  # the probe did import the function's routes
    unwanted = (NOT_IMPORTED[function] | ROUTES | NACL) - OWN[function]
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_every_function_is_pinned() -> None:
    from claros.api.entry import ROUTE_MODULES

    functions = {p.name for p in (REPO / "functions").iterdir() if (p / "app.py").is_file()}
    assert functions == set(NOT_IMPORTED) == set(ROUTE_MODULES) | {"authorizer"}


@pytest.mark.parametrize("function", sorted(set(NOT_IMPORTED) - {"authorizer"}))
def test_a_function_routes_import_no_asyncio_nor_other_resolvers(function: str) -> None:
    """What bench/coldstart.py times: claros.api.entry and the function's routes (with the
    lazy event handler package) import no asyncio. The built handler does: Powertools'
    Tracer imports the X-Ray SDK, whose recorder imports asyncio, as it did before."""
    probe = (
        "import importlib, claros.api.entry as e\n"
        f"for m in e.ROUTE_MODULES[{function!r}]: importlib.import_module(m)"
    )
    loaded = _loaded_by(function, probe)
    assert "aws_lambda_powertools.event_handler.api_gateway" in loaded
    unwanted = RESOLVERS | EVENTS | METADATA | ARCHIVES | {"asyncio", "aws_xray_sdk"}
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_no_function_compiles_tokenize_regex_at_start() -> None:
    """A pydantic default factory that is a builtin (dict, list) has its signature parsed
    with tokenize when the model is built, and tokenize's first use compiles its regex
    (10 ms): claros.empty's factories are Python functions. Pinned on the two functions
    with the most models."""
    probe = "import app, tokenize\nassert tokenize._compile.cache_info().currsize == 0"
    for function in ("check", "admin", "web"):
        _loaded_by(function, probe)


def test_rule_models_still_answer_what_moved_to_terms() -> None:
    """The responses, severity, strength and rule_hash moved to claros.rules.terms (the
    check function decides without the rule models); claros.rules.model still has them."""
    from claros.rules import model, terms

    for name in ("ON_UNKNOWN", "RESPONSES", "SEVERITY", "rule_hash", "strength"):
        assert getattr(model, name) is getattr(terms, name)


def test_webhook_settings_still_answer_from_claros_webhook() -> None:
    """WebhookSettings moved to claros.webhook_settings (its HttpUrl's imports); the old
    name still answers, the same class, and a name the module lacks is still an error."""
    import claros.webhook
    from claros.webhook_settings import WebhookSettings

    assert claros.webhook.WebhookSettings is WebhookSettings
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        claros.webhook.NoSuchName  # noqa: B018
    with pytest.raises(ValueError, match="url"):
        WebhookSettings.model_validate({"url": "not a url", "secret": "s" * 16})


@pytest.mark.parametrize("function", sorted(NOT_IMPORTED))
def test_no_function_defines_a_dataclass_at_its_cold_start(function: str) -> None:
    """A frozen dataclass compiles six generated methods when it is defined (about 1 ms
    CPU each, a NamedTuple about 0.15): the value types a function imports at its cold
    start (the store's, the ledger's, the principal, a tampering event, a rule version, a
    page's frame...) are NamedTuples, the mutable ones (the services, a decision, a
    verify report...) plain classes. None is left on any function's routes. A new
    dataclass there fails this test: make it a NamedTuple or a plain class, or import it
    where it is used."""
    probe = (
        "import dataclasses, importlib, sys\n"
        + (
            "import claros.api.authorizer\n"
            if function == "authorizer"
            else "import claros.api.entry as e\n"
            f"for m in e.ROUTE_MODULES[{function!r}]: importlib.import_module(m)\n"
        )
        + "print(sorted(f'{n}.{k}' for n, m in list(sys.modules.items()) if n.startswith('claros')"
        " for k, v in vars(m).items() if isinstance(v, type) and v.__module__ == n"
        " and dataclasses.is_dataclass(v)))"
    )
    done = _run(probe, REPO, CLAROS_STORE="dynamodb", AWS_DEFAULT_REGION="us-east-1")
    assert done.stdout.strip() == repr([])


# The first request of each function that validates no body, in the environment its role
# has (template.yaml: the readers write nothing).
# (function, sample event, CLAROS_ROLE_WRITES, whether the request imports pydantic): the
# last row, the prune function's one body, is the control (it validates, so it does).
BODYLESS_REQUESTS = [
    ("evidence", "evidence-verify", "", False),
    ("evidence", "evidence-checkpoints", "", False),
    ("checkpoint", "checkpoint-checkpoint-now", "verified_state", False),
    ("checkpoint", "checkpoint-schedule", "verified_state", False),
    ("export", "export-report", "", False),
    ("prune", "prune-get-retention", "key_use", False),
    ("prune", "prune-prune", "key_use", False),
    ("prune", "prune-put-retention", "key_use", True),
]


@pytest.mark.parametrize(("function", "event", "writes", "validates"), BODYLESS_REQUESTS)
def test_a_function_that_validates_no_body_answers_without_pydantic(
    tmp_path: Path, function: str, event: str, writes: str, validates: bool
) -> None:
    """Not only its start: its first request imports no pydantic either (nothing moved
    from the import into the request), in a fresh interpreter as Lambda runs it (its
    handler built), on a SQLite store. The prune function's PUT retention, its one body,
    imports it at that first request (as its start did before)."""
    from claros.auth import create_key
    from claros.config import Settings
    from claros.wiring import build_services
    from tests.events import load_event

    data = tmp_path / "data"
    services = build_services(Settings(data_dir=data))
    try:
        key = create_key(services.store, "acme", "admin", person="ada@acme.test")
    finally:
        services.close()
    sample = load_event(event)  # an HTTP request gets the key; the schedule's event none
    if "routeKey" in sample:
        sample = load_event(event, key)
    probe = (
        "import json, sys\nimport app\n"
        "class Context:\n"
        "    function_name = 'probe'; memory_limit_in_mb = 512; aws_request_id = 'r1'\n"
        "    invoked_function_arn = 'arn:aws:lambda:us-east-1:1:function:probe'\n"
        "    def get_remaining_time_in_millis(self): return 30000\n"
        f"answer = app.lambda_handler(json.loads({json.dumps(sample)!r}), "
        "Context())\n"
        # The schedule's answer is the checkpoints it signed, not an HTTP response.
        "print(json.dumps([answer.get('statusCode', 200), 'pydantic' in sys.modules]))"
    )
    done = _run(
        probe, REPO / "functions" / function,
        CLAROS_STORE="sqlite", CLAROS_DATA=str(data), CLAROS_SIGNER="file",
        CLAROS_ROLE_WRITES=writes, AWS_DEFAULT_REGION="us-east-1",
        POWERTOOLS_TRACE_DISABLED="true", POWERTOOLS_METRICS_NAMESPACE="Claros",
    )  # fmt: skip
    status, imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert status < 500 and imported is validates, (status, done.stderr[-2000:])


# What Lambda's environment has and a shell's lacks: with it, the X-Ray SDK takes its
# Lambda sampler (outside, its centralized sampler builds two botocore X-Ray clients at
# import) and Powertools' Tracer is on, so it patches what it is told to.
LAMBDA_MARKERS = {"AWS_LAMBDA_FUNCTION_NAME": "probe", "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13"}


@pytest.mark.parametrize("function", sorted(set(NOT_IMPORTED) - {"authorizer"}))
def test_a_function_traces_botocore_alone_in_lambda(function: str) -> None:
    """In Lambda, the Tracer's default patches every library the X-Ray SDK knows that is
    installed: in the layer, httpx (and its HTTP stack) and sqlite3 too, imported at every
    cold start for a webhook sent on a thread after the answer (no trace context there)
    and a store Lambda never opens. The functions trace the AWS calls (botocore) alone."""
    probe = (
        "import json, sys\nimport app\n"
        "from aws_xray_sdk.core import patcher\n"
        "print(json.dumps([sorted(patcher._PATCHED_MODULES),"
        " sorted({'httpx', 'httpcore', 'sqlite3'} & set(sys.modules))]))"
    )
    done = _run(
        probe, REPO / "functions" / function, **LAMBDA_MARKERS,
        LAMBDA_TASK_ROOT=str(REPO / "functions" / function),
        CLAROS_STORE="dynamodb", AWS_DEFAULT_REGION="us-east-1",
    )  # fmt: skip
    patched, imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert patched == ["botocore"] and imported == [], (patched, imported)
