"""ICE consent freshness (RFC 7675) in which media arriving from the peer counts as its answer.

aioice checks consent every CONSENT_INTERVAL (5 s, randomised by ±20 %) and closes the connection
after CONSENT_FAILURES (6) checks in a row go unanswered. Some WHIP clients never answer them while
their media keeps arriving over the same candidate pair: FFmpeg 9's WHIP muxer was cut 33 s after
ICE completed (bench/results/2026-12-07-ffmpeg-whip.md). Servers in this role either are ICE-lite
(no checks at all) or keep a connection whose media keeps coming.

Here a round of checks also passes when the nominated pair's remote address sent us anything since
the round before: a peer that neither answers nor sends for six rounds (about 30 s) still loses
its connection, as before. Datagrams from any other address count for nothing, so a third party
cannot keep the connection alive by sending to our port.

The consent loop is aioice's own `Connection.query_consent`, replaced on the instance; it reaches
the Connection's nominated pairs and its task attribute (stream/aiortc_internals/touched.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

from aioice import stun
from aioice.ice import CONSENT_FAILURES, CONSENT_INTERVAL, CandidatePair, Connection, StunProtocol

logger = logging.getLogger(__name__)

# Our mark on a Connection whose consent loop is already replaced, and on a protocol whose
# datagrams are already noted.
_CONSENT_MARK = "_facefuse_consent_by_media"
_HEARD_MARK = "_facefuse_last_heard"


def count_media_as_consent(
    connection: Connection, interval_s: float = CONSENT_INTERVAL, max_failures: int = CONSENT_FAILURES
) -> None:
    """Replaces `connection`'s consent loop with one in which media from the peer counts as an
    answer; a check every `interval_s` (±20 %), closed after `max_failures` rounds in a row with
    neither an answer nor media (aioice's own figures unless a test shortens them). Call before
    ICE completes (aioice starts the loop once it has)."""
    if getattr(connection, _CONSENT_MARK, False):
        return
    setattr(connection, _CONSENT_MARK, True)
    connection.query_consent = lambda: _query_consent(connection, interval_s, max_failures)  # type: ignore[method-assign]


async def _query_consent(connection: Connection, interval_s: float, max_failures: int) -> None:
    assert connection.remote_password is not None  # as aioice: the loop starts after connect()
    integrity_key = connection.remote_password.encode("utf8")
    last_heard = {id(pair): _heard_from(pair) for pair in connection._nominated.values()}
    failures = 0
    round_started = time.monotonic()
    while True:
        await asyncio.sleep(interval_s * (0.8 + 0.4 * random.random()))
        previous_round, round_started = round_started, time.monotonic()
        for pair in connection._nominated.values():
            heard = last_heard.setdefault(id(pair), _heard_from(pair))
            request = connection.build_request(pair, nominate=False)
            try:
                await pair.protocol.request(request, pair.remote_addr, integrity_key=integrity_key, retransmissions=0)
                failures = 0
            except stun.TransactionError:
                failures = 0 if heard() >= previous_round else failures + 1
            if failures >= max_failures:
                logger.info(
                    "ICE consent expired: %d checks unanswered and no media from %s", failures, pair.remote_addr
                )
                connection._query_consent_task = None  # close() would otherwise wait for this very task
                await connection.close()
                return


def _heard_from(pair: CandidatePair) -> Callable[[], float]:
    """When `pair`'s remote address last sent anything to its local socket (monotonic seconds;
    the time the noting began, to start with)."""
    protocol: StunProtocol = pair.protocol
    remote = pair.remote_addr
    marks: dict[tuple[str, int], list[float]] = getattr(protocol, _HEARD_MARK, None) or {}
    if not hasattr(protocol, _HEARD_MARK):
        setattr(protocol, _HEARD_MARK, marks)
        datagram_received = protocol.datagram_received

        def noted(data: bytes, addr: tuple) -> None:
            if (stamp := marks.get(addr[:2])) is not None:
                stamp[0] = time.monotonic()
            datagram_received(data, addr)

        protocol.datagram_received = noted  # type: ignore[method-assign]
    stamp = marks.setdefault(tuple(remote[:2]), [time.monotonic()])
    return lambda: stamp[0]
