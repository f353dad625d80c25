"""RedisStore: the QuotaStore of several server nodes sharing accounts on one Redis.

Every operation is one Lua script (quota/lua/, one EVALSHA round trip) over the
keys of one account (quota/redis_keys.py: one hash tag, so one Cluster slot), timed by
Redis `TIME`, never by this node's clock. Scripts are registered on this store's
own client (`register_script` reloads them after `SCRIPT FLUSH`). A Redis that
cannot be reached raises StoreUnavailable within a few seconds: metering fails
closed. Connections come from a bounded pool: an operation that finds every one
busy for `pool_timeout_s` fails closed the same way instead of opening more.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import redis.asyncio as aioredis
from redis.asyncio.connection import BlockingConnectionPool, parse_url
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from quota.errors import (
    BALANCE_LIMIT_MESSAGE,
    AccountExists,
    AccountNotFound,
    BalanceLimit,
    IdempotencyKeyReused,
    LeaseNotFound,
    NothingToSpend,
    StoreUnavailable,
    TooManyLeases,
    ViewTokenLimit,
)
from quota.redis_keys import AccountKeys, check_prefix, key_index, node_leases, view_token_index
from quota.settings import MAX_BALANCE_TOKENS, TierRules, to_micro
from quota.store import Account, Grant, ViewToken

HISTORY_LIMIT = 1000  # entries kept per account
MAX_CONNECTIONS = 16  # to Redis, per node: each operation holds one for one round trip
CREDIT_KEY_TTL_S = 30 * 24 * 3600  # how long a credit's idempotency key is remembered

# Error replies of a Redis that is up but cannot serve writes now.
_UNAVAILABLE_REPLIES = ("LOADING", "READONLY", "MASTERDOWN", "MISCONF", "OOM", "CLUSTERDOWN", "TRYAGAIN", "BUSY")

_SCRIPT_NAMES = (
    "create_account",
    "read_account",
    "get_account",
    "credit",
    "open_lease",
    "renew_lease",
    "close_lease",
    "history",
    "settle_lease",
    "add_view_token",
    "revoke_view_token",
)


LUA_DIR = Path(__file__).resolve().with_name("lua")


def _read_lua(name: str) -> str:
    return (LUA_DIR / f"{name}.lua").read_text(encoding="utf-8")


def _compose(name: str, ledger: str) -> str:
    """The script's header comment, then the shared ledger functions, then the script's body."""
    lines = _read_lua(name).splitlines(keepends=True)
    header = 0
    while header < len(lines) and lines[header].startswith("--"):
        header += 1
    return "".join(lines[:header]) + ledger + "".join(lines[header:])


def _load_scripts() -> dict[str, str]:
    ledger = _read_lua("ledger")
    return {name: _compose(name, ledger) for name in _SCRIPT_NAMES}


SCRIPTS: dict[str, str] = _load_scripts()  # Lua sources, read once at import


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _cap(rules: TierRules) -> int:
    return -1 if rules.hourly_cap is None else to_micro(rules.hourly_cap)


def _node_member(account_id: str, lease_id: str) -> str:
    return json.dumps([account_id, lease_id])


def _view_token(account_id: str, token_id: str, entry: str) -> tuple[ViewToken, str]:
    """A view token and its hash from its entry in the account's hash (quota/redis_keys.py)."""
    created_at, token_hash, stream = entry.split(":", 2)
    return ViewToken(token_id, account_id, stream, int(created_at) / 1_000_000), token_hash


def _grant(lease_id: str, reply: list[Any]) -> Grant:
    granted, held, balance, hour_left, open_leases = (int(v) for v in reply)
    return Grant(lease_id, granted, held, balance, None if hour_left < 0 else hour_left, open_leases)


def check_redis_url(url: str) -> None:
    """ValueError for a URL redis-py cannot use, or whose database is no number (redis-py would
    quietly use 0). The message leaves the URL out: it may hold a password."""
    try:
        parse_url(url)
    except ValueError as exc:
        raise ValueError(f"--redis-url: {exc}") from None
    database = urlparse(url).path.strip("/")
    if url.startswith(("redis://", "rediss://")) and database and not database.isdigit():
        raise ValueError(f"--redis-url: the database must be a number, not {database!r}")


