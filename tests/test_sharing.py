"""Safe to share: a run dir from someone else loads without running its code (``rlzoo.training.safe_load``).

Copies of real run dirs carry payloads that would write a marker file when unpickled or instantiated: in every
``:serialized:`` entry of ``model.zip``'s ``data``, in ``config.yaml`` (a ``_target_``), in a ``.pth`` of the zip and
in ``obs_norm.npz``. Loaded untrusted, none runs: the load fails in one line or, with only the zip's pickles
poisoned, loads and acts as the clean run loaded with SB3's own (trusted) load.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from conftest import TINY_ALGO_RUNS, TINY_ON_POLICY, TINY_RUN
from extras import require_extra
from rlzoo.config import compose_config
from rlzoo.enjoy import EnjoySettings, enjoy
from rlzoo.errors import ConfigError
from rlzoo.kinds import load_agent
from rlzoo.playback.loading import load_run
from rlzoo.rundir import MODEL, OBS_NORM, RunDir
from rlzoo.train import train
from rlzoo.training.shared_config import PLACES, Built, parse_shared

TINY = [*TINY_RUN, "test_episodes=0"]
RUNS = {
    "ppo": ["algo=ppo", *TINY_ALGO_RUNS["ppo"]],
    "sac": ["algo=sac", *TINY_ALGO_RUNS["sac"], "normalize=true"],
    "ddqn": ["algo=ddqn", *TINY_ALGO_RUNS["ddqn"]],
    "sbx_sac": ["algo=sbx_sac", *TINY_ALGO_RUNS["sbx_sac"]],
}


class Payload:
    """Unpickled, it opens ``marker`` for writing (the file appears): what a shared file could run."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.marker, "w"))


def _rewrite_zip(path: Path, **entries: bytes) -> None:
    with zipfile.ZipFile(path) as archive:
        contents = {name: archive.read(name) for name in archive.namelist()}
    contents.update(entries)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in contents.items():
            archive.writestr(name, data)


def poison_data(path: Path, marker: Path) -> None:
    """Every ``:serialized:`` entry of the zip's ``data`` becomes the payload."""
    with zipfile.ZipFile(path) as archive:
        data = json.loads(archive.read("data"))
    blob = base64.b64encode(pickle.dumps(Payload(marker))).decode()
    for value in data.values():
        if isinstance(value, dict) and ":serialized:" in value:
            value[":serialized:"] = blob
    _rewrite_zip(path, data=json.dumps(data).encode())


def poison_pth(path: Path, marker: Path) -> None:
    """The zip's ``policy.pth`` holds the payload (a pickled object ``weights_only`` refuses)."""
    buffer = io.BytesIO()
    torch.save({"policy": Payload(marker)}, buffer)
    _rewrite_zip(path, **{"policy.pth": buffer.getvalue()})


def poison_config(run: Path, marker: Path) -> None:
    """A ``_target_`` outside the allowlist that writes the marker when instantiated."""
    config = OmegaConf.load(run / "config.yaml")
    config.algo.learning_rate = {"_target_": "codecs.open", "_args_": [str(marker), "w"]}
    OmegaConf.save(config, run / "config.yaml")


def poison_obs_norm(path: Path, marker: Path) -> None:
    """``obs_norm.npz`` holding an object array (a pickle)."""
    np.savez(path, mean=np.array([Payload(marker)], dtype=object))


def models(run: Path) -> list[Path]:
    return [run / MODEL, *(folder / MODEL for folder in RunDir(run).checkpoints())]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("shared")
    trained = {name: _train(folder / name, overrides) for name, overrides in RUNS.items() if name != "sbx_sac"}
    from srl_helpers import make_dataset, make_encoder

    encoder = folder / "encoder"
    make_encoder(encoder, make_dataset(folder / "data", ["n_samples=100"]), "random")
    learned = ["algo=ppo", "env=MobileRobot", "env.random_target=true", "srl_model=random", *TINY_ON_POLICY,
               f"srl_model.checkpoint={encoder}", "srl_model.height=16", "srl_model.width=16"]  # fmt: skip
    trained["learned_encoder"] = _train(folder / "learned_encoder", learned)
    return trained


