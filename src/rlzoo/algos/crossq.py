"""CrossQ with a critic sized for a CPU."""

import inspect
from typing import Any

import sb3_contrib

CPU_NET_ARCH = [256, 256]


class CrossQ(sb3_contrib.CrossQ):
    """CrossQ (Bhatt et al., 2024, "CrossQ: Batch Normalization in Deep Reinforcement Learning for Greater Sample
    Efficiency and Simplicity"), sb3-contrib's, with [256, 256] actor and critic layers when ``policy_kwargs`` sets no
    ``net_arch``: sb3-contrib's [1024, 1024] critic ran 2,000 steps in 385-535 s on 2 CPU cores, the [256, 256] one
    (which the paper reports works too) about 5 times faster (``benchmarks/algo_speed.py``). Models load with plain
    ``sb3_contrib.CrossQ``; ``policy_kwargs.net_arch={pi: [256, 256], qf: [1024, 1024]}`` is the paper's network.
    """

    def __init__(self, policy: Any, env: Any, policy_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(policy, env, policy_kwargs={"net_arch": CPU_NET_ARCH, **(policy_kwargs or {})}, **kwargs)


CrossQ.__signature__ = inspect.signature(sb3_contrib.CrossQ)  # type: ignore[attr-defined]  # for rlzoo's checks
