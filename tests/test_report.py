"""rlzoo.report: one self-contained HTML page, opened in a real headless Chromium (Debian's chromium and
chromium-driver, driven by Selenium); and the table and figures as a W&B run, read back from its offline files."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import OmegaConf

from extras import require_extra
from rlzoo.errors import ConfigError
from rlzoo.report import main
from rlzoo.reporting.figures import plot_env
from rlzoo.reporting.media import encoder_folders
from rlzoo.reporting.page import write_report
from rlzoo.reporting.wandb_results import log_results
from rlzoo.results.comparison import compare
from rlzoo.results.stats import rliable_installed
from srl_helpers import make_dataset, make_encoder
from test_loggers import finished_records

RUN = [
    "algo=ppo", "env=MobileRobot", "env.random_target=true", "n_envs=2", "vec_env=dummy", "total_timesteps=1000",
    "algo.n_steps=128", "algo.batch_size=64", "algo.n_epochs=1", "+algo.policy_kwargs.net_arch=[16]",
    "test_episodes=1", "checkpoint_freq=0", "verbose=0", "logger.formats=[csv]",
]  # fmt: skip


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real tiny runs: ground truth and a random encoder (16 x 16), 2 seeds each, and the encoder in the folder."""
    from rlzoo.config import compose_config
    from rlzoo.train import train

    folder = tmp_path_factory.mktemp("sweep")
    encoder = folder / "encoders" / "random"
    make_encoder(encoder, make_dataset(folder / "data", ["n_samples=100"]), "random")
    learned = ["srl_model=random", f"srl_model.checkpoint={encoder}", "srl_model.height=16", "srl_model.width=16"]
    for name, overrides in (("ground_truth", ["srl_model=ground_truth"]), ("random", learned)):
        for seed in (0, 1):
            run_dir = folder / "runs" / f"{name}_{seed}"
            train(compose_config([*RUN, *overrides, f"seed={seed}"], run_dir=run_dir))
    return folder


@pytest.fixture
def chromium() -> Iterator[Any]:
    """Debian's headless Chromium through its chromedriver (no download: both are found on PATH)."""
    require_extra("selenium", "dev")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver_path is None:
        message = "apt-get install chromium chromium-driver (Debian) for the headless browser check"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but chromium is missing: {message}", pytrace=False)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,2000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


ROWS = "return Array.from(document.querySelectorAll('table')[0].rows, r => Array.from(r.cells, c => c.innerText))"
IMAGES = "return Array.from(document.images, i => [i.complete, i.naturalWidth, i.naturalHeight, i.alt, i.src])"
CAPTIONS = "return Array.from(document.querySelectorAll('figcaption'), c => c.innerText)"
KNN_MSE = "return document.querySelectorAll('table')[1].rows[1].cells[3].innerText"


def test_the_page_renders_in_chromium(sweep: Path, chromium: Any, tmp_path: Path) -> None:
    page = write_report(sweep, tmp_path / "report.html", log=lambda _: None)
    chromium.get(page.path.as_uri())

    assert chromium.find_element("css selector", "h1").text == f"rlzoo report: {sweep.resolve()}"
    rows = chromium.execute_script(ROWS)
    assert rows[0][:3] == ["env", "algo", "srl_model"] and rows[0][-1] == "p vs ground_truth"
    assert sorted(r[2] for r in rows[1:]) == ["ground_truth", "random"] and all(r[4] == "2" for r in rows[1:])
    (random_p,) = [row.p_value for row in page.comparison.rows if row.group.srl_model == "random"]
    assert next(r for r in rows[1:] if r[2] == "random")[-1] == f"{random_p:.3g}" and 0.0 <= random_p <= 1.0
    success = rows[0].index("test success (mean ± SE)")  # MobileRobot reports is_success: mean test success rates
    assert all(r[success].endswith("%") for r in rows[1:]), rows
    captions = [c for c in chromium.execute_script(CAPTIONS) if "seed" in c]
    assert sorted(c.split(",")[0] for c in captions) == ["PPO / ground_truth", "PPO / random"], captions
    images = chromium.execute_script(IMAGES)
    alts = sorted(alt for *_, alt, _ in images)
    profile = ["performance profile"] if rliable_installed() else []  # the [stats] extra's figure
    figures = ["learning curves on rlzoo/MobileRobot-v0", *profile, "random states"]
    assert alts[: len(figures)] == figures, alts
    replays = [alt.rsplit("_", 1)[0] for alt in alts[len(figures) :]]
    assert replays == ["replay of ground_truth", "replay of random"], alts
    assert all(complete and width > 0 and height > 0 for complete, width, height, *_ in images), images  # none broken
    assert {src[:15] for *_, src in images} == {"data:image/png;", "data:image/gif;"}  # embedded: self-contained
    html = page.path.read_text()
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert [entry for entry in chromium.get_log("browser") if entry["level"] == "SEVERE"] == []  # no console error
    assert len(chromium.find_elements("css selector", "details")) == 4  # every run's config
    expected = json.loads((sweep / "encoders" / "random" / "metrics.json").read_text())["srl/knn_mse"]
    assert chromium.execute_script(KNN_MSE) == f"{expected:.4g}"  # the KNN-MSE of the encoder the runs used
    shot = tmp_path / "report.png"
    assert chromium.save_screenshot(str(shot)) and shot.stat().st_size > 20_000


