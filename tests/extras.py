"""Tests of an optional extra: skipped (with the pip command that fixes it) where it is missing, failed under CI."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` from the optional extra ``extra``, or skip the calling test (module) saying how to install it.

    Under ``CI=true`` a missing extra fails instead: CI installs every extra, so a skip there would hide a broken
    install. Call it at module level to cover a whole test file.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        message = f'{module} is not installed ({error}): pip install -e ".[{extra}]"'
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but the [{extra}] extra is missing: {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)
