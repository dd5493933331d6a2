"""A generated attack corpus against every way of loading a shared run dir (``rlzoo.untrusted``, ``safe_load``).

A table-driven generator makes the cases: a payload (a ``_target_`` that opens a marker file for writing when it is
built) hidden in a way (a plain node, ``oc.decode`` / ``oc.create`` interpolations, an escaped interpolation that a
second resolution brings alive, a reference) at a place (a value, a nested node, a list item, a ``_partial_``'s
keyword); an allowed algorithm class nested below the root whose ``env`` string names a module shipped beside the run
dir (SB3 hands it to ``gymnasium.make``, which imports it); env ids naming such a module (it writes the marker when
imported); a YAML tag;
state files and links naming paths outside the run dir (``..``, absolute, symlinked log, output folder and model).

Untrusted, every case goes through every load path that reads what it plants (``enjoy``, ``load_agent``,
``load_run``, ``resume=``, the report, ``init_from=``, the pipeline's cached runs, multi-agent loading): refused in one
line, no marker, no file anywhere changed. Loaded with ``trusted=true`` the same cases create their markers (the
payloads are live); a path case leads outside the run dir (checked by resolving it) and is refused even trusted.

The folder half of the corpus (links, FIFOs, sparse files, gzip bombs, YAML tags, non-finite figures and linked
output folders through ``rlzoo.plot``, the pipeline's results step and ``rlzoo.records``) is
``test_sharing_attacks_folders.py``.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import DictConfig, OmegaConf

import rlzoo
from conftest import TINY_ALGO_RUNS, TINY_RUN
from rlzoo.checkpoint_format import REPLAY, RUN_STATE, RUN_STATE_ARRAYS
from rlzoo.config import compose_config
from rlzoo.enjoy import EnjoySettings, enjoy
from rlzoo.errors import ConfigError
from rlzoo.kinds import load_agent
from rlzoo.model_files import LEARNERS_STATE
from rlzoo.playback.loading import load_run
from rlzoo.rundir import MODEL, RunDir
from rlzoo.train import train

PPO = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], *TINY_RUN, "test_episodes=0"]
GAME = ["env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", "multiagent=independent", "algo=dqn",
        "algo.learning_starts=20", "algo.buffer_size=500", "algo.batch_size=16", "+algo.policy_kwargs.net_arch=[16]",
        "verbose=0", "logger.formats=[csv]", "hardware.torch_threads=1", "test_episodes=0", "total_timesteps=100",
        "checkpoint_freq=50"]  # fmt: skip
SCHEDULE = "stable_baselines3.common.utils.LinearSchedule"


# --- the generator ---------------------------------------------------------------------------------------------------


def payload(marker: Path) -> dict[str, Any]:
    """Built, it opens ``marker`` for writing (the file appears)."""
    return {"_target_": "codecs.open", "_args_": [str(marker), "w"]}


def _flow(marker: Path) -> str:
    return f"{{_target_: codecs.open, _args_: [{marker}, w]}}"


# How a payload is hidden: the value planted for a marker.
HIDINGS: dict[str, Callable[[Path], Any]] = {
    "node": payload,
    "decode": lambda marker: f"${{oc.decode:'{_flow(marker)}'}}",
    "create": lambda marker: f"${{oc.create:{_flow(marker)}}}",
    "escaped": lambda marker: f"\\${{oc.decode:'{_flow(marker)}'}}",  # alive after one resolution
    "reference": lambda marker: "${algo.policy_kwargs.stash}",  # the stash holds the payload (see _plant_value)
}
# Where in the algo group it goes (each is built when the algorithm is).
PLACES: dict[str, Callable[[DictConfig, Any], None]] = {
    "value": lambda algo, value: algo.__setitem__("learning_rate", value),
    "nested": lambda algo, value: algo.policy_kwargs.__setitem__("activation_fn", value),
    "list_item": lambda algo, value: algo.policy_kwargs.__setitem__("net_arch", [16, value]),
    "partial": lambda algo, value: algo.__setitem__(
        "learning_rate", {"_target_": SCHEDULE, "_partial_": True, "start": value, "end": 0.0}
    ),
}
HIDDEN_TARGET = (
    r"(is an interpolation; a shared run's config holds its values written out|is outside the allowlist"
    r"|takes a schedule written as rlzoo writes it)"
)


@dataclass(frozen=True)
class Attack:
    """One case: what it plants in a copy of a run, and what a load of it must say.

    :param plant: plants the payload in the run copy for the marker (returns the modules it ships, for sys.path).
    :param message: the refusal's regex.
    :param reads: the load paths that read what it plants (None: all).
    :param live: trusted=true runs it (a YAML tag never runs: OmegaConf's loader builds no objects; an ``oc.env``
        interpolation reads, it runs nothing).
    :param leads_to: for a path case, the path (in the copy) whose resolution leads outside it.
    :param unbuilt: load paths that never build what it plants (a multi-agent run has no representation): refused
        untrusted all the same, not run trusted.
    """

    name: str
    plant: Callable[[Path, Path], None]
    message: str
    reads: frozenset[str] | None = None
    live: bool = True
    leads_to: str | None = None
    unbuilt: frozenset[str] = frozenset()


def _edit_config(run: Path, edit: Callable[[DictConfig], None]) -> None:
    config = OmegaConf.load(run / "config.yaml")
    assert isinstance(config, DictConfig)
    edit(config)
    OmegaConf.save(config, run / "config.yaml")


def _plant_value(hiding: str, place: str) -> Callable[[Path, Path], None]:
    def plant(run: Path, marker: Path) -> None:
        def edit(config: DictConfig) -> None:
            if hiding == "reference":
                config.algo.policy_kwargs.stash = payload(marker)
            PLACES[place](config.algo, HIDINGS[hiding](marker))

        _edit_config(run, edit)

    return plant


def _module_name(run: Path) -> str:
    return f"shipped_{abs(hash(str(run))) % 10**8}"


def _plant_module(run: Path, marker: Path) -> None:
    """A module beside the run dir (where ``python -m`` run from the folder above puts it first on sys.path), named
    by ``env.id`` (``module:EnvId``; a multi-agent run: the PettingZoo module itself)."""
    name = _module_name(run)
    (run.parent / f"{name}.py").write_text(f"open({str(marker)!r}, 'w')\n")
    multiagent = OmegaConf.load(run / "config.yaml").get("multiagent")
    _edit_config(run, lambda config: config.env.__setitem__("id", name if multiagent else f"{name}:CartPole-v1"))


def _plant_self_trusted(run: Path, marker: Path) -> None:
    """A payload in a config that says ``trusted: true``: only the loading user's word counts."""

    def edit(config: DictConfig) -> None:
        config.trusted = True
        config.algo.learning_rate = payload(marker)

    _edit_config(run, edit)