def _train(run_dir: Path, overrides: list[str]) -> Path:
    train(compose_config([*overrides, *TINY], run_dir=run_dir))
    return run_dir


def _copy(run: Path, folder: Path) -> Path:
    copy = folder / f"copy_of_{run.name}"
    shutil.copytree(run, copy)
    return copy


def _same_actions(trusted: Any, untrusted: Any) -> None:
    """The same action, step by step, on 100 seeded observations of the model's space."""
    space = trusted.model.observation_space
    space.seed(0)
    for _ in range(100):
        obs = space.sample()[None]
        mine, _ = untrusted.model.predict(untrusted.normalize_observation(obs), deterministic=True)
        theirs, _ = trusted.model.predict(trusted.normalize_observation(obs), deterministic=True)
        np.testing.assert_array_equal(mine, theirs)


def _check_same_run(run: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    copy = _copy(run, tmp_path)
    for model in models(copy):
        poison_data(model, marker)
    for checkpoint in (None, int(RunDir(copy).checkpoints()[0].name)):
        untrusted = load_run(copy, checkpoint)
        assert not marker.exists(), "a pickle of model.zip's data was loaded"
        _same_actions(load_run(run, checkpoint, trusted=True), untrusted)
        assert untrusted.model.num_timesteps == load_run(run, checkpoint, trusted=True).model.num_timesteps
    with pytest.raises(Exception):  # noqa: B017  (the proof that the payload runs: SB3's own load)
        load_run(copy, trusted=True)
    assert marker.exists()


@pytest.mark.parametrize("name", ["ppo", "sac", "ddqn", "learned_encoder"])
def test_untrusted_load_runs_no_pickle_and_acts_as_trusted(name: str, runs: dict[str, Path], tmp_path: Path) -> None:
    _check_same_run(runs[name], tmp_path)


def test_sbx_run_shares_its_weights_as_msgpack(tmp_path: Path) -> None:
    require_extra("sbx", "jax")
    run = _train(tmp_path / "sbx_sac", RUNS["sbx_sac"])
    assert (run / "model.msgpack").is_file()
    _check_same_run(run, tmp_path)
    (run / "model.msgpack").unlink()  # an SBX run from before model.msgpack: trusted only, one line
    with pytest.raises(ConfigError, match=r"^\S+model.zip is an SBX model saved without model.msgpack .*trusted=true"):
        load_run(run)


def _one_line(error: pytest.ExceptionInfo[ConfigError]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


POISONS = {
    "config": lambda run, marker: poison_config(run, marker),
    "pth": lambda run, marker: [poison_pth(model, marker) for model in models(run)],
    "obs_norm": lambda run, marker: poison_obs_norm(run / OBS_NORM, marker),
}
MESSAGES = {
    "config": r"config.yaml: algo.learning_rate._target_='codecs.open' is outside the allowlist: .*trusted=true",
    "pth": r"model.zip cannot be loaded as PPO: its weights hold a pickled object, not plain tensors; .*trusted=true",
    "obs_norm": r"obs_norm.npz: member .mean.npy. holds Python objects \(a pickle\): plain arrays only",
}


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_poisoned_file_is_refused_in_one_line(poison: str, runs: dict[str, Path], tmp_path: Path) -> None:
    """Through load_run, load_agent and rlzoo.enjoy: one line naming the file, nothing run, nothing written."""
    marker = tmp_path / "ran"
    copy = _copy(runs["ppo"], tmp_path)
    POISONS[poison](copy, marker)
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    for load in (
        lambda: load_run(copy),
        lambda: load_agent(copy),
        lambda: enjoy(EnjoySettings(run=str(copy), n_episodes=1), log=lambda _: None),
    ):
        with pytest.raises(ConfigError, match=MESSAGES[poison]) as error:
            load()
        _one_line(error)
    assert not marker.exists()
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before


def test_bad_run_dirs_are_refused_in_one_line(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = _copy(runs["ppo"], tmp_path)
    (copy / MODEL).write_bytes((runs["ppo"] / MODEL).read_bytes()[:200])  # truncated
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(ConfigError, match=r"model.zip cannot be loaded as PPO: File is not a zip file") as error:
        load_run(copy)
    _one_line(error)
    (copy / "config.yaml").unlink()
    with pytest.raises(ConfigError, match=r"is not a run dir \(it has no config.yaml\)") as error:
        load_agent(copy)
    _one_line(error)
    assert sorted(tmp_path.rglob("*")) == [p for p in before if p != copy / "config.yaml"]


def test_enjoy_command_refuses_a_foreign_target_in_one_line(runs: dict[str, Path], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    copy = _copy(runs["ppo"], tmp_path)
    poison_config(copy, marker)
    done = subprocess.run(
        [sys.executable, "-m", "rlzoo.enjoy", f"run={copy}"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and not marker.exists()
    assert re.fullmatch(r"rlzoo.enjoy: error: \S+config.yaml: algo.learning_rate._target_='codecs.open' is outside "
                        r"the allowlist: .*\n", done.stderr), done.stderr  # fmt: skip
    assert not (copy / "enjoy").exists()


def test_fine_tuning_and_resume_read_no_pickle(runs: dict[str, Path], tmp_path: Path) -> None:
    """``init_from`` and ``resume`` of a copy whose zips' pickles are payloads: they train, nothing runs; a
    ``_target_`` outside the allowlist in the resumed run's config is refused in one line before anything is
    written."""
    marker = tmp_path / "ran"
    copy = _copy(runs["ppo"], tmp_path)
    for model in models(copy):
        poison_data(model, marker)
    tuned = tmp_path / "tuned"
    train(compose_config([*RUNS["ppo"], *TINY, "total_timesteps=64", f"init_from={copy}"], run_dir=tuned))
    assert RunDir(tuned).is_finished() and not marker.exists()
    # An unfinished copy: the final model and metrics gone, so resume=<copy> continues from the newest checkpoint.
    (copy / MODEL).unlink()
    (copy / "metrics.json").unlink()
    newest = int(RunDir(copy).checkpoints()[-1].name)
    shutil.rmtree(RunDir(copy).checkpoint(newest))
    resumed = tmp_path / "hydra"
    train(compose_config([f"resume={copy}"], run_dir=resumed))
    assert RunDir(copy).is_finished() and RunDir(copy).resumes() and not marker.exists()
    other = _copy(runs["ppo"], tmp_path / "second")
    (other / "metrics.json").unlink()
    poison_config(other, marker)
    before = sorted(other.rglob("*"))
    with pytest.raises(ConfigError, match=MESSAGES["config"]) as error:
        train(compose_config([f"resume={other}"], run_dir=resumed))
    _one_line(error)
    assert not marker.exists() and sorted(other.rglob("*")) == before


def test_report_replays_a_shared_run_without_its_pickles(runs: dict[str, Path], tmp_path: Path) -> None:
    """The report (and the pipeline, which writes it) replays the best run untrusted: a GIF, nothing run."""
    from rlzoo.reporting.page import write_report

    marker = tmp_path / "ran"
    copy = _copy(runs["ppo"], tmp_path / "sweep")
    for model in models(copy):
        poison_data(model, marker)
    page = write_report(tmp_path / "sweep", tmp_path / "report.html", log=lambda _: None)
    assert [replay.run.path for replay in page.replays] == [copy] and not marker.exists()


LINEAR = "stable_baselines3.common.utils.LinearSchedule"
SCHEDULE = {"_target_": LINEAR, "start": 0.001, "end": 0.0, "end_fraction": 1.0}
TANH = {"_target_": "hydra.utils.get_class", "path": "torch.nn.Tanh"}
NOISE = {"_target_": "stable_baselines3.common.noise.NormalActionNoise", "mean": [0.0], "sigma": [0.1]}
STACK = {"_target_": "stable_baselines3.common.vec_env.VecFrameStack", "_partial_": True, "n_stack": 4}
PIXELS = {"_target_": "rlzoo.srl.pixels.rendered_pixels", "_partial_": True, "height": 64, "width": 64}
# (place, value): each an object the typed description takes at that place.
TAKEN = [(("algo", "learning_rate"), SCHEDULE), (("algo", "action_noise"), NOISE),
         (("algo", "policy_kwargs", "activation_fn"), TANH), (("srl_model", "vec_wrapper"), STACK),
         (("srl_model", "observation_wrapper"), PIXELS)]  # fmt: skip
NO_PLACE = "outside the allowlist: a shared config builds objects only at"
PPO_NODE = {"_target_": "stable_baselines3.PPO", "_partial_": True, "policy": "MlpPolicy", "env": "mod:Env-v0"}
REFUSED = [
    (("algo", "learning_rate"), PPO_NODE, "_target_='stable_baselines3.PPO' is outside the allowlist: not a schedule"),
    (("algo", "policy_kwargs", "net_arch"), PPO_NODE, NO_PLACE),
    (("algo", "policy_kwargs", "activation_fn"), {"_target_": "hydra.utils.get_class", "path": "os.system"},
     "path='os.system' is outside the allowlist: not an activation class"),
    (("algo", "learning_rate"), {**SCHEDULE, "_partial_": True}, "written as rlzoo writes it"),
    (("algo", "learning_rate"), {**SCHEDULE, "start": "1e-3"}, r"start='1e-3' must be"),
    (("algo", "learning_rate"), {**SCHEDULE, "extra": 1}, "extra is not a keyword of LinearSchedule"),
    (("srl_model", "make_kwargs"), {"render_mode": PPO_NODE}, NO_PLACE),
    (("srl_model", "vec_wrapper"), {**STACK, "venv": PPO_NODE}, "venv is not a keyword of VecFrameStack"),
    (("logger", "extra"), {"_target_": "codecs.open"}, r"logger\.extra\._target_='codecs.open' is outside"),
    (("algo", "policy"), {"_target_": "codecs.open"}, "must be a policy name"),
    (("algo", "policy_kwargs", "_target_"), "stable_baselines3.PPO", "a mapping of policy keywords, not an object"),
    (("srl_model", "_target_"), "stable_baselines3.PPO", r"srl_model\._target_='stable_baselines3.PPO' is outside"),
    (("_target_",), "stable_baselines3.PPO", "_target_ is refused at the root"),
]  # fmt: skip


def _shared(place: tuple[str, ...], value: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"algo": {"_target_": "stable_baselines3.PPO", "_partial_": True, "policy_kwargs": {}},
                              "srl_model": {"name": "ground_truth"}, "logger": {}}  # fmt: skip
    node = values
    for key in place[:-1]:
        node = node.setdefault(key, {})
    node[place[-1]] = value
    return values


@pytest.mark.parametrize(("place", "value"), TAKEN)
def test_shared_schema_rebuilds_the_objects_of_its_tables(place: tuple[str, ...], value: Any) -> None:
    """A typed node at its place is parsed into a typed value and written again by rlzoo: equal to the file's, its
    class path rlzoo's own string."""
    values = _shared(place, value)
    described = parse_shared(values, Path("config.yaml"))
    assert OmegaConf.to_container(described.config()) == values
    found: Any = described.values
    for key in place:
        found = found[key]
    assert isinstance(found, Built)
    path = found.node().get("path", found.node()["_target_"])
    assert any(path is ours for table in PLACES.values() for ours in table.entries.values())  # not the file's text


@pytest.mark.parametrize(("place", "value", "message"), REFUSED)
def test_shared_schema_refuses_objects_outside_their_place_or_table(
    place: tuple[str, ...], value: Any, message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        parse_shared(_shared(place, value), Path("config.yaml"))
    assert re.search(message, str(error.value)) and "\n" not in str(error.value), str(error.value)


def test_shared_schema_takes_algorithms_by_registry_at_the_root_only() -> None:
    values = _shared(("algo", "gamma"), 0.9)
    values["algo"]["_target_"] = LINEAR
    with pytest.raises(ConfigError, match="is outside the allowlist: not an algorithm of rlzoo's registry"):
        parse_shared(values, Path("config.yaml"))
    values["algo"]["_target_"] = "stable_baselines3.PPO.load"
    with pytest.raises(ConfigError, match="is outside the allowlist: not an algorithm of rlzoo's registry"):
        parse_shared(values, Path("config.yaml"), allow=["stable_baselines3"])  # functions: never
    values["algo"]["_target_"] = "stable_baselines3.PPO"
    assert parse_shared(values, Path("config.yaml")).algorithm == "stable_baselines3.PPO"
    values["algo"]["env"] = "mod:Env-v0"
    with pytest.raises(ConfigError, match=r"algo\.env is set by the env group"):
        parse_shared(values, Path("config.yaml"))


def test_multiagent_run_loads_and_resumes_without_its_pickles(tmp_path: Path) -> None:
    """A multi-agent run dir: every learner rebuilt from the checked config with its weights (same actions as SB3's
    own load), a foreign ``_target_`` refused in one line, and a resume that reads no pickle."""
    require_extra("pettingzoo", "multiagent")
    from rlzoo.multiagent.agents import load_multiagent

    game = ["env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", "multiagent=independent", "algo=dqn",
            "algo.learning_starts=20", "algo.buffer_size=500", "algo.batch_size=16",
            "+algo.policy_kwargs.net_arch=[16]", "verbose=0", "logger.formats=[csv]", "hardware.torch_threads=1",
            "test_episodes=0"]  # fmt: skip
    run = tmp_path / "run"
    train(compose_config([*game, "total_timesteps=200", "checkpoint_freq=100"], run_dir=run))
    marker = tmp_path / "ran"
    copy = _copy(run, tmp_path)
    zips = sorted(copy.rglob(MODEL))
    assert len(zips) >= 4  # final and checkpointed models of both learners
    for model in zips:
        poison_data(model, marker)
    untrusted, trusted = load_multiagent(copy), load_multiagent(run, trusted=True)
    assert not marker.exists(), "a pickle of a learner's model.zip was loaded"
    assert set(untrusted.models) == set(trusted.models) == {"player_1", "player_2"}
    for key, model in trusted.models.items():
        space = model.observation_space
        space.seed(0)
        for _ in range(20):
            obs = space.sample()
            mine, _ = untrusted.models[key].predict(obs, deterministic=True)
            theirs, _ = model.predict(obs, deterministic=True)
            np.testing.assert_array_equal(mine, theirs)
    # An unfinished copy (its metrics gone): resume=<copy> loads its final models and plays the test.
    (copy / "metrics.json").unlink()
    train(compose_config([f"resume={copy}"], run_dir=tmp_path / "hydra"))
    assert not marker.exists(), "a resume read a pickle of a learner's model.zip"
    assert RunDir(copy).is_finished() and RunDir(copy).resumes()
    poisoned = _copy(run, tmp_path / "poisoned")
    poison_config(poisoned, marker)
    with pytest.raises(ConfigError, match="outside the allowlist"):
        load_multiagent(poisoned)
    assert not marker.exists()


def test_links_inside_wandb_folder_are_its_own_but_the_folder_is_checked(tmp_path: Path) -> None:
    """A copied run's ``wandb/debug.log`` links point where the run was made (W&B's own, never read or written by
    rlzoo); the ``wandb`` folder itself leading outside is refused like any link."""
    from rlzoo.errors import Refused
    from rlzoo.untrusted import check_links

    run = tmp_path / "run"
    (run / "wandb").mkdir(parents=True)
    os.symlink(tmp_path / "where_it_was_made" / "debug.log", run / "wandb" / "debug.log")
    check_links(run)
    os.symlink(tmp_path / "where_it_was_made" / "debug.log", run / "debug.log")
    with pytest.raises(Refused, match=r"run/debug.log is a symlink to \S+where_it_was_made/debug.log, outside"):
        check_links(run)
    (run / "debug.log").unlink()
    shutil.rmtree(run / "wandb")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", run / "wandb")
    with pytest.raises(Refused, match=r"run/wandb is a symlink to \S+elsewhere, outside"):
        check_links(run)
