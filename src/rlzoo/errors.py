"""The one exception type for bad user input."""


class ConfigError(ValueError):
    """A user-facing configuration error: its message names the bad value and what is allowed."""
