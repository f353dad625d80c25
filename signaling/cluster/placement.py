"""Where a new session goes: here, unless this node is full, draining or clearly busier than
another live node; then the node with the largest free share of its capacity (ties at random)."""

from __future__ import annotations

import random

from signaling.cluster.node_registry import NodeRecord

# "Clearly busier": the best node's free share is more than this larger than ours. A small gap is not
# worth a client's extra round trip, and a wide one keeps two nodes whose records are a heartbeat
# apart from sending a burst of clients back and forth.
BUSIER_BY = 0.25


def better_node(here: NodeRecord, others: list[NodeRecord], rng: random.Random | None = None) -> NodeRecord | None:
    """The node a new session should go to instead of `here`, or None to stay."""
    candidates = [node for node in others if node.id != here.id and node.free_share > 0]
    if not candidates:
        return None  # nowhere better: here answers as it would alone (503 when full or draining)
    best_share = max(node.free_share for node in candidates)
    if here.free_share > 0 and best_share - here.free_share <= BUSIER_BY:
        return None
    return (rng or random).choice([node for node in candidates if node.free_share == best_share])
