"""The building blocks of new algorithms (the autonomous-learning-library's Approximation design): function
approximations with their optimiser, clipping, schedules and target networks (:mod:`.approximations`), Q-network
modules with noisy and distributional heads (:mod:`.q_networks`), prioritised replay on a sum tree
(:mod:`.replay_buffers`) and the K-FAC optimiser (:mod:`.kfac`).

Imports torch and SB3, nothing of rlzoo: an algorithm in :mod:`rlzoo.algos` composes them.
"""
