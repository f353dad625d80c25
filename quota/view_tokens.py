"""View tokens: credentials that only play one stream of an account (WHEP and the watch page).

A streamer pastes a watch URL into OBS's Browser Source; the URL carries a view token, never the
account's API key. Tokens are kept only as SHA-256 hashes (as API keys are), in the quota store so
that every node of a Redis deployment knows them.
"""

from __future__ import annotations

import secrets

from quota.accounts import hash_key
from quota.errors import QuotaError
from quota.store import QuotaStore, ViewToken
from stream.published_streams import STREAM_NAME_RULE, is_stream_name

MAX_VIEW_TOKENS_PER_ACCOUNT = 100  # a bound on what one account keeps in the store
VIEW_TOKEN_PREFIX = "fv_"  # tells a view token from an API key ("ff_") at a glance, in logs and in errors


class InvalidStreamName(QuotaError):
    code = "invalid_stream_name"


class InvalidViewToken(QuotaError):
    code = "unauthorized"


class ViewTokenNotFound(QuotaError):
    code = "view_token_not_found"


def checked_stream_name(stream: str) -> str:
    if not is_stream_name(stream):
        raise InvalidStreamName(f"the stream name {stream[:80]!r} is not valid: a stream name has {STREAM_NAME_RULE}")
    return stream


def looks_like_view_token(credential: str) -> bool:
    return credential.startswith(VIEW_TOKEN_PREFIX)


class ViewTokens:
    def __init__(self, store: QuotaStore, limit: int = MAX_VIEW_TOKENS_PER_ACCOUNT) -> None:
        self.store = store
        self.limit = limit

    async def create(self, account_id: str, stream: str) -> tuple[ViewToken, str]:
        """A new view token for the stream and its secret (returned once; only its hash is kept)."""
        token = VIEW_TOKEN_PREFIX + secrets.token_urlsafe(24)
        view_token = await self.store.add_view_token(
            account_id, "vt_" + secrets.token_hex(8), checked_stream_name(stream), hash_key(token), self.limit
        )
        return view_token, token

    async def of_account(self, account_id: str, stream: str | None = None) -> list[ViewToken]:
        """Oldest first; only the stream's when one is given."""
        tokens = await self.store.view_tokens(account_id)
        return [token for token in tokens if stream is None or token.stream == stream]

    async def revoke(self, account_id: str, stream: str, token_id: str) -> None:
        if not await self.store.revoke_view_token(account_id, stream, token_id):
            raise ViewTokenNotFound(f"the stream {stream!r} has no view token {token_id!r}")

    async def resolve(self, token: str) -> ViewToken:
        """The view token behind a secret; InvalidViewToken for an unknown or revoked one."""
        view_token = await self.store.view_token_for_hash(hash_key(token))
        if view_token is None:
            raise InvalidViewToken("the view token is not valid (unknown or revoked)")
        return view_token
