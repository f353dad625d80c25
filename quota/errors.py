"""The quota package's errors; `signaling` maps them to HTTP statuses."""

from quota.settings import MAX_BALANCE_TOKENS, to_tokens


class QuotaError(Exception):
    code = "quota_error"


class AccountNotFound(QuotaError):
    code = "account_not_found"


class AccountExists(QuotaError):
    code = "account_exists"


class NothingToSpend(QuotaError):
    """402: the account has no tokens (or no hourly allowance) left."""

    code = "payment_required"


class TooManyLeases(QuotaError):
    """429: the account already runs as many sessions as its tier allows."""

    code = "too_many_sessions"

    def __init__(self, open_leases: int, max_sessions: int, frees_in_s: int) -> None:
        self.open_leases = open_leases
        self.max_sessions = max_sessions
        self.frees_in_s = frees_in_s  # when the soonest lease expires unless its session renews it
        super().__init__(
            f"{open_leases} of {max_sessions} sessions open; a slot frees up when one of them ends, or in "
            f"{frees_in_s} s if the one whose lease expires first is no longer running"
        )


class BalanceLimit(QuotaError):
    """409: the credit would take the balance past MAX_BALANCE_TOKENS."""

    code = "balance_limit"


BALANCE_LIMIT_MESSAGE = f"the credit would take the balance past {MAX_BALANCE_TOKENS:,} tokens, the most one holds"


class IdempotencyKeyReused(QuotaError):
    """409: a credit repeats an idempotency key with another amount. Answering the first credit's
    result would tell the caller its new amount was credited when nothing was."""

    code = "idempotency_key_reused"

    def __init__(self, idempotency_key: str, original_amount: int) -> None:
        self.original_amount = original_amount  # micro-tokens
        tokens = f"{to_tokens(original_amount):,.6f}".rstrip("0").rstrip(".")
        super().__init__(
            f"the idempotency key {idempotency_key!r} was used for a credit of {tokens} tokens; a retry must "
            "ask for the same amount, another credit needs its own key"
        )


class LeaseNotFound(QuotaError):
    code = "lease_not_found"


class StoreUnavailable(QuotaError):
    """The store cannot be reached; metering fails closed."""

    code = "quota_store_unavailable"


class ViewTokenLimit(QuotaError):
    """409: the account holds as many view tokens as it may."""

    code = "view_token_limit"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"the account holds {limit} view tokens, the most it may: revoke one it no longer needs "
            "(DELETE /api/streams/{stream}/view-tokens/{id}) first"
        )
