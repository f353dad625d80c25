"""MemoryStore: the QuotaStore of a single server, in memory (the embedded default).

The same rules as the Lua scripts of RedisStore (quota/lua/ledger.lua and one
script per operation), in integer micro-tokens and microseconds of `clock`.
Every operation runs without an await, so on one event loop each is atomic.
"""

from __future__ import annotations

import math
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from quota.errors import (
    BALANCE_LIMIT_MESSAGE,
    AccountExists,
    AccountNotFound,
    BalanceLimit,
    IdempotencyKeyReused,
    LeaseNotFound,
    NothingToSpend,
    TooManyLeases,
    ViewTokenLimit,
)
from quota.settings import MAX_BALANCE_TOKENS, TierRules, to_micro
from quota.store import Account, Grant, ViewToken

HISTORY_LIMIT = 1000  # entries kept per account
CREDIT_KEY_TTL_S = 30 * 24 * 3600  # how long a credit's idempotency key is remembered


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _cap(rules: TierRules) -> int | None:
    return None if rules.hourly_cap is None else to_micro(rules.hourly_cap)


@dataclass
class _Lease:
    lease_id: str
    session_id: str
    granted_total: int
    metered: bool
    opened_at: int
    ttl_us: int
    node_id: str
    spent_total: int = 0
    seq: int = 0
    last_seen: int = 0
    open: bool = True
    closed_by: str | None = None  # "close", "expiry" or "node_restart"
    first: Grant | None = None  # the open's grant
    last: Grant | None = None  # the grant of the operation numbered seq

    @property
    def expires_at(self) -> int:
        return self.last_seen + self.ttl_us


@dataclass
class _Account:
    id: str
    tier: str
    balance: int
    key_hash: str
    hour_window: int
    refilled_at: int
    created_at: int
    hour_used: int = 0
    leases: dict[str, _Lease] = field(default_factory=dict)
    open: dict[str, _Lease] = field(default_factory=dict)
    history: deque[tuple[str, Any]] = field(default_factory=deque)  # ("credit", dict) or ("session", lease id)
    credit_keys: dict[str, tuple[int, int]] = field(default_factory=dict)  # idempotency key -> (when (us), amount)
    view_tokens: dict[str, tuple[ViewToken, str]] = field(default_factory=dict)  # token id -> (token, its hash)

    # -- the ledger (mirrors quota/lua/ledger.lua) --------------------------------------------
    def roll_window(self, now: int, hour_us: int) -> None:
        window = now // hour_us
        if window != self.hour_window:
            self.hour_window = window
            self.hour_used = 0

    def used_now(self, now: int, hour_us: int) -> int:
        return 0 if now // hour_us != self.hour_window else self.hour_used

    def hour_left(self, cap: int | None) -> int | None:
        return None if cap is None else max(0, cap - self.hour_used)

    def hour_left_now(self, now: int, hour_us: int, cap: int | None) -> int | None:
        return None if cap is None else max(0, cap - self.used_now(now, hour_us))

    def refill(self, now: int, refill_micro: int, refill_max: int, period_us: int) -> None:
        if refill_micro <= 0 or period_us <= 0 or self.balance >= refill_max:
            self.refilled_at = now
            return
        add = (now - self.refilled_at) * refill_micro // period_us
        if add <= 0:
            return  # keep refilled_at: fractions accumulate
        self.balance = min(refill_max, self.balance + add)
        self.refilled_at = now

    def grantable(self, want: int, metered: bool, cap: int | None) -> int:
        if not metered:
            return want
        available = self.balance if cap is None else min(self.balance, cap - self.hour_used)
        return max(0, min(want, available))

    def refund(self, amount: int, metered: bool) -> None:
        if metered and amount > 0:
            self.balance += amount
            self.hour_used = max(0, self.hour_used - amount)

    def settle(self, lease: _Lease, closed_by: str) -> None:
        """As the store settles a lease it stopped hearing from: spent up to the last renewal."""
        self.refund(lease.granted_total - lease.spent_total, lease.metered)
        lease.open, lease.closed_by = False, closed_by
        del self.open[lease.lease_id]

    def settle_expired(self, now: int) -> None:
        for lease in [lease for lease in self.open.values() if lease.expires_at <= now]:
            self.settle(lease, "expiry")

    def frees_in_s(self, now: int) -> int:
        """Seconds until the soonest open lease expires (unless renewed), rounded up."""
        if not self.open:
            return 0  # a tier of no sessions at all
        soonest = min(lease.expires_at for lease in self.open.values())
        return max(1, math.ceil((soonest - now) / 1_000_000))

    def add_history(self, entry: tuple[str, Any], limit: int) -> None:
        self.history.append(entry)
        while len(self.history) > limit:
            kind, value = self.history.popleft()
            if kind == "session" and not self.leases[value].open:
                del self.leases[value]

    def grant(self, lease_id: str, granted: int, held: int, cap: int | None) -> Grant:
        return Grant(lease_id, granted, held, self.balance, self.hour_left(cap), len(self.open))

    def snapshot(self, now: int, hour_us: int) -> Account:
        return Account(
            self.id, self.tier, self.balance, self.key_hash, self.used_now(now, hour_us), self.created_at / 1_000_000
        )


