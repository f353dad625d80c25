"""A case this machine cannot run: skipped on a developer's machine, failed in CI.

CI (`.ci/run`, which sets CI=true) runs on a machine that can run every such case; there a skip
would pass a run that never tried it, so it fails instead and says what the machine lacks.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def cannot_run_here(why: str) -> NoReturn:
    """Skips the test with `why`; in CI fails it with `why`."""
    if in_ci():
        pytest.fail(f"CI must run this case, and this machine cannot: {why}", pytrace=False)
    pytest.skip(why)
