"""Progress as plain lines on stderr, for output that goes to a file (Slurm, ``nohup``, CI, the pipeline's children):
every long phase of every entrypoint reports through one :class:`ProgressLines` (ground floor).

A line says what a terminal's progress bar shows: ``training: 12,288/100,000 steps (12%), 1,024 steps/s, elapsed
0:12, 1:26 left``. :meth:`ProgressLines.update` costs one clock read; a line is written at most every
:data:`LINE_SECONDS` (the first after that long: a short phase writes nothing).

The phases writing to stderr keep one pace (:data:`STDERR_PACE`): a phase's first line is due that long after the last
line any phase wrote, or after the first of the silent phases before it began, not after its own start, so that a
short training followed by a short test phase still grows the log every ~10 s (a log that stays the same for long
looks hung). The pace is the process's, like stderr itself: a sweep's jobs in one process share it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Literal, TextIO

LINE_SECONDS = 10.0  # at most one line this often; work steps longer than ~20 s are the only way to go longer

Mode = Literal["bar", "lines"] | None


class Pace:
    """When the phases writing to one stream last wrote a line, or when the first of the silent ones began."""

    def __init__(self) -> None:
        self.since: float | None = None

    def quiet_since(self, started: float) -> float:
        """When the stream went quiet, for a phase that starts at ``started``."""
        if self.since is None:
            self.since = started
        return self.since


STDERR_PACE = Pace()  # the pace of the phases writing to stderr on the monotonic clock


def progress_mode(setting: bool | str, *, sweep: bool = False, stream: TextIO | None = None) -> Mode:
    """How a phase shows its progress for the ``progress_bar`` setting: ``true``: a bar; ``false``: nothing;
    ``auto``: a bar on an interactive terminal (not in a sweep), lines otherwise."""
    if setting != "auto":
        return "bar" if setting else None
    terminal = (stream or sys.stderr).isatty()
    return "bar" if terminal and not sweep else "lines"


def duration(seconds: float) -> str:
    """``m:ss`` or ``h:mm:ss`` (tqdm's format)."""
    minutes, secs = divmod(max(int(seconds), 0), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressLines:
    """Lines of one phase's progress on ``stream`` (stderr), at most one per ``every`` seconds.

    :param phase: what is being done (``training``, ``test episodes``, ``collect`` ...).
    :param total: the units the phase will have done at its end (None: not known).
    :param unit: what is counted (``steps``, ``episodes``, ``frames``, ``batches``).
    :param done: units done before this phase started (a resumed run's): the rate counts this phase's only.
    :param every: seconds between two lines (default :data:`LINE_SECONDS`).
    :param clock: the time source (seconds, monotonic).
    :param pace: the pace this phase keeps with the others writing to its stream (default: :data:`STDERR_PACE` for
        stderr on the monotonic clock, else its own).
    """

    def __init__(
        self,
        phase: str,
        total: int | None,
        unit: str = "steps",
        *,
        done: int = 0,
        every: float | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        pace: Pace | None = None,
    ) -> None:
        self.phase, self.total, self.unit = phase, total, unit
        self.every = LINE_SECONDS if every is None else every
        self.stream, self.clock = stream, clock
        self.started, self.first = clock(), done
        self.pace = STDERR_PACE if pace is None and stream is None and clock is time.monotonic else pace
        self.due = (self.started if self.pace is None else self.pace.quiet_since(self.started)) + self.every
        self.written = 0

    def update(self, done: int, note: str = "") -> None:
        """``done`` units so far: a line when one is due (``note``: what else to say, ``epoch 3``)."""
        now = self.clock()
        if now >= self.due:
            self.write(done, now, note)

    def before_pause(self, done: int, seconds: float) -> None:
        """``done`` units so far, before work of about ``seconds`` that cannot report (a policy update): a line now
        when one would be due before that work ends."""
        now = self.clock()
        if now + seconds >= self.due:
            self.write(done, now)

    def write(self, done: int, now: float | None = None, note: str = "") -> None:
        """Write the line for ``done`` units now."""
        now = self.clock() if now is None else now
        stream = self.stream or sys.stderr
        stream.write(self.line(done, now, note) + "\n")
        stream.flush()
        self.written += 1
        self.due = now + self.every
        if self.pace is not None:
            self.pace.since = now

    def finish(self, done: int, note: str = "") -> None:
        """The phase ended: a last line, when it wrote any (a short phase stays quiet)."""
        if self.written:
            self.write(done, note=note)

    def line(self, done: int, now: float, note: str = "") -> str:
        elapsed = now - self.started
        rate = (done - self.first) / elapsed if elapsed > 0 else 0.0
        parts = [f"{done:,} {self.unit}"]
        if self.total:
            parts = [f"{done:,}/{self.total:,} {self.unit} ({min(done / self.total, 1.0):.0%})"]
        if rate > 0:
            parts.append(f"{rate:,.1f} {self.unit}/s" if rate < 10 else f"{rate:,.0f} {self.unit}/s")
        parts.append(f"elapsed {duration(elapsed)}")
        if self.total and rate > 0:
            parts.append(f"{duration(max(self.total - done, 0) / rate)} left")
        return f"{self.phase}: {', '.join(parts + ([note] if note else []))}"


class PhaseProgress:
    """One phase's progress as a tqdm bar (``mode="bar"``), progress lines (``"lines"``) or nothing (None); a
    context manager.

    :param total: the units the phase will have done at its end.
    :param unit: what is counted (``frames``, ``batches``).
    """

    def __init__(self, phase: str, total: int | None, unit: str, mode: Mode) -> None:
        self.mode, self.done, self.note = mode, 0, ""
        self._lines = ProgressLines(phase, total, unit) if mode == "lines" else None
        self._bar: Any = None
        if mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=" " + unit, desc=phase, dynamic_ncols=True, file=sys.stderr)

    def __enter__(self) -> PhaseProgress:
        return self

    def update(self, done: int, note: str = "") -> None:
        """``done`` units so far (``note``: what else to show, ``loss 0.12``)."""
        self.done, self.note = done, note
        if self._lines is not None:
            self._lines.update(done, note)
        elif self._bar is not None:
            if note:
                self._bar.set_postfix_str(note, refresh=False)
            self._bar.update(done - self._bar.n)

    def __exit__(self, *exc: object) -> None:
        if self._lines is not None:
            self._lines.finish(self.done, self.note)
        if self._bar is not None:
            self._bar.close()
