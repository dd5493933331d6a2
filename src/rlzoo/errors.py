"""rlzoo's exception types (bad user input, a run that cannot go on) and the error line of a traceback."""


class ConfigError(ValueError):
    """A user-facing configuration error: its message names the bad value and what is allowed."""


class RunFailure(RuntimeError):
    """A run that cannot go on (its disk is full ...): the message names the path and what survived."""


class Refused(ConfigError):
    """A run dir refused without ``trusted=true``: it holds or names something rlzoo does not take from a shared run
    (code to run, a module to import, a path outside it); the message names it."""


def error_line(text: str) -> str:
    """The first line of the error a traceback ends with (``rlzoo.errors.ConfigError: env.id=...``), whole."""
    lines = text.strip().splitlines()
    start = 0
    for i, line in enumerate(lines):
        if line.startswith((" ", "\t", "Traceback")):
            start = i + 1
    return lines[start] if start < len(lines) else (lines[-1] if lines else "")
