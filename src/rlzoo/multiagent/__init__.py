"""Multi-agent runs over PettingZoo envs: the ``multiagent`` config group's plan (:mod:`.plan`), its training run
(:mod:`.run`) and the AEC episode loop (:mod:`.episodes`). The agents themselves are in :mod:`rlzoo.agents`
(:class:`~rlzoo.agents.MultiagentState`, :func:`~rlzoo.agents.load_multiagent`). Nothing is imported here, so that
the entrypoint can ask :func:`.plan.is_pettingzoo` without importing torch."""
