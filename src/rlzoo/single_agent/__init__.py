"""The single-agent kind of run: one SB3 model on ``n_envs`` Gymnasium envs (the kind of every run that no other kind
marks). :mod:`.kind` is the kind (plan, build, load as a :class:`~rlzoo.agents.loaded_agent.TestAgent`, replay,
``train_run``); :mod:`.learning` is how its runs learn, checkpoint and test; :mod:`.experiment` is
``run_experiment``, every preset on every env as a run of the kind.

Importing this package registers the kind (:func:`rlzoo.training.kind.register_kind`); its modules, which import
torch and SB3, are imported only for a run of the kind. May import every layer below it and the agent API
(:mod:`rlzoo.agents`).
"""

from __future__ import annotations

from rlzoo.training.kind import SINGLE_AGENT, KindEntry, RunKind, register_kind


def _single_agent() -> RunKind:
    from rlzoo.single_agent.kind import SingleAgent

    return SingleAgent()


register_kind(KindEntry(SINGLE_AGENT, _single_agent))
