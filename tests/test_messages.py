"""Messages a user meets: the action-space refusal is one line with or without an extra's algorithms installed; an
experiment's own keys are never held against the user's narrowed sweep."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from gymnasium import spaces
from stable_baselines3 import DQN

from extras import require_extra
from rlzoo.algos.factory import algorithm_classes, check_action_space
from rlzoo.errors import ConfigError
from rlzoo.pipeline.spec import pipeline_spec
from rlzoo.pipeline.steps import check_overrides_apply, is_learned, method_config


@pytest.mark.parametrize("sbx_installed", [True, False])
def test_the_action_space_message_is_one_line_with_or_without_sbx(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, sbx_installed: bool
) -> None:
    if sbx_installed:
        require_extra("sbx", "jax")
    else:
        monkeypatch.setitem(sys.modules, "sbx", None)  # import sbx raises ImportError, as without the [jax] extra
    with caplog.at_level(logging.WARNING), pytest.raises(ConfigError, match="algorithms that fit: ") as error:
        check_action_space(DQN, spaces.Box(-1, 1, (3,)))
    assert "\n" not in str(error.value)
    assert [r.getMessage() for r in caplog.records] == []  # Hydra logged an ERROR per algorithm it could not import
    assert ("sbx_sac" in algorithm_classes()) == sbx_installed


def narrowed_check(tmp_path: Path, extra: list[str]) -> None:
    """Check the small benchmark's overrides with its sweep narrowed to ground truth and random (an encoder without
    training epochs), as the pipeline's planning does first."""
    spec = pipeline_spec(["experiment=srl_benchmark_small", f"pipeline.dir={tmp_path / 'pipe'}",
                          "pipeline.sweep.srl_model=[ground_truth,random]", *extra])  # fmt: skip
    bases = {str(m): method_config(spec, str(m)) for m in spec.axes["srl_model"]}
    check_overrides_apply(spec, bases, [m for m, base in bases.items() if is_learned(base)])


def test_an_experiment_s_own_keys_are_not_held_against_a_narrowed_sweep(tmp_path: Path) -> None:
    narrowed_check(tmp_path, [])  # the experiment's srl_model.training.epochs applies to no method left: accepted
    with pytest.raises(ConfigError, match=r"pipeline.srl_train: srl_model.training.epochs=3 sets a key that no"):
        narrowed_check(tmp_path, ["pipeline.srl_train.srl_model.training.epochs=3"])  # typed by the user: refused
    assert not (tmp_path / "pipe").exists()
