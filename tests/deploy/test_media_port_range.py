"""The compose file gives each node its media ports through its container's
net.ipv4.ip_local_port_range: aioice has no port-range setting and binds its sockets to port 0.
Checked with the server's own candidate gathering (stream/ice.py) in a network namespace of our
own, set up as docker sets up a node's: that range, one address."""

from __future__ import annotations

import json
import subprocess
import sys

from support.deploy_files import compose_nodes, port_range
from support.photos import REPO_ROOT
from support.private_network import can_make_namespace
from support.required import cannot_run_here

PEER_CONNECTIONS = 5

# A session's peer connection as the server makes it, the answerer to a client's offer (video and
# the events channel, bundled as browsers and OBS offer), candidates gathered on the --ice-host
# addresses only; prints the ports each answer offers.
GATHER = """
import asyncio, json
from aiortc import RTCPeerConnection
from stream.ice import IceSettings, restrict_gathering, rtc_configuration

def candidate_ports(description):
    lines = [line for line in description.sdp.splitlines() if line.startswith("a=candidate:")]
    return sorted({int(line.split()[5]) for line in lines})

async def main(count):
    settings = IceSettings(hosts=("127.0.0.1",))
    ports, connections = [], []
    for _ in range(count):
        client, server = RTCPeerConnection(rtc_configuration(settings)), RTCPeerConnection(rtc_configuration(settings))
        connections += [client, server]
        client.createDataChannel("events")
        client.addTransceiver("video", direction="sendrecv")
        offer = await client.createOffer()
        await restrict_gathering(client, settings)
        await client.setLocalDescription(offer)
        await server.setRemoteDescription(client.localDescription)
        answer = await server.createAnswer()
        await restrict_gathering(server, settings)
        await server.setLocalDescription(answer)
        ports.append(candidate_ports(server.localDescription))
    for pc in connections:
        await pc.close()
    print(json.dumps(ports))

asyncio.run(main(%d))
"""


def test_a_nodes_media_ports_come_from_its_namespaces_ephemeral_range():
    ok, why = can_make_namespace()
    if not ok:
        cannot_run_here(f"this machine does not let a process make a network namespace: {why}")
    node = compose_nodes()["node-a"]
    wanted = port_range(node["sysctls"]["net.ipv4.ip_local_port_range"])
    setup = f"ip link set lo up && sysctl -qw net.ipv4.ip_local_port_range='{wanted.start} {wanted.stop - 1}'"
    done = subprocess.run(
        [
            "unshare",
            "--net",
            "--map-root-user",
            "sh",
            "-c",
            f'{setup} && exec "$0" -c "$1"',
            sys.executable,
            GATHER % PEER_CONNECTIONS,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    ports = json.loads(done.stdout)

    # one UDP port per peer connection (BUNDLE, rtcp-mux, one address): the range's size is the
    # node's peer connections (sessions and WHEP viewers) at once, plus its TCP connections
    assert all(len(each) == 1 for each in ports), ports
    used = [each[0] for each in ports]
    assert len(set(used)) == PEER_CONNECTIONS and all(port in wanted for port in used), (used, wanted)
