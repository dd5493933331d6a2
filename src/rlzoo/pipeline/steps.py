"""The cached steps before the RL sweep: one dataset per env, one encoder per (env, learned method).

Each step's folder is named by the content of its config: a dataset by its env (as the RL runs configure it) and
collection settings (seed included, worker count apart), an encoder by its dataset's key and its training config.
A folder that holds a finished result (``dataset.json``, ``encoder.json``) is reused; one without it (a crash) is
removed and made again. Each learned method then gets a generated ``srl_model`` option per env,
``<pipeline dir>/conf/srl_model/pipeline_<method>_<env>.yaml``: the method with the pipeline's overrides, its images
at the dataset's size and its encoder pinned, which the RL jobs select (``hydra.searchpath``). That folder holds
only those options: it is emptied before they are written (:func:`clear_options`), so nothing else a pipeline dir
holds reaches Hydra.
"""

from __future__ import annotations

import multiprocessing
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from rlzoo.config import compose_config
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.pipeline.spec import PipelineSpec, content_key
from rlzoo.srl.dataset import METADATA as DATASET_DONE
from rlzoo.srl.encoder import METADATA as ENCODER_DONE

# Keys that do not change a step's result (where it is written, how it reports, where it runs).
DATASET_FREE_KEYS = ("run_dir", "progress_bar", "n_workers")
ENCODER_FREE_KEYS = ("run_dir", "progress_bar", "device", "torch_threads", "dataset")
OPTIONS = Path("conf") / "srl_model"


@dataclass(frozen=True)
class Step:
    """One cached step: its folder, its composed config, and whether it is done already."""

    kind: str
    label: str
    folder: Path
    config: DictConfig
    marker: str

    @property
    def done(self) -> bool:
        return (self.folder / self.marker).is_file()

    def prepare(self) -> bool:
        """Clear an unfinished attempt; return whether the step is to be run."""
        if self.done:
            return False
        if self.folder.exists():
            shutil.rmtree(self.folder)  # a crashed attempt: derived data, made again from its config
        return True


def srl_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def applicable(overrides: Sequence[str], node: DictConfig) -> list[str]:
    """The overrides of ``srl_model.*`` keys that ``node`` (a composed srl.train config) has, and every other one."""
    return [
        o
        for o in overrides
        if not srl_key(o).startswith("srl_model.")
        or OmegaConf.select(node, srl_key(o), default=KeyError) is not KeyError
    ]


def check_overrides_apply(spec: PipelineSpec, bases: dict[str, DictConfig], learned: Sequence[str]) -> None:
    """Refuse an ``srl_model.*`` override the user typed that would do nothing: one of ``pipeline.srl_train`` that
    no ``learned`` method's config has, or one of ``pipeline.srl_model.<method>`` that its method's config does not
    have. The experiment's own settings are not checked: a sweep narrowed to other methods leaves them unused."""
    for override in spec.srl_train:
        if (
            learned
            and srl_key(override).startswith("srl_model.")
            and _typed(spec, f"pipeline.srl_train.{srl_key(override)}")
            and not any(applicable([override], bases[method]) for method in learned)
        ):
            raise ConfigError(
                f"pipeline.srl_train: {override} sets a key that no learned method of the sweep "
                f"({', '.join(learned)}) has, so it would do nothing; a key of conf/srl_model/<method>.yaml is allowed"
            )
    for method, overrides in spec.srl_model.items():
        if method not in bases:  # a representation of the experiment that the sweep is narrowed away from
            continue
        for override in overrides:
            typed = _typed(spec, f"pipeline.srl_model.{method}.{srl_key(override).removeprefix('srl_model.')}")
            if typed and not applicable([override], bases[method]):
                raise ConfigError(
                    f"pipeline.srl_model.{method}: {override} sets a key that srl_model={method} does not have, "
                    "so it would do nothing; a key of its conf/srl_model file is allowed"
                )


def _typed(spec: PipelineSpec, key: str) -> bool:
    """``key`` (or a node above it) was set on the command line."""
    return any(key == typed or key.startswith(typed + ".") for typed in spec.typed)


def compose_train(
    spec: PipelineSpec, env: str, srl_option: str, run_dir: Path, search: Path | None = None
) -> DictConfig:
    """The config of an RL job of ``spec`` (seed apart), composed as ``python -m rlzoo.train`` would."""
    overrides = [f"experiment={spec.experiment}", *spec.train, f"env={env}", f"srl_model={srl_option}"]
    if search is not None:
        overrides.append(f"hydra.searchpath=[file://{search}]")
    try:
        return compose_config(overrides, run_dir=run_dir)
    except Exception as error:  # Hydra's composition errors: a key or option the config has not
        raise ConfigError(f"the RL jobs' config ({' '.join(overrides)}): {error}".replace("\n", " ")) from None


def _compose(overrides: Sequence[str], run_dir: Path, config_name: str, what: str) -> DictConfig:
    try:
        return compose_config(list(overrides), run_dir=run_dir, config_name=config_name)
    except Exception as error:
        raise ConfigError(f"pipeline.{what} ({' '.join(overrides)}): {error}".replace("\n", " ")) from None


