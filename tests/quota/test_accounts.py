"""Accounts: which ids they may have."""

from __future__ import annotations

import pytest

from quota.accounts import Accounts, InvalidAccount
from quota.memory_store import MemoryStore
from quota.settings import QuotaSettings


@pytest.mark.parametrize("account_id", ["", "a" * 65, "with space", "a/b", "bob\n", "bob\r\n"])
async def test_an_account_id_is_letters_digits_dot_dash_underscore(account_id: str):
    """ "bob\\n" passed once: the pattern ended in "$", which also matches before a final newline."""
    with pytest.raises(InvalidAccount):
        await Accounts(MemoryStore(), QuotaSettings()).create(account_id, "paid", 0)


async def test_a_fine_id_makes_an_account():
    account, api_key = await Accounts(MemoryStore(), QuotaSettings()).create("Bob_1.x-y" + "z" * 55, "paid", 0)
    assert len(account.id) == 64 and api_key.startswith("ff_")
