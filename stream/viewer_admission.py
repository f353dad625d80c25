"""Whether a new WHEP viewer may join: the node's cap, its stream's, and its view token's.

Each viewer encodes its own video, so the node bounds them all (--max-viewers). A view token is a
credential its holder may share, and its viewers must never lock the stream's owner out: a
token's viewers take at most the stream's limit less OWNER_RESERVE, each token at most
--max-viewers-per-token of them, and the owner (the account's API key, or local mode) may use the
stream's whole limit.
"""

from __future__ import annotations

from collections.abc import Sequence

from stream.errors import NodeViewersFull, TooManyViewers, ViewTokenViewersFull
from stream.settings import StreamSettings
from stream.viewer import Viewer

# Viewers of a stream that only its owner may take, whatever its tokens' holders do.
OWNER_RESERVE = 5


def check_room_for_viewer(
    viewers: Sequence[Viewer], session_id: str, stream: str, token_id: str | None, settings: StreamSettings
) -> None:
    """Raises the TooManyViewers that applies, if any; `viewers`: every viewer on this node."""
    if len(viewers) >= settings.max_viewers:
        raise NodeViewersFull(f"this server has its {settings.max_viewers} viewers; try again later")
    of_stream = [viewer for viewer in viewers if viewer.session.id == session_id]
    limit = settings.max_viewers_per_stream
    if token_id is None:
        if len(of_stream) >= limit:
            raise TooManyViewers(f"the stream {stream!r} has its {limit} viewers; try again later")
        return
    by_tokens = [viewer for viewer in of_stream if viewer.token_id is not None]
    if len(by_tokens) >= limit - min(OWNER_RESERVE, limit) or len(of_stream) >= limit:
        raise TooManyViewers(
            f"the stream {stream!r} has all the viewers view tokens may hold; its owner's API key still plays it"
        )
    of_token = sum(1 for viewer in by_tokens if viewer.token_id == token_id)
    if of_token >= settings.max_viewers_per_token:
        raise ViewTokenViewersFull(
            f"this view token plays the stream on {settings.max_viewers_per_token} connections already; "
            "close one, or ask the stream's owner for another token"
        )
