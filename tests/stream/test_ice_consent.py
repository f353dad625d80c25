"""ICE consent by media (stream/aiortc_internals/consent.py) between two real aioice connections on
127.0.0.1, with the checks every 0.2 s instead of 5 s: a peer that answers no consent check keeps
its connection while it sends, loses it once it stops, and a third party's datagrams to the same
port keep nothing alive."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator

from aioice import Connection
from aioice.ice import ConnectionClosed

from stream.aiortc_internals import (
    count_media_as_consent,
    gather_candidates_on,
    guard_incoming_checks,
    publish_candidates,
)

INTERVAL_S = 0.2
FAILURES = 3
# Closed once FAILURES rounds in a row saw nothing; the two rounds whose windows (each from the
# round before's start) still held the last media go first. Each round is at most 1.2 intervals
# and an unanswered check's wait (aioice's STUN timeout, 0.5 s); twice that for a slow machine.
CHECK_TIMEOUT_S = 0.5
CLOSES_WITHIN_S = 2 * (FAILURES + 2) * (1.2 * INTERVAL_S + CHECK_TIMEOUT_S)
HELD_S = 3.0  # 15 rounds: five times what it takes to close


async def connected_pair(peer_answers: bool) -> tuple[Connection, Connection]:
    """A (the server, consent by media) and B (the peer) connected over 127.0.0.1; from then on B
    answers the server's consent checks or not."""
    server, peer = Connection(ice_controlling=False), Connection(ice_controlling=True)
    count_media_as_consent(server, interval_s=INTERVAL_S, max_failures=FAILURES)
    # the peer's own checks would count as signs of life: it sends none during a test
    count_media_as_consent(peer, interval_s=3600)
    for connection in (server, peer):
        publish_candidates(connection, await gather_candidates_on(connection, ["127.0.0.1"]))
    for this, other in ((server, peer), (peer, server)):
        this.remote_username, this.remote_password = other.local_username, other.local_password
        for candidate in other.local_candidates:
            await this.add_remote_candidate(candidate)
        await this.add_remote_candidate(None)
    await asyncio.gather(server.connect(), peer.connect())
    if not peer_answers:
        guard_incoming_checks(peer, lambda _host: False)
    return server, peer


@contextlib.asynccontextmanager
async def connected(peer_answers: bool = False) -> AsyncIterator[tuple[Connection, Connection, asyncio.Task[None]]]:
    """The pair, and a task that ends when the server's connection closes."""
    server, peer = await connected_pair(peer_answers)
    closed = asyncio.ensure_future(until_closed(server))
    try:
        yield server, peer, closed
    finally:
        await asyncio.gather(server.close(), peer.close())
        await asyncio.wait([closed], timeout=5)


async def until_closed(connection: Connection) -> None:
    while (event := await connection.get_event()) is not None and not isinstance(event, ConnectionClosed):
        pass


async def closed_within(closed: asyncio.Task[None], seconds: float) -> bool:
    done, _ = await asyncio.wait([closed], timeout=seconds)
    return bool(done)


async def keep_sending(connection: Connection, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await connection.send(b"\x80media")  # not STUN: media, as RTP's first byte says
        await asyncio.sleep(0.05)


async def test_a_peer_that_answers_no_check_keeps_its_connection_while_its_media_arrives():
    async with connected() as (_server, peer, closed):
        sending = asyncio.ensure_future(keep_sending(peer, HELD_S))
        assert not await closed_within(closed, HELD_S), "closed while the peer's media kept arriving"
        await sending
        # its media stops: closed after the same unanswered rounds as aioice's own rule
        started = time.monotonic()
        assert await closed_within(closed, CLOSES_WITHIN_S), f"open {CLOSES_WITHIN_S:.1f} s after the media stopped"
        print(f"\nclosed {time.monotonic() - started:.2f} s after the peer's media stopped")


async def test_datagrams_from_another_address_do_not_count_as_consent():
    async with connected() as (server, _peer, closed):
        listening = server.local_candidates[0]
        stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        stranger.bind(("127.0.0.1", 0))
        stranger.setblocking(False)

        async def spray() -> None:
            while True:
                stranger.sendto(b"\x80media", (listening.host, listening.port))
                await asyncio.sleep(0.05)

        spraying = asyncio.ensure_future(spray())
        try:
            assert await closed_within(closed, CLOSES_WITHIN_S), "a third party's datagrams kept the connection"
        finally:
            spraying.cancel()
            await asyncio.gather(spraying, return_exceptions=True)
            stranger.close()


async def test_a_peer_that_answers_its_checks_keeps_its_connection_without_media():
    async with connected(peer_answers=True) as (_server, _peer, closed):
        assert not await closed_within(closed, HELD_S)
