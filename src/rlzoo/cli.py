"""What every entrypoint does with a bad input: one line on stderr and a non-zero exit (ground floor).

A rejected command leaves nothing behind: Hydra makes a single run's output dir (``.hydra/``, ``<job>.log``) before
the command is checked, and it is removed again when the command fails before the run wrote anything there.
Under ``--multirun`` the error is re-raised, so that the launcher records the failed job and runs the others.
"""

from __future__ import annotations

import functools
import logging
import shutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from rlzoo.errors import ConfigError, RunFailure

P = ParamSpec("P")
INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C (128 + SIGINT)
R = TypeVar("R")


def in_multirun() -> bool:
    """Whether this process runs a job of a Hydra ``--multirun``."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def discard_output_dir() -> None:
    """Remove a single run's Hydra output dir when it holds nothing but Hydra's own files, and the folders above it
    that this leaves empty (inside the working directory). A sweep's job dirs are kept: the summary lists them."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized() or in_multirun():
        return
    hydra_cfg = HydraConfig.get()
    folder = Path(hydra_cfg.runtime.output_dir).resolve()
    cwd = Path.cwd().resolve()
    own = {hydra_cfg.output_subdir, f"{hydra_cfg.job.name}.log"}
    if not folder.is_dir() or _inside(cwd, folder) or any(p.name not in own for p in folder.iterdir()):
        return
    _close_log_files_in(folder)
    shutil.rmtree(folder, ignore_errors=True)
    for parent in folder.parents:
        if parent == cwd or not _inside(parent, cwd) or any(parent.iterdir()):
            break
        parent.rmdir()


def _close_log_files_in(folder: Path) -> None:
    """Detach and close the logging file handlers Hydra opened in ``folder`` (its ``<job>.log``), so that no later log
    record of this process reopens a file in a removed folder."""
    named = [item for item in logging.root.manager.loggerDict.values() if isinstance(item, logging.Logger)]
    for logger in [logging.getLogger(), *named]:
        for handler in list(logger.handlers):
            if isinstance(handler, logging.FileHandler) and _inside(Path(handler.baseFilename).resolve(), folder):
                logger.removeHandler(handler)
                handler.close()


def discard_output_dir_if_elsewhere(run_dir: str | Path) -> None:
    """Remove Hydra's own output dir when the command writes to another folder (``run_dir=``, ``resume=``): it would
    stay behind holding nothing but Hydra's files."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized() and Path(run_dir).resolve() != Path(HydraConfig.get().runtime.output_dir).resolve():
        discard_output_dir()


def _record_job_failure(entrypoint: str, error: Exception) -> None:
    """A sweep job's error goes to its run dir's ``error.txt`` (the sweep summary reads it) and one line on stderr."""
    from hydra.core.hydra_config import HydraConfig

    from rlzoo.errors import error_line
    from rlzoo.rundir import record_failure

    hydra_cfg = HydraConfig.get()
    record_failure(Path(hydra_cfg.runtime.output_dir), error)
    message = error_line("".join(traceback.format_exception_only(error)))
    print(f"{entrypoint}: job {hydra_cfg.job.num} failed: {message}", file=sys.stderr, flush=True)


def _finished_already(entrypoint: str, error: Exception) -> bool:
    """Whether a sweep job found its own run finished (a requeued job, a job launched twice): then it says so in one
    line and ends as a success, writing nothing (:class:`rlzoo.rundir.RunDirFinished`): the log file Hydra opened
    in the run dir is closed, so that the job's last log records (Submitit's) stay out of it."""
    from hydra.core.hydra_config import HydraConfig

    from rlzoo.rundir import RunDirFinished

    if not (isinstance(error, RunDirFinished) and error.same_run):
        return False
    _close_log_files_in(Path(HydraConfig.get().runtime.output_dir).resolve())
    print(f"{entrypoint}: {error}", flush=True)
    return True


def _check_choices() -> None:
    """A missing option of an optional group (``algo_env=tuned/<name>``) fails like any bad input."""
    from hydra.core.hydra_config import HydraConfig

    from rlzoo.config import check_chosen_options

    if HydraConfig.initialized():
        check_chosen_options(HydraConfig.get())


def run_checked(main: Callable[[], object], entrypoint: str, config_name: str, sweeps_in: str | None = None) -> None:
    """Run a Hydra ``main`` once the command line's group options are checked: a missing one (``logger=tensorboard``)
    or ``group=null`` exits with one line, before Hydra composes anything (:func:`rlzoo.config.check_group_choices`);
    so do a sweep without ``-m`` and a key the config lacks, given without ``+`` (:mod:`rlzoo.overrides`; ``sweeps_in``:
    the node of an entrypoint that takes its sweep as lists, see :func:`rlzoo.overrides.check_overrides`)."""
    from rlzoo.config import check_group_choices
    from rlzoo.overrides import check_overrides

    try:
        check_group_choices(config_name, sys.argv[1:])
        check_overrides(config_name, sys.argv[1:], sweeps_in)
    except ConfigError as error:
        sys.exit(f"{entrypoint}: error: {error}")
    main()


def _exit_if_interrupted(entrypoint: str, error: BaseException) -> None:
    """Ctrl-C: one line on stderr (what the entrypoint kept and how to go on, when it says) and exit status 130."""
    if isinstance(error, KeyboardInterrupt):
        print(f"{entrypoint}: interrupted{f': {error}' if str(error) else ''}", file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED)


def one_line_errors(entrypoint: str, *, summarised_sweeps: bool = False) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a Hydra ``main``: a :class:`ConfigError` (or :class:`RunFailure`) exits with
    ``<entrypoint>: error: <message>``; Ctrl-C with ``<entrypoint>: interrupted[: <what the entrypoint says>]`` and
    status 130; a command that fails before writing leaves no output dir.

    :param summarised_sweeps: the entrypoint's sweeps have a summary callback (:mod:`rlzoo.results.sweep`): a
        failing job records its error and returns, so that the sweep ends with the summary's counts, not a traceback.
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                _check_choices()
                return function(*args, **kwargs)
            except Exception as error:
                if in_multirun():
                    if not summarised_sweeps:
                        raise
                    if _finished_already(entrypoint, error):
                        return None  # type: ignore[return-value]  # nothing to do, nothing written
                    _record_job_failure(entrypoint, error)
                    return None  # type: ignore[return-value]  # a failed job: the summary reports it
                discard_output_dir()
                if isinstance(error, ConfigError | RunFailure):
                    sys.exit(f"{entrypoint}: error: {error}")
                raise
            except BaseException as error:
                if not in_multirun():
                    discard_output_dir()
                    _exit_if_interrupted(entrypoint, error)
                raise

        return wrapped

    return decorate
