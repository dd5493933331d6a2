"""Constraints on algorithm keywords that SB3 only trips over inside ``learn()`` (or never), checked with the plan.

SB3 2.9 constructors accept ``n_epochs=0`` (PPO dies after its first rollout with an ``UnboundLocalError``),
``train_freq=0`` (a ``ZeroDivisionError`` in ``learn()``), ``batch_size=0``, ``tau=2`` and ``ent_coef=-1`` (SAC trains
on empty batches, diverges, or pays for entropy instead of earning it, without a word). Here every such keyword,
whichever algorithm takes it, is checked once, before the run dir exists, with one line naming the value and what is
allowed. A value SB3 gives a meaning keeps it (``gradient_steps=-1``: as many gradient steps as env steps in the
rollout; ``ent_coef=auto``: a learned weight).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from rlzoo.errors import ConfigError

# Counts and sizes: an int ≥ 1.
AT_LEAST_ONE = (
    "n_steps",
    "n_epochs",
    "batch_size",
    "buffer_size",
    "policy_delay",
    "target_update_interval",
    "n_critic_updates",
    "n_delta",
    "n_eval_episodes",
)
# Counts that may be 0.
AT_LEAST_ZERO = ("learning_starts",)
# Fractions and discounts: a number in [0, 1].
UNIT_INTERVAL = (
    "gamma",
    "tau",
    "gae_lambda",
    "exploration_fraction",
    "exploration_initial_eps",
    "exploration_final_eps",
)
# Numbers that must be > 0 (or a schedule where SB3 takes one); a learning rate may be 0 (weights kept).
POSITIVE = ("clip_range", "clip_range_vf", "max_grad_norm", "target_kl")
# Loss weights and noise scales SB3 assumes ≥ 0 (a negative one trains without a word, toward the wrong objective).
NON_NEGATIVE = ("vf_coef", "q_coef", "target_policy_noise", "target_noise_clip")
TRAIN_FREQ_UNITS = ("step", "episode")
SCHEDULE_EXAMPLE = "{_target_:stable_baselines3.common.utils.LinearSchedule,start:1e-3,end:0,end_fraction:1}"


def check_constraints(kwargs: dict[str, Any]) -> None:
    """Fail with one line on the first keyword whose value lies outside what the algorithm can train with.

    :raise ConfigError: naming ``algo.<key>=<value>`` and what is allowed.
    """
    for key, value in kwargs.items():
        problem = _problem(key, value)
        if problem is not None:
            raise ConfigError(f"algo.{key}={value!r} {problem}")


def _problem(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` for the keyword ``key`` (None: nothing, or a keyword without a constraint)."""
    rule = RULES.get(key)
    if rule is None or value is None:  # None passed the type check: the algorithm's "off" (max_grad_norm ...)
        return None
    allowed, description = rule
    return None if allowed(value) else description


def _train_freq_problem(value: Any) -> str | None:
    if _is_int(value):
        return None if value >= 1 else TRAIN_FREQ
    if isinstance(value, list | tuple) and len(value) == 2:
        n, unit = value
        if _is_int(n) and n >= 1 and unit in TRAIN_FREQ_UNITS:
            return None
    return TRAIN_FREQ


def _ent_coef_allowed(value: Any) -> bool:
    """A weight ≥ 0, ``auto`` (learned), or ``auto_<x>`` with a starting value x > 0 (SAC's family)."""
    if not isinstance(value, str):
        return _is_number(value) and value >= 0
    if value == "auto":
        return True
    try:
        return value.startswith("auto_") and float(value.removeprefix("auto_")) > 0
    except ValueError:
        return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


ENT_COEF = "must be a number ≥ 0, or 'auto' / 'auto_<x>' with x > 0 where the algorithm learns it"
TRAIN_FREQ = "must be an integer ≥ 1 or [n, 'step' | 'episode'] with n ≥ 1"
Rule = tuple[Callable[[Any], bool], str]
RULES: dict[str, Rule] = {
    **{key: (lambda v: _is_int(v) and v >= 1, "must be an integer ≥ 1") for key in AT_LEAST_ONE},
    **{key: (lambda v: _is_int(v) and v >= 0, "must be an integer ≥ 0") for key in AT_LEAST_ZERO},
    **{key: (lambda v: _is_number(v) and 0 <= v <= 1, "must be a number in [0, 1]") for key in UNIT_INTERVAL},
    **{key: (lambda v: callable(v) or (_is_number(v) and v > 0), "must be a number > 0") for key in POSITIVE},
    **{key: (lambda v: _is_number(v) and v >= 0, "must be a number ≥ 0") for key in NON_NEGATIVE},
    "ent_coef": (_ent_coef_allowed, ENT_COEF),
    "learning_rate": (lambda v: callable(v) or (_is_number(v) and v >= 0), "must be a number ≥ 0 or a schedule"),
    "gradient_steps": (
        lambda v: _is_int(v) and (v >= 1 or v == -1),
        "must be an integer ≥ 1, or -1 (as many gradient steps as env steps)",
    ),
    "train_freq": (lambda v: _train_freq_problem(v) is None, TRAIN_FREQ),
}


def describe_hint(hint: Any) -> str:
    """A type hint in words for a one-line message: a schedule (``float | Callable[[float], float]``) is "a number or
    a schedule" with an example; other hints are printed without their module prefixes."""
    if _is_schedule(hint):
        return f"a number or a schedule (an object such as {SCHEDULE_EXAMPLE})"
    name = getattr(hint, "__name__", None)
    if name and typing.get_origin(hint) is None:
        return str(name)
    return str(hint).replace("typing.", "").replace("collections.abc.", "")


def _is_schedule(hint: Any) -> bool:
    args = typing.get_args(hint)
    return any(typing.get_origin(arg) is Callable for arg in args) and any(arg is float for arg in args)
