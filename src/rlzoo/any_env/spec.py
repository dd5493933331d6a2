"""Which env a run makes: a Gymnasium id and its ``gymnasium.make`` keywords, checked without making the env."""

from __future__ import annotations

import difflib
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym

from rlzoo.any_env.extras import atari_hint, ensure_registered, env_creator
from rlzoo.any_env.options import EnvOptions
from rlzoo.errors import ConfigError
from rlzoo.kwargs_check import check_keywords

MAKE_KEYWORDS = ("max_episode_steps", "disable_env_checker")  # gymnasium.make's own, not the env constructor's


class Representation(Protocol):
    """What env checks and observation planning read of a run's representation
    (:class:`rlzoo.srl.representation.Representation` has it; this layer does not import it)."""

    @property
    def name(self) -> str: ...

    @property
    def policy_family(self) -> str: ...

    @property
    def make_kwargs(self) -> dict[str, Any]: ...

    @property
    def observation_wrapper(self) -> Any: ...

    @property
    def envs(self) -> str: ...


@dataclass(frozen=True)
class EnvSpec:
    """A Gymnasium id, the keyword arguments for ``gymnasium.make`` and rlzoo's own env keys (:class:`EnvOptions`)."""

    id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: EnvOptions = field(default_factory=EnvOptions)

    @classmethod
    def from_values(cls, env_values: dict[str, Any]) -> EnvSpec:
        """The spec of resolved ``env`` values: ``id`` and the make keywords."""
        values = dict(env_values)
        env_id = values.pop("id", None)
        if env_id == "???":
            raise ConfigError("env=gym needs the Gymnasium id: add env.id=<id>, e.g. env.id=LunarLander-v3")
        if not isinstance(env_id, str) or not env_id:
            raise ConfigError(f"env.id must be a Gymnasium id such as CartPole-v1, got {env_id!r}")
        options, kwargs = EnvOptions.split({str(k): v for k, v in values.items()})
        return cls(env_id, kwargs, options)

    def with_kwargs(self, **kwargs: Any) -> EnvSpec:
        """The same env with keywords added or replaced."""
        return EnvSpec(self.id, {**self.kwargs, **kwargs}, self.options)

    def values(self) -> dict[str, Any]:
        """The ``env`` values of a config: ``id``, the make keywords and rlzoo's env keys."""
        return {"id": self.id, **self.kwargs, **self.options.values()}


def check_env_id(env_id: str) -> str:
    """The registered id (``module:Id`` imports ``module`` first); fails with close matches when it is not one."""
    if ":" in env_id:
        module, _, env_id = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(f"env.id: cannot import module {module!r} ({error})") from None
    ensure_registered(env_id)  # Atari ids exist once ale_py is imported ([atari] extra)
    if env_id in gym.registry:
        return env_id
    close = difflib.get_close_matches(env_id, list(gym.registry), n=5, cutoff=0.6)
    hint = f"; did you mean: {', '.join(close)}" if close else "; see gymnasium.pprint_registry() for the ids"
    hint += atari_hint(env_id)
    raise ConfigError(f"env.id={env_id!r} is not a registered Gymnasium id{hint}")


def check_env(spec: EnvSpec, representation: Representation | None = None) -> None:
    """Check the id, every keyword against the env constructor's signature and type hints, and the keywords a
    representation adds (``render_mode="rgb_array"`` for pixels, ``arm_state`` ...) against the constructor and the
    env's ``metadata["render_modes"]``, without making the env.
    """
    registered = gym.spec(check_env_id(spec.id))
    if registered.entry_point is None:
        return
    creator: Any = env_creator(spec.id)  # a missing simulator ([box2d], [mujoco]) fails here with one line
    owner = getattr(creator, "__name__", spec.id)
    try:
        check_keywords(creator, spec.kwargs, prefix="env.", owner=owner, also_allowed=MAKE_KEYWORDS)
    except ConfigError as error:
        raise ConfigError(f"env {spec.id} rejected its arguments {spec.kwargs}: {error}") from None
    if representation is not None:
        _check_representation_keywords(spec.id, creator, representation)


def _check_representation_keywords(env_id: str, creator: Any, representation: Representation) -> None:
    """The representation's ``gymnasium.make`` keywords: a render mode the env offers, keywords it takes."""
    name, make_kwargs = representation.name, representation.make_kwargs
    render_mode = make_kwargs.get("render_mode")
    modes = getattr(creator, "metadata", {}).get("render_modes")
    if render_mode is not None and modes is not None and render_mode not in modes:
        raise ConfigError(
            f"srl_model={name} needs render_mode={render_mode!r}, which {env_id} does not offer "
            f"(its render modes: {', '.join(modes) or 'none'})"
        )
    own = {k: v for k, v in make_kwargs.items() if k != "render_mode"}  # render modes: checked above
    if not own:
        return
    parameters = inspect.signature(creator).parameters
    refused = [k for k in own if k not in parameters]
    if refused and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        envs = representation.envs or "an env"
        raise ConfigError(f"srl_model={name} needs {envs} taking {', '.join(refused)}; env {env_id} does not")
    check_keywords(creator, own, prefix=f"srl_model={name}: make_kwargs.", owner=getattr(creator, "__name__", env_id))
