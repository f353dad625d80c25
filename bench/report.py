"""A benchmark run's table: printed, and appended to a results file when one is given."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    """The checkout's short commit, for the results' header ('?' outside git)."""
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    return found.stdout.strip() or "?"


def emit(lines: list[str], out: Path | None) -> None:
    text = "\n".join(lines)
    print(text)
    if out is not None:
        with out.open("a") as results:
            results.write(text + "\n")
