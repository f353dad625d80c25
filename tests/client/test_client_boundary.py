"""The client is a caller of the server, not a part of it: no server package imports `client`."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVER_PACKAGES = ("stream", "pipeline", "signaling", "quota")


def imports_of(package_dir: Path, top_level: str) -> list[str]:
    """'file: module' for each import of `top_level` (or anything under it) in the package's sources."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            name = path.relative_to(REPO)
            found += [f"{name}: {module}" for module in modules if module.split(".")[0] == top_level]
    return found


@pytest.mark.parametrize("package", SERVER_PACKAGES)
def test_server_code_does_not_import_the_client(package):
    assert imports_of(REPO / package, "client") == []


def test_the_client_helpers_live_only_in_the_client():
    """One copy of each: a helper the server needed would stay server-side and be imported from there."""
    helpers = {"facefuse_client.py", "image_track.py", "still_picture.py", "frame_stamp.py", "client.py"}
    server_copies = [
        str(path.relative_to(REPO))
        for package in SERVER_PACKAGES
        for path in (REPO / package).rglob("*.py")
        if path.name in helpers
    ]
    assert server_copies == []
