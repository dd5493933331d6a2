"""What every entrypoint does with a bad input: one line on stderr and a non-zero exit (ground floor).

Under ``--multirun`` the error is re-raised, so that the launcher records the failed job and runs the others.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from rlzoo.errors import ConfigError

P = ParamSpec("P")
R = TypeVar("R")


def _in_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def one_line_errors(entrypoint: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a Hydra ``main``: a :class:`ConfigError` exits with ``<entrypoint>: error: <message>``."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return function(*args, **kwargs)
            except ConfigError as error:
                if _in_multirun():
                    raise
                sys.exit(f"{entrypoint}: error: {error}")

        return wrapped

    return decorate