def dataset_step(spec: PipelineSpec, env: str, env_node: DictConfig) -> Step:
    """The dataset of ``env``, collected on the env exactly as the RL runs configure it."""
    probe = _compose([f"env={env}", *spec.collect], spec.dir, "collect", "collect")
    with open_dict(probe):
        probe.env = env_node
    values = OmegaConf.to_container(probe, resolve=True)
    assert isinstance(values, dict)
    key = content_key({k: v for k, v in values.items() if k not in DATASET_FREE_KEYS})
    folder = spec.dir / "datasets" / f"{env}-{key}"
    with open_dict(probe):
        probe.run_dir = str(folder)
    return Step("dataset", env, folder, probe, DATASET_DONE)


def method_config(spec: PipelineSpec, method: str) -> DictConfig:
    """``python -m rlzoo.srl.train srl_model=<method>``'s config, without the pipeline's overrides."""
    return _compose([f"srl_model={method}"], spec.dir, "srl_train", "srl_train")


def is_learned(base: DictConfig) -> bool:
    """Whether a method (its :func:`method_config`) is trained from a dataset (its option has the recipe key kind)."""
    return "kind" in base.srl_model


def _method_overrides(spec: PipelineSpec, method: str, base: DictConfig) -> list[str]:
    return applicable([*spec.srl_train, *spec.srl_model.get(method, [])], base)


def encoder_step(spec: PipelineSpec, method: str, base: DictConfig, env: str, dataset: Step) -> Step:
    """The encoder of ``method`` on ``env``'s dataset (``pipeline.srl_train`` and ``pipeline.srl_model.<method>``)."""
    from rlzoo.srl.train import check_encoder_config  # torch: imported when the experiment trains an encoder

    overrides = [f"srl_model={method}", f"dataset={dataset.folder}", *_method_overrides(spec, method, base)]
    config = _compose(overrides, spec.dir, "srl_train", "srl_train")
    try:
        check_encoder_config(config)
    except ConfigError as error:
        raise ConfigError(f"pipeline.srl_train of {method} on {env}: {error}") from None
    values = OmegaConf.to_container(config, resolve=True)
    assert isinstance(values, dict)
    content = {k: v for k, v in values.items() if k not in ENCODER_FREE_KEYS}
    key = content_key({"dataset": dataset.folder.name, **content})
    folder = spec.dir / "encoders" / f"{method}-{env}-{key}"
    with open_dict(config):
        config.run_dir = str(folder)
    return Step("encoder", f"{method} on {env}", folder, config, ENCODER_DONE)


def clear_options(spec: PipelineSpec) -> None:
    """Empty ``<pipeline dir>/conf`` before this run writes its options again, so that Hydra's search path holds only
    the options rlzoo generated: whatever a received pipeline dir brought there (a launcher's config, callbacks, any
    other option) is removed; a link is removed, never followed."""
    folder = spec.dir / OPTIONS.parent
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.is_dir():
        shutil.rmtree(folder)


def write_option(
    spec: PipelineSpec, method: str, base: DictConfig, env: str, image_size: int | None, encoder: Path | None
) -> str:
    """Write the generated ``srl_model`` option of ``method`` for ``env``'s RL jobs; return its name."""
    name = f"pipeline_{method}_{env}"
    keys = [srl_key(o).split(".", 1)[1] + "=" + o.split("=", 1)[1] for o in _method_overrides(spec, method, base)
            if srl_key(o).startswith("srl_model.")]  # fmt: skip
    body = OmegaConf.from_dotlist(keys)
    if image_size is not None:
        body.height = body.width = image_size
    if encoder is not None:
        body.checkpoint = str(encoder)
    text = (
        f"# Generated by python -m rlzoo.pipeline experiment={spec.experiment}: srl_model={method} for env={env}\n"
        f"# (its RL jobs select it through hydra.searchpath; rewritten on every pipeline run).\n"
        f"defaults:\n  - {method}\n  - _self_\n\n{OmegaConf.to_yaml(body)}"
    )
    atomic_write_text(spec.dir / OPTIONS / f"{name}.yaml", text)
    return name


def run_steps(
    steps: Sequence[Step],
    action: Callable[[DictConfig], Any],
    workers: int,
    log: Callable[[str], None],
    on_done: Callable[[Step], None] = lambda step: None,
) -> None:
    """Run the steps that are not cached; with ``workers`` > 1, that many at once, each in a process of its own with
    one torch thread (``action`` must be a module-level function). A lone step left to run still gets its one-thread
    process: torch's thread count changes a network's floats, so a step's result must not depend on how many of its
    neighbours were cached. ``on_done`` is called with each step as soon as it is done."""
    todo = [step for step in steps if announced(step, log)]
    if workers == 1 or not todo:
        for step in todo:
            action(step.config)
            log(f"{step.kind} {step.label}: done")
            on_done(step)
        return
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked torch or JAX threads
    with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=context) as pool:
        futures = {pool.submit(action, _one_thread(step.config)): step for step in todo}
        for future in as_completed(futures):
            future.result()  # a step's error stops the pipeline (after the steps running beside it)
            log(f"{futures[future].kind} {futures[future].label}: done")
            on_done(futures[future])


def announced(step: Step, log: Callable[[str], None]) -> bool:
    """Whether ``step`` is to run (not cached); say which."""
    if not step.prepare():
        log(f"{step.kind} {step.label}: cached ({step.folder})")
        return False
    log(f"{step.kind} {step.label}: running into {step.folder}")
    return True


def _one_thread(config: DictConfig) -> DictConfig:
    config = config.copy()
    with open_dict(config):
        config.torch_threads = 1
    return config
