"""`claros --help`, every subcommand's `--help` and `claros --version`, as a user reads them:
plain text (no reStructuredText markup) and no internal names (module paths, functions)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from claros_guard import RELEASE, cli

REPO = Path(__file__).resolve().parents[1]
CLAROS = Path(sys.executable).parent / "claros"  # the console script pip installed
MARKUP = re.compile(r"``|:(func|class|mod|meth|attr|data|ref|doc):`|\.\. [a-z]+::")
INTERNAL = re.compile(
    r"\bclaros_guard\b|\bclaros\.[a-z_]+|\b[a-z]+_[a-z_]+\(\)|\bresolve_connection\b"
)


def _parsers(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [words]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _parsers(child, (*words, name))
    return found


COMMANDS = _parsers(cli.build_parser())


def test_every_command_is_walked() -> None:
    names = {" ".join(words) for words in COMMANDS}
    for expected in ("serve", "verify", "login", "guard", "hook", "hooks install", "rules push",
                     "mappings push", "tools confirm"):  # fmt: skip
        assert expected in names, names


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(words) or "claros")
def test_help_is_plain_text_without_internal_names(words: tuple[str, ...]) -> None:
    done = subprocess.run([str(CLAROS), *words, "--help"], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: claros {' '.join(words)}".rstrip()), done.stdout
    assert not MARKUP.search(done.stdout), done.stdout
    assert not INTERNAL.search(done.stdout), done.stdout


def test_version_prints_the_installed_version() -> None:
    done = subprocess.run([str(CLAROS), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert done.stdout == f"claros {project['version']}\n"
    assert "--version" in subprocess.run([str(CLAROS), "--help"], capture_output=True,
                                         text=True, timeout=60).stdout  # fmt: skip


def test_the_version_constant_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    # From a source tree never installed, importlib.metadata knows no getclaros.
    import importlib.metadata

    import claros_guard

    def unknown(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", unknown)
    monkeypatch.delitem(claros_guard.__dict__, "VERSION", raising=False)
    assert claros_guard.VERSION == RELEASE
    monkeypatch.delitem(claros_guard.__dict__, "VERSION")


def test_one_version_and_one_licence_in_pyproject_package_json_and_the_constant() -> None:
    import json

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    npm = json.loads((REPO / "npm" / "getclaros" / "package.json").read_text())
    assert project["name"] == npm["name"] == "getclaros"
    assert project["version"] == npm["version"] == RELEASE
    assert project["license"] == npm["license"] == "Apache-2.0"
    assert (REPO / "LICENSE").read_text().lstrip().startswith("Apache License")
