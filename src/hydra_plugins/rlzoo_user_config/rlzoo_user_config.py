"""Puts rlzoo's user config folder on Hydra's search path, after rlzoo's own ``conf/``, for rlzoo's commands only.

The folder (``rlzoo_conf/`` in the working directory, or ``$RLZOO_CONF``) holds the user's own options of rlzoo's
config groups: ``rlzoo.tune`` exports a study's best trial there as ``algo_env/tuned/<name>.yaml``, so that
``python -m rlzoo.train algo_env=tuned/<name>`` finds it, from a wheel install as from a checkout, without anything
being written into the installed package. rlzoo's own options come first: a user file of the same name is not used.
"""

from __future__ import annotations

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

PROVIDER = "rlzoo user config"


def _is_rlzoo_conf(path: str | None) -> bool:
    """Whether a search path entry is rlzoo's ``conf/`` (checked on disk, without importing rlzoo)."""
    if not path or path.startswith(("pkg://", "structured://")):
        return False
    folder = Path(path.removeprefix("file://"))
    return (folder / "train.yaml").is_file() and (folder / "algo_env").is_dir() and (folder / "srl_model").is_dir()


class RlzooUserConfig(SearchPathPlugin):
    """Appends the user config folder (when it exists) to the search path of an app whose primary config folder is
    rlzoo's."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if not any(_is_rlzoo_conf(element.path) for element in search_path.get_path()):
            return  # another Hydra app: left as it is
        from rlzoo.config import user_config_dir

        folder = user_config_dir()
        if folder.is_dir():  # Hydra warns about a folder that does not exist
            search_path.append(provider=PROVIDER, path=f"file://{folder}")
