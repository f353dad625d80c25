"""The failures `facefuse cam` shows as one line before it exits non-zero, and the server's
refusals said in words that tell the user what to do."""

from __future__ import annotations

import json
from collections.abc import Mapping


class CamError(Exception):
    """A failure the command shows as one line (its message) and exits 1."""


class ServerRefusal(CamError):
    """An HTTP answer that is not the one asked for: status, the error body's code and message."""

    def __init__(self, status: int, code: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(explain(status, code, message, retry_after_s))
        self.status, self.code, self.server_message, self.retry_after_s = status, code, message, retry_after_s


def refusal(status: int, body: str, headers: Mapping[str, str]) -> ServerRefusal:
    """A ServerRefusal from an answer: our servers send {"error": {"code", "message"}}, others may not."""
    code, message = "?", body.strip()[:200]
    try:
        error = json.loads(body).get("error", {})
        code, message = str(error.get("code", code)), str(error.get("message", message))
    except (ValueError, AttributeError):
        pass
    try:
        retry_after_s = float(headers.get("Retry-After", ""))
    except ValueError:
        retry_after_s = None
    return ServerRefusal(status, code, message, retry_after_s)


def explain(status: int, code: str, message: str, retry_after_s: float | None) -> str:
    """One line per refusal a user can act on; the server's own message for the rest."""
    later = f" in {retry_after_s:g} s" if retry_after_s is not None else " later"
    if status == 401:
        return "the server refused the token (401): give an API key of this server with --token"
    if status == 402:
        return "the account has no tokens left (402): top it up, then start again"
    if status == 404 and code == "face_not_found":
        return f"no such face on this server (404: {message}): give a photo with --face PHOTO to upload one"
    if status == 429:
        return f"the account runs as many sessions as its tier allows (429): {message}"
    if status == 503:
        return f"the server cannot take this session now (503 {code}: {message}); try again{later}"
    return f"the server answered {status} {code}: {message}"
