"""A private network inside a network namespace of its own (`unshare --net --map-root-user`),
for clients whose ICE agent never offers loopback addresses (libnice: simple-whip-client).

The namespace holds its own loopback plus a veth pair with two addresses of PRIVATE_NET, both
ends inside it: traffic between them never leaves the namespace, which has no route out.
"""

from __future__ import annotations

import subprocess

PRIVATE_NET = "10.200.0.0/24"
SERVER_ADDRESS = "10.200.0.1"
CLIENT_ADDRESS = "10.200.0.2"


def can_make_namespace() -> tuple[bool, str]:
    """Whether this machine lets an unprivileged process make a network namespace (and why not)."""
    try:
        done = subprocess.run(
            ["unshare", "--net", "--map-root-user", "ip", "link", "add", "ff0", "type", "veth", "peer", "name", "ff1"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return done.returncode == 0, done.stderr.strip()


def bring_up() -> None:
    """Inside a fresh namespace: loopback up, and the veth pair with the two addresses."""
    for command in (
        "ip link set lo up",
        "ip link add ff0 type veth peer name ff1",
        f"ip addr add {SERVER_ADDRESS}/24 dev ff0",
        f"ip addr add {CLIENT_ADDRESS}/24 dev ff1",
        "ip link set ff0 up",
        "ip link set ff1 up",
    ):
        subprocess.run(command.split(), check=True, capture_output=True)
