"""Hyperparameter search on Optuna (``python -m rlzoo.tune``): search spaces as config, pruning on intermediate
evaluations, workers sharing one journal-file study, the best trial exported as a tuned pair.

Optuna comes with the ``[tune]`` extra; :func:`require_optuna` says how to install it.
"""

from __future__ import annotations

import importlib.util

from rlzoo.errors import ConfigError

EXTRA = "tune"
INSTALL = 'pip install -e ".[tune]"'


def require_optuna() -> None:
    """Fail with one line naming the extra when Optuna or plotly is missing."""
    missing = [name for name in ("optuna", "plotly") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"rlzoo.tune needs the [{EXTRA}] extra ({', '.join(missing)} missing): {INSTALL}")
