"""Preemption that changes nothing: a run stopped after a checkpoint and resumed ends with the weights (a SHA-256 of
every parameter tensor) and the metrics (times aside) of the uninterrupted run with the same seed and config."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.save_util import load_from_zip_file
from stable_baselines3.common.vec_env import DummyVecEnv

from conftest import Compose
from extras import require_extra
from rlzoo.checkpoint_format import REPLAY
from rlzoo.errors import ConfigError, Refused
from rlzoo.rundir import RunDir
from rlzoo.train import train
from rlzoo.training.env_state import capture_envs
from rlzoo.training.run_state import Snapshot
from srl_helpers import RANDOM_TARGET, make_dataset, make_encoder

QUIET = ["verbose=0", "logger.formats=[csv]", "test_episodes=3", "hardware.torch_threads=1", "seed=3"]
TINY_NET = "+algo.policy_kwargs.net_arch=[16]"
RUNS = {
    "ppo_MobileRobot": ["algo=ppo", "env=MobileRobot", "algo.n_steps=32", "algo.batch_size=64", "algo.n_epochs=2",
                        TINY_NET, "total_timesteps=1024", "checkpoint_freq=512"],
    "sac_MobileRobot": ["algo=sac", "env=MobileRobot", "algo.buffer_size=500", "algo.learning_starts=100",
                        "algo.batch_size=32", "+algo.policy_kwargs.net_arch=[16]", "total_timesteps=1200",
                        "checkpoint_freq=400"],
    "dqn_MobileRobot": ["algo=dqn", "env=MobileRobot", "algo.buffer_size=300", "algo.learning_starts=100",
                        "algo.batch_size=16", "algo.target_update_interval=50", TINY_NET, "total_timesteps=1200",
                        "checkpoint_freq=400"],
    "ppo_CartPole": ["algo=ppo", "env=CartPole", "n_envs=2", "algo.n_steps=32", "algo.batch_size=32", TINY_NET,
                     "total_timesteps=768", "checkpoint_freq=256", "eval_freq=256", "eval_episodes=2"],
    "per_CartPole": ["algo=per", "env=CartPole", "algo.buffer_size=300", "algo.learning_starts=50",
                     "algo.batch_size=16", TINY_NET, "total_timesteps=900", "checkpoint_freq=300"],
}  # fmt: skip
TIME_KEYS = ("time/",)


def weights_hash(model_zip: Path) -> str:
    """SHA-256 over every tensor the zip holds (policy, optimizers, SB3's torch variables), in name order."""
    _, params, variables = load_from_zip_file(model_zip, device="cpu", load_data=False)
    digest = hashlib.sha256()
    for name, tensor in sorted(_tensors({**params, **(variables or {})}).items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _tensors(tree: object, prefix: str = "") -> dict[str, torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    if isinstance(tree, dict):
        return {k: v for key, value in tree.items() for k, v in _tensors(value, f"{prefix}/{key}").items()}
    if isinstance(tree, list | tuple):
        return {k: v for i, value in enumerate(tree) for k, v in _tensors(value, f"{prefix}/{i}").items()}
    return {}


def figures(run: RunDir) -> dict[str, float]:
    return {k: v for k, v in run.read_metrics().items() if not k.startswith(TIME_KEYS)}


def episodes(run: RunDir) -> list[list[str]]:
    """Each env's training episodes (return and length; not the wall time)."""
    return [[",".join(line.split(",")[:2]) for line in f.read_text().splitlines()[2:]] for f in run.monitor_files()]


def stop_after(source: Path, target: Path, steps: int) -> RunDir:
    """``target``: ``source`` as it was when a kill struck after checkpoint ``steps`` (later checkpoints, the final
    model and metrics gone; logs, TensorBoard events and replay chunks written later still there)."""
    shutil.copytree(source, target)
    run = RunDir(target)
    for folder in run.checkpoints():
        if int(folder.name) > steps:
            shutil.rmtree(folder)
    for name in ("model.zip", "obs_norm.npz", "metrics.json", "test_returns.csv", "provenance.json"):
        (target / name).unlink(missing_ok=True)
    return run


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_resumed_run_ends_where_the_uninterrupted_run_ends(name: str, compose: Compose, tmp_path: Path) -> None:
    check_resumes_exactly([*RUNS[name], *QUIET], compose, tmp_path)


def check_resumes_exactly(overrides: list[str], compose: Compose, tmp_path: Path) -> None:
    """Train ``overrides`` uninterrupted, stop a copy after its second-last checkpoint, resume it, compare."""
    whole = RunDir(tmp_path / "whole")
    train(compose(overrides, run_dir=whole.path))
    steps = [int(folder.name) for folder in whole.checkpoints()]
    stopped = stop_after(whole.path, tmp_path / "stopped", steps[-2])
    train(compose(overrides, run_dir=stopped.path))
    assert stopped.resumes() == [steps[-2]]
    assert weights_hash(stopped.model) == weights_hash(whole.model)
    assert figures(stopped) == figures(whole)
    assert episodes(stopped) == episodes(whole)
    assert stopped.returns100.read_text() == whole.returns100.read_text()
    if (whole.path / "obs_norm.npz").is_file():
        with np.load(whole.path / "obs_norm.npz") as a, np.load(stopped.path / "obs_norm.npz") as b:
            assert all(np.array_equal(a[k], b[k]) for k in a.files)


def test_a_run_on_a_learned_encoder_resumes_exactly(compose: Compose, tmp_path: Path) -> None:
    """SAC on a tiny autoencoder's states of 16 x 16 renders of MobileRobot, two stacked (the encoder's vec wrapper,
    the pixels rendered from the restored env state, the frame stack, the encoded states in the replay buffer)."""
    encoder = tmp_path / "encoder"
    make_encoder(encoder, make_dataset(tmp_path / "data"), "autoencoder")
    learned = [*RANDOM_TARGET, "srl_model=autoencoder", f"srl_model.checkpoint={encoder}", "srl_model.height=16",
               "srl_model.width=16", "+env.frame_stack=2", "algo=sac", "algo.buffer_size=300",
               "algo.learning_starts=100", "algo.batch_size=32", TINY_NET, "total_timesteps=600",
               "checkpoint_freq=200"]  # fmt: skip
    check_resumes_exactly([*learned, *QUIET], compose, tmp_path)


def test_a_checkpoint_holds_no_pickle(compose: Compose, tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    train(compose([*RUNS["sac_MobileRobot"], *QUIET], run_dir=run.path))
    folder = run.checkpoints()[-1]
    json.loads((folder / "run_state.json").read_text())
    for path in [folder / "run_state.npz", *(run.path / REPLAY).glob("*.npz")]:
        with np.load(path, allow_pickle=False) as saved:
            assert all(saved[key].dtype != object for key in saved.files)


@pytest.fixture
def sac_run(compose: Compose, tmp_path: Path) -> tuple[list[str], RunDir]:
    """An uninterrupted SAC run on MobileRobot (checkpoints 400, 800, 1200; a 500-row buffer that wraps within the
    chunk of 800: its run state lists the chunks of 400 and 800)."""
    overrides = [*RUNS["sac_MobileRobot"], *QUIET]
    whole = RunDir(tmp_path / "whole")
    train(compose(overrides, run_dir=whole.path))
    return overrides, whole


def test_a_truncated_chunk_resumes_from_the_checkpoint_before(
    sac_run: tuple[list[str], RunDir], compose: Compose, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    overrides, whole = sac_run
    stopped = stop_after(whole.path, tmp_path / "stopped", 800)
    listed = json.loads((stopped.checkpoint(800) / "run_state.json").read_text())["buffer"]["chunks"]
    assert [c["file"] for c in listed] == ["400.npz", "800.npz"]  # 800's rows wrap past the buffer's end
    chunk = stopped.path / REPLAY / "800.npz"
    chunk.write_bytes(chunk.read_bytes()[:-100])  # a kill while the chunk was written, after an older checkpoint
    with caplog.at_level("WARNING", logger="rlzoo"):
        train(compose(overrides, run_dir=stopped.path))
    assert stopped.resumes() == [400]
    warnings = [r.getMessage() for r in caplog.records if "is incomplete" in r.getMessage()]
    assert len(warnings) == 1 and str(chunk) in warnings[0]
    assert weights_hash(stopped.model) == weights_hash(whole.model)


def test_a_missing_chunk_everywhere_is_refused_in_one_line(
    sac_run: tuple[list[str], RunDir], compose: Compose, tmp_path: Path
) -> None:
    overrides, whole = sac_run
    stopped = stop_after(whole.path, tmp_path / "stopped", 800)
    for chunk in (stopped.path / REPLAY).glob("*.npz"):
        chunk.unlink()
    before = sorted(p.name for p in stopped.path.rglob("*"))
    refusal = r"no checkpoint can rebuild the replay buffer \(checkpoint 800: .*replay/400\.npz is missing"
    with pytest.raises(ConfigError, match=refusal):
        train(compose(overrides, run_dir=stopped.path))
    assert sorted(p.name for p in stopped.path.rglob("*")) == before  # nothing written


def test_without_checkpoint_buffer_a_run_resumes_with_an_empty_buffer(
    sac_run: tuple[list[str], RunDir], compose: Compose, tmp_path: Path
) -> None:
    overrides, whole = sac_run
    stopped = stop_after(whole.path, tmp_path / "stopped", 800)
    train(compose([*overrides, "checkpoint_buffer=false"], run_dir=stopped.path))
    assert stopped.resumes() == [800]
    assert weights_hash(stopped.model) != weights_hash(whole.model)  # the buffer is part of the run's future


def test_envs_that_cannot_be_saved_are_reset_saying_so_in_one_line(
    compose: Compose, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    overrides = ["algo=ppo", "env=CartPole", "n_envs=2", "vec_env=subproc", "algo.n_steps=32", "algo.batch_size=32",
                 TINY_NET, "total_timesteps=256", "checkpoint_freq=128", *QUIET]  # fmt: skip
    whole = RunDir(tmp_path / "whole")
    train(compose(overrides, run_dir=whole.path))
    assert json.loads((whole.checkpoint(128) / "run_state.json").read_text())["envs_saved"] is False
    stopped = stop_after(whole.path, tmp_path / "stopped", 128)
    with caplog.at_level("WARNING", logger="rlzoo"):
        train(compose(overrides, run_dir=stopped.path))
    lines = [r.getMessage() for r in caplog.records if "cannot be saved" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert stopped.read_metrics()["train/timesteps"] == 256


def test_a_pickled_replay_chunk_is_refused_in_one_line(
    sac_run: tuple[list[str], RunDir], compose: Compose, tmp_path: Path
) -> None:
    overrides, whole = sac_run
    stopped = stop_after(whole.path, tmp_path / "stopped", 800)
    chunk = stopped.path / REPLAY / "800.npz"
    with chunk.open("wb") as stream:
        np.savez(stream, start=np.array([object()], dtype=object))
    state = stopped.checkpoint(800) / "run_state.json"
    values = json.loads(state.read_text())
    values["buffer"]["chunks"][-1]["bytes"] = chunk.stat().st_size  # the manifest agrees: only the content is bad
    state.write_text(json.dumps(values))
    with pytest.raises(ConfigError, match=r"800\.npz: member 'start\.npy' holds Python objects \(a pickle\)"):
        train(compose(overrides, run_dir=stopped.path))


ARM = ["env=KukaButton", "+env.max_steps=60", "env.continuous=true", "algo=sac", "algo.buffer_size=200",
       "algo.learning_starts=50", "algo.batch_size=16", TINY_NET, "total_timesteps=240",
       "checkpoint_freq=80"]  # fmt: skip


def test_an_arm_run_resumes_exactly(compose: Compose, tmp_path: Path) -> None:
    """SAC on KukaButton (its physics, end-effector target and counters: its get_state/set_state), 60-step
    episodes, stopped after the checkpoint at 160 steps, in the middle of an episode."""
    require_extra("pybullet", "arm")
    check_resumes_exactly([*ARM, *QUIET], compose, tmp_path)
    saved = json.loads((tmp_path / "whole" / "checkpoints" / "160" / "run_state.json").read_text())
    assert saved["envs_saved"] is True
    for key, value, refusal in ARM_CRAFTED:  # a shared run dir's run state: numbers, checked against the fresh env
        crafted = stop_after(tmp_path / "whole", tmp_path / f"crafted_{key}", 160)
        path = crafted.checkpoint(160) / "run_state.npz"
        with np.load(path, allow_pickle=False) as saved_arrays:
            arrays = {k: saved_arrays[k] for k in saved_arrays.files}
        name = next(k for k in arrays if k.startswith("env/0/") and k.endswith(f"/{key}"))
        arrays[name] = value(arrays[name])
        with path.open("wb") as stream:
            np.savez(stream, **arrays)
        with pytest.raises(Refused, match=rf"^run state env/0/\d+/{refusal}"):
            train(compose([*ARM, *QUIET], run_dir=crafted.path))


ARM_CRAFTED = [
    ("bases", lambda a: np.where(np.arange(a.size).reshape(a.shape) == 3, np.nan, a), "bases: values that are not"),
    ("bodies", lambda a: a + 1, "bodies: not those of this env's scene"),
    ("joint_states", lambda a: a[:-1], r"joint_states: not an array shaped \(\d+, 2\)"),
    ("counters", lambda a: np.array([0, 0, 5, 0]), "counters: negative, or a goal button"),
]


def test_an_arm_checkpoint_with_bodies_in_contact_leaves_the_envs_to_be_reset() -> None:
    """The solver starts a contact from the last step's impulses, which PyBullet does not restore: a checkpoint taken
    with bodies in contact saves no env state (the resumed run resets its envs, saying so)."""
    pybullet = require_extra("pybullet", "arm")
    venv = DummyVecEnv([lambda: gym.make("rlzoo/KukaButton-v0")])
    venv.seed(0)
    venv.reset()
    assert capture_envs(Snapshot(), venv)
    env = venv.envs[0].unwrapped
    for _ in range(500):
        venv.step(np.array([4]))  # down, onto the button (about 220 steps)
        if pybullet.getContactPoints(physicsClientId=env.scene.client):
            break
    assert pybullet.getContactPoints(physicsClientId=env.scene.client)
    assert not capture_envs(Snapshot(), venv)
    venv.close()
