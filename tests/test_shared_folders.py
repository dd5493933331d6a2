"""Pipeline dirs and stores read as data: Hydra's search path holds only the options rlzoo wrote, and a store's
``overrides`` are run keys of its experiment with plain values (``rlzoo.pipeline.steps``, ``rlzoo.pipeline.rerun``)."""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

import pytest
import yaml

from rlzoo.algos.factory import build_algorithm_factory
from rlzoo.config import compose_config
from rlzoo.errors import ConfigError
from rlzoo.pipeline.command import plan_pipeline
from rlzoo.pipeline.launch import launch_command
from rlzoo.pipeline.rerun import rerun_record
from rlzoo.pipeline.spec import pipeline_spec
from test_pipeline import TINY

ONE_OPTION = [*(o for o in TINY if not o.startswith("pipeline.sweep.srl_model")),
              "pipeline.sweep.srl_model=[ground_truth,raw_pixels]"]  # fmt: skip


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def test_pipeline_search_path_holds_only_the_options_it_wrote(tmp_path: Path) -> None:
    """A received pipeline dir's ``conf/`` (a launcher config, callbacks, an option of its own, a link out) never
    reaches Hydra: the pipeline run again empties it and writes its options only."""
    spec = pipeline_spec([*ONE_OPTION, f"pipeline.dir={tmp_path / 'pipe'}"])
    plan_pipeline(spec)
    conf = spec.dir / "conf"
    written = _files(conf)
    assert written == ["srl_model/pipeline_raw_pixels_MobileRobot.yaml"]
    planted = {
        "hydra/launcher/basic.yaml": "_target_: codecs.open\n",
        "hydra/callbacks/ran.yaml": "ran:\n  _target_: codecs.open\n",
        "srl_model/pipeline_raw_pixels_MobileRobot.yaml": "defaults:\n  - /hydra/callbacks: ran\n",
        "experiment/srl_benchmark_small.yaml": "# @package _global_\n",
    }
    for name, text in planted.items():
        (conf / name).parent.mkdir(parents=True, exist_ok=True)
        (conf / name).write_text(text)
    plan_pipeline(spec)
    assert _files(conf) == written
    assert "/hydra/callbacks" not in (conf / written[0]).read_text()
    assert f"hydra.searchpath=[file://{conf}]" in launch_command(spec, {"seed": [0]})
    # conf/ as a link to a folder outside: the link is removed, the folder it named left as it was
    outside = tmp_path / "outside"
    (outside / "hydra").mkdir(parents=True)
    (outside / "hydra" / "kept.yaml").write_text("kept: 1\n")
    shutil.rmtree(conf)
    conf.symlink_to(outside)
    plan_pipeline(spec)
    assert not conf.is_symlink() and _files(conf) == written
    assert _files(outside) == ["hydra/kept.yaml"]


PAYLOAD = "{_target_:codecs.open,_args_:[MARKER,w]}"
HOSTILE = {
    "target": ("+algo.policy_kwargs._target_=codecs.open", r"adds, deletes or moves a key or a config"),
    "args": ("+algo.policy_kwargs._args_=[MARKER,w]", r"adds, deletes or moves a key or a config"),
    "target-set": ("algo.policy_kwargs._target_=codecs.open", r"names 'algo.policy_kwargs._target_', not a run key"),
    "add-inside": ("+algo.policy_kwargs.net_arch=[8]", r"adds, deletes or moves a key or a config \(a \+, \+\+ or ~"),
    "force-add": ("++seed=1", r"adds, deletes or moves a key or a config"),
    "delete": ("~seed", r"adds, deletes or moves a key or a config"),
    "trusted": ("trusted=true", "sets trusted, which only your command line sets"),
    "budget": ("memory_budget_gb=1000", "sets memory_budget_gb, which only your command line sets"),
    "init-from": ("init_from=/elsewhere/run", "sets init_from, which only your command line sets"),
    "step-target": ("pipeline.srl_train._target_=codecs.open", r"names 'pipeline.srl_train._target_', not a run key"),
    "step-payload": (f"pipeline.collect.policy={PAYLOAD}", "holds an interpolation or an object"),
    "node": (f"algo.gamma={PAYLOAD}", "holds an interpolation or an object"),
    "hydra": (f"hydra.callbacks.ran={PAYLOAD}", "names 'hydra.callbacks.ran', not a run key"),
    "add-group": ("+hydra/callbacks=ran", r"adds, deletes or moves a key or a config"),
    "interpolation": ("n_envs=${oc.env:HOME}", "holds an interpolation or an object"),
    "sweep": ("seed=choice(1,2)", "is a sweep, not one value"),
    "unknown": ("payload=1", "names 'payload', not a run key"),
    "option-path": ("algo=../../../received/algo", "chooses '../../../received/algo', not an option's name"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_store_overrides_name_run_keys_with_plain_values(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``records action=rerun`` on a received store: a hostile ``overrides`` entry is one line, nothing runs or is
    written (the rerun's pipeline dir is not made)."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    override, message = HOSTILE[case]
    override = override.replace("MARKER", str(marker))
    store = tmp_path / "store"
    store.mkdir()
    description = {"experiment": "srl_benchmark_small", "commit": "unknown", "verdict_of": "srl_splits",
                   "overrides": ["total_timesteps=600", override]}  # fmt: skip
    (store / "store.yaml").write_text(yaml.safe_dump(description))
    before = _files(tmp_path)
    with pytest.raises(ConfigError) as error:
        rerun_record(store, "srl_splits", 0, tmp_path / "rerun", log=lambda _: None)
    said = str(error.value)
    assert "\n" not in said and re.search(message, said), said
    assert said.startswith(f"{store / 'store.yaml'}: overrides entry {override!r}")
    assert not marker.exists() and _files(tmp_path) == before


def test_a_stores_step_settings_are_plain_keys_the_rerun_adds(tmp_path: Path) -> None:
    """A step setting or a keyword the experiment leaves unset (``pipeline.collect.progress_bar``,
    ``algo.policy_kwargs.ortho_init``) is written without a prefix and composed with rlzoo's own ``+``; a run key the
    experiment has stays as written."""
    from rlzoo.pipeline.store_overrides import store_overrides
    from rlzoo.reporting.store_table import StoreInfo

    written = ["total_timesteps=600", "pipeline.collect.progress_bar=false", "pipeline.srl_train.device=cpu",
               "algo.policy_kwargs.net_arch=[16]", "algo.policy_kwargs.ortho_init=false"]  # fmt: skip
    info = StoreInfo("srl_benchmark_small", "unknown", "srl_splits", written)
    assert store_overrides(info, tmp_path / "store.yaml") == [
        "total_timesteps=600", "+pipeline.collect.progress_bar=false", "+pipeline.srl_train.device=cpu",
        "algo.policy_kwargs.net_arch=[16]", "+algo.policy_kwargs.ortho_init=false",
    ]  # fmt: skip


def test_a_store_override_with_a_target_is_live_when_composed(tmp_path: Path) -> None:
    """The proof that the ``target`` and ``args`` cases are live: composed as the user's own overrides, they build
    the payload."""
    marker = tmp_path / "ran"
    overrides = [HOSTILE[case][0].replace("MARKER", str(marker)) for case in ("target", "args")]
    with contextlib.suppress(Exception):  # a file object is no policy_kwargs: the check fails after it ran
        build_algorithm_factory(compose_config(["algo=ppo", *overrides], run_dir=tmp_path / "run").algo)
    assert marker.exists()
