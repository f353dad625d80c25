"""Our errors -> HTTP statuses and JSON bodies `{"error": {"code", "message"}}`.

Only this module knows HTTP statuses; the other packages raise their own types.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from pipeline.faces import (
    FaceForbidden,
    FaceLibraryFull,
    FaceNotFound,
    FaceStoreUnavailable,
    FaceTooSmall,
    NoFaceFound,
    UnusableFace,
)
from pipeline.images import ImageTooLarge, UnreadableImage, UnsupportedImage
from quota.accounts import InvalidAccount, InvalidApiKey
from quota.errors import (
    AccountExists,
    AccountNotFound,
    BalanceLimit,
    IdempotencyKeyReused,
    NothingToSpend,
    StoreUnavailable,
    TooManyLeases,
    ViewTokenLimit,
)
from quota.view_tokens import InvalidStreamName, InvalidViewToken, ViewTokenNotFound
from stream.errors import (
    IceGatheringFailed,
    InvalidOffer,
    LineFull,
    NodeDraining,
    SessionClosedEarly,
    SessionForbidden,
    SessionNotFound,
    TooManySessions,
    ViewerNotFound,
)
from stream.swap_options import InvalidSwapOptions

logger = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


_STATUS_BY_TYPE: list[tuple[type[Exception], int]] = [
    (InvalidOffer, 400),
    (InvalidSwapOptions, 400),
    (UnreadableImage, 400),
    (InvalidAccount, 400),
    (InvalidStreamName, 400),
    (InvalidApiKey, 401),
    (InvalidViewToken, 401),
    (NothingToSpend, 402),
    (FaceForbidden, 403),
    (SessionForbidden, 403),
    (FaceNotFound, 404),
    (SessionNotFound, 404),
    (ViewerNotFound, 404),
    (AccountNotFound, 404),
    (ViewTokenNotFound, 404),
    (AccountExists, 409),
    (BalanceLimit, 409),
    (IdempotencyKeyReused, 409),
    (ViewTokenLimit, 409),
    (SessionClosedEarly, 409),
    (NoFaceFound, 422),
    (FaceTooSmall, 422),
    (UnusableFace, 422),
    (TooManyLeases, 429),
    (StoreUnavailable, 503),
    (FaceStoreUnavailable, 503),
    (ImageTooLarge, 413),
    (UnsupportedImage, 415),
    (FaceLibraryFull, 507),
    (TooManySessions, 503),
    (LineFull, 503),
    (NodeDraining, 503),
    (IceGatheringFailed, 500),
]


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status, headers=headers)


# nginx's status for a client that left before its answer: never sent, but the access log tells it from a 5xx
CLIENT_CLOSED_REQUEST = 499


def _client_went_away(request: web.Request, exc: Exception) -> bool:
    """A connection error once the client's socket is gone (e.g. it left mid-body) is the client's doing."""
    return isinstance(exc, ConnectionError) and (request.transport is None or request.transport.is_closing())


def _message(exc: Exception) -> str:
    # KeyError's str() wraps the message in quotes
    return exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)


@web.middleware
async def json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc.status, exc.code, exc.message, exc.headers)
    except web.RequestPayloadError:  # aiohttp's pure-Python parser, reading a malformed chunked body
        return error_response(
            400, "invalid_body", "the request body could not be read: its chunked framing is malformed"
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = exc.reason.lower().replace(" ", "_")
        message = exc.text if exc.text and not exc.text.startswith(f"{exc.status}:") else exc.reason
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return error_response(exc.status, code, message, allow)
    except Exception as exc:
        if _client_went_away(request, exc):
            logger.debug("client went away during %s %s: %s", request.method, request.path, exc)
            return error_response(CLIENT_CLOSED_REQUEST, "client_closed_request", "the client closed the connection")
        for error_type, status in _STATUS_BY_TYPE:
            if isinstance(exc, error_type):
                headers = {"Retry-After": "5"} if status in (429, 503) else None
                if status == 401:
                    headers = {"WWW-Authenticate": "Bearer"}
                return error_response(status, getattr(exc, "code", "error"), _message(exc), headers)
        logger.exception("unhandled error in %s %s", request.method, request.path)
        return error_response(500, "internal_error", "the server failed to handle this request")
