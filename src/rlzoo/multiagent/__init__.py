"""Everything multi-agent, over PettingZoo envs: the PettingZoo adapter (:mod:`.pettingzoo_envs`), one agent's turn
as a state (:mod:`.state`), the agents that act for it (:mod:`.agents`), the learners that train them
(:mod:`.learners`), the ``multiagent`` config group's plan (:mod:`.plan`), the multi-agent kind of run
(:mod:`.kind`, run by :func:`rlzoo.training.run.run`), the AEC episode loop (:mod:`.episodes`) and replay
(:mod:`.replay`).

May import every layer below it, the single-agent API (:mod:`rlzoo.agents`) included. Nothing is imported here;
a run, a load or a replay enters this package only for a multi-agent run (:func:`rlzoo.training.kind.resolve_kind`).
"""
