"""Request models are built on their first validation, not when their module is imported
(``defer_build=True``): a function's routes declare many models (the admin function 35)
and a request validates one or two, so a cold start built the rest for nothing. None is
built at import: ``claros.config.Settings``, which every function reads, is not a model
(its rules' model, ``claros.settings_model.SettingsModel``, is asked only about a value
that is not plainly valid: tests/test_config.py). Pinned here so a new model follows, with
every deferred model built once (a model that cannot be built fails this test, not a
user's first request)."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

import claros

REPO = Path(__file__).resolve().parents[2]
EAGER: set[str] = set()


def _claros_models() -> list[type[BaseModel]]:
    for info in pkgutil.walk_packages(claros.__path__, "claros."):
        importlib.import_module(info.name)

    def subclasses(cls: type[BaseModel]) -> list[type[BaseModel]]:
        out = []
        for sub in cls.__subclasses__():
            out += [sub, *subclasses(sub)]
        return out

    found = {c for c in subclasses(BaseModel) if c.__module__.startswith("claros.")}
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _name(model: type[BaseModel]) -> str:
    return f"{model.__module__}.{model.__qualname__}"


def test_every_model_defers_its_build() -> None:
    models = _claros_models()
    assert len(models) > 30  # the walk found the routes' models
    eager = {_name(m) for m in models if not m.model_config.get("defer_build")}
    assert eager == EAGER


def test_every_deferred_model_builds() -> None:
    for model in _claros_models():
        model.model_rebuild(force=True)
        assert model.__pydantic_complete__, _name(model)


def test_a_deferred_model_still_refuses_what_it_refused() -> None:
    from claros.agent_info import AgentInfo

    with pytest.raises(ValidationError) as refused:
        AgentInfo.model_validate({"name": "", "surprise": 1})
    assert {e["type"] for e in refused.value.errors()} == {"string_too_short", "extra_forbidden"}
    assert AgentInfo.model_validate({"name": "bot"}).name == "bot"


@pytest.mark.parametrize("function", ["admin", "web", "check"])
def test_a_cold_function_builds_no_model_until_a_request_validates(function: str) -> None:
    """In a fresh interpreter: the function's entry module (its handler built) leaves every
    model unbuilt; validating one model builds it, and no other."""
    probe = (
        "import json, sys, app\n"
        "from pydantic import BaseModel\n"
        "def subs(c):\n"
        "    for s in c.__subclasses__():\n"
        "        yield s\n"
        "        yield from subs(s)\n"
        "def built():\n"
        "    return sorted(f'{c.__module__}.{c.__qualname__}' for c in subs(BaseModel)\n"
        "                  if c.__module__.startswith('claros.') and c.__pydantic_complete__)\n"
        "at_import = built()\n"
        "from claros.agent_info import AgentInfo\n"
        "AgentInfo.model_validate({'name': 'bot', 'via': {'guard': 'g'}})\n"
        "json.dump([at_import, built()], sys.stdout)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAROS_", "POWERTOOLS_"))}
    env.update(CLAROS_STORE="dynamodb", AWS_DEFAULT_REGION="us-east-1")
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO / "functions" / function, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    at_import, after = json.loads(done.stdout)
    assert at_import == sorted(EAGER)
    # Via is built inside AgentInfo's schema (pydantic marks only the validated one built)
    assert after == sorted(EAGER | {"claros.agent_info.AgentInfo"})
