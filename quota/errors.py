"""The quota package's errors; `signaling` maps them to HTTP statuses."""


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


class LeaseNotFound(QuotaError):
    code = "lease_not_found"


class StoreUnavailable(QuotaError):
    """The store cannot be reached; metering fails closed."""

    code = "quota_store_unavailable"
