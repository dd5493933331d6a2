"""Messages a user meets stay one line: the action-space refusal with or without an extra's algorithms installed."""

from __future__ import annotations

import logging
import sys

import pytest
from gymnasium import spaces
from stable_baselines3 import DQN

from rlzoo.algos.factory import algorithm_classes, check_action_space
from rlzoo.errors import ConfigError


@pytest.mark.parametrize("sbx_installed", [True, False])
def test_the_action_space_message_is_one_line_with_or_without_sbx(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, sbx_installed: bool
) -> None:
    if not sbx_installed:
        monkeypatch.setitem(sys.modules, "sbx", None)  # import sbx raises ImportError, as without the [jax] extra
    with caplog.at_level(logging.WARNING), pytest.raises(ConfigError, match="algorithms that fit: ") as error:
        check_action_space(DQN, spaces.Box(-1, 1, (3,)))
    assert "\n" not in str(error.value)
    assert [r.getMessage() for r in caplog.records] == []  # Hydra logged an ERROR per algorithm it could not import
    assert ("sbx_sac" in algorithm_classes()) == sbx_installed
