"""The one exception type for bad user input."""


class ConfigError(ValueError):
    """A user-facing configuration error: its message names the bad value and what is allowed."""


class RunFailure(RuntimeError):
    """A run that cannot go on (its disk is full ...): the message names the path and what survived."""


class Refused(ConfigError):
    """A run dir refused without ``trusted=true``: it holds or names something rlzoo does not take from a shared run
    (code to run, a module to import, a path outside it); the message names it."""
