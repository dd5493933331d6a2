"""python -m rlzoo.srl.evaluate: encoders measured on a dataset of the user's choice."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlzoo.config import compose_config
from rlzoo.errors import ConfigError
from rlzoo.srl import metrics
from rlzoo.srl.dataset import load_dataset
from rlzoo.srl.encoder import load_encoder
from rlzoo.srl.evaluate import evaluate_encoders
from srl_helpers import make_dataset, make_encoder

NAMES = ("robot_x", "robot_y", "target_x", "target_y")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A training dataset, another one of 12 short episodes (other seeds) and two encoders trained on the first."""
    root = tmp_path_factory.mktemp("evaluate")
    train = make_dataset(root / "train")
    for method in ("supervised", "random"):
        make_encoder(root / method, train, method)
    other = make_dataset(root / "other", ["seed=1000", "+env.max_steps=25", "n_samples=300"])
    return {"train": train, "other": other, "supervised": root / "supervised", "random": root / "random"}


def run(overrides: list[str]) -> dict[str, dict[str, float]]:
    return evaluate_encoders(compose_config(overrides, run_dir=None, config_name="srl_evaluate"))


def test_the_metrics_are_those_of_every_frame_of_the_chosen_dataset(folders: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "sub" / "metrics.json"
    encoders = f"encoders=[{folders['supervised']},{folders['random']}]"
    results = run([f"dataset={folders['other']}", encoders, "subset_episodes=4", "draws=3", f"out={out}"])
    written = json.loads(out.read_text())
    assert written["encoders"] == results and written["dataset"] == str(folders["other"].resolve())
    dataset = load_dataset(folders["other"])
    assert dataset.episode_starts.sum() == 12
    ground_truth, names = dataset.metric_ground_truth()
    assert tuple(names) == NAMES
    for name in ("supervised", "random"):
        result = results[str(folders[name].resolve())]
        states = load_encoder(folders[name]).encode(dataset.images)
        expected = metrics.gtc(states, ground_truth)
        assert [result[f"gtc/{n}"] for n in NAMES] == pytest.approx(expected.tolist(), abs=1e-6)
        assert result["gtc_mean"] == pytest.approx(float(np.mean(expected)), abs=1e-6)
        assert all(0 <= result[f"{kind}/{n}"] <= 1 for kind in ("gtc", "gtc_4_episodes") for n in NAMES)
        assert all(-1 <= result[f"probe/{n}"] <= 1 for n in NAMES)
    # Four of twelve episodes: GTC is a maximum of correlations over fewer target positions, never exactly the same.
    supervised = results[str(folders["supervised"].resolve())]
    assert supervised["gtc_4_episodes_mean"] != pytest.approx(supervised["gtc_mean"], abs=1e-6)


BAD = [
    (["encoders=[]"], r"encoders=\[\] names no encoder"),
    (["encoders=[{tmp}]"], r"encoders: .* is not an encoder folder \(no encoder.json in it\)"),
    (["encoders=[{supervised}]", "subset_episodes=50"], r"subset_episodes=50 is more than the dataset's 12 episodes"),
    (["encoders=[{supervised}]", "subset_episodes=1"], r"subset_episodes=1 must be ≥ 2"),
    (["encoders=[{supervised}]", "draws=0"], r"draws=0 must be ≥ 1"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_input_one_message_and_nothing_written(
    overrides: list[str], message: str, folders: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out" / "metrics.json"
    filled = [o.format(tmp=tmp_path, supervised=folders["supervised"]) for o in overrides]
    with pytest.raises(ConfigError, match=message):
        run([f"dataset={folders['other']}", *filled, f"out={out}"])
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_dataset_of_another_image_size(folders: dict[str, Path], tmp_path: Path) -> None:
    bigger = make_dataset(tmp_path / "bigger", ["image_size=24", "n_samples=60"])
    done = subprocess.run(
        [sys.executable, "-m", "rlzoo.srl.evaluate", f"dataset={bigger}", f"encoders=[{folders['supervised']}]"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("rlzoo.srl.evaluate: error: encoder ")
    assert "takes images of shape (16, 16, 3)" in done.stderr and "has (24, 24, 3)" in done.stderr


def test_latest_is_the_newest_encoder_of_the_dataset_env(
    folders: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"encoders=\[latest\]: no finished encoder trained on rlzoo/MobileRobot-v0"):
        run([f"dataset={folders['other']}", "encoders=[latest]", "subset_episodes=null"])
    shutil.copytree(folders["random"], tmp_path / "outputs" / "srl" / "a")
    shutil.copytree(folders["supervised"], tmp_path / "outputs" / "srl" / "b")
    results = run([f"dataset={folders['other']}", "encoders=[latest]", "subset_episodes=null"])
    # The fixture trains the random encoder after the supervised one: its encoder.json says it was created later.
    assert list(results) == [str((tmp_path / "outputs" / "srl" / "a").resolve())]
