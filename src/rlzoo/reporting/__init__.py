"""Reports of compared runs: figures, tables, an HTML page, W&B tables (used by the plot, report and pipeline
entrypoints)."""
