"""aiohttp's log of a request it could not parse: one short line, without the request's bytes.

aiohttp logs such a request at ERROR with a traceback whose message quotes the raw bytes (a
malformed chunked body: 98 KB a line, sent by anyone, no key needed). It is the client's error,
which the access log also records as a 400: one INFO line with the reason is enough.
"""

from __future__ import annotations

import logging
import re

from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web import RequestPayloadError

MAX_REASON_CHARS = 100


class BadRequestLogFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (HttpProcessingError, RequestPayloadError)):
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {_reason(exc)}"
            record.args = ()
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def _reason(exc: BaseException) -> str:
    """The parser's description without the bytes it quotes: they follow a colon or a quote."""
    if isinstance(exc, RequestPayloadError) and isinstance(exc.__cause__, HttpProcessingError):
        exc = exc.__cause__  # the pure-Python parser wraps its error
    text = exc.message if isinstance(exc, HttpProcessingError) else str(exc)
    return re.split(r"""[:'"\n]""", str(text), maxsplit=1)[0].strip()[:MAX_REASON_CHARS] or "unreadable request"


def quiet_bad_request_log() -> None:
    """Installs the filter on aiohttp's server logger, once per process."""
    server_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, BadRequestLogFilter) for f in server_log.filters):
        server_log.addFilter(BadRequestLogFilter())