def _plant_environment(run: Path, marker: Path) -> None:
    """An interpolation reading the loading user's environment (into a table, a message ...): nothing to run."""
    _edit_config(run, lambda config: config.algo.__setitem__("gamma", "${oc.env:HOME}"))


def _plant_yaml_tag(run: Path, marker: Path) -> None:
    with (run / "config.yaml").open("a") as stream:
        stream.write(f"payload: !!python/object/apply:codecs.open [{str(marker)!r}, w]\n")


# Where an algorithm class is nested below the root (each is built while the algorithm factory or the representation
# is made, before any keyword check).
NESTED_ALGORITHM: dict[str, Callable[[DictConfig, Any], None]] = {
    "policy_kwargs": lambda config, node: config.algo.policy_kwargs.__setitem__("features_extractor_kwargs", node),
    "learning_rate": lambda config, node: config.algo.__setitem__("learning_rate", node),
    "make_kwargs": lambda config, node: config.srl_model.__setitem__("make_kwargs", {"options": node}),
}


def _plant_nested_algorithm(place: str) -> Callable[[Path, Path], None]:
    """An allowlisted algorithm class below the root whose ``env`` is ``<module>:<Id>``: SB3 hands the string to
    ``gymnasium.make``, which imports the module (shipped beside the run dir, first on sys.path) when it is built."""

    def plant(run: Path, marker: Path) -> None:
        name = _module_name(run)
        (run.parent / f"{name}.py").write_text(f"open({str(marker)!r}, 'w')\n")
        node = {"_target_": "stable_baselines3.PPO", "policy": "MlpPolicy", "env": f"{name}:CartPole-v1"}
        _edit_config(run, lambda config: NESTED_ALGORITHM[place](config, node))

    return plant


