"""The quota package's settings section: tiers, prices, leases, throttle levels."""

from __future__ import annotations

import math
import re
import socket
from dataclasses import dataclass, field, fields

MICRO = 1_000_000  # micro-tokens per token


def to_micro(tokens: float) -> int:
    return round(tokens * MICRO)


# The most one credit or starting balance may hold: far beyond any real purchase, and far inside
# what the Redis scripts' numbers (doubles, exact to 2**53 micro-tokens) count exactly.
MAX_AMOUNT_TOKENS = 1_000_000_000
# The most a balance may reach by credits: under 2**53 micro-tokens (9,007,199,254 tokens), past
# which the Redis scripts' additions round (a 0.000001 credit on 1e10 tokens was lost, the memory
# store's integers kept it).
MAX_BALANCE_TOKENS = 9_000_000_000


def micro_amount(tokens: object) -> int | None:
    """A JSON number of tokens as micro-tokens; None when it is no number (bool, NaN, infinity) or
    outside 0..MAX_AMOUNT_TOKENS."""
    if not isinstance(tokens, (int, float)) or isinstance(tokens, bool) or not math.isfinite(tokens):
        return None
    return to_micro(tokens) if 0 <= tokens <= MAX_AMOUNT_TOKENS else None


def to_tokens(micro: int) -> float:
    return micro / MICRO


_NODE_ID = re.compile(r"^[\x21-\x7e]{1,200}$")  # printable ASCII, no spaces: it is part of a Redis key


def default_node_id(port: int) -> str:
    """HOST:PORT: the same for every run of a server started the same way on the same machine."""
    return f"{socket.gethostname()}:{port}"


@dataclass(frozen=True)
class TierRules:
    """What a tier allows; passed to every store operation (tiers are settings, not data)."""

    name: str
    metered: bool = True  # False: never charged, still recorded (vip)
    refill_tokens: float = 0.0  # added per refill period ...
    refill_max: float = 0.0  # ... while the balance is below this
    hourly_cap: float | None = None  # tokens spendable per hour window; None: no cap
    priority: int = 0  # scheduler priority when the device is saturated
    max_sessions: int = 4  # concurrent sessions across all nodes


DEFAULT_TIERS: tuple[TierRules, ...] = (
    TierRules("free", refill_tokens=10, refill_max=10, hourly_cap=60, priority=0, max_sessions=1),
    TierRules("paid", hourly_cap=600, priority=1, max_sessions=4),
    TierRules("vip", metered=False, priority=2, max_sessions=16),
)


# tokens per second of processed video by output size: (max pixels, price); None = above all.
# Pixels, not height: a 2560x480 strip is not 480p, nor a 480x640 portrait 720p.
DEFAULT_PRICES: tuple[tuple[int | None, float], ...] = ((640 * 480, 1.0), (1280 * 720, 3.0), (None, 5.0))


@dataclass(frozen=True)
class QuotaSettings:
    # both may come from an operator's file instead (quota/quota_config.py)
    tiers: tuple[TierRules, ...] = DEFAULT_TIERS
    prices: tuple[tuple[int | None, float], ...] = DEFAULT_PRICES
    nominal_fps: float = 30.0
    refill_period_s: float = 3600.0
    hour_s: float = 3600.0  # the window of the hourly cap (tests shorten it)
    lease_s: float = 5.0  # a lease holds this many seconds of video at the current price
    renew_below: float = 0.4  # renew when less than this fraction of a lease is left
    lease_ttl_s: float = 60.0  # a lease not renewed for this long is settled by the store
    slow_below_s: float = 60.0  # fewer seconds of video left than this: slow_fps
    slow_fps: float = 15.0
    crawl_below_s: float = 15.0  # fewer than this: crawl_fps
    crawl_fps: float = 5.0
    grace_s: float = 10.0  # an exhausted session is closed after this unless topped up
    redis_url: str | None = field(
        default=None,
        metadata={  # None: the in-memory store
            "help": "quota store, e.g. redis://127.0.0.1:6379/0",
            "default_text": "in memory",
        },
    )
    redis_prefix: str = "facefuse"
    redis_max_connections: int = field(default=16, metadata={"help": "connections to Redis this node opens at most"})
    redis_pool_timeout_s: float = 2.0  # an operation waiting longer for a free connection fails closed
    # this node's name in the store, recorded with its leases: at start it settles those its previous
    # run left; None: default_node_id of the port
    node_id: str | None = field(
        default=None,
        metadata={
            "help": "this node's name in the quota store, unique among live nodes; at start it settles the leases its "
            "previous run left",
            "default_text": "HOST:PORT",
        },
    )
    admin_key: str | None = None
    tiers_by_name: dict[str, TierRules] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tiers_by_name", {tier.name: tier for tier in self.tiers})
        numbers = {f.name: getattr(self, f.name) for f in fields(self) if f.type in ("float", float)}
        for name, value in numbers.items():
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, not {value}")
        for name in ("nominal_fps", "refill_period_s", "hour_s", "lease_s", "lease_ttl_s", "slow_fps", "crawl_fps"):
            if numbers[name] <= 0:
                raise ValueError(f"{name} must be > 0")
        if not 0 < self.renew_below < 1:
            raise ValueError("renew_below must be between 0 and 1")
        if self.lease_ttl_s < 2 * self.lease_s:
            raise ValueError("lease_ttl_s must be at least twice lease_s (a lease is renewed well before its TTL)")
        if self.redis_max_connections < 1:
            raise ValueError(f"--redis-max-connections must be at least 1, not {self.redis_max_connections}")
        if self.node_id is not None and not _NODE_ID.match(self.node_id):
            raise ValueError(f"--node-id must be 1-200 printable ASCII characters without spaces, not {self.node_id!r}")

    def tier(self, name: str) -> TierRules:
        try:
            return self.tiers_by_name[name]
        except (KeyError, TypeError):  # TypeError: a JSON list or object as the name
            raise ValueError(f"unknown tier {name!r}; tiers: {', '.join(self.tiers_by_name)}") from None

    def price_per_second(self, width: int, height: int) -> float:
        pixels = width * height
        for max_pixels, price in self.prices:
            if max_pixels is None or pixels <= max_pixels:
                return price
        return self.prices[-1][1]
