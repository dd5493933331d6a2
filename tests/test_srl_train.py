"""python -m rlzoo.srl.train: every method on a tiny dataset, the encoder directory, checkpoints, RL on it."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

from rlzoo.any_env.spec import EnvSpec
from rlzoo.config import compose_config
from rlzoo.errors import ConfigError
from rlzoo.playback.loading import load_run
from rlzoo.srl.collection import make_collection_env
from rlzoo.srl.dataset import load_dataset
from rlzoo.srl.encoder import find_encoder, load_encoder
from rlzoo.srl.kinds import ENCODER_KINDS
from rlzoo.srl.train import REPRESENTATION_KEYS, SRL_CONFIG_DIR, compose_srl_config
from rlzoo.srl.wrapper import EncodeObservations
from rlzoo.train import train
from srl_helpers import RANDOM_TARGET, TINY_DATASET, make_dataset, make_encoder

METHODS = sorted(p.stem for p in (SRL_CONFIG_DIR / "srl_model").glob("*.yaml") if "\nkind: " in p.read_text())


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("srl") / "data")


@pytest.fixture(scope="module")
def encoders(dataset: Path) -> dict[str, tuple[Path, dict[str, float]]]:
    """One tiny encoder of every method, with its metrics."""
    return {
        method: (dataset.parent / method, make_encoder(dataset.parent / method, dataset, method)) for method in METHODS
    }


def copy_encoder(source: Path, folder: Path, **changes: object) -> Path:
    """A copy of an encoder folder, with ``encoder.json`` changed (``created`` orders ``latest``)."""
    shutil.copytree(source, folder)
    meta = json.loads((folder / "encoder.json").read_text())
    (folder / "encoder.json").write_text(json.dumps({**meta, **changes}))
    return folder


def test_every_method_trains_measures_and_reloads(
    encoders: dict[str, tuple[Path, dict[str, float]]], dataset: Path
) -> None:
    assert len(METHODS) == 12
    data = load_dataset(dataset)
    for method, (folder, result) in encoders.items():
        meta = json.loads((folder / "encoder.json").read_text())
        assert meta["method"] == method and meta["image_shape"] == [16, 16, 3] and meta["state_dim"] == 8
        assert meta["env_id"] == "rlzoo/MobileRobot-v0" and meta["dataset"] == str(dataset.resolve())
        names = ["robot_x", "robot_y", "target_x", "target_y"]
        assert set(result) >= {"srl/knn_mse", "srl/gtc_mean", *(f"srl/gtc/{n}" for n in names)}
        assert 0 <= result["srl/gtc_mean"] <= 1 and result["srl/knn_mse"] > 0
        assert json.loads((folder / "metrics.json").read_text()) == pytest.approx(result)
        assert (folder / "states.png").stat().st_size > 0 and (folder / "config.yaml").is_file()
        trained = method not in ("pca", "random")
        assert (folder / "losses.png").is_file() == (folder / "losses.csv").is_file() == trained
        assert (folder / ("pca.npz" if method == "pca" else "encoder.pt")).is_file()
        # Reloaded from disk (weights_only), the encoder gives the states the metrics were measured on.
        encoder = load_encoder(folder)
        states = encoder.encode(data.images[:20])
        assert states.shape == (20, 8) and states.dtype == np.float32
        assert np.allclose(states, load_encoder(folder / "encoder.json").encode(data.images[:20]), atol=1e-6)


def test_pca_is_the_principal_subspace(encoders: dict[str, tuple[Path, dict[str, float]]], dataset: Path) -> None:
    encoder = load_encoder(encoders["pca"][0])
    images = load_dataset(dataset).images
    flat = images.reshape(len(images), -1) / 255.0
    states = encoder.encode(images).astype(np.float64)
    components = encoder.module.components.numpy().astype(np.float64)  # type: ignore[union-attr]
    assert np.allclose(components @ components.T, np.eye(8), atol=1e-4)  # orthonormal axes
    mean = encoder.module.mean.numpy()  # type: ignore[union-attr]
    assert np.allclose(states, (flat - mean) @ components.T, atol=1e-3)
    residual = np.mean((flat - mean - states @ components) ** 2)
    assert residual < 0.9 * np.mean((flat - mean) ** 2)  # 8 components explain part of the variance


def test_supervised_encoder_correlates_better_than_random(
    encoders: dict[str, tuple[Path, dict[str, float]]], dataset: Path, tmp_path: Path
) -> None:
    epochs = ["srl_model.training.epochs=4", "srl_model.training.batch_size=32"]
    supervised = make_encoder(tmp_path / "s", dataset, "supervised", epochs)
    assert supervised["srl/gtc_mean"] > encoders["random"][1]["srl/gtc_mean"]


def test_splits_follow_the_config(dataset: Path, tmp_path: Path) -> None:
    cfg = compose_srl_config(["srl_model=srl_splits"], run_dir=tmp_path)
    assert {name: list(loss.dims) for name, loss in cfg.srl_model.losses.items()} == {
        "reconstruction": [0, -2], "reward": [0, -2], "inverse": [-2, None],
    }  # fmt: skip
    # The paper's 1 / 1 / 2 at srl-zoo's loss scales: reconstruction x 40 (conf/srl_model/srl_splits.yaml).
    weights = [loss.weight for loss in cfg.srl_model.losses.values()]
    assert weights == [40.0, 1.0, 2.0] and cfg.srl_model.state_dim == 200
    result = make_encoder(tmp_path / "w", dataset, "srl_splits", ["srl_model.losses.inverse.weight=0.5"])
    rows = (tmp_path / "w" / "losses.csv").read_text().splitlines()
    header, first = rows[0].split(","), [float(v) for v in rows[1].split(",")]
    row = dict(zip(header, first, strict=True))
    expected = 40 * row["train/reconstruction"] + row["train/reward"] + 0.5 * row["train/inverse"]
    assert row["train/total"] == pytest.approx(expected, rel=1e-4) and result["srl/best_epoch"] == 1


@pytest.mark.parametrize(
    ("method", "overrides", "message"),
    [
        ("pca", ["+srl_model.network.channels=8"], "network do nothing for kind pca"),
        ("autoencoder", ["srl_model.losses.reconstruction.dims=[0,0]"], "dims=\\[0, 0\\] must be a non-empty"),
        ("autoencoder", ["+srl_model.losses.reconstruction.beta=2"], "losses.reconstruction: .*beta"),
        ("autoencoder", ["srl_model.training.epochs=0"], "epochs=0 must be (an integer )?≥ 1"),
        ("autoencoder", ["srl_model.training.max_seconds=0.5"], "max_seconds=0.5 must be (a number )?≥ 1"),
        ("pca", ["srl_model.state_dim=100000"], "at most"),
        ("autoencoder", ["dataset=/nonexistent"], "not a dataset folder"),
        ("autoencoder", ["val_fraction=1.5"], "val_fraction=1.5"),
        ("autoencoder", ["whiten=0"], r"whiten=0(\.0)?; allowed: null \(off\) or a regulariser in \(0, 1\)"),
        ("random", ["whiten=1.5"], r"whiten=1\.5; allowed"),
        ("pca", ["whiten=0.001"], "whiten=0.001 whitens image encoders .*not kind pca"),
    ],
)
def test_bad_input(dataset: Path, tmp_path: Path, method: str, overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_encoder(tmp_path / "bad", dataset, method, overrides)
    assert not (tmp_path / "bad" / "encoder.json").exists()


@pytest.mark.parametrize("method", ["random", "srl_splits"])
def test_whiten_folds_a_zca_transform_into_the_last_layer(dataset: Path, tmp_path: Path, method: str) -> None:
    """Whitened, the states of the training frames have an identity covariance (to the regulariser), and the encoder
    is still one module that reloads as any other."""
    covariances, results = {}, {}
    for whiten in (None, 1e-9):
        folder = tmp_path / str(whiten)
        result = make_encoder(folder, dataset, method, [f"whiten={'null' if whiten is None else whiten}"])
        config = json.loads((folder / "encoder.json").read_text())
        assert config.get("whiten") == whiten and result.get("srl/whiten") == whiten
        results[whiten] = result
        images = load_dataset(dataset).images
        states = load_encoder(str(folder), "cpu").encode(images[:-1]).astype(np.float64)  # (about) the training frames
        eigenvalues = np.linalg.eigvalsh(np.cov(states, rowvar=False))
        covariances[whiten] = eigenvalues[eigenvalues > 1e-9 * eigenvalues.max()]  # the tiny CNN has 4 features
    assert len(covariances[None]) == len(covariances[1e-9]) >= 2
    assert covariances[None].max() / covariances[None].min() > 10  # unwhitened: far from isotropic
    assert covariances[1e-9].min() > 0.5 and covariances[1e-9].max() < 2.0
    # The GTC of the states before whitening is kept beside the whitened one: the unwhitened encoder's, exactly.
    assert "srl/unwhitened/gtc_mean" not in results[None]
    for key in ("gtc_mean", *(f"gtc/{name}" for name in ("robot_x", "robot_y", "target_x", "target_y"))):
        assert results[1e-9][f"srl/unwhitened/{key}"] == pytest.approx(results[None][f"srl/{key}"], abs=1e-9)


def test_kinds_have_their_keys() -> None:
    cfg = compose_srl_config(["srl_model=random"], run_dir="x")
    assert set(cfg.srl_model) - REPRESENTATION_KEYS == ENCODER_KINDS["random"].allowed_keys()


def _rl(run_dir: Path, checkpoint: str | Path, extra: tuple[str, ...] = ()) -> dict[str, float]:
    tiny = ["algo=ppo", "n_envs=2", "algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=1", "total_timesteps=200"]
    tiny += ["+algo.policy_kwargs.net_arch=[16]", "test_episodes=2", "verbose=0", "logger.formats=[csv]"]
    env = ["env=MobileRobot", "env.random_target=true", "srl_model.height=16", "srl_model.width=16"]
    overrides = [*tiny, *env, "srl_model=srl_splits", f"srl_model.checkpoint={checkpoint}", *extra]
    return train(compose_config(overrides, run_dir=run_dir))


def test_rl_on_a_learned_encoder_and_latest(
    encoders: dict[str, tuple[Path, dict[str, float]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    splits, random = encoders["srl_splits"][0], encoders["random"][0]
    now = time.time()
    copy_encoder(splits, tmp_path / "outputs" / "srl" / "a", created=now - 20)
    newer = copy_encoder(splits, tmp_path / "multirun" / "srl" / "b", created=now - 10)
    copy_encoder(splits, tmp_path / "outputs" / "srl" / "d", created=now, env_id="rlzoo/MobileRobot1D-v0")
    newest = copy_encoder(random, tmp_path / "outputs" / "srl" / "c", created=now)  # another method
    assert find_encoder("latest", "srl_splits", "rlzoo/MobileRobot-v0") == newer.resolve()
    assert find_encoder("latest", "learned", "rlzoo/MobileRobot-v0") == newest.resolve()

    metrics = _rl(tmp_path / "rl", "latest")
    assert metrics["train/timesteps"] >= 200 and "test/mean_return" in metrics
    config = (tmp_path / "rl" / "config.yaml").read_text()
    assert f"checkpoint: {newer.resolve()}" in config and "checkpoint: latest" not in config  # pinned
    assert (tmp_path / "rl" / "obs_norm.npz").is_file()  # states are normalised after the encoder


def test_frame_stack_stacks_encoded_states(encoders: dict[str, tuple[Path, dict[str, float]]], tmp_path: Path) -> None:
    """``env.frame_stack`` stacks the encoder's states (the encoder reads one image at a time)."""
    splits = encoders["srl_splits"][0]
    state_dim = load_encoder(splits).state_dim
    _rl(tmp_path / "rl", splits, ("+env.frame_stack=2",))
    model = load_run(tmp_path / "rl").model
    assert model.observation_space.shape == (2 * state_dim,)


