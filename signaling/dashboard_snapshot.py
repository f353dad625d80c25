"""One snapshot of what a dashboard shows, sent about once a second on its event stream
(routes/events.py; the fields are docs/api.md's "Dashboard events").

The operator's snapshot lists the sessions of every node sharing the Redis (operator_sessions.py),
an account's its own sessions and streams on every node, the other nodes asked at most once a
second; the operator's has each session's and the device's share of the batches
(scheduler_shares.py).

Each part is what the API's own answer for it is (GET /api/account, /api/sessions/{id},
/api/streams, /api/faces), so the page's numbers match the API's. What fails while a snapshot is
built (the quota store not answering) is named in its `errors` in words a person understands, and
the last figures the store gave are shown meanwhile: the stream goes on.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from pipeline.device_memory import device_memory
from pipeline.faces import FaceStoreUnavailable
from quota.errors import AccountNotFound, StoreUnavailable
from quota.store import Account
from signaling.app_keys import ACCOUNTS, CLUSTER, DEVICE, RUNNER, SESSIONS
from signaling.cluster.node_registry import NodeRecord
from signaling.cluster.routing import account_elsewhere
from signaling.operator_sessions import ASK_TIMEOUT_S, sessions_here, sessions_on_other_nodes
from signaling.routes.account import describe
from signaling.routes.faces import describe_library
from signaling.routes.health import STORE_PING_TIMEOUT_S, readiness
from signaling.routes.streams import describe_streams, with_streams_elsewhere
from signaling.scheduler_shares import SCHEDULER_SHARES

# The most accounts the operator's view lists (those burning fastest).
MAX_NODE_ACCOUNTS = 100

STORE_UNAVAILABLE = {
    "code": "quota_store_unavailable",
    "message": "the token store is not answering: balances may be stale",
}
FACE_STORE_UNAVAILABLE = {
    "code": "face_store_unavailable",
    "message": "the face store is not answering: the face library may be stale",
}
ACCOUNT_GONE = {"code": "account_not_found", "message": "this account no longer exists"}
REGISTRY_UNAVAILABLE = {
    "code": "node_registry_unavailable",
    "message": "the node registry (Redis) is not answering: other nodes' sessions are not listed",
}
# The operator's snapshot asks the other nodes for their sessions at most this often.
ASK_NODES_EVERY_S = 1.0


def _node_silent(node_id: str) -> dict[str, str]:
    return {
        "code": "node_unreachable",
        "message": f"node {node_id} did not answer in time: its sessions are not listed",
    }


class DashboardSnapshots:
    """The snapshots of one open dashboard: an account's (its sessions and streams on every node,
    its faces) or, with `account` None, the operator's (every session on every node, and this node)."""

    def __init__(self, request: web.Request, account: Account | None) -> None:
        self._request = request
        self._app = request.app
        self._account_id = account.id if account is not None else None
        # the last figures the store gave, shown while it does not answer
        self._account = describe(request, account) if account is not None else None
        self._streams: list[dict[str, Any]] = []
        self._balances: dict[str, dict[str, Any]] = {}
        self._faces: list[dict[str, object]] = []
        # the other nodes as last asked (when, the registry's list, their sessions, errors): every
        # session for the operator, the account's sessions and streams for an account
        self._asked_nodes_at = float("-inf")
        self._nodes: list[NodeRecord] = []
        self._elsewhere: list[dict[str, Any]] = []
        self._streams_elsewhere: list[dict[str, Any]] = []  # the account's: live on the other nodes
        self._nodes_errors: list[dict[str, str]] = []

    async def build(self) -> dict[str, Any]:
        errors: list[dict[str, str]] = []
        account_id = self._account_id
        snapshot: dict[str, Any] = {
            "t": time.time(),
            "account": await self._account_now(errors) if account_id is not None else None,
            "sessions": [],  # below
            "streams": await self._streams_now(errors) if account_id is not None else None,
            "faces": await self._faces_now(errors) if account_id is not None else None,
        }
        if account_id is not None:
            await self._ask_other_nodes_of_account()
            errors.extend(self._nodes_errors)
            here = self._app[CLUSTER].id
            own = [{**session.snapshot(), "node_id": here} for session in self._app[SESSIONS].all(account_id)]
            snapshot["sessions"] = own + self._elsewhere
            snapshot["streams"] = with_streams_elsewhere(snapshot["streams"], self._streams_elsewhere)
        else:
            await self._ask_other_nodes()
            errors.extend(self._nodes_errors)
            snapshot["sessions"] = sessions_here(self._app) + self._elsewhere  # every node's, with node_id
            snapshot["node"] = await self._node(snapshot["sessions"], errors)
        snapshot["errors"] = _unique(errors)
        return snapshot

    async def _faces_now(self, errors: list[dict[str, str]]) -> list[dict[str, object]]:
        try:
            async with asyncio.timeout(STORE_PING_TIMEOUT_S):
                self._faces = await describe_library(self._request, self._account_id)
        except (FaceStoreUnavailable, TimeoutError):
            errors.append(FACE_STORE_UNAVAILABLE)
        return self._faces

    async def _account_now(self, errors: list[dict[str, str]]) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(STORE_PING_TIMEOUT_S):
                account = await self._app[ACCOUNTS].get(self._account_id)
        except (StoreUnavailable, TimeoutError):
            errors.append(STORE_UNAVAILABLE)
        except AccountNotFound:
            errors.append(ACCOUNT_GONE)
        else:
            self._account = describe(self._request, account)
        return self._account

    async def _streams_now(self, errors: list[dict[str, str]]) -> list[dict[str, Any]]:
        try:
            async with asyncio.timeout(STORE_PING_TIMEOUT_S):
                self._streams = await describe_streams(self._request, self._account_id)
        except (StoreUnavailable, TimeoutError):
            errors.append(STORE_UNAVAILABLE)
        return self._streams

    async def _node(self, sessions: list[dict[str, Any]], errors: list[dict[str, str]]) -> dict[str, Any]:
        runner = self._app[RUNNER]
        store_ok, rtt_ms = await self._ping_store()
        if not store_ok:
            errors.append(STORE_UNAVAILABLE)
        status = readiness(runner.running, store_ok)
        device = self._app[DEVICE]
        on_gpu = device.startswith("cuda")
        gpu_memory = device_memory(device) if on_gpu else None
        timer = getattr(runner.chain, "timer", None)  # face chains time their stages
        return {
            "ready": status == "ok",
            "status": status,
            "chain": runner.chain.name,
            "device": device,
            "scheduler": {**runner.stats(), "busy_share": self._app[SCHEDULER_SHARES].busy_share()},
            "chain_stages_ms": timer.means() if timer is not None else None,
            "capacity": self._app[SESSIONS].capacity.describe(self._app[SESSIONS].all()),
            "quota_store": {"ok": store_ok, "rtt_ms": rtt_ms},
            "memory": {
                "resident_bytes": device_memory("cpu").in_use_bytes,
                "device_bytes": gpu_memory.in_use_bytes if gpu_memory is not None else None,
                "device_peak_bytes": gpu_memory.peak_bytes if gpu_memory is not None else None,
            },
            "accounts": await self._accounts_by_burn_rate(sessions, store_ok),
            "node_id": self._app[CLUSTER].id,
            "nodes": [node.describe() for node in self._nodes],
        }

    def _time_to_ask_nodes(self) -> bool:
        """At most once a second (ASK_NODES_EVERY_S), for the account's snapshot and the operator's alike."""
        now = time.monotonic()
        if now - self._asked_nodes_at < ASK_NODES_EVERY_S:
            return False
        self._asked_nodes_at = now
        return True

    async def _ask_other_nodes_of_account(self) -> None:
        """The account's sessions and streams on the other nodes, asked at most once a second."""
        if not self._time_to_ask_nodes():
            return
        try:
            async with asyncio.timeout(STORE_PING_TIMEOUT_S + ASK_TIMEOUT_S):  # the directory, then the nodes
                sessions, streams, silent = await account_elsewhere(self._request, self._account_id, ASK_TIMEOUT_S)
        except (StoreUnavailable, TimeoutError):
            self._nodes_errors = [REGISTRY_UNAVAILABLE]
            self._elsewhere, self._streams_elsewhere = [], []
            return
        self._elsewhere, self._streams_elsewhere = sessions, streams
        self._nodes_errors = [_node_silent(node_id) for node_id in silent]

    async def _ask_other_nodes(self) -> None:
        """The registry's nodes and the other nodes' sessions, asked at most once a second."""
        if not self._time_to_ask_nodes():
            return
        try:
            self._nodes = await self._app[CLUSTER].live_nodes()
        except StoreUnavailable:
            self._nodes_errors = [REGISTRY_UNAVAILABLE]
            self._elsewhere = []
            return
        self._elsewhere, silent = await sessions_on_other_nodes(self._request, self._nodes)
        self._nodes_errors = [_node_silent(node_id) for node_id in silent]

    async def _ping_store(self) -> tuple[bool, float | None]:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(STORE_PING_TIMEOUT_S):
                await self._app[ACCOUNTS].store.ping()
        except (StoreUnavailable, TimeoutError):
            return False, None
        return True, round((time.perf_counter() - started) * 1000, 2)

    async def _accounts_by_burn_rate(self, sessions: list[dict[str, Any]], store_ok: bool) -> list[dict[str, Any]]:
        """The accounts with sessions listed (on any node), fastest burning first. The store lists no
        accounts, and one with no session burns nothing; balances are the last the store gave while
        it does not answer."""
        ids = {session["account_id"] for session in sessions if session["account_id"] is not None}
        if store_ok:
            found = await asyncio.gather(*(self._described(account_id) for account_id in ids))
            self._balances = {entry["id"]: entry for entry in found if entry is not None}
        described = [self._balances[account_id] for account_id in ids if account_id in self._balances]
        described.sort(key=lambda entry: entry["burn_rate"], reverse=True)
        return described[:MAX_NODE_ACCOUNTS]

    async def _described(self, account_id: str) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(STORE_PING_TIMEOUT_S):
                account = await self._app[ACCOUNTS].get(account_id)
        except (StoreUnavailable, TimeoutError, AccountNotFound):
            return None
        entry = describe(self._request, account)
        return {key: entry[key] for key in ("id", "tier", "balance", "burn_rate", "active_sessions")}


def _unique(errors: list[dict[str, str]]) -> list[dict[str, str]]:
    """One of each: the store down fails the account, the streams and the ping alike."""
    return list({(error["code"], error["message"]): error for error in errors}.values())
