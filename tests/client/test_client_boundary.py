"""The client is a caller of the server, not a part of it: no server package imports `client`."""

import pytest

from support.imports import REPO, imports_of

SERVER_PACKAGES = ("stream", "pipeline", "signaling", "quota")
# The command line is where both meet: `facefuse cam` reads its flags and runs the client from there.
COMMAND_LINE = "signaling/cli.py: client.cam.cli"


@pytest.mark.parametrize("package", SERVER_PACKAGES)
def test_server_code_does_not_import_the_client(package):
    assert [found for found in imports_of(REPO / package, "client") if found != COMMAND_LINE] == []


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
