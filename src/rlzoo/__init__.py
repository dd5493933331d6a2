"""rlzoo: reinforcement learning on top of state representation learning (SB3 + Gymnasium + Hydra).

Importing rlzoo registers its Gymnasium environments (``rlzoo/MobileRobot-v0`` ...).
"""

import rlzoo.envs  # noqa: F401  (registers the rlzoo/ env ids)

__version__ = "0.1.0"
