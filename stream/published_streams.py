"""Stream names: the handle under which an account publishes one live session (WHIP's
/whip/{stream}), so that a streamer configures it once in OBS and viewers find it by name.

One session per (account, name): a newer publisher displaces the older, because a client that
reconnects (OBS after a network drop) must not be refused while its old session times out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STREAM_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
STREAM_NAME_RULE = "letters, digits, '-' and '_', 1 to 64 characters"


def is_stream_name(name: str) -> bool:
    """The one rule for stream names (WHIP, WHEP, view tokens)."""
    return STREAM_NAME.fullmatch(name) is not None  # not match(...$): "$" also matches before a final newline


@dataclass(frozen=True)
class Publication:
    """A session published under a name, with the ICE credentials of the publisher's offer (a
    trickled fragment with other credentials is an ICE restart)."""

    account_id: str | None
    name: str
    session_id: str
    ice_ufrag: str
    ice_pwd: str


class PublishedStreams:
    def __init__(self) -> None:
        self._by_name: dict[tuple[str | None, str], Publication] = {}
        self._by_session: dict[str, Publication] = {}

    def publish(self, publication: Publication) -> Publication | None:
        """Registers the publication; returns the one it displaced under the same name, if any."""
        displaced = self._by_name.get((publication.account_id, publication.name))
        if displaced is not None:
            self._by_session.pop(displaced.session_id, None)
        self._by_name[(publication.account_id, publication.name)] = publication
        self._by_session[publication.session_id] = publication
        return displaced

    def find(self, account_id: str | None, name: str) -> Publication | None:
        return self._by_name.get((account_id, name))

    def of_session(self, session_id: str) -> Publication | None:
        return self._by_session.get(session_id)

    def of_account(self, account_id: str | None) -> list[Publication]:
        return [p for (account, _), p in self._by_name.items() if account == account_id]

    def forget(self, session_id: str) -> None:
        publication = self._by_session.pop(session_id, None)
        if publication is not None and self._by_name.get((publication.account_id, publication.name)) is publication:
            del self._by_name[(publication.account_id, publication.name)]
