"""Accounts and their API keys (stored only as SHA-256 hashes)."""

from __future__ import annotations

import hashlib
import re
import secrets

from quota.errors import AccountExists, QuotaError
from quota.settings import MAX_AMOUNT_TOKENS, QuotaSettings, micro_amount
from quota.store import Account, QuotaStore

LOCAL_ACCOUNT = "local"
LOCAL_TIER = "vip"  # unmetered: the local account is the operator's own
_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class InvalidApiKey(QuotaError):
    code = "unauthorized"


class InvalidAccount(QuotaError):
    code = "invalid_account"


def hash_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


class Accounts:
    def __init__(self, store: QuotaStore, settings: QuotaSettings) -> None:
        self.store = store
        self.settings = settings

    async def create(self, account_id: str, tier: str, balance: float) -> tuple[Account, str]:
        """A new account and its API key (returned once; only its hash is kept)."""
        if not isinstance(account_id, str) or not _ID.fullmatch(account_id):  # "$" would let a final newline by
            raise InvalidAccount("the account id must be 1-64 letters, digits, '.', '_' or '-'")
        try:
            self.settings.tier(tier)
        except ValueError as exc:
            raise InvalidAccount(str(exc)) from None
        micro = micro_amount(balance)
        if micro is None:
            raise InvalidAccount(f"the balance must be a number from 0 to {MAX_AMOUNT_TOKENS:,}")
        api_key = "ff_" + secrets.token_urlsafe(24)
        account = await self.store.create_account(account_id, tier, micro, hash_key(api_key))
        return account, api_key

    async def authenticate(self, api_key: str) -> Account:
        account = await self.store.account_for_key(hash_key(api_key))
        if account is None:
            raise InvalidApiKey("the API key is not valid")
        return await self.store.get_account(account.id, self.settings.tier(account.tier))

    async def get(self, account_id: str) -> Account:
        """The account with its tier's refill applied."""
        tier = await self.store.tier_of(account_id)
        return await self.store.get_account(account_id, self.settings.tier(tier))

    async def ensure_local(self) -> Account:
        """The single unmetered account of a loopback server without an admin key."""
        try:
            await self.store.create_account(LOCAL_ACCOUNT, LOCAL_TIER, 0, hash_key(secrets.token_urlsafe(24)))
        except AccountExists:
            pass
        return await self.get(LOCAL_ACCOUNT)