class MemoryStore:
    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        *,
        hour_s: float = 3600.0,
        refill_period_s: float = 3600.0,
        history_limit: int = HISTORY_LIMIT,
        node_id: str = socket.gethostname(),
    ) -> None:
        """hour_s and refill_period_s serve the operations that are not given them
        (get_account, account_for_key, credit, history): pass the settings' values.
        node_id is recorded with each lease this store opens."""
        self._node_id = node_id
        self._clock = clock
        self._hour_us = _us(hour_s)
        self._refill_period_us = _us(refill_period_s)
        self._history_limit = history_limit
        self._accounts: dict[str, _Account] = {}
        self._key_index: dict[str, str] = {}
        self._view_token_index: dict[str, tuple[str, str]] = {}  # token hash -> (account id, token id)

    def _now(self) -> int:
        return _us(self._clock())

    def _account(self, account_id: str) -> _Account:
        try:
            return self._accounts[account_id]
        except KeyError:
            raise AccountNotFound(f"no account {account_id!r}") from None

    # -- accounts ------------------------------------------------------------------------------
    async def create_account(self, account_id: str, tier: str, balance: int, key_hash: str) -> Account:
        if balance < 0:
            raise ValueError("the balance must be >= 0")
        if account_id in self._accounts:
            raise AccountExists(f"the account {account_id!r} exists")
        now = self._now()
        account = _Account(account_id, tier, balance, key_hash, now // self._hour_us, now, now)
        self._accounts[account_id] = account
        self._key_index[key_hash] = account_id
        return account.snapshot(now, self._hour_us)

    async def get_account(self, account_id: str, rules: TierRules) -> Account:
        account = self._account(account_id)
        now = self._now()
        account.roll_window(now, self._hour_us)
        account.refill(now, to_micro(rules.refill_tokens), to_micro(rules.refill_max), self._refill_period_us)
        account.settle_expired(now)
        return account.snapshot(now, self._hour_us)

    async def tier_of(self, account_id: str) -> str:
        return self._account(account_id).tier

    async def account_for_key(self, key_hash: str) -> Account | None:
        account = self._accounts.get(self._key_index.get(key_hash, ""))
        if account is None or account.key_hash != key_hash:
            return None
        return account.snapshot(self._now(), self._hour_us)

    async def credit(self, account_id: str, amount: int, idempotency_key: str) -> Account:
        if amount < 0:
            raise ValueError("a credit must be >= 0")
        account = self._account(account_id)
        now = self._now()
        credited_at, original = account.credit_keys.get(idempotency_key, (None, amount))
        if credited_at is not None and now - credited_at < _us(CREDIT_KEY_TTL_S):
            if original != amount:
                raise IdempotencyKeyReused(idempotency_key, original)
        else:
            if account.balance + amount > to_micro(MAX_BALANCE_TOKENS):
                raise BalanceLimit(BALANCE_LIMIT_MESSAGE)
            account.credit_keys[idempotency_key] = (now, amount)
            account.balance += amount
            entry = {"kind": "credit", "amount": amount, "idempotency_key": idempotency_key, "at": now / 1_000_000}
            account.add_history(("credit", entry), self._history_limit)
        return account.snapshot(now, self._hour_us)

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
        account = self._account(account_id)
        existing = account.leases.get(lease_id)
        if existing is not None:
            assert existing.first is not None
            return existing.first
        cap, now = _cap(rules), self._now()
        account.roll_window(now, _us(hour_s))
        account.refill(now, to_micro(rules.refill_tokens), to_micro(rules.refill_max), _us(refill_period_s))
        account.settle_expired(now)
        if len(account.open) >= rules.max_sessions:
            raise TooManyLeases(len(account.open), rules.max_sessions, account.frees_in_s(now))
        granted = account.grantable(want, rules.metered, cap)
        if rules.metered and granted <= 0:
            raise NothingToSpend("no tokens left" if account.balance <= 0 else "the hourly allowance is used up")
        if rules.metered:
            account.balance -= granted
            account.hour_used += granted
        lease = _Lease(
            lease_id, session_id, granted, rules.metered, now, _us(lease_ttl_s), self._node_id, last_seen=now
        )
        account.leases[lease_id] = account.open[lease_id] = lease
        account.add_history(("session", lease_id), self._history_limit)
        lease.first = lease.last = account.grant(lease_id, granted, granted, cap)
        return lease.first

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
        account = self._accounts.get(account_id)
        lease = None if account is None else account.leases.get(lease_id)
        if account is None or lease is None or not lease.open:
            raise LeaseNotFound(f"no open lease {lease_id!r}")
        cap, hour_us, now = _cap(rules), _us(hour_s), self._now()
        expired = lease.expires_at <= now
        if not expired and seq <= lease.seq:
            if seq == lease.seq:
                assert lease.last is not None
                return lease.last
            held = max(0, lease.granted_total - lease.spent_total)
            return Grant(
                lease_id, 0, held, account.balance, account.hour_left_now(now, hour_us, cap), len(account.open)
            )
        account.roll_window(now, hour_us)
        account.refill(now, to_micro(rules.refill_tokens), to_micro(rules.refill_max), _us(refill_period_s))
        account.settle_expired(now)
        if expired:
            raise LeaseNotFound(f"no open lease {lease_id!r} (expired)")
        spent = max(lease.spent_total, spent_total)
        if lease.metered:
            spent = min(spent, lease.granted_total)
        granted = account.grantable(want, lease.metered, cap)
        if lease.metered:
            account.balance -= granted
            account.hour_used += granted
        lease.granted_total += granted
        lease.spent_total, lease.seq, lease.last_seen = spent, seq, now
        lease.last = account.grant(lease_id, granted, max(0, lease.granted_total - spent), cap)
        return lease.last

    async def close_lease(
        self, account_id: str, lease_id: str, seq: int, spent_total: int, rules: TierRules, *, hour_s: float
    ) -> Grant:
        if spent_total < 0:
            raise ValueError("spent_total must be >= 0")
        account = self._accounts.get(account_id)
        lease = None if account is None else account.leases.get(lease_id)
        if account is None or lease is None:
            raise LeaseNotFound(f"no open lease {lease_id!r}")
        cap, hour_us, now = _cap(rules), _us(hour_s), self._now()
        if not lease.open:
            if lease.closed_by == "close" and seq == lease.seq:
                assert lease.last is not None
                return lease.last
            return Grant(lease_id, 0, 0, account.balance, account.hour_left_now(now, hour_us, cap), len(account.open))
        spent = max(lease.spent_total, spent_total)
        if lease.metered:
            spent = min(spent, lease.granted_total)
        account.roll_window(now, hour_us)
        account.refund(lease.granted_total - spent, lease.metered)
        del account.open[lease_id]
        lease.open, lease.closed_by = False, "close"
        lease.spent_total, lease.seq, lease.last_seen = spent, max(seq, lease.seq), now
        lease.last = account.grant(lease_id, 0, 0, cap)
        return lease.last

    async def settle_node_leases(self) -> int:
        """Settles every open lease this node id opened. In memory none outlive the process that
        opened them, so at start there are none."""
        now = self._now()
        settled = 0
        for account in self._accounts.values():
            mine = [lease for lease in account.open.values() if lease.node_id == self._node_id]
            if mine:
                account.roll_window(now, self._hour_us)
                account.settle_expired(now)
            for lease in mine:
                if not lease.open:
                    continue  # it had expired: settled just now, as any expired lease
                account.settle(lease, "node_restart")
                settled += 1
        return settled

    # -- history -------------------------------------------------------------------------------
    async def history(self, account_id: str, limit: int = 100) -> list[dict[str, Any]]:
        account = self._account(account_id)
        now = self._now()
        account.roll_window(now, self._hour_us)
        account.settle_expired(now)
        entries: list[dict[str, Any]] = []
        for kind, value in reversed(account.history):
            if len(entries) >= limit:
                break
            if kind == "credit":
                entries.append(dict(value))
            else:
                lease = account.leases[value]
                entries.append(
                    {
                        "kind": "session",
                        "lease_id": lease.lease_id,
                        "session_id": lease.session_id,
                        "spent": lease.spent_total,
                        "open": lease.open,
                        "at": lease.opened_at / 1_000_000,
                    }
                )
        return entries

    # -- view tokens ---------------------------------------------------------------------------
    async def add_view_token(
        self, account_id: str, token_id: str, stream: str, token_hash: str, limit: int
    ) -> ViewToken:
        account = self._account(account_id)
        if len(account.view_tokens) >= limit:
            raise ViewTokenLimit(limit)
        token = ViewToken(token_id, account_id, stream, self._now() / 1_000_000)
        account.view_tokens[token_id] = (token, token_hash)
        self._view_token_index[token_hash] = (account_id, token_id)
        return token

    async def view_tokens(self, account_id: str) -> list[ViewToken]:
        account = self._accounts.get(account_id)
        return [] if account is None else [token for token, _ in account.view_tokens.values()]

    async def view_token_for_hash(self, token_hash: str) -> ViewToken | None:
        account_id, token_id = self._view_token_index.get(token_hash, ("", ""))
        account = self._accounts.get(account_id)
        found = None if account is None else account.view_tokens.get(token_id)
        return found[0] if found is not None and found[1] == token_hash else None

    async def revoke_view_token(self, account_id: str, stream: str, token_id: str) -> bool:
        account = self._accounts.get(account_id)
        found = None if account is None else account.view_tokens.get(token_id)
        if found is None or found[0].stream != stream:
            return False
        del account.view_tokens[token_id]
        del self._view_token_index[found[1]]
        return True

    async def ping(self) -> None:
        pass  # always there: it lives in this process

    async def aclose(self) -> None:
        pass