def unfinished(run: Path) -> RunDir:
    """The run as a killed run leaves it: no final model, no metrics (resume continues from its newest checkpoint)."""
    (run / "metrics.json").unlink()
    (run / MODEL).unlink()
    return RunDir(run)


def _plant_log_lines(name: str) -> Callable[[Path, Path], None]:
    def plant(run: Path, marker: Path) -> None:
        state = unfinished(run).checkpoints()[-1] / "state.json"
        victim = run.parent.parent / "victim.txt"
        content = json.loads(state.read_text())
        content["log_lines"][name.format(victim=victim)] = 0
        state.write_text(json.dumps(content))

    return plant


def _plant_symlink(name: str) -> Callable[[Path, Path], None]:
    def plant(run: Path, marker: Path) -> None:
        link = run / name
        if link.exists():
            shutil.rmtree(link) if link.is_dir() else link.unlink()
        target = run.parent.parent / ("victim.txt" if link.suffix else "outside")
        os.symlink(target, link)

    return plant


def _plant_encoder_link(run: Path, marker: Path) -> None:
    """The config names an encoder folder (outside the run dir, as encoders are) whose weights link further out."""
    encoder = run.parent.parent / "encoder"
    encoder.mkdir()
    (encoder / "encoder.json").write_text("{}\n")
    os.symlink(run.parent.parent / "victim.txt", encoder / "encoder.pt")
    _edit_config(run, lambda config: config.srl_model.__setitem__("checkpoint", str(encoder)))


class _Opens:
    """Pickled, it reduces to ``codecs.open(marker, "w")``: unpickling it makes the marker appear."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return codecs.open, (str(self.marker), "w")


def _plant_pickled_run_state(run: Path, marker: Path) -> None:
    """A checkpoint's run state whose array is a pickle (NumPy writes object arrays so): read without unpickling."""
    folder = unfinished(run).checkpoints()[-1]
    with (folder / RUN_STATE_ARRAYS).open("wb") as stream:
        np.savez(stream, **{"random/torch": np.array([_Opens(marker)], dtype=object)})


def _multiagent_manifest(run: Path) -> tuple[Path, dict[str, Any]]:
    """The newest checkpoint's run state of a multi-agent run as a kill leaves it (no final models, no metrics)."""
    for name in ("metrics.json", LEARNERS_STATE):
        (run / name).unlink()
    state = RunDir(run).checkpoints()[-1] / RUN_STATE
    return state, json.loads(state.read_text())


def _plant_pickled_agent_chunk(run: Path, marker: Path) -> None:
    """A learning key's replay chunk (``replay/<key>/``) that is a pickle, of the size its checkpoint records."""
    state, values = _multiagent_manifest(run)
    key, found = next(iter(values["buffers"].items()))
    chunk = run / REPLAY / key / found["chunks"][-1]["file"]
    with chunk.open("wb") as stream:
        np.savez(stream, start=np.array([_Opens(marker)], dtype=object))
    found["chunks"][-1]["bytes"] = chunk.stat().st_size
    state.write_text(json.dumps(values))


