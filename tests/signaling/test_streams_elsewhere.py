"""An account's stream list across nodes (signaling/routes/streams.py): this node's streams, with
those live on other nodes in the place of names not live here."""

from signaling.routes.streams import with_streams_elsewhere


def stream(name: str, live: bool, node: str | None, tokens: int = 0) -> dict:
    return {
        "stream": name,
        "live": live,
        "session_id": f"s-{name}-{node}" if live else None,
        "node_id": node if live else None,
        "viewers": [],
        "view_tokens": tokens,
    }


def test_a_stream_live_here_wins_over_another_nodes_record_of_it() -> None:
    here = [stream("cam", True, "a", tokens=2)]
    elsewhere = [stream("cam", True, "b", tokens=2)]
    assert with_streams_elsewhere(here, elsewhere) == here


def test_a_name_not_live_here_is_listed_as_it_is_on_the_node_where_it_is_live() -> None:
    here = [stream("cam", False, None, tokens=1)]
    there = stream("cam", True, "b", tokens=1)
    assert with_streams_elsewhere(here, [there]) == [there]


def test_names_from_both_sides_are_listed_once_each_in_order() -> None:
    here = [stream("studio", True, "a"), stream("cam", False, None, tokens=1)]
    elsewhere = [stream("backstage", True, "b"), stream("cam", True, "c", tokens=1)]
    listed = with_streams_elsewhere(here, elsewhere)
    assert [(s["stream"], s["node_id"]) for s in listed] == [("backstage", "b"), ("cam", "c"), ("studio", "a")]
