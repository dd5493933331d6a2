"""A run dir read as data (ground floor): its config as plain YAML without interpolations, the paths it names inside
it, the modules it names imported only from installed packages.

These checks hold for every run dir rlzoo reads without ``trusted=true`` (:mod:`rlzoo.training.safe_load` adds the
``_target_`` allowlist); each refusal is one :class:`~rlzoo.errors.Refused` line naming the file, key or path.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.confined import YAML_CAP, read_text
from rlzoo.errors import Refused

TRUST_HINT = "pass trusted=true (Python: trusted=True) only if you trust who made the run"
INTERPOLATION = "${"


def read_yaml(path: Path) -> DictConfig:
    """The mapping of a YAML file; YAML tags (``!!python/...``), broken YAML or a file that is not a mapping are one
    line naming the file and the line."""
    try:
        text = read_text(path.parent, path.name, YAML_CAP)
    except OSError as error:
        raise Refused(f"{path} cannot be read ({error.strerror or type(error).__name__})") from None
    try:
        config = OmegaConf.create(text) if text.strip() else OmegaConf.create({})
    except Exception as error:  # yaml's ConstructorError (a tag), ParserError, OmegaConf's key errors ...
        problem = getattr(error, "problem", None) or str(error).strip().splitlines()[0]
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise Refused(f"{path} is not plain YAML{where}: {problem}; a run's config holds plain values only") from None
    if not isinstance(config, DictConfig):
        raise Refused(f"{path} does not hold a mapping of config keys")
    return config


def _strings(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a plain container, keys included, with its dotted key."""
    if isinstance(node, dict):
        for key, value in node.items():
            dotted = f"{path}.{key}" if path else str(key)
            yield dotted, str(key)
            yield from _strings(value, dotted)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _strings(value, f"{path}[{index}]")
    elif isinstance(node, str):
        yield path, node


def refuse_interpolations(config: DictConfig, source: Path) -> None:
    """Refuse a config holding an interpolation (``${...}``, escaped or not, anywhere): a run's config is written
    resolved, so it holds none, and an interpolation could build new nodes or read the environment when resolved."""
    for key, text in _strings(OmegaConf.to_container(config, resolve=False)):
        if INTERPOLATION in text:
            shown = text if len(text) <= 60 else text[:57] + "..."
            raise Refused(
                f"{source}: {key}={shown!r} is an interpolation; a shared run's config holds its values written out, "
                f"so interpolations are refused; {TRUST_HINT}"
            )


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def inside(root: Path, path: str | Path, what: str) -> Path:
    """``path`` (relative to ``root``, the run dir) resolved, symlinks followed; refused when it leads outside ``root``.

    :param what: what names the path, for the message (``checkpoints/64/state.json: log_lines``).
    """
    base = root.resolve()
    resolved = (base / path).resolve()
    if not _within(resolved, base):
        raise Refused(f"{what} names {str(path)!r}, which leads outside the run dir {base}; a run names its own files")
    return resolved


# W&B's own folder in a run dir: its ``debug.log`` links are absolute, pointing where the run was made (outside a
# copied run dir); rlzoo reads nothing in it and only moves earlier processes' folders into ``wandb/superseded/`` (a
# rename moves a link, never follows it), and W&B replaces its links rather than writing through them.
OWN_LINKS = "wandb"


def check_links(root: Path) -> None:
    """Refuse a folder holding a symlink (at any depth, but not inside :data:`OWN_LINKS`) that leads outside it, or a
    file linked elsewhere too (a hard link): rlzoo reads and writes a run dir's files as its own."""
    base = root.resolve()
    for folder, folders, files in os.walk(base):
        entries = [*folders, *files]
        if Path(folder) == base and OWN_LINKS in folders:
            folders.remove(OWN_LINKS)  # checked itself below, not searched
        for name in entries:
            entry = Path(folder) / name
            if entry.is_symlink() and not _within(entry.resolve(), base):
                raise Refused(
                    f"{entry} is a symlink to {entry.resolve()}, outside {base}; a run dir's files are its own"
                )
            if not entry.is_symlink() and name in files and entry.stat().st_nlink > 1:
                raise Refused(f"{entry} is hard-linked to a file elsewhere; a run dir's files are its own")


def _folder_of(spec: Any) -> list[Path]:
    """The folders a module's top-level package or file was found in."""
    if spec.submodule_search_locations:
        return [Path(location).resolve().parent for location in spec.submodule_search_locations]
    return [Path(spec.origin).resolve().parent] if spec.origin and spec.has_location else []


def check_import(
    module: str, allowed: Sequence[str], what: str, run_root: Path | None, user: Sequence[str] = ()
) -> None:
    """Refuse to import ``module`` for a run unless it lies under a name of ``allowed`` or ``user`` (modules the
    loading user named) and is found where :func:`check_origin` allows.

    :param what: the key naming the module, for the message (``env.id='mymod:Env-v0'``).
    """
    names = (*allowed, *user)
    if not any(module == name or module.startswith(name + ".") for name in names):
        raise Refused(
            f"{what}: module {module!r} is not on the import allowlist of shared runs ({', '.join(allowed)}); "
            f"allow it with allow=[{module}] if you trust it, or {TRUST_HINT}"
        )
    users = any(module == name or module.startswith(name + ".") for name in user)
    check_origin(module, what, run_root, current_folder=users)


def check_origin(module: str, what: str, run_root: Path | None, *, current_folder: bool = False) -> None:
    """Refuse a module (not imported yet) whose top-level package would be imported from the run dir, a folder
    inside it or the folder holding it, or from the current folder (``python -m`` puts it first on ``sys.path``):
    what a shared run ships beside its files never runs.

    :param current_folder: allow the current folder (a module the loading user named: their own code).
    """
    top = module.split(".")[0]
    if top in sys.modules:
        return  # imported already: importing it again runs nothing
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return  # not installed: importing it fails in one line where it is used
    cwd, base = Path.cwd().resolve(), run_root.resolve() if run_root is not None else None
    for folder in _folder_of(spec):
        if base is not None and (folder == base.parent or _within(folder, base)):
            where = "the run dir" if _within(folder, base) else "the folder holding the run dir"
        elif folder == cwd and not current_folder:
            where = "the current folder"
        else:
            continue
        raise Refused(
            f"{what}: module {top!r} would be imported from {folder} ({where}), not from an installed package; "
            "rlzoo imports nothing a shared run ships"
        )
