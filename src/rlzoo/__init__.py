"""rlzoo: reinforcement learning on top of state representation learning (SB3 + Gymnasium + Hydra).

Importing rlzoo registers its Gymnasium environments (``rlzoo/MobileRobot-v0`` ...) and nothing heavier: the agent API
(``preset``, ``run_experiment``, ``load_agent``, ``State``, ``StateArray``) is imported on first use.
"""

import os
from typing import Any

from rlzoo.float_path import pin_float_path

pin_float_path(os.environ)  # before anything imports torch: RLZOO_FLOAT_PATH's kernel caps

import rlzoo.envs  # noqa: E402, F401  (registers the rlzoo/ env ids)

__version__ = "0.1.0"

_LAZY = {
    "preset": "rlzoo.agents.presets",
    "load_agent": "rlzoo.kinds",
    "State": "rlzoo.agents.state",
    "StateArray": "rlzoo.agents.state",
    "run_experiment": "rlzoo.single_agent.experiment",
    "MultiagentState": "rlzoo.multiagent.state",
    "Multiagent": "rlzoo.multiagent.state",
    "load_multiagent": "rlzoo.multiagent.agents",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    """Import the agent API on first use (``from rlzoo import preset``), keeping ``import rlzoo`` light."""
    if name not in _LAZY:
        raise AttributeError(f"module 'rlzoo' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
