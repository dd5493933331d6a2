"""Where a run's metrics go while it trains: SB3's logger with its output formats and the W&B run (:mod:`.outputs`),
and visdom live plots (:mod:`.live_plot`).

May import the ground floor only.
"""
