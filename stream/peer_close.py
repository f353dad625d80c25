"""Closing an aiortc peer connection without waiting on it forever.

aiortc's `RTCPeerConnection.close()` awaits every sender's, receiver's and transport's task in
turn, and such waits have stalled before (aiortc/aiortc#283, aiortc/aioice#12). A stalled close
must not keep a DELETE unanswered, a session listed, a server from shutting down or a test from
ending, so closing waits a bounded time and then leaves the connection behind.
"""

from __future__ import annotations

from aiortc import RTCPeerConnection

from stream.bounded_wait import finished_within

PEER_CLOSE_TIMEOUT_S = 5.0


async def close_peer(pc: RTCPeerConnection) -> bool:
    """True when the connection closed within PEER_CLOSE_TIMEOUT_S."""
    return await finished_within(pc.close(), PEER_CLOSE_TIMEOUT_S)