def _plant_chunk_folder_outside(run: Path, marker: Path) -> None:
    """A chunk list whose agent key (the folder of its chunks under ``replay/``) climbs out of the run dir."""
    state, values = _multiagent_manifest(run)
    values["buffers"] = {"../../outside": next(iter(values["buffers"].values()))}
    state.write_text(json.dumps(values))


def _data_bomb(run: Path, marker: Path) -> None:
    """Every ``model.zip`` of the run (final, checkpoints) with a ``data`` entry of 64 MiB deflated to ~64 kB."""
    for model in [run / MODEL, *run.glob("checkpoints/*/" + MODEL)]:
        if model.is_file():
            with zipfile.ZipFile(model, "a", zipfile.ZIP_DEFLATED) as archive:
                archive.writestr("data", b" " * (64 << 20))


def _lying_run_state(run: Path, marker: Path) -> None:
    """A checkpoint's ``run_state.npz`` whose array header claims 10^10 rows of 64 float64 (5 TiB) over 8 bytes."""
    folder = unfinished(run).checkpoints()[-1]
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**10, 64)})
    with zipfile.ZipFile(folder / RUN_STATE_ARRAYS, "w") as archive:
        archive.writestr("random/torch.npy", header.getvalue() + b"\0" * 8)


def _compressed_run_state(run: Path, marker: Path) -> None:
    """A checkpoint's ``run_state.npz`` holding 64 MiB of zeros compressed to ~64 kB."""
    folder = unfinished(run).checkpoints()[-1]
    with (folder / RUN_STATE_ARRAYS).open("wb") as stream:
        np.savez_compressed(stream, **{"random/torch": np.zeros(64 << 20, dtype=np.uint8)})


RESUME = frozenset({"resume"})
# the final model.zip (the report failing on a refused replay: issue 66 item 5, another change)
SINGLE = frozenset({"load_run", "load_agent", "enjoy", "init_from"})
MULTIAGENT_RESUME = frozenset({"multiagent_resume"})
OUTSIDE = r"(leads outside the run dir|is a symlink to \S+, outside)"


def attacks() -> list[Attack]:
    """The corpus: every hiding at every place, modules, a YAML tag, paths leading out of the run dir."""
    cases = [
        Attack(f"{hiding}-{place}", _plant_value(hiding, place), HIDDEN_TARGET)
        for hiding, place in itertools.product(HIDINGS, PLACES)
    ]
    cases += [
        Attack(
            f"algorithm-{place}",
            _plant_nested_algorithm(place),
            r"_target_='stable_baselines3.PPO' is outside",
            unbuilt=frozenset({"multiagent"} if place == "make_kwargs" else ()),
        )
        for place in NESTED_ALGORITHM
    ]
    cases.append(Attack("self-trusted", _plant_self_trusted, r"algo.learning_rate._target_='codecs.open' is outside"))
    cases.append(Attack("module-env-id", _plant_module, r"module 'shipped_\d+' is not on the import allowlist"))
    cases.append(
        Attack("environment", _plant_environment, r"algo.gamma='\$\{oc.env:HOME\}' is an interpolation", live=False)
    )
    cases.append(Attack("yaml-tag", _plant_yaml_tag, r"config.yaml is not plain YAML \(line \d+\)", live=False))
    for name, shape in (("dotdot", "../../victim.txt"), ("absolute", "{victim}")):
        cases.append(Attack(f"log-{name}", _plant_log_lines(shape), OUTSIDE, RESUME, leads_to=shape))
    for name in ("progress.csv", "enjoy", "checkpoints/64/model.zip"):
        cases.append(Attack(f"symlink-{name.split('/')[0]}", _plant_symlink(name), OUTSIDE, leads_to=name))
    cases.append(Attack("symlink-encoder", _plant_encoder_link, OUTSIDE, live=False))  # checked untrusted only
    pickled = r"run_state.npz: member 'random/torch.npy' holds Python objects \(a pickle\): plain arrays only"
    cases.append(Attack("pickled-run-state", _plant_pickled_run_state, pickled, RESUME, live=False))  # never unpickled
    chunk = r"replay/\S+\.npz: member 'start.npy' holds Python objects \(a pickle\): plain arrays only"
    cases.append(Attack("pickled-agent-chunk", _plant_pickled_agent_chunk, chunk, MULTIAGENT_RESUME, live=False))
    outside = r"buffers must map agent keys \(letters, digits, _ \. -\) to replay chunk lists"
    cases.append(Attack("chunk-folder-outside", _plant_chunk_folder_outside, outside, MULTIAGENT_RESUME, live=False))
    cases.append(Attack("zip-data-bomb", _data_bomb, r"member 'data' expands to 67108864 bytes", SINGLE, live=False))
    lying = r"run_state.npz: member 'random/torch.npy' announces \(10000000000, 64\) of float64"
    cases.append(Attack("npz-header-lie", _lying_run_state, lying, RESUME, live=False))
    bomb = r"run_state.npz: member 'random/torch.npy' expands to 67108\d+ bytes from \d+"
    cases.append(Attack("npz-bomb", _compressed_run_state, bomb, RESUME, live=False))
    return cases


