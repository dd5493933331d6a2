"""Everything multi-agent, over PettingZoo envs: the PettingZoo adapter (:mod:`.pettingzoo_envs`), one agent's turn
as a state (:mod:`.state`), the agents that act for it (:mod:`.agents`), the learners that train them
(:mod:`.learners`), the ``multiagent`` config group's plan (:mod:`.plan`), the multi-agent kind of run
(:mod:`.kind`, run by :func:`rlzoo.training.run.run`), the AEC episode loop (:mod:`.episodes`) and replay
(:mod:`.replay`).

May import every layer below it, the single-agent API (:mod:`rlzoo.agents`) included. Importing this package
registers the multi-agent kind (:func:`rlzoo.training.kind.register_kind`) and imports nothing else of it: a run, a
load or a replay enters its modules only for a multi-agent run (:func:`rlzoo.training.kind.resolve_kind`).
"""

from __future__ import annotations

from rlzoo.training.kind import KindEntry, RunKind, register_kind

MULTI_AGENT = "multi-agent"


def _multi_agent() -> RunKind:
    from rlzoo.multiagent.kind import MultiAgent

    return MultiAgent()


register_kind(KindEntry(MULTI_AGENT, _multi_agent, ("multiagent", "env.api")))
