"""Settings without pydantic, the model's values and messages: ``claros.config.Settings``
takes a plainly valid value as it is and leaves every other one to the pydantic model
(``claros.settings_model.SettingsModel``, the model Settings was). Checked here: the two
state the same fields, defaults and bounds, and on generated environments and values
``Settings`` gives what the model gives, or the same error."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import typing
from collections.abc import Mapping
from pathlib import Path

import pytest
from annotated_types import Ge, Le
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from claros import config
from claros.config import ENV, FIELDS, UNPLAIN, ConfigError, Settings
from claros.settings_model import SettingsModel

REPO = Path(__file__).resolve().parents[1]
MODEL = SettingsModel.model_fields


def _model_from_env(env: Mapping[str, str]) -> dict[str, object] | str:
    """What ``Settings.from_env`` answered when Settings was the model: every value, or
    the ConfigError's message (the code as it was, on the model)."""
    values: dict[str, object] = {field: env[name] for field, name in ENV.items() if name in env}
    if isinstance(values.get("role_writes"), str):
        values["role_writes"] = [w.strip() for w in str(values["role_writes"]).split(",")
                                 if w.strip()]  # fmt: skip
    if values.get("store") == "dynamodb":
        values.setdefault("signer", "kms")
        values.setdefault("inline_checkpoints", "false")
    try:
        model = SettingsModel.model_validate(values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            field = str(error["loc"][0]) if error["loc"] else ""
            name = ENV.get(field, field)
            problems.append(f"{name}={env.get(name, '')!r}: {error['msg']}")
        return "bad environment: " + "; ".join(problems)
    return model.model_dump()


def _from_env(env: Mapping[str, str]) -> dict[str, object] | str:
    try:
        return Settings.from_env(env).as_dict()
    except ConfigError as exc:
        return str(exc)


# --- the same fields, defaults and bounds --------------------------------------------------
def test_the_fields_and_defaults_are_the_models() -> None:
    assert list(FIELDS) == list(MODEL)
    assert {n: d for n, (d, _) in FIELDS.items()} == {n: f.default for n, f in MODEL.items()}
    assert Settings().as_dict() == SettingsModel().model_dump()
    assert set(ENV) <= set(FIELDS)


def test_the_types_are_the_models() -> None:
    hints = typing.get_type_hints(Settings)
    assert hints == {name: field.annotation for name, field in MODEL.items()}


def _bounds(name: str) -> tuple[int | None, int | None]:
    least = next((int(m.ge) for m in MODEL[name].metadata if isinstance(m, Ge)), None)
    most = next((int(m.le) for m in MODEL[name].metadata if isinstance(m, Le)), None)
    return least, most


@pytest.mark.parametrize("name", list(FIELDS))
def test_each_rule_reads_the_models_type_and_bounds(name: str) -> None:
    annotation = MODEL[name].annotation
    kind, *args = FIELDS[name][1]
    if kind == "word":
        assert typing.get_origin(annotation) is typing.Literal
        assert tuple(args[0]) == typing.get_args(annotation)
    elif kind == "int":
        assert annotation is int and tuple(args) == _bounds(name)
    elif kind == "alias":
        assert annotation is str
        assert [m.pattern for m in MODEL[name].metadata] == [f"^{config.ALIAS_PREFIX}$"]
    elif kind == "role_writes":
        assert annotation == frozenset[config.RoleWrite]
        assert typing.get_args(config.RoleWrite) == config.ROLE_WRITES
    else:
        assert annotation is {"str": str, "bool": bool, "path": Path}[kind]
    if kind not in ("int", "alias"):
        assert MODEL[name].metadata == []  # a bound the rule would not know of


# --- the same values and messages ----------------------------------------------------------
# Characters where a reading could differ: signs, "_", ".", whitespace of several kinds
# (pydantic strips Unicode White_Space; \x1c is not one, \xa0 is), non-ASCII digits and
# letters, and the words the settings take.
EDGES = "0123456789+-_. \t\n\x1c\xa0\u2003\u0663\uff11ekxabfnorstuyEFNOTY/"
WORDS = [
    "sqlite", "dynamodb", "file", "kms", "", "none", "keyword", "bedrock", "true", "False",
    "YES", "off", "1", "0", "100", "0100", " 100 ", "1_000", "1.0", "1.", "+5", "-1",
    "1000000", "1000001", "alias/claros-ledger-", "alias/x", "alias/x\n", "alias/",
    "key_use", "verified_state", " key_use , verified_state ", "ledger", "key_use,,x",
]  # fmt: skip
_text = st.one_of(st.sampled_from(WORDS), st.text(EDGES, max_size=8))
_env = st.dictionaries(st.sampled_from(sorted(ENV.values())), _text, max_size=6)


@settings(max_examples=3000, deadline=None, database=None)
@given(_env)
def test_from_env_answers_as_the_model_did(env: dict[str, str]) -> None:
    assert _from_env(env) == _model_from_env(env)


_python_value = st.one_of(
    _text,
    st.integers(-3, 2_000_000),
    st.booleans(),
    st.floats(allow_nan=False),
    st.none(),
    st.builds(Path, st.text(EDGES, max_size=5)),
    st.lists(st.sampled_from(["key_use", "verified_state", "x", ""]), max_size=3),
    st.frozensets(st.sampled_from(["key_use", "verified_state"])),
)


@settings(max_examples=3000, deadline=None, database=None)
@given(st.sampled_from(list(FIELDS)), _python_value)
def test_a_plain_reading_is_the_models(name: str, value: object) -> None:
    """Every value taken as plainly valid is valid to the model, and the model reads it
    as the same value of the same type."""
    plain = config._plain(FIELDS[name][1], value)
    if plain is UNPLAIN:
        return
    read = getattr(SettingsModel.model_validate({name: value}), name)
    assert (plain, type(plain)) == (read, type(read))


@settings(max_examples=1000, deadline=None, database=None)
@given(st.dictionaries(st.sampled_from(list(FIELDS)), _python_value, max_size=4))
def test_the_constructor_answers_as_the_model_did(values: dict[str, object]) -> None:
    try:
        expected: object = SettingsModel.model_validate(values).model_dump()
    except ValidationError as exc:
        expected = exc.errors(include_url=False)
    try:
        got: object = Settings(**values).as_dict()
    except ValidationError as exc:
        got = exc.errors(include_url=False)
    assert got == expected


def test_the_template_environments_are_plain() -> None:
    """What the template and a local run set never needs the model (nor pydantic)."""
    aws = {"CLAROS_STORE": "dynamodb", "CLAROS_LEDGER_CHECKPOINT_EVERY": "100",
           "CLAROS_ROLE_WRITES": "key_use", "CLAROS_KMS_ALIAS_PREFIX": "alias/claros-x-",
           "CLAROS_JUDGE": "bedrock", "CLAROS_INLINE_CHECKPOINTS": "false"}  # fmt: skip
    for env in ({}, aws, {"CLAROS_DATA": "/tmp/x", "CLAROS_JUDGE": "keyword"}):
        values = {f: env[n] for f, n in ENV.items() if n in env}
        values["role_writes"] = ["key_use"] if "CLAROS_ROLE_WRITES" in env else []
        if "CLAROS_ROLE_WRITES" not in env:
            del values["role_writes"]
        assert config._plainly_valid(values) is not None, env


# --- messages named in the docs and other tests --------------------------------------------
@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CLAROS_STORE": "mongo"}, "CLAROS_STORE='mongo': Input should be 'sqlite' or 'dynamodb'"),
        (
            {"CLAROS_LEDGER_CHECKPOINT_EVERY": "x"},
            "CLAROS_LEDGER_CHECKPOINT_EVERY='x': Input should be a valid integer, unable to "
            "parse string as an integer",
        ),
        (
            {"CLAROS_LEDGER_CHECKPOINT_EVERY": "1000001"},
            "CLAROS_LEDGER_CHECKPOINT_EVERY='1000001': Input should be less than or equal to "
            "1000000",
        ),
        (
            {"CLAROS_ASK_TTL_S": "0"},
            "CLAROS_ASK_TTL_S='0': Input should be greater than or equal to 1",
        ),
        (
            {"CLAROS_JUDGE": "gpt"},
            "CLAROS_JUDGE='gpt': Input should be '', 'none', 'keyword' or 'bedrock'",
        ),
        (
            {"CLAROS_INLINE_CHECKPOINTS": "maybe"},
            "CLAROS_INLINE_CHECKPOINTS='maybe': Input should be a valid boolean, unable to "
            "interpret input",
        ),
        (
            {"CLAROS_KMS_ALIAS_PREFIX": "alias/"},
            "CLAROS_KMS_ALIAS_PREFIX='alias/': String should match pattern "
            "'^alias/[A-Za-z0-9][A-Za-z0-9/_-]{0,200}$'",
        ),
        (
            {"CLAROS_ROLE_WRITES": "key_use,ledger", "CLAROS_STORE": "x"},
            "bad environment: CLAROS_STORE='x': Input should be 'sqlite' or 'dynamodb'; "
            "CLAROS_ROLE_WRITES='key_use,ledger': Input should be 'verified_state' or "
            "'key_use'",
        ),
    ],
)
def test_a_bad_value_is_named_with_the_models_message(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(env)
    assert message in str(refused.value)
    assert str(refused.value).startswith("bad environment: ")


def test_values_pydantic_reads_are_read_so() -> None:
    """Values the plain reading leaves to the model are still taken as pydantic took them."""
    read = Settings.from_env({"CLAROS_LEDGER_CHECKPOINT_EVERY": " 1_000 ", "CLAROS_ASK_TTL_S":
                              "60.00", "CLAROS_INLINE_CHECKPOINTS": "On"})  # fmt: skip
    assert (read.checkpoint_every, read.ask_ttl_s, read.inline_checkpoints) == (1000, 60, True)


def test_the_constructor_refuses_as_the_model_did() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        Settings(checkpoint_every=0)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted") as refused:
        Settings(checkpoint_evry=5)
    assert refused.value.title == "Settings"
    assert Settings(data_dir="x").data_dir == Path("x")  # a str is read as a path


# --- a plain frozen value ------------------------------------------------------------------
def test_settings_are_frozen_and_replace_makes_a_checked_copy() -> None:
    base = Settings(data_dir=Path("d"), checkpoint_every=5)
    with pytest.raises(AttributeError, match="frozen"):
        base.checkpoint_every = 6  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        del base.store
    changed = base.replace(export_bucket="b", data_dir="e")
    assert (changed.export_bucket, changed.data_dir, changed.checkpoint_every) == (
        "b", Path("e"), 5,
    )  # fmt: skip
    assert base.export_bucket == "" and base.data_dir == Path("d")
    with pytest.raises(ValidationError):
        base.replace(checkpoint_every=0)
    with pytest.raises(AttributeError):
        base.surprise = 1  # type: ignore[attr-defined]


def test_settings_compare_hash_copy_and_pickle_by_value() -> None:
    one = Settings(data_dir=Path("d"))
    assert one == Settings(data_dir="d") and hash(one) == hash(Settings(data_dir="d"))
    assert one != Settings(data_dir="e") and one != "d"
    for again in (copy.copy(one), copy.deepcopy(one), pickle.loads(pickle.dumps(one))):
        assert again == one and type(again) is Settings
    assert repr(one).startswith("Settings(store='sqlite', signer='file', data_dir=")


def test_reading_a_plain_environment_imports_no_pydantic() -> None:
    probe = (
        "import sys\nfrom claros.config import Settings\n"
        "s = Settings.from_env({'CLAROS_STORE': 'dynamodb', 'CLAROS_ROLE_WRITES': 'key_use'})\n"
        "s = s.replace(data_dir='x')\n"
        "assert 'pydantic' not in sys.modules, 'pydantic imported'\n"
        "Settings.from_env({'CLAROS_ASK_TTL_S': ' 5 '})\n"
        "assert 'pydantic' in sys.modules\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    subprocess.run([sys.executable, "-c", probe], env=env, cwd=REPO, check=True, timeout=60)
