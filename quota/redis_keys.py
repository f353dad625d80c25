"""Redis key names of the quota store.

All keys of one account share the hash tag `{account_id}`, so every script,
which touches only one account's keys, runs on one Redis Cluster slot. The id
is escaped so that a brace in it cannot move the tag. The API-key index, the
view-token index and the node index are the only keys outside an account's slot; no script
touches them.

    <prefix>:{<id>}:account          hash: tier, balance, key_hash, hour_used, hour_window,
                                     refilled_at, created_at (us), history_seq
    <prefix>:{<id>}:open             zset: open lease id -> expiry (us, Redis clock)
    <prefix>:{<id>}:history          zset: entry -> history_seq ("c:<amount>:<at>:<key>" or "s:<lease id>")
    <prefix>:{<id>}:lease:<lease id> hash: one lease, kept while its history entry is
    <prefix>:{<id>}:credit:<key>     string: an idempotency key already credited (expires)
    <prefix>:{<id>}:view_tokens      hash: view token id -> "<created_at (us)>:<token hash>:<stream>"
    <prefix>:key:<key hash>          string: the account id of an API key hash
    <prefix>:view_token:<hash>       string: a view token hash's JSON [account id, token id]
    <prefix>:node:<node id>:leases   set: the leases a node opened and has not closed, each
                                     a JSON [account id, lease id] (settled at the node's start)

The cluster's keys (signaling/cluster/: the node registry and the session directory), each with a
TTL its node's heartbeat refreshes, so a node that dies leaves nothing behind for long:

    <prefix>:{nodes}:node:<node id>  string: the node's record as JSON (its URL, capacity, sessions,
                                     draining, ...); TTL 10 s
    <prefix>:{nodes}:index           set: the node ids, read to list the nodes (dead ids are removed
                                     by the reader); {nodes}: both in one slot, for MGET
    <prefix>:session:<session id>    string: JSON {"node", "account"}; TTL 10 s
    <prefix>:{<id>}:sessions         hash: the account's session id -> node id (the account's slot);
                                     the key's TTL 10 s, a dead node's fields dropped by the reader
    <prefix>:{<id>}:stream:<name>    string: JSON {"node", "session"} of the session published under
                                     the stream name, where its WHEP viewers are sent; TTL 10 s
"""

from __future__ import annotations

from dataclasses import dataclass


def account_tag(account_id: str) -> str:
    """The account id with '%', '{' and '}' escaped: a hash tag that is the whole id."""
    return account_id.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def check_prefix(prefix: str) -> str:
    if not prefix or "{" in prefix or "}" in prefix:
        raise ValueError(f"the Redis key prefix must be non-empty and without braces, not {prefix!r}")
    return prefix


@dataclass(frozen=True)
class AccountKeys:
    prefix: str
    account_id: str

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{account_tag(self.account_id)}}}:"

    @property
    def account(self) -> str:
        return self.base + "account"

    @property
    def open(self) -> str:
        return self.base + "open"

    @property
    def history(self) -> str:
        return self.base + "history"

    @property
    def lease_prefix(self) -> str:
        return self.base + "lease:"

    def lease(self, lease_id: str) -> str:
        return self.lease_prefix + lease_id

    def credit(self, idempotency_key: str) -> str:
        return self.base + "credit:" + idempotency_key

    @property
    def view_tokens(self) -> str:
        return self.base + "view_tokens"


def key_index(prefix: str, key_hash: str) -> str:
    return f"{prefix}:key:{key_hash}"


def view_token_index(prefix: str, token_hash: str) -> str:
    return f"{prefix}:view_token:{token_hash}"


def node_leases(prefix: str, node_id: str) -> str:
    return f"{prefix}:node:{node_id}:leases"
