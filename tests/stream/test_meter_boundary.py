"""A session knows its meter only through stream.metering.Meter: stream/ imports nothing of quota/."""

import ast
from pathlib import Path

from quota.meter import CLOSE_WAIT_S
from stream.metering import RETURN_LEASE_LIMIT_S

STREAM_DIR = Path(__file__).resolve().parents[2] / "stream"


def quota_imports(package_dir: Path) -> list[str]:
    """'file: module' for each import of quota (or anything under it) in the package's sources."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            name = path.relative_to(package_dir)
            found += [f"{name}: {module}" for module in modules if module.split(".")[0] == "quota"]
    return found


def test_stream_does_not_import_quota():
    assert quota_imports(STREAM_DIR) == []


def test_closing_waits_longer_for_the_lease_than_the_meter_does():
    """The meter hands a slow return to the background after CLOSE_WAIT_S; the session's closing
    step must not cut it off before (stream/ cannot import the figure, so it is checked here)."""
    assert RETURN_LEASE_LIMIT_S >= CLOSE_WAIT_S + 0.5
