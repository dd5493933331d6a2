"""rlzoo: reinforcement learning on top of state representation learning (SB3 + Gymnasium + Hydra)."""

__version__ = "0.1.0"
