"""One training run: plan (every input checked, nothing written), build (the one assembly of envs, normaliser and
model), budget, monitor, callbacks, checkpoints and resume, fine-tuning, fault guards, test episodes, and
:func:`.run.run`, the one run skeleton that puts them in order for every kind of run (:mod:`.kind`: the protocol,
the registry, which the kinds' packages fill, and the one resolver; the exact resume composes the state of the parts
that implement :class:`rlzoo.stateful.Stateful`, naming no env).

May import the ground floor, :mod:`rlzoo.envs`, :mod:`rlzoo.any_env`, :mod:`rlzoo.srl`, :mod:`rlzoo.algos` and
:mod:`rlzoo.loggers`; never the agent API, results, replay or an entrypoint.
"""
