"""``--help`` of every entrypoint prints its help and exits 0 (in-process: Hydra's mains read ``sys.argv``)."""

from __future__ import annotations

import importlib
import sys

import pytest

# module -> the callable its ``python -m`` runs
ENTRYPOINTS = {
    "rlzoo.train": "main", "rlzoo.collect": "main", "rlzoo.srl.train": "main", "rlzoo.srl.evaluate": "main",
    "rlzoo.enjoy": "main", "rlzoo.plot": "main", "rlzoo.report": "main", "rlzoo.tune.command": "main",
    "rlzoo.pipeline.command": "cli",
}  # fmt: skip


@pytest.mark.parametrize("module", list(ENTRYPOINTS))
def test_help_exits_0_with_help(module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    entry = getattr(importlib.import_module(module), ENTRYPOINTS[module])
    absl_logging = sys.modules.get("absl.logging")  # imported with JAX (the sbx algorithms) by an earlier test
    if absl_logging is not None:  # Hydra's logging setup closes every handler; absl's closes its stream unless it is
        # the console's, and it holds the stderr pytest captured when it was made: point it at the console
        monkeypatch.setattr(absl_logging.get_absl_handler().python_handler, "stream", sys.__stderr__)
    monkeypatch.setattr("sys.argv", [module, "--help"])
    try:
        entry()
    except SystemExit as exit_:
        assert exit_.code in (0, None)
    captured = capsys.readouterr()
    assert "== Config ==" in captured.out or "python -m rlzoo.pipeline experiment=<name>" in captured.out
    assert "Traceback" not in captured.out + captured.err


def test_pipeline_help_names_the_experiments(capsys: pytest.CaptureFixture) -> None:
    from rlzoo.pipeline.command import cli

    cli(["--help"])
    assert "experiments: srl_benchmark, srl_benchmark_small" in capsys.readouterr().out
