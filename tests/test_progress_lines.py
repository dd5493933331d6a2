"""Progress lines (:mod:`rlzoo.progress_lines`): what a line says, how often one comes, and when a phase writes them."""

from __future__ import annotations

import io
import re

import pytest

from rlzoo.progress_lines import Pace, PhaseProgress, ProgressLines, duration, progress_mode


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_line_says_phase_done_total_rate_and_time_left() -> None:
    stream, clock = io.StringIO(), Clock()
    lines = ProgressLines("training", 10_000, "steps", done=1_000, stream=stream, clock=clock)
    lines.update(1_500)
    assert stream.getvalue() == ""  # nothing in the first ten seconds
    clock.now += 10.0
    lines.update(2_000)
    assert stream.getvalue() == "training: 2,000/10,000 steps (20%), 100 steps/s, elapsed 0:10, 1:20 left\n"


def test_lines_come_at_most_every_ten_seconds_and_a_last_one_at_the_end() -> None:
    stream, clock = io.StringIO(), Clock()
    lines = ProgressLines("collect", 600, "frames", stream=stream, clock=clock)
    for second in range(1, 36):
        clock.now += 1.0
        lines.update(second * 10)
    lines.finish(600)
    written = stream.getvalue().splitlines()
    assert [line.split(", ")[0] for line in written] == [
        "collect: 100/600 frames (17%)", "collect: 200/600 frames (33%)", "collect: 300/600 frames (50%)",
        "collect: 600/600 frames (100%)",
    ]  # fmt: skip
    assert all(re.search(r"10 frames/s, elapsed 0:\d\d", line) for line in written[:3])


def test_a_short_phase_stays_quiet_and_an_unknown_total_has_no_eta() -> None:
    stream, clock = io.StringIO(), Clock()
    ProgressLines("replay", 3, "episodes", stream=stream, clock=clock).finish(3)
    assert stream.getvalue() == ""
    lines = ProgressLines("waiting", None, "jobs", stream=stream, clock=clock)
    clock.now += 3_725.0
    lines.update(0)
    assert stream.getvalue() == "waiting: 0 jobs, elapsed 1:02:05\n"  # no rate before any progress
    assert duration(59.9) == "0:59"


def test_phases_on_one_stream_keep_one_pace() -> None:
    """A short training then a test phase: the test phase's first line is due ten seconds after the training began
    (it wrote none), then ten seconds after the last line, whichever phase wrote it."""
    stream, clock, pace = io.StringIO(), Clock(), Pace()
    training = ProgressLines("training", 64, "steps", stream=stream, clock=clock, pace=pace)
    clock.now += 9.0
    training.finish(64)  # nine seconds: quiet
    clock.now += 0.5
    test = ProgressLines("test episodes", 10, "episodes", stream=stream, clock=clock, pace=pace)
    test.update(0)
    assert stream.getvalue() == ""
    clock.now += 0.5
    test.update(1)  # ten seconds since the log last grew
    clock.now += 9.0
    test.update(5)
    later = ProgressLines("replay", 3, "episodes", stream=stream, clock=clock, pace=pace)
    clock.now += 1.0
    later.update(1)
    assert [line.split(", ")[0] for line in stream.getvalue().splitlines()] == [
        "test episodes: 1/10 episodes (10%)", "replay: 1/3 episodes (33%)"
    ]  # fmt: skip


def test_before_a_pause_a_line_comes_when_one_falls_due_during_it() -> None:
    stream, clock = io.StringIO(), Clock()
    lines = ProgressLines("training", 2048, "steps", stream=stream, clock=clock)
    clock.now += 4.0
    lines.before_pause(1024, 5.9)  # a policy update of ~5.9 s follows
    assert stream.getvalue() == ""
    lines.before_pause(1024, 6.0)
    assert stream.getvalue().startswith("training: 1,024/2,048 steps (50%), ") and lines.due == clock.now + 10.0


def test_training_writes_a_line_before_an_update_that_would_pass_the_due_time() -> None:
    from rlzoo.training.budget import LineProgress

    stream, clock = io.StringIO(), Clock()
    callback = LineProgress(ProgressLines("training", 4096, "steps", stream=stream, clock=clock), lambda: 1024)
    clock.now += 2.0
    callback.on_rollout_end()  # the first update: its length is not known yet
    clock.now += 6.0
    callback.on_rollout_start()
    clock.now += 2.0 - 1e-6
    callback.on_rollout_end()  # 10 s is due during the next update, as long as the last (6 s)
    assert stream.getvalue().startswith("training: 1,024/4,096 steps (25%), ")


@pytest.mark.parametrize(
    ("setting", "stream", "sweep", "mode"),
    [("auto", io.StringIO(), False, "lines"), ("auto", Terminal(), False, "bar"), ("auto", Terminal(), True, "lines"),
     (True, io.StringIO(), False, "bar"), (False, Terminal(), False, None)],
)  # fmt: skip
def test_a_bar_on_a_terminal_and_lines_elsewhere(
    setting: bool | str, stream: io.StringIO, sweep: bool, mode: str
) -> None:
    assert progress_mode(setting, sweep=sweep, stream=stream) == mode


def test_phase_progress_writes_lines_with_its_note(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("rlzoo.progress_lines.LINE_SECONDS", 0.0)
    with PhaseProgress("encoder training", 4, "batches", "lines") as progress:
        for batch in range(1, 5):
            progress.update(batch, f"epoch 1, loss {1 / batch:.4g}")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("encoder training: 1/4 batches (25%), ") and err[0].endswith("epoch 1, loss 1")
    assert err[-1].startswith("encoder training: 4/4 batches (100%)") and err[-1].endswith("loss 0.25")
    with PhaseProgress("collect", 4, "frames", None) as quiet:
        quiet.update(4)
    assert capsys.readouterr().err == ""
