"""Replaying a trained run: loading it with its frozen normalisation and test env (:mod:`.loading`), trajectory and
action plots (:mod:`.plots`), and the one video/GIF writer used by ``rlzoo.enjoy`` and the report (:mod:`.video`).

May import the ground floor, :mod:`rlzoo.envs`, :mod:`rlzoo.any_env`, :mod:`rlzoo.srl`, :mod:`rlzoo.algos`,
:mod:`rlzoo.loggers` and :mod:`rlzoo.training`.
"""