ATTACKS = {attack.name: attack for attack in attacks()}


# --- the load paths --------------------------------------------------------------------------------------------------


def _enjoy(run: Path, trusted: bool, allow: tuple[str, ...]) -> None:
    enjoy(EnjoySettings(run=str(run), n_episodes=1, trusted=trusted, allow=allow), log=lambda _: None)


def _resume(run: Path, trusted: bool, allow: tuple[str, ...]) -> None:
    train(compose_config([f"resume={run}", f"trusted={str(trusted).lower()}"], run_dir=run.parent / "hydra"))


def _init_from(run: Path, trusted: bool, allow: tuple[str, ...]) -> None:
    train(compose_config([*PPO, "total_timesteps=64", f"init_from={run}"], run_dir=run.parent.parent / "tuned"))


def _report(run: Path, trusted: bool, allow: tuple[str, ...]) -> None:
    from rlzoo.reporting.page import write_report

    write_report(run.parent, run.parent.parent / "report.html", trusted=trusted, log=lambda _: None)


def _pipeline(run: Path, trusted: bool, allow: tuple[str, ...]) -> None:
    """The pipeline's results step over its cached runs (``<pipeline dir>/runs/``): table, then the report."""
    from rlzoo.pipeline.command import results
    from rlzoo.pipeline.spec import pipeline_spec

    spec = pipeline_spec(
        ["experiment=srl_benchmark_small", "pipeline.verdict_of=null", f"pipeline.dir={run.parent.parent}"]
    )
    assert spec.runs_dir == run.parent
    results(spec, lambda _: None)


def _multiagent(run: Path, trusted: bool, allow: tuple[str, ...]) -> None:
    from rlzoo.multiagent.agents import load_multiagent

    load_multiagent(run, trusted=trusted, allow=allow)


LoadPath = Callable[[Path, bool, tuple[str, ...]], Any]
LOADS: dict[str, LoadPath] = {
    "load_run": lambda run, trusted, allow: load_run(run, trusted=trusted, allow=allow),
    "load_agent": lambda run, trusted, allow: load_agent(run, trusted=trusted, allow=allow),
    "enjoy": _enjoy,
    "resume": _resume,
    "report": _report,
    "init_from": _init_from,
    "pipeline": _pipeline,
    "multiagent": _multiagent,
    "multiagent_resume": _resume,  # a multi-agent run's checkpoint: its per-key replay chunks
}
TAKE_ALLOW = ("load_run", "load_agent", "enjoy", "multiagent")  # allow=: the module named, still never shipped
WHERE = {"report": "sweep", "pipeline": "pipe/runs"}  # where a path finds runs (else: shared/)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny PPO run and a tiny multi-agent run, both with checkpoints."""
    folder = tmp_path_factory.mktemp("bases")
    train(compose_config(PPO, run_dir=folder / "ppo"))
    made = {"ppo": folder / "ppo"}
    try:
        import pettingzoo  # noqa: F401
    except ImportError:
        return made
    train(compose_config(GAME, run_dir=folder / "multiagent"))
    return {**made, "multiagent": folder / "multiagent"}


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``folder`` (links not followed): its size and modification time."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(folder))] = (info.st_size, info.st_mtime_ns)
    return found


