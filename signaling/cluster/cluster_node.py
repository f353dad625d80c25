"""This node in the cluster: its heartbeat (its record, its sessions in the directory, the other
nodes' records read back), and the questions the routes ask (where does a new session go, which
node holds this session or stream, the account's sessions on the other nodes)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator

import aiohttp
from redis.exceptions import RedisError

from pipeline.runner import BatchRunner
from quota.errors import StoreUnavailable
from signaling.cluster.node_registry import HEARTBEAT_S, MemoryNodeRegistry, NodeRecord, RedisNodeRegistry
from signaling.cluster.peer_health import CONNECTIONS_PER_PEER, PeerHealth
from signaling.cluster.placement import better_node
from signaling.cluster.session_directory import DirectoryEntry, MemoryDirectory, RedisDirectory
from stream.manager import SessionManager
from stream.session import Session

logger = logging.getLogger(__name__)

# How long a stopping node waits to take itself and its sessions out of Redis; past that they
# expire with their TTL (10 s), which is what a crash leaves too.
LEAVE_WAIT_S = 1.0


@contextlib.contextmanager
def _store_errors(what: str) -> Iterator[None]:
    try:
        yield
    except (RedisError, OSError) as exc:
        raise StoreUnavailable(f"the session directory (Redis) is unavailable during {what}: {exc}") from exc


def _entry(session: Session, node_id: str) -> DirectoryEntry:
    return DirectoryEntry(session.id, session.account_id, node_id, session.stream)


class ClusterNode:
    def __init__(
        self,
        node_id: str,
        url: str,
        registry: MemoryNodeRegistry | RedisNodeRegistry,
        directory: MemoryDirectory | RedisDirectory,
        sessions: SessionManager,
        runner: BatchRunner,
        device: str,
        hop_secret: str,
    ) -> None:
        self.id = node_id
        self.url = url
        self._registry = registry
        self._directory = directory
        self._sessions = sessions
        self._runner = runner
        self._device = device
        self._draining = False
        self._nodes: dict[str, NodeRecord] = {}  # the live nodes as of the last heartbeat
        self._registered: dict[str, DirectoryEntry] = {}  # this node's sessions in the directory
        self._task: asyncio.Task[None] | None = None
        self._last_beat: tuple[float, int] | None = None  # (monotonic time, the runner's batches then)
        self._busy_share: float | None = None
        self.http: aiohttp.ClientSession | None = None  # forwarded requests
        self.hop_secret = hop_secret  # signs and checks forwarded requests (signaling/cluster/hops.py)
        self.peers = PeerHealth()  # which other nodes answer forwarded requests

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        # one pool, bounded per peer: a node that never answers holds its connections and no more
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, limit_per_host=CONNECTIONS_PER_PEER))
        await self.beat()
        self._task = asyncio.ensure_future(self._beat_forever())
        self._task.set_name("cluster heartbeat")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        try:  # at worst they expire with the TTL: a Redis that does not answer must not hold up the stop
            await asyncio.wait_for(self._leave(), LEAVE_WAIT_S)
        except (TimeoutError, RedisError, OSError) as exc:
            logger.warning("node %s: left the registry by its TTL, not at once: %s", self.id, exc)
        if self.http is not None:
            await self.http.close()

    @property
    def draining(self) -> bool:
        """Set here or by the node's drain (signaling/drain.py marks the session manager)."""
        return self._draining or self._sessions.draining

    async def _leave(self) -> None:
        await self._directory.remove(list(self._registered.values()))
        await self._registry.leave(self.id)

    def set_draining(self, draining: bool = True) -> None:
        """A draining node takes no new sessions: placement sends them elsewhere, and the other
        nodes read it from the next heartbeat's record."""
        self._draining = draining

    # -- the heartbeat ------------------------------------------------------------------------
    def record(self) -> NodeRecord:
        """This node as it is now (not as of the last beat)."""
        stats = self._runner.stats()
        capacity = self._sessions.capacity.describe(self._sessions.all())
        processed, headroom = int(capacity["processed"]), int(capacity["fits_more"]["480p"])  # type: ignore[call-overload, index]
        return NodeRecord(
            id=self.id,
            url=self.url,
            capacity=processed + headroom,
            sessions=processed,
            headroom=headroom,
            waiting=int(capacity["waiting"]),  # type: ignore[call-overload]
            chain=self._runner.chain.name,
            device=self._device,
            draining=self.draining,
            chain_ms_p50=stats["chain_ms"]["p50"],  # type: ignore[index]
            batches=int(stats["batches"]),  # type: ignore[arg-type]
            chain_busy_share=self._busy_share,
            heartbeat_at=time.time(),
        )

    async def beat(self) -> None:
        """Writes this node's record, refreshes its sessions in the directory (and drops the ended
        ones), and reads the live nodes back."""
        self._measure_busy_share()
        live = {session.id: _entry(session, self.id) for session in self._sessions.all()}
        gone = [entry for session_id, entry in self._registered.items() if session_id not in live]
        try:
            await self._registry.beat(self.record())
            await self._directory.remove(gone)
            await self._directory.register(live.values())
            self._registered = live
            self._nodes = {node.id: node for node in await self._registry.live()}
        except (RedisError, OSError) as exc:  # the next beat tries again; the records expire meanwhile
            logger.warning("cluster heartbeat failed: %s", exc)

    def _measure_busy_share(self) -> None:
        stats = self._runner.stats()
        now, batches, chain_ms = time.monotonic(), int(stats["batches"]), stats["chain_ms"]["p50"]  # type: ignore[arg-type, index]
        if self._last_beat is not None and now > self._last_beat[0]:
            ran = batches - self._last_beat[1]
            self._busy_share = round(min(1.0, ran * (chain_ms or 0.0) / 1000 / (now - self._last_beat[0])), 3)
        self._last_beat = (now, batches)

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            await self.beat()

    # -- what the routes ask ------------------------------------------------------------------
    async def live_nodes(self) -> list[NodeRecord]:
        """Read now, not from the last beat (GET /api/admin/nodes); this node's record is fresh."""
        with _store_errors("listing the nodes"):
            nodes = {node.id: node for node in await self._registry.live()}
        nodes[self.id] = self.record()
        return sorted(nodes.values(), key=lambda node: node.id)

    async def place_new_session(self) -> NodeRecord | None:
        """The node a new session should go to instead, or None to open it here. The other nodes are
        as the last heartbeat read them, unless this node cannot take the session: then they are read
        now, for a node that joined since (a node that just started knew of none yet)."""
        here = self.record()
        node = better_node(here, self._answering_nodes())
        if node is None and here.free_share == 0:
            with contextlib.suppress(RedisError, OSError):  # else: answered here, as a lone node would
                self._nodes = {node.id: node for node in await self._registry.live()}
                node = better_node(here, self._answering_nodes())
        return node

    def _answering_nodes(self) -> list[NodeRecord]:
        """The live nodes, less those marked unhealthy: a client sent there by 307 would not get in."""
        unhealthy = self.peers.unhealthy()
        return [node for node in self._nodes.values() if node.id not in unhealthy]

    async def session_opened(self, session: Session) -> None:
        """In the directory at once, so another node finds it before the next heartbeat. A Redis
        that does not answer does not fail the session: the next heartbeat registers it."""
        entry = _entry(session, self.id)
        try:
            await self._directory.register([entry])
        except (RedisError, OSError) as exc:
            logger.warning("session %s: not in the directory until the next heartbeat: %s", session.id, exc)
            return
        self._registered[session.id] = entry

    async def session_closed(self, session: Session) -> None:
        entry = self._registered.pop(session.id, None)
        if entry is not None:
            with contextlib.suppress(RedisError, OSError):  # else it expires with the TTL
                await self._directory.remove([entry])

    async def other_node(self, node_id: str) -> NodeRecord | None:
        """A live node other than this one; a node that joined since the last beat is read now."""
        if node_id == self.id:
            return None
        if node_id not in self._nodes:
            with _store_errors("reading the nodes"):
                self._nodes = {node.id: node for node in await self._registry.live()}
        return self._nodes.get(node_id)

    def knows_other_nodes(self) -> bool:
        """Whether the last heartbeat (or look-up) saw another live node."""
        return any(node_id != self.id for node_id in self._nodes)

    async def session_owner(self, session_id: str) -> NodeRecord | None:
        """The other node holding the session; None when it is here or nowhere."""
        with _store_errors("looking up a session"):
            entry = await self._directory.owner(session_id)
        return await self.other_node(entry.node_id) if entry is not None else None

    async def stream_holder(self, account_id: str | None, stream: str) -> tuple[NodeRecord, str] | None:
        """The other node holding the session published under the account's stream name, and that
        session's id."""
        with _store_errors("looking up a stream"):
            entry = await self._directory.stream_owner(account_id, stream)
        node = await self.other_node(entry.node_id) if entry is not None else None
        return (node, entry.session_id) if node is not None and entry is not None else None

    async def nodes_with_sessions_of(self, account_id: str | None) -> list[NodeRecord]:
        """The other live nodes holding some of the account's sessions; dead nodes' entries dropped."""
        with _store_errors("listing the account's sessions"):
            by_session = await self._directory.account_sessions(account_id)
            nodes = {node.id: node for node in await self._registry.live()}
            dead = [session_id for session_id, node_id in by_session.items() if node_id not in nodes]
            await self._directory.drop_sessions(account_id, dead)
        self._nodes = nodes
        holding = {node_id for node_id in by_session.values() if node_id != self.id}
        return [nodes[node_id] for node_id in sorted(holding) if node_id in nodes]