def test_mismatched_checkpoints_fail_before_the_run(
    encoders: dict[str, tuple[Path, dict[str, float]]], tmp_path: Path
) -> None:
    splits = encoders["srl_splits"][0]
    other = copy_encoder(splits, tmp_path / "enc1d", env_id="rlzoo/MobileRobot1D-v0")
    cases = [
        (other, (), "trained on frames of rlzoo/MobileRobot1D-v0, not rlzoo/MobileRobot-v0"),
        (splits, ("srl_model.height=32", "srl_model.width=32"), "takes 16x16 images but the run renders 32x32"),
        (splits, ("srl_model=autoencoder",), "is a srl_splits encoder, not autoencoder"),
        (tmp_path / "nothing", (), "not an encoder"),
    ]
    for checkpoint, extra, message in cases:
        with pytest.raises(ConfigError, match=message):
            _rl(tmp_path / "run", checkpoint, extra)
        assert not (tmp_path / "run" / "config.yaml").exists()


def test_wrapper_encodes_the_batch_as_one_by_one(encoders: dict[str, tuple[Path, dict[str, float]]]) -> None:
    kwargs = {"random_target": True, "render_size": 16, "max_steps": 3}
    venv = DummyVecEnv([lambda: make_collection_env(EnvSpec("rlzoo/MobileRobot-v0", kwargs), 16) for _ in range(3)])
    venv.seed(0)
    wrapped = EncodeObservations(venv, str(encoders["autoencoder"][0]), method="autoencoder")
    calls = []
    wrapped.encoder.module.register_forward_hook(lambda *args: calls.append(1))
    states = wrapped.reset()
    images = np.stack(venv.env_method("render"))
    assert len(calls) == 1 and states.shape == (3, 8)
    one_by_one = np.concatenate([wrapped.encode(image[None]) for image in images])
    assert np.allclose(states, one_by_one, atol=1e-5)
    for _ in range(3):  # the third step ends every episode: terminal observations are encoded in the same pass
        calls.clear()
        states, _, dones, infos = wrapped.step(np.zeros(3, dtype=int))
        assert len(calls) == 1
    assert dones.all() and all(info["terminal_observation"].shape == (8,) for info in infos)


