"""Every documented command works: each ``python -m rlzoo.<command>`` line of README.md and docs/*.md is composed
in-process with Hydra's compose API (what ``--cfg job`` prints), placeholders (``<run dir>`` ...) filled from a fixture
run; a key, option or group that does not exist fails. The cheap training commands also train at a tiny budget.

Not composed (:data:`NOT_COMPOSED`): lines that need a file the reader makes first (``my_conf/``, a custom algorithm).
Sweeps (``-m``) are composed with the first value of each swept key (what their first job composes).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from conftest import TINY_ON_POLICY
from rlzoo.config import compose_config
from rlzoo.train import train

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONFIGS = {"train": "train", "enjoy": "enjoy", "plot": "plot", "report": "report", "collect": "collect",
           "srl.train": "srl_train", "tune": "tune", "pipeline": "pipeline"}  # fmt: skip
COMMAND = re.compile(r"python -m rlzoo\.([a-z_.]+)((?:[^`#\n\\]|\\\n)*)")
# Hydra flags that take no part in composing: --cfg job, --info searchpath, -m.
FLAGS = {"-m", "--multirun", "--cfg", "--info", "job", "all", "hydra", "searchpath", "..."}
# Lines that need files the reader writes first.
NOT_COMPOSED = {
    "algo=vpg": "tests/custom_algorithm: the reader's own algorithm module and my_conf/ folder (README's example)",
}
RUN_KEYS = ("run", "resume", "init_from", "dir", "collect_policy.run")


@dataclass(frozen=True)
class Documented:
    """One documented command: where it is, the entrypoint and its arguments."""

    where: str
    command: str
    arguments: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: python -m rlzoo.{self.command} {' '.join(self.arguments)}"


def documented_commands() -> Iterator[Documented]:
    for doc in DOCS:
        text = doc.read_text()
        for match in COMMAND.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            command, rest = match.group(1).rstrip("."), match.group(2).replace("\\\n", " ")
            if command in CONFIGS:
                yield Documented(f"{doc.name}:{line}", command, tuple(shlex.split(rest)))


COMMANDS = list(documented_commands())


def test_the_docs_hold_commands_of_every_entrypoint() -> None:
    assert len(COMMANDS) > 80
    assert {c.command for c in COMMANDS} == set(CONFIGS)


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny trained run (PPO on MobileRobot) standing for ``<run dir>`` and the run folders the docs name."""
    path = tmp_path_factory.mktemp("docs") / "run"
    overrides = ["algo=ppo", "env=MobileRobot", "n_envs=1", *TINY_ON_POLICY, "algo.n_epochs=1", "total_timesteps=64",
                 "test_episodes=1", "checkpoint_freq=32", "verbose=0", "logger.formats=[csv]"]  # fmt: skip
    train(compose_config(overrides, run_dir=path))
    return path


def filled(arguments: tuple[str, ...], run: Path) -> list[str]:
    """The overrides of a documented command: flags dropped, a sweep's first value, placeholders filled."""
    overrides = []
    for argument in arguments:
        if argument in FLAGS:
            continue
        key, equals, value = argument.partition("=")
        if key.lstrip("+~") in RUN_KEYS and (value.startswith(("outputs/", "multirun/", "<")) or "<" in value):
            tail = value.rpartition(":")[2] if ":" in value and key == "init_from" else ""
            value = str(run) + (f":{tail}" if tail in ("25000", "latest", "final", "best") else "")
        value = value.replace("<tune.dir>", str(run.parent / "tune"))
        overrides.append(f"{key}={value}" if equals else argument)
    parser = OverridesParser.create()
    first = []
    for override, text in zip(parser.parse_overrides(overrides), overrides, strict=True):
        if override.is_sweep_override():
            values = list(override.sweep_string_iterator())
            first.append(f"{text.split('=', 1)[0]}={values[0]}")
        else:
            first.append(text)
    return first


@pytest.mark.parametrize("documented", COMMANDS, ids=str)
def test_every_documented_command_composes(documented: Documented, fixture_run: Path, tmp_path: Path) -> None:
    reason = next((why for marker, why in NOT_COMPOSED.items() if marker in documented.arguments), None)
    if reason is not None:
        pytest.skip(reason)
    overrides = filled(documented.arguments, fixture_run)
    config = CONFIGS[documented.command]
    run_dir = tmp_path / "run" if config in ("train", "tune", "collect", "srl_train", "pipeline") else None
    compose_config(overrides, run_dir=run_dir, config_name=config)
