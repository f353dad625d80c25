"""Where a new session goes, given the nodes' records (no servers: the rule alone)."""

import random

from signaling.cluster.node_registry import NodeRecord
from signaling.cluster.placement import better_node


def node(node_id: str, capacity: int, sessions: int, draining: bool = False) -> NodeRecord:
    return NodeRecord(node_id, f"http://{node_id}", capacity, sessions, "passthrough", "cpu", draining)


def test_a_lone_node_keeps_its_sessions_even_when_full():
    here = node("a", 2, 2)
    assert better_node(here, [here]) is None


def test_a_full_or_draining_node_sends_new_sessions_to_the_one_with_most_room():
    others = [node("b", 4, 3), node("c", 8, 2)]
    assert better_node(node("a", 2, 2), others).id == "c"
    assert better_node(node("a", 2, 0, draining=True), others).id == "c"


def test_a_node_only_a_little_busier_keeps_the_session():
    assert better_node(node("a", 4, 1), [node("b", 4, 0)]) is None  # 75 % free against 100 %: not worth a 307
    assert better_node(node("a", 4, 2), [node("b", 4, 0)]).id == "b"  # 50 % against 100 %


def test_nowhere_with_room_means_here():
    assert better_node(node("a", 2, 2), [node("b", 2, 2), node("c", 2, 0, draining=True)]) is None


def test_ties_are_broken_at_random():
    others = [node("b", 4, 0), node("c", 4, 0)]
    chosen = {better_node(node("a", 1, 1), others, random.Random(seed)).id for seed in range(20)}
    assert chosen == {"b", "c"}
