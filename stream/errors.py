"""The stream package's errors; `signaling` maps them to HTTP statuses."""


class StreamError(Exception):
    code = "stream_error"


class InvalidOffer(StreamError):
    code = "invalid_sdp"


class UnsupportedCodec(InvalidOffer):
    """The offer's video is in no codec or profile this server can decode (e.g. H.264 High only)."""

    code = "unsupported_codec"


class TooManyCandidates(InvalidOffer):
    """More remote ICE candidates than one connection may name (offered and trickled together)."""

    code = "too_many_candidates"


class TrickleRefused(StreamError):
    """A trickle PATCH the connection takes no more of: too many, or past its connect deadline."""

    code = "trickle_refused"


class TooManyPatches(TrickleRefused):
    code = "too_many_patches"


class TrickleTooLate(TrickleRefused):
    code = "trickle_too_late"


class TooManySessions(StreamError):
    code = "too_many_sessions"


class LineFull(StreamError):
    """The node is full and its waiting line too (--max-queue)."""

    code = "line_full"


class NodeDraining(StreamError):
    """The node is draining for a restart: it takes no new session (signaling/drain.py)."""

    code = "node_draining"


class TooManyViewers(StreamError):
    """The stream has its viewers (a view token's holders take all but the owner's reserve)."""

    code = "too_many_viewers"


class NodeViewersFull(TooManyViewers):
    """The node encodes for as many viewers as it may (--max-viewers), every stream's together."""

    code = "node_viewers_full"


class ViewTokenViewersFull(TooManyViewers):
    """One view token holds its --max-viewers-per-token viewers: its holder's limit, not the stream's."""

    code = "view_token_viewers_full"


class StreamNotLive(StreamError):
    """Nothing is published under the stream name now (a player retries: the publisher may be reconnecting)."""

    code = "stream_not_live"


class ViewerNotFound(StreamError):
    code = "viewer_not_found"


class SessionNotFound(StreamError):
    code = "session_not_found"


class SessionForbidden(StreamError):
    code = "forbidden"


class SessionClosedEarly(StreamError):
    """The session was closed (by request, or the server stopping) before its offer was answered."""

    code = "session_closed"


class IceGatheringFailed(StreamError):
    """The server's own ICE settings produced no candidate (a configuration problem)."""

    code = "ice_gathering_failed"


class InvalidCommand(StreamError):
    """A data-channel command the session cannot carry out; answered with an error event."""

    code = "invalid_command"

    def __init__(self, message: str, code: str = "invalid_command") -> None:
        super().__init__(message)
        self.code = code