def test_results_go_to_the_sweeps_wandb_group(sweep: Path, tmp_path: Path) -> None:
    comparison = compare(sweep / "runs")
    figure = tmp_path / "curves.png"
    plot_env(comparison.groups[0].env, comparison.groups, figure)
    folder = log_results(comparison, [figure], {"project": "rlzoo", "mode": "offline"}, "my/sweep", tmp_path)

    (records_file,) = folder.glob("run-*.wandb")
    records = finished_records(records_file)
    run = next(r.run for r in records if r.HasField("run"))
    assert (run.run_group, run.display_name, run.job_type) == ("my/sweep", "results", "results")
    history = [item for r in records if r.HasField("history") for item in r.history.item]
    logged = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in history}
    assert logged["results/_type"] == "table-file" and logged["curves/curves/_type"] == "image-file"
    (table_file,) = folder.glob("files/media/table/results_*.table.json")
    table = json.loads(table_file.read_text())
    columns = table["columns"]
    assert logged["results/ncols"] == len(columns) and logged["results/nrows"] == 2
    assert columns[:3] == ["env", "algo", "srl_model"] and columns[-1] == "p_value"
    # Per score the table shows, its text column and its numbers: train, greedy test and success (MobileRobot's).
    assert {"train return (mean ± SE)", "test return (mean ± SE)", "test success (mean ± SE)"} <= set(columns)
    assert {"mean", "se", "test_mean", "test_se", "success_mean", "success_se"} <= set(columns)
    by_method = {row[2]: row for row in table["data"]}
    rows = {row.group.srl_model: row for row in comparison.rows}
    assert by_method["random"][columns.index("mean")] == pytest.approx(rows["random"].mean)
    assert by_method["random"][-1] == pytest.approx(rows["random"].p_value)
    assert list(folder.glob("files/media/images/curves/*.png"))


def test_bad_input_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(sys, "argv", ["rlzoo.report", f"dir={tmp_path / 'empty'}"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert str(exited.value.code).startswith(f"rlzoo.report: error: dir={tmp_path / 'empty'} holds no run dirs")
    make_dataset(tmp_path / "only_data", ["n_samples=50"])
    with pytest.raises(
        ConfigError, match=r"holds no training runs \(its config.yaml files are datasets' or encoders'\)"
    ):
        write_report(tmp_path / "only_data", log=lambda _: None)
    assert not (tmp_path / "only_data" / "report.html").exists()
    monkeypatch.setattr(sys, "argv", ["rlzoo.report", f"dir={tmp_path}", "videos=maybe"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == "rlzoo.report: error: videos='maybe' must be true or false"


def test_p_column_without_a_baseline_in_the_env() -> None:
    """PPO and A2C with ground truth only: both rows are ground_truth, neither is compared with anything: ``—``."""
    from rlzoo.results.comparison import Row, table_cells
    from rlzoo.results.runs import Group

    rows = [
        Row(Group("CartPole-v1", f"stable_baselines3.{algo}", "ground_truth"), 1000, (1.0, 2.0), (0, 1),
            is_baseline=True)
        for algo in ("PPO", "A2C")
    ]  # fmt: skip
    header, lines = table_cells(rows, "ground_truth")
    assert header[-1] == "p vs ground_truth" and [line[-1] for line in lines] == ["—", "—"]
    assert "test success" not in header  # no run reports is_success
    compared = [*rows, Row(Group("CartPole-v1", "stable_baselines3.PPO", "raw_pixels"), 1000, (1.0, 3.0), (0, 1))]
    _, lines = table_cells(compared, "ground_truth")
    assert [line[-1] for line in lines] == ["baseline", "—", "—"]  # PPO's baseline has a row compared with it


def test_a_copied_pipeline_dirs_encoders_count_once(tmp_path: Path) -> None:
    original, copied = tmp_path / "pipe", tmp_path / "copy"
    for name in ("random-MobileRobot-84d7416d4d76", "srl_splits-MobileRobot-a369c8853927"):
        (original / "encoders" / name).mkdir(parents=True)
        (original / "encoders" / name / "encoder.json").write_text("{}")
    shutil.copytree(original, copied)
    elsewhere = tmp_path / "other" / "autoencoder-MobileRobot-f15a2a60d1a4"
    elsewhere.mkdir(parents=True)
    (elsewhere / "encoder.json").write_text("{}")
    # The copy's runs still name the original's folders (absolute paths), and one encoder outside both.
    used = [original / "encoders" / "random-MobileRobot-84d7416d4d76", elsewhere]
    results = [SimpleNamespace(config=OmegaConf.create({"srl_model": {"checkpoint": str(p)}})) for p in used]
    found = encoder_folders(results, copied)  # type: ignore[arg-type]
    names = sorted([*(p.name for p in (original / "encoders").iterdir()), elsewhere.name])
    assert sorted(p.name for p in found) == names  # 3, not 4: the original's random encoder is the copy's
    assert all(copied.resolve() in p.parents for p in found if p != elsewhere.resolve())
