"""View tokens in the store, run against MemoryStore and RedisStore alike (fixture `under_test`)."""

from __future__ import annotations

import pytest
from store_harness import StoreUnderTest

from quota.accounts import hash_key
from quota.errors import AccountNotFound, ViewTokenLimit
from quota.memory_store import MemoryStore
from quota.store import QuotaStore
from quota.view_tokens import InvalidStreamName, InvalidViewToken, ViewTokenNotFound, ViewTokens


async def stored_text(under_test: StoreUnderTest) -> str:
    """Everything the store holds, as text: every Redis key and value, or the memory store's dicts."""
    if under_test.server is None:
        store = under_test.store
        assert isinstance(store, MemoryStore)
        return repr(store._accounts) + repr(store._view_token_index)
    admin = under_test.admin
    parts = []
    async for key in admin.scan_iter("*"):
        kind = await admin.type(key)
        value = {
            "string": admin.get,
            "hash": admin.hgetall,
            "zset": lambda k: admin.zrange(k, 0, -1, withscores=True),
            "set": admin.smembers,
        }[kind](key)
        parts.append(f"{key} {await value}")
    return "\n".join(sorted(parts))


@pytest.fixture
async def tokens(store: QuotaStore) -> ViewTokens:
    await store.create_account("alice", "paid", 0, hash_key("alice-key"))
    await store.create_account("bob", "paid", 0, hash_key("bob-key"))
    return ViewTokens(store, limit=3)


async def test_create_list_resolve_revoke(tokens: ViewTokens, under_test: StoreUnderTest):
    first, first_secret = await tokens.create("alice", "main-cam")
    await under_test.advance(0.01)
    second, second_secret = await tokens.create("alice", "second_cam")
    assert first.id != second.id and first_secret != second_secret
    assert (first.account_id, first.stream) == ("alice", "main-cam")
    assert abs(first.created_at - await under_test.now()) < 60

    assert [t.id for t in await tokens.of_account("alice")] == [first.id, second.id]
    assert [t.id for t in await tokens.of_account("alice", "main-cam")] == [first.id]
    assert await tokens.of_account("bob") == []
    assert await tokens.resolve(first_secret) == first
    assert await tokens.resolve(second_secret) == second

    await tokens.revoke("alice", "main-cam", first.id)
    with pytest.raises(InvalidViewToken):
        await tokens.resolve(first_secret)
    assert await tokens.resolve(second_secret) == second
    assert [t.id for t in await tokens.of_account("alice")] == [second.id]
    with pytest.raises(ViewTokenNotFound):  # revoking twice
        await tokens.revoke("alice", "main-cam", first.id)


async def test_only_the_owner_revokes_and_only_under_the_tokens_stream(tokens: ViewTokens):
    token, secret = await tokens.create("alice", "cam")
    with pytest.raises(ViewTokenNotFound):
        await tokens.revoke("bob", "cam", token.id)
    with pytest.raises(ViewTokenNotFound):
        await tokens.revoke("alice", "other-cam", token.id)
    assert await tokens.resolve(secret) == token


async def test_unknown_secrets_and_api_keys_resolve_to_nothing(tokens: ViewTokens):
    for secret in ("fv_nothing", "alice-key", ""):
        with pytest.raises(InvalidViewToken):
            await tokens.resolve(secret)


async def test_the_store_keeps_only_the_hash(tokens: ViewTokens, under_test: StoreUnderTest):
    _, secret = await tokens.create("alice", "cam")
    text = await stored_text(under_test)
    assert hash_key(secret) in text  # the dump does hold the tokens
    assert secret not in text and secret[3:] not in text


async def test_an_account_holds_a_bounded_number(tokens: ViewTokens, under_test: StoreUnderTest):
    kept = [await tokens.create("alice", f"cam{n}") for n in range(3)]
    before = await stored_text(under_test)
    with pytest.raises(ViewTokenLimit) as refused:
        await tokens.create("alice", "cam3")
    assert refused.value.limit == 3 and "revoke" in str(refused.value)
    assert await stored_text(under_test) == before  # a refused token leaves nothing behind
    await tokens.create("bob", "cam")  # the bound is per account
    await tokens.revoke("alice", "cam0", kept[0][0].id)
    await tokens.create("alice", "cam3")  # a revoked one frees its place


async def test_an_unknown_account_gets_no_token(store: QuotaStore, under_test: StoreUnderTest):
    before = await stored_text(under_test)
    with pytest.raises(AccountNotFound):
        await ViewTokens(store).create("nobody", "cam")
    assert await stored_text(under_test) == before


@pytest.mark.parametrize("stream", ["", "a" * 65, "with space", "dot.ted", "slash/", "ünïcode", "a:b", "cam\n"])
async def test_stream_names_are_letters_digits_dash_underscore(tokens: ViewTokens, stream: str):
    with pytest.raises(InvalidStreamName):
        await tokens.create("alice", stream)


async def test_a_stream_name_of_64_characters_is_fine(tokens: ViewTokens):
    token, _ = await tokens.create("alice", "A-z_9" + "x" * 59)
    assert len(token.stream) == 64