def planted(
    attack: Attack, path: str, bases: dict[str, Path], world: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """A copy of the base run holding ``attack``'s payload where ``path`` finds runs, the working directory the
    folder above it (as for ``python -m`` run there, which puts that folder first on sys.path); (copy, marker)."""
    base = bases["multiagent" if path.startswith("multiagent") else "ppo"]
    run = world / WHERE.get(path, "shared") / "run"
    shutil.copytree(base, run)
    (world / "victim.txt").write_text("kept\n")
    (world / "outside").mkdir()
    marker = world / "ran"
    attack.plant(run, marker)
    monkeypatch.syspath_prepend(str(run.parent))
    monkeypatch.chdir(run.parent)
    return run, marker


# The pipeline's results step makes its table (seconds of figures) before the report replays its cached runs: it takes
# one case of each family; the report path, the same replays, takes them all.
PIPELINE_CASES = ("node-value", "algorithm-make_kwargs", "decode-list_item", "escaped-partial", "module-env-id",
                  "yaml-tag", "symlink-enjoy")  # fmt: skip
CASES = [
    (attack, path)
    for attack, path in itertools.product(ATTACKS, LOADS)
    # a multi-agent resume reads the config as resume= does: it takes only the cases of its own files
    if ((ATTACKS[attack].reads is None and path != "multiagent_resume") or path in (ATTACKS[attack].reads or ()))
    and not (path == "multiagent" and ATTACKS[attack].leads_to is not None)  # path cases: the single-agent layout
    and (path != "pipeline" or attack in PIPELINE_CASES)
]


@pytest.mark.parametrize(("attack", "path"), CASES)
def test_untrusted_load_refuses_in_one_line_and_changes_nothing(
    attack: str, path: str, bases: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path.startswith("multiagent") and "multiagent" not in bases:
        pytest.skip("needs the [multiagent] extra")
    case = ATTACKS[attack]
    run, marker = planted(case, path, bases, tmp_path, monkeypatch)
    before = snapshot(tmp_path)
    allow = (_module_name(run),) if attack == "module-env-id" and path in TAKE_ALLOW else ()
    with pytest.raises(ConfigError) as error:
        LOADS[path](run, False, allow)
    message = str(error.value)
    assert "\n" not in message
    expected = r"would be imported from \S+ \(the folder holding the run dir\)" if allow else case.message
    assert re.search(expected, message), message
    if path in ("report", "pipeline"):
        assert str(run) in message  # names the run
    assert not marker.exists()
    after = snapshot(tmp_path)
    if path == "pipeline":  # its table (results/) comes before the report's replays
        after = {key: value for key, value in after.items() if key != "pipe" and not key.startswith("pipe/results")}
        before.pop("pipe")
    assert after == before


LIVE = [
    (name, path)
    for path in ("load_run", "resume", "multiagent")
    for name, case in ATTACKS.items()
    if case.live and case.leads_to is None and path not in case.unbuilt
]


@pytest.mark.parametrize(("attack", "path"), LIVE)
def test_trusted_load_runs_the_same_payload(
    attack: str, path: str, bases: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proof that the corpus is live: trusted, the payload runs (the load may fail after that)."""
    if path == "multiagent" and path not in bases:
        pytest.skip("needs the [multiagent] extra")
    run, marker = planted(ATTACKS[attack], path, bases, tmp_path, monkeypatch)
    with contextlib.suppress(Exception):  # a marker's file object is no learning rate: the load fails after it ran
        LOADS[path](run, True, ())
    assert marker.exists()


@pytest.mark.parametrize("attack", [name for name, case in ATTACKS.items() if case.leads_to is not None])
def test_path_cases_lead_outside_and_are_refused_even_trusted(
    attack: str, bases: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = ATTACKS[attack]
    run, _ = planted(case, "resume", bases, tmp_path, monkeypatch)
    assert case.leads_to is not None
    named = (run / case.leads_to.format(victim=tmp_path / "victim.txt")).resolve()
    assert named in (tmp_path / "victim.txt", tmp_path / "outside")  # the payload: a path that leads out
    load = _resume if not (run / MODEL).exists() else LOADS["load_run"]  # a state-file case: its copy is unfinished
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=OUTSIDE):
        load(run, True, ())
    assert snapshot(tmp_path) == before and (tmp_path / "victim.txt").read_text() == "kept\n"


def test_report_command_fails_in_one_line_naming_the_refused_run(
    bases: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line: ``rlzoo.report`` exits non-zero with one line naming the run; no page is written."""
    run, marker = planted(ATTACKS["node-value"], "report", bases, tmp_path, monkeypatch)
    out = tmp_path / "report.html"
    source = str(Path(rlzoo.__file__).resolve().parents[1])  # this checkout's rlzoo, from any working directory
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "rlzoo.report", f"dir={run.parent}", f"out={out}"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode != 0 and not marker.exists() and not out.exists()
    assert re.fullmatch(rf"rlzoo.report: error: the replay of run {re.escape(str(run))} was refused: .*\n", done.stderr)


def test_report_fails_naming_the_run_whose_replay_raises(
    bases: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay that raises (here a truncated ``model.zip``) fails the report in one line naming the run, writing no
    page: a report never says "0 replay(s)" over a run it could not replay."""
    run = tmp_path / "sweep" / "run"
    shutil.copytree(bases["ppo"], run)
    model = run / MODEL
    model.write_bytes(model.read_bytes()[:100])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        _report(run, False, ())
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"the replay of run {run} failed: "), message
    assert not (tmp_path / "report.html").exists()


def test_untrusted_load_instantiates_only_rlzoo_own_targets(
    bases: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What reaches Hydra's ``instantiate`` on an untrusted load is the config rlzoo wrote from the typed description:
    every ``_target_`` in it is one of rlzoo's tables (a schedule planted in the run here)."""
    import hydra.utils

    from rlzoo.training.shared_config import GET_CLASS, PLACES, algorithm_registry

    run = tmp_path / "shared" / "run"
    shutil.copytree(bases["ppo"], run)
    schedule = {"_target_": SCHEDULE, "start": 0.001, "end": 0.0, "end_fraction": 1.0}
    _edit_config(run, lambda config: config.algo.__setitem__("learning_rate", schedule))
    seen: list[str] = []
    real = hydra.utils.instantiate

    def spy(config: Any, *args: Any, **kwargs: Any) -> Any:
        seen.extend(target for target, _ in _targets_in(OmegaConf.to_container(OmegaConf.create(config))))
        return real(config, *args, **kwargs)

    monkeypatch.setattr(hydra.utils, "instantiate", spy)
    load_run(run)
    ours = {path for table in PLACES.values() for path in table.entries.values()} | {GET_CLASS}
    assert SCHEDULE in seen and set(seen) <= ours | set(algorithm_registry()), seen


def _targets_in(node: Any) -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        found = [(node["_target_"], node)] if "_target_" in node else []
        return found + [pair for value in node.values() for pair in _targets_in(value)]
    if isinstance(node, list):
        return [pair for value in node for pair in _targets_in(value)]
    return []
