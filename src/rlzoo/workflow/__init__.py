"""The pipeline's parts: what a pipeline run is (spec), its cached steps (datasets, encoders), its RL sweep."""
