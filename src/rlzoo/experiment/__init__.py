"""Running experiments: run directories, environments, callbacks, logging, test episodes."""
