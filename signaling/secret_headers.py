"""What keeps credentials out of other hands: headers on every response, and the access log masked.

- `Referrer-Policy: no-referrer` on every response: a page's URL (a watch link carried its view
  token in the query) is never sent on as a Referer, to our own requests or anyone's.
- Pages may not be framed by other sites (`X-Frame-Options: DENY`, CSP `frame-ancestors 'none'`):
  the dashboard acts with the key it holds, and a framing site could steer its clicks.
- The access log masks view tokens in URLs (`token=***`) and Bearer credentials wherever a log
  format would show them: a log is read by more people than a key is meant for.
"""

from __future__ import annotations

import logging
import re

from aiohttp import web

ACCESS_LOGGER = "aiohttp.access"
_QUERY_TOKEN = re.compile(r"([?&#](?:token|api_key|key)=)[^&\s\"]*", re.IGNORECASE)
_BEARER = re.compile(r"(Bearer\s+)[^\s\"]+", re.IGNORECASE)
MASK = "***"


def mask_secrets(text: str) -> str:
    return _BEARER.sub(rf"\g<1>{MASK}", _QUERY_TOKEN.sub(rf"\g<1>{MASK}", text))


class MaskSecrets(logging.Filter):
    """Rewrites an access-log record's message with its secrets masked (aiohttp formats the line
    before logging it, so the message is the whole line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = mask_secrets(record.getMessage())
        record.args = ()
        return True


def mask_access_log() -> None:
    """Installs the mask on aiohttp's access logger, once per process."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, MaskSecrets) for f in logger.filters):
        logger.addFilter(MaskSecrets())


async def add_secret_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The app's on_response_prepare: every response, pages, files and errors alike."""
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    if (response.content_type or "").startswith("text/html"):
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Content-Security-Policy", "frame-ancestors 'none'")