def test_training_does_not_depend_on_what_the_process_did_before(dataset: Path, tmp_path: Path) -> None:
    """A pipeline's worker process trains encoders one after another: the same config gives the same encoder and
    losses whatever torch's random state was (the loss heads were once made before seeding)."""
    import torch

    make_encoder(tmp_path / "first", dataset, "autoencoder")
    torch.rand(1000)  # as a previous encoder in the same process would
    make_encoder(tmp_path / "after", dataset, "autoencoder")
    assert (tmp_path / "first" / "losses.csv").read_text() == (tmp_path / "after" / "losses.csv").read_text()
    first, after = (torch.load(tmp_path / name / "encoder.pt", weights_only=True) for name in ("first", "after"))
    assert first.keys() == after.keys()
    assert all(torch.equal(first[key], after[key]) for key in first)


def test_cli_with_run_dir_leaves_no_hydra_folder(tmp_path: Path) -> None:
    """``run_dir=`` elsewhere: neither ``rlzoo.collect`` nor ``rlzoo.srl.train`` leaves Hydra's own folder behind."""
    import subprocess
    import sys

    data, encoder = tmp_path / "data", tmp_path / "encoder"
    commands = [
        ["rlzoo.collect", *RANDOM_TARGET, *TINY_DATASET, "n_samples=64", f"run_dir={data}"],
        ["rlzoo.srl.train", "srl_model=pca", "srl_model.state_dim=4", f"dataset={data}", "progress_bar=false",
         "device=cpu", f"run_dir={encoder}"],
    ]  # fmt: skip
    for command in commands:
        done = subprocess.run(
            [sys.executable, "-m", *command], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
    assert (data / "dataset.json").is_file() and (encoder / "encoder.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "encoder"]  # no outputs/
