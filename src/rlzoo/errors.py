"""The one exception type for bad user input."""


class ConfigError(ValueError):
    """A user-facing configuration error: its message names the bad value and what is allowed."""


class RunFailure(RuntimeError):
    """A run that cannot go on (its disk is full ...): the message names the path and what survived."""