class RedisStore:
    def __init__(
        self,
        url: str,
        prefix: str = "facefuse",
        *,
        hour_s: float = 3600.0,
        refill_period_s: float = 3600.0,
        socket_timeout_s: float = 2.0,
        history_limit: int = HISTORY_LIMIT,
        node_id: str = socket.gethostname(),
        max_connections: int = MAX_CONNECTIONS,
        pool_timeout_s: float = 2.0,
    ) -> None:
        """hour_s and refill_period_s serve the operations that are not given them
        (get_account, account_for_key, credit, history): pass the settings' values.
        node_id is recorded with each lease this store opens. At most max_connections are
        open to Redis; an operation waits at most pool_timeout_s for a free one."""
        if max_connections < 1:
            raise ValueError("the Redis connection pool needs at least 1 connection")
        self._prefix = check_prefix(prefix)
        self._hour_us = _us(hour_s)
        self._refill_period_us = _us(refill_period_s)
        self._history_limit = history_limit
        self._node_id = node_id
        self._node_leases = node_leases(self._prefix, node_id)
        # Bounded: a Redis that answers slowly made every waiting operation open a connection of its
        # own (31 open after 40 slow clients), each a file descriptor here and a client there.
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=pool_timeout_s,
            decode_responses=True,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=socket_timeout_s,
            health_check_interval=5,
            # one quick retry, for a pooled connection that died (a Redis restart); every
            # script is idempotent except create_account, which then reports AccountExists
            retry=Retry(ExponentialBackoff(cap=0.1, base=0.02), 1),
        )
        self._client = aioredis.Redis.from_pool(pool)  # closes the pool with the client
        self._scripts = {name: self._client.register_script(source) for name, source in SCRIPTS.items()}

    # -- running a script ----------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, what: str, account_id: str = "", lease_id: str = "") -> Iterator[None]:
        try:
            yield
        except (RedisConnectionError, RedisTimeoutError) as exc:  # BusyLoadingError and a busy pool too
            raise StoreUnavailable(f"quota store (Redis) unavailable during {what}: {exc}") from exc
        except ResponseError as exc:
            code, _, detail = str(exc).partition(" ")
            if code == "ACCOUNT_EXISTS":
                raise AccountExists(f"the account {account_id!r} exists") from None
            if code == "ACCOUNT_NOT_FOUND":
                raise AccountNotFound(f"no account {account_id!r}") from None
            if code == "LEASE_NOT_FOUND":
                raise LeaseNotFound(f"no open lease {lease_id!r}" + (f" ({detail})" if detail else "")) from None
            if code == "BALANCE_LIMIT":
                raise BalanceLimit(BALANCE_LIMIT_MESSAGE) from None
            if code == "TOO_MANY_LEASES":
                open_leases, max_sessions, frees_in_s = (int(n) for n in detail.split())
                raise TooManyLeases(open_leases, max_sessions, frees_in_s) from None
            if code == "NOTHING_TO_SPEND":
                raise NothingToSpend(detail) from None
            if code == "VIEW_TOKEN_LIMIT":
                raise ViewTokenLimit(int(detail)) from None
            if code in _UNAVAILABLE_REPLIES:
                raise StoreUnavailable(f"quota store (Redis) cannot serve {what}: {exc}") from exc
            raise

    async def _run(self, name: str, keys: list[str], args: list[Any], account_id: str, lease_id: str = "") -> Any:
        with self._errors(name, account_id, lease_id):
            return await self._scripts[name](keys=keys, args=args)

    def _keys(self, account_id: str) -> AccountKeys:
        return AccountKeys(self._prefix, account_id)

    @staticmethod
    def _account(account_id: str, reply: list[Any]) -> Account:
        tier, balance, key_hash, hour_used, created_at = reply
        return Account(account_id, tier, int(balance), key_hash, int(hour_used), int(created_at) / 1_000_000)

    # -- accounts ------------------------------------------------------------------------------
    async def create_account(self, account_id: str, tier: str, balance: int, key_hash: str) -> Account:
        if balance < 0:
            raise ValueError("the balance must be >= 0")
        # The index first: a failure in between leaves an index to no account (ignored by
        # account_for_key) and the retry succeeds, instead of an account no key finds.
        with self._errors("create_account"):
            await self._client.set(key_index(self._prefix, key_hash), account_id)
        keys = self._keys(account_id)
        reply = await self._run("create_account", [keys.account], [tier, balance, key_hash, self._hour_us], account_id)
        return self._account(account_id, reply)

    async def get_account(self, account_id: str, rules: TierRules) -> Account:
        keys = self._keys(account_id)
        reply = await self._run(
            "get_account",
            [keys.account, keys.open],
            [
                keys.lease_prefix,
                self._hour_us,
                to_micro(rules.refill_tokens),
                to_micro(rules.refill_max),
                self._refill_period_us,
            ],
            account_id,
        )
        return self._account(account_id, reply)

    async def tier_of(self, account_id: str) -> str:
        reply = await self._run("read_account", [self._keys(account_id).account], [self._hour_us], account_id)
        if reply is None:
            raise AccountNotFound(f"no account {account_id!r}")
        return self._account(account_id, reply).tier

    async def account_for_key(self, key_hash: str) -> Account | None:
        with self._errors("account_for_key"):
            account_id = await self._client.get(key_index(self._prefix, key_hash))
        if account_id is None:
            return None
        reply = await self._run("read_account", [self._keys(account_id).account], [self._hour_us], account_id)
        if reply is None:
            return None
        account = self._account(account_id, reply)
        return account if account.key_hash == key_hash else None  # an index left by a failed create

    async def credit(self, account_id: str, amount: int, idempotency_key: str) -> Account:
        if amount < 0:
            raise ValueError("a credit must be >= 0")
        keys = self._keys(account_id)
        with self._errors("credit", account_id):
            try:
                reply = await self._scripts["credit"](
                    keys=[keys.account, keys.history, keys.credit(idempotency_key)],
                    args=[
                        amount,
                        idempotency_key,
                        CREDIT_KEY_TTL_S,
                        self._history_limit,
                        keys.lease_prefix,
                        self._hour_us,
                        to_micro(MAX_BALANCE_TOKENS),
                    ],
                )
            except ResponseError as exc:
                code, _, original = str(exc).partition(" ")
                if code == "IDEMPOTENCY_KEY_REUSED":
                    raise IdempotencyKeyReused(idempotency_key, int(original)) from None
                raise
        return self._account(account_id, reply)

    # -- leases --------------------------------------------------------------------------------
    async def open_lease(
        self,
        account_id: str,
        lease_id: str,
        session_id: str,
        want: int,
        rules: TierRules,
        *,
        hour_s: float,
        refill_period_s: float,
        lease_ttl_s: float,
    ) -> Grant:
        if want < 0:
            raise ValueError("want must be >= 0")
        keys = self._keys(account_id)
        # The node's index first: a crash in between leaves an entry to no open lease (ignored when
        # settled), never an open lease the node's next run cannot find.
        member = _node_member(account_id, lease_id)
        with self._errors("open_lease"):
            await self._client.sadd(self._node_leases, member)
        try:
            reply = await self._run(
                "open_lease",
                [keys.account, keys.open, keys.history, keys.lease(lease_id)],
                [
                    lease_id,
                    session_id,
                    want,
                    int(rules.metered),
                    rules.max_sessions,
                    _cap(rules),
                    to_micro(rules.refill_tokens),
                    to_micro(rules.refill_max),
                    _us(refill_period_s),
                    _us(hour_s),
                    _us(lease_ttl_s),
                    self._history_limit,
                    keys.lease_prefix,
                    self._node_id,
                ],
                account_id,
                lease_id,
            )
        except (AccountNotFound, TooManyLeases, NothingToSpend):
            await self._forget_lease(member)  # refused: no lease was created
            raise
        return _grant(lease_id, reply)

    async def renew_lease(
        self,
        account_id: str,
        lease_id: str,
        seq: int,
        spent_total: int,
        want: int,
        rules: TierRules,
        *,
        hour_s: float,
        refill_period_s: float,
    ) -> Grant:
        if want < 0 or spent_total < 0:
            raise ValueError("want and spent_total must be >= 0")
        keys = self._keys(account_id)
        reply = await self._run(
            "renew_lease",
            [keys.account, keys.open, keys.lease(lease_id)],
            [
                lease_id,
                seq,
                spent_total,
                want,
                _cap(rules),
                to_micro(rules.refill_tokens),
                to_micro(rules.refill_max),
                _us(refill_period_s),
                _us(hour_s),
                keys.lease_prefix,
            ],
            account_id,
            lease_id,
        )
        return _grant(lease_id, reply)

    async def close_lease(
        self, account_id: str, lease_id: str, seq: int, spent_total: int, rules: TierRules, *, hour_s: float
    ) -> Grant:
        if spent_total < 0:
            raise ValueError("spent_total must be >= 0")
        keys = self._keys(account_id)
        reply = await self._run(
            "close_lease",
            [keys.account, keys.open, keys.lease(lease_id)],
            [lease_id, seq, spent_total, _cap(rules), _us(hour_s)],
            account_id,
            lease_id,
        )
        await self._forget_lease(_node_member(account_id, lease_id))
        return _grant(lease_id, reply)

    async def settle_node_leases(self) -> int:
        """Settles the leases this node id opened and did not close (its previous run's: call it at
        start, before this run opens any) as expiry would, at once instead of after their TTL."""
        with self._errors("settle_node_leases"):
            members = await self._client.smembers(self._node_leases)
        settled = 0
        for member in members:
            account_id, lease_id = json.loads(member)
            keys = self._keys(account_id)
            settled += await self._run(
                "settle_lease",
                [keys.account, keys.open, keys.lease(lease_id)],
                [lease_id, self._node_id, self._hour_us, keys.lease_prefix],
                account_id,
                lease_id,
            )
            await self._forget_lease(member)
        return settled

    async def _forget_lease(self, member: str) -> None:
        """Drops a lease from the node's index; one left behind only costs a look at the next start."""
        with contextlib.suppress(RedisError):
            await self._client.srem(self._node_leases, member)

    # -- history -------------------------------------------------------------------------------
    async def history(self, account_id: str, limit: int = 100) -> list[dict[str, Any]]:
        keys = self._keys(account_id)
        reply = await self._run(
            "history", [keys.account, keys.history, keys.open], [limit, keys.lease_prefix, self._hour_us], account_id
        )
        entries: list[dict[str, Any]] = []
        for row in reply:
            member = row[0]
            if member.startswith("s:"):
                _, session_id, spent, is_open, opened_at = row
                entries.append(
                    {
                        "kind": "session",
                        "lease_id": member[2:],
                        "session_id": session_id,
                        "spent": int(spent),
                        "open": bool(int(is_open)),
                        "at": int(opened_at) / 1_000_000,
                    }
                )
            else:
                _, amount, at, idempotency_key = member.split(":", 3)
                entries.append(
                    {
                        "kind": "credit",
                        "amount": int(amount),
                        "idempotency_key": idempotency_key,
                        "at": int(at) / 1_000_000,
                    }
                )
        return entries

    # -- view tokens ---------------------------------------------------------------------------
    async def add_view_token(
        self, account_id: str, token_id: str, stream: str, token_hash: str, limit: int
    ) -> ViewToken:
        # The index first, as for API keys: a failure in between leaves an index to no token
        # (ignored by view_token_for_hash), never a token no index finds.
        index = view_token_index(self._prefix, token_hash)
        with self._errors("add_view_token"):
            await self._client.set(index, json.dumps([account_id, token_id]))
        keys = self._keys(account_id)
        try:
            created_at = await self._run(
                "add_view_token",
                [keys.account, keys.view_tokens],
                [token_id, stream, token_hash, limit],
                account_id,
            )
        except (AccountNotFound, ViewTokenLimit):
            await self._forget(index)  # refused: no token was kept
            raise
        return ViewToken(token_id, account_id, stream, int(created_at) / 1_000_000)

    async def view_tokens(self, account_id: str) -> list[ViewToken]:
        with self._errors("view_tokens", account_id):
            entries = await self._client.hgetall(self._keys(account_id).view_tokens)
        tokens = [_view_token(account_id, token_id, entry)[0] for token_id, entry in entries.items()]
        return sorted(tokens, key=lambda token: (token.created_at, token.id))

    async def view_token_for_hash(self, token_hash: str) -> ViewToken | None:
        with self._errors("view_token_for_hash"):
            indexed = await self._client.get(view_token_index(self._prefix, token_hash))
            if indexed is None:
                return None
            account_id, token_id = json.loads(indexed)
            entry = await self._client.hget(self._keys(account_id).view_tokens, token_id)
        if entry is None:
            return None  # revoked, or an index left by a failed add
        token, stored_hash = _view_token(account_id, token_id, entry)
        return token if stored_hash == token_hash else None

    async def revoke_view_token(self, account_id: str, stream: str, token_id: str) -> bool:
        keys = self._keys(account_id)
        token_hash = await self._run("revoke_view_token", [keys.view_tokens], [token_id, stream], account_id)
        if token_hash is None:
            return False
        # the token is gone from the account's hash already: an index left behind finds nothing
        await self._forget(view_token_index(self._prefix, token_hash))
        return True

    async def _forget(self, key: str) -> None:
        with contextlib.suppress(RedisError):
            await self._client.delete(key)

    async def ping(self) -> None:
        """StoreUnavailable for any failure: a health check reads every refusal as the store being
        unusable (an ACL user without PING got NOPERM, which no other call maps, and /healthz a 500)."""
        try:
            with self._errors("ping"):
                await self._client.ping()
        except RedisError as exc:  # what _errors gives no meaning to
            raise StoreUnavailable(f"quota store (Redis) refused ping: {exc}") from exc

    async def aclose(self) -> None:
        await self._client.aclose()
