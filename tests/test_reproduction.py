"""A rerun's verdict (``rlzoo.results.reproduction``): equal to the last digit; different on the platform that made
the record (a broken reproduction, exit 1); different on another platform or a record naming none (judged by the
stored seeds' range). Records are built in memory; the platforms come from the test, not from a second machine."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from rlzoo.float_path import FLOAT_PATH
from rlzoo.pipeline.rerun import compare_records
from rlzoo.provenance import platform_difference, platform_facts
from rlzoo.results.records import Record

EPISODES = [[("230.0", "100"), ("231.0", "100"), ("232.0", "100")], [("240.0", "100"), ("241.0", "100")]]
HERE = dict(platform_facts())
ELSEWHERE = {**HERE, "cpu_model": "Intel(R) Xeon(R) Platinum", "cpu_capability": "AVX2"}


def monitor(rows: list[tuple[str, str]]) -> bytes:
    lines = ['#{"t_start": 0.0, "env_id": "rlzoo/MobileRobot-v0"}', "r,l,t", *(f"{r},{n},1.5" for r, n in rows)]
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


def record(
    seed: int,
    greedy: float,
    platform: dict[str, Any] | None,
    episodes: list[list[tuple[str, str]]] = EPISODES,
    sampled: float = 236.15,
) -> Record:
    metrics = {"test/mean_return": greedy, "test_sampled/mean_return": sampled, "time/total_seconds": 1.0 + seed}
    files = {"metrics.json": json.dumps(metrics).encode(), "test_returns.csv": f"0,{greedy},100\n".encode()}
    files |= {f"monitor/{rank}.monitor.csv.gz": monitor(rows) for rank, rows in enumerate(episodes)}
    info: dict[str, Any] = {"representation": "ground_truth", "seed": seed, "encoder": None}
    if platform is not None:
        info["platform"] = platform
    config = OmegaConf.create({"seed": seed, "srl_model": {"name": "ground_truth"}})
    return Record(Path(f"ground_truth_seed{seed}"), config, info, files)


def seeds(stored: Record) -> list[Record]:
    """Ten stored seeds of one representation: greedy test returns 235.1 to 236.45."""
    return [stored, *(record(s, 235.1 + 0.15 * s, HERE) for s in range(10) if s != stored.seed)]


def diverged(rerun_platform: dict[str, Any] | None, greedy: float) -> Record:
    """The rerun of seed 5: its env 1's second episode differs, and its greedy test return."""
    episodes = [EPISODES[0], [EPISODES[1][0], ("239.0", "100")]]
    return record(5, greedy, rerun_platform, episodes)


def test_an_equal_rerun_says_so_and_passes() -> None:
    stored = record(5, 236.32, HERE)
    outcome = compare_records(stored, record(5, 236.32, HERE), seeds(stored))
    assert not outcome.failed
    assert outcome.line.startswith("rlzoo.records: ground_truth_seed5 equals its record to the last digit (5 training")


def test_a_different_rerun_on_the_same_platform_is_a_broken_reproduction() -> None:
    stored = record(5, 236.32, HERE)
    outcome = compare_records(stored, diverged(HERE, 236.30), seeds(stored))
    assert outcome.failed
    assert "on the same platform, a broken reproduction" in outcome.line
    assert "first differing training episode env 1, episode 1" in outcome.line
    assert "test/mean_return 236.32 → 236.3" in outcome.line
    assert "\n" not in outcome.line


def test_a_different_rerun_on_another_platform_is_judged_by_the_stored_seeds_range() -> None:
    stored = record(5, 236.32, ELSEWHERE)
    inside = compare_records(stored, diverged(HERE, 236.30), seeds(stored))
    assert not inside.failed
    assert "on another platform (cpu_model Intel(R) Xeon(R) Platinum → " in inside.line
    assert "cpu_capability AVX2 → " in inside.line
    assert "first differing training episode env 1, episode 1" in inside.line
    assert "test/mean_return 236.3: within the 10 stored seeds' range 235.1 to 236.45" in inside.line
    outside = compare_records(stored, diverged(HERE, 230.0), seeds(stored))
    assert outside.failed
    assert "test/mean_return 230: outside the 10 stored seeds' range 235.1 to 236.45" in outside.line


def test_a_record_that_names_no_platform_is_judged_by_the_range() -> None:
    stored = record(5, 236.32, None)
    outcome = compare_records(stored, diverged(HERE, 236.0), seeds(stored))
    assert not outcome.failed
    assert "on another platform (the record names no platform)" in outcome.line


def test_a_platform_recorded_before_the_float_path_was_kept_is_the_native_path() -> None:
    older = {k: v for k, v in HERE.items() if k not in ("float_path", "mkl_cbwr", "onednn_max_cpu_isa")}
    assert platform_difference(older, {**HERE, "float_path": "native"}) == []
    assert platform_difference(older, {**HERE, "float_path": "avx2"}) == ["float_path native → avx2"]


@pytest.mark.parametrize(("path", "capability"), [("avx2", "AVX2"), ("native", None)])
def test_the_float_path_caps_the_kernels_torch_dispatches(path: str, capability: str | None) -> None:
    script = "import rlzoo, torch; print(torch.backends.cpu.get_cpu_capability())"
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, FLOAT_PATH: path},
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip() == (capability or platform_facts()["cpu_capability"])


def test_an_unknown_float_path_is_one_line() -> None:
    done = subprocess.run([sys.executable, "-c", "import rlzoo"], env={**os.environ, FLOAT_PATH: "avx9"},
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == "rlzoo: RLZOO_FLOAT_PATH='avx9' is not a float path; allowed: native, avx2"
