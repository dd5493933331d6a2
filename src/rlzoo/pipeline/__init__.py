"""``python -m rlzoo.pipeline``: from nothing to the results table in one command. What a pipeline run is
(:mod:`.spec`), its cached steps (datasets, encoders: :mod:`.steps`), its RL sweep (:mod:`.launch`) and the command
(:mod:`.command`).

May import every layer below the entrypoints, and the collect, srl.train and plot entrypoints it drives.
"""
