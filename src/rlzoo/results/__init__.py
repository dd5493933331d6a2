"""Reading many runs: run discovery and each run's results (:mod:`.runs`), the comparison table with its statistics
(:mod:`.comparison`), and the summary a sweep writes after every job (:mod:`.sweep`).

May import the ground floor only (runs are read through :mod:`rlzoo.rundir`).
"""
