"""The store interface: accounts, leases and view tokens, with two implementations of the same semantics.

`MemoryStore` (the embedded default) and `RedisStore` (several server nodes
sharing accounts) both satisfy `QuotaStore`; one contract test suite runs
against both. Every operation is atomic. Time (refills, the hourly window,
lease expiry) comes from the store's own clock: Redis `TIME` inside the script,
`time.time()` in memory.

Amounts are integer micro-tokens. A lease moves tokens from the balance into
the lease (counted against the hourly window at once, so several nodes cannot
overspend together); the node spends them locally and reports its cumulative
`spent_total`; closing the lease returns `granted_total - spent_total` to the
balance and to the hourly window. Cumulative totals plus a per-lease `seq`
make every lease operation idempotent: a retried renew or close (same seq)
returns the first result and changes nothing. Each store belongs to one server node
and records the node's id with every lease it opens, so that the node's next run
can settle what a crash left open (`settle_node_leases`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from quota.settings import TierRules


@dataclass(frozen=True)
class Account:
    id: str
    tier: str
    balance: int  # micro-tokens
    key_hash: str
    hour_used: int  # micro-tokens granted in the current hour window (net of refunds)
    created_at: float


@dataclass(frozen=True)
class Grant:
    """The result of a lease operation."""

    lease_id: str
    granted: int  # micro-tokens this operation moved into the lease (0 if none were left)
    held: int  # micro-tokens the lease holds unspent now: granted_total - spent_total
    balance: int  # the account's balance after the operation
    hour_left: int | None  # what the hourly cap still allows; None without a cap
    open_leases: int  # the account's open leases after the operation


@dataclass(frozen=True)
class ViewToken:
    """A token that plays one stream of an account; the store keeps only its hash."""

    id: str
    account_id: str
    stream: str
    created_at: float


class QuotaStore(Protocol):
    async def create_account(self, account_id: str, tier: str, balance: int, key_hash: str) -> Account:
        """AccountExists if the id is taken."""

    async def get_account(self, account_id: str, rules: TierRules) -> Account:
        """Applies the tier's refill first. AccountNotFound."""

    async def tier_of(self, account_id: str) -> str:
        """The account's tier, read without applying anything. AccountNotFound."""

    async def account_for_key(self, key_hash: str) -> Account | None: ...

    async def credit(self, account_id: str, amount: int, idempotency_key: str) -> Account:
        """Adds amount once per idempotency key; a repeated key with the same amount changes nothing.
        IdempotencyKeyReused for a repeated key with another amount; AccountNotFound; BalanceLimit."""

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
        """Opens a lease holding up to `want`.

        TooManyLeases when the account has rules.max_sessions open leases (expired
        ones are settled first; it says when the soonest expires); NothingToSpend when a metered account can be
        granted nothing (no lease is created then). Unmetered: granted = want,
        balance untouched. Repeating the same lease_id returns the first grant.
        """

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
        """Records spent_total (cumulative, never decreasing) and grants up to `want` more.

        seq counts the lease's operations (1 for the first renew); a seq already
        applied returns that operation's grant again. LeaseNotFound for an unknown,
        closed or expired lease. granted may be 0 (nothing left).
        """

    async def close_lease(
        self, account_id: str, lease_id: str, seq: int, spent_total: int, rules: TierRules, *, hour_s: float
    ) -> Grant:
        """Records spent_total and returns the unspent rest; idempotent by seq; closing a closed lease is a no-op."""

    async def settle_node_leases(self) -> int:
        """Settles every open lease this store's node id opened, as expiry settles a lease the store
        stopped hearing from (spent up to its last renewal, the rest refunded, its slot free); returns
        how many. Called at a node's start, before it opens any: what its previous run left."""

    async def history(self, account_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """Newest first: {"kind": "credit", "amount", "idempotency_key", "at"} and
        {"kind": "session", "lease_id", "session_id", "spent", "open", "at"} (spent in micro-tokens)."""

    async def add_view_token(
        self, account_id: str, token_id: str, stream: str, token_hash: str, limit: int
    ) -> ViewToken:
        """Keeps a view token's hash for the account's stream. ViewTokenLimit when the account
        already holds `limit` view tokens; AccountNotFound."""

    async def view_tokens(self, account_id: str) -> list[ViewToken]:
        """The account's view tokens, oldest first (an unknown account has none)."""

    async def view_token_for_hash(self, token_hash: str) -> ViewToken | None:
        """The view token with that hash; None for an unknown or revoked one."""

    async def revoke_view_token(self, account_id: str, stream: str, token_id: str) -> bool:
        """Forgets the token; False when the account has no such token for that stream."""

    async def ping(self) -> None:
        """Returns when the store answers; StoreUnavailable when it cannot."""

    async def aclose(self) -> None: ...
