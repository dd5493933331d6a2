"""PyBullet, an optional extra of rlzoo (``pip install -e ".[arm]"``): imported here, once, for the arm envs, so that a
missing install fails with one line naming the extra."""

from __future__ import annotations

INSTALL_HINT = 'rlzoo\'s arm envs (rlzoo/Kuka*-v0) need pybullet, an optional extra: pip install -e ".[arm]"'

try:
    import pybullet
    import pybullet_data
except ImportError as error:  # pragma: no cover - depends on the install
    raise ModuleNotFoundError(INSTALL_HINT, name="pybullet") from error

p = pybullet


def data_path() -> str:
    """:return: the folder of ``pybullet_data`` (the arm, the table, the plane, the distractor objects)."""
    return str(pybullet_data.getDataPath())


__all__ = ["INSTALL_HINT", "data_path", "p"]
