"""Tiers and prices from an operator's TOML file (`facefuse serve --quota-config FILE`).

    [tiers.free]
    refill_tokens = 10   # added each refill period while the balance is below refill_max
    refill_max = 10
    hourly_cap = 60      # tokens spendable per hour; left out: no cap
    priority = 0         # who goes first when the device is saturated (higher first)
    max_sessions = 1     # sessions at once, all nodes together

    [tiers.vip]
    metered = false      # never charged (still recorded)
    priority = 2
    max_sessions = 16

    [prices]             # tokens per second of processed video, by output size in pixels
    640x480 = 1.0        # up to 640*480 pixels
    1280x720 = 3.0       # up to 1280*720
    above = 5.0          # larger than every size listed

A tier's keys that are left out take TierRules' defaults; a file without [prices] or without
[tiers] keeps the built-in table of that part. Every error names the key it is about.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Any

from quota.settings import DEFAULT_PRICES, DEFAULT_TIERS, MAX_AMOUNT_TOKENS, TierRules

ABOVE = "above"
MAX_PRIORITY = 1000
MAX_SESSIONS = 10_000
_TIER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # tier names go into JSON answers and Redis hashes
_SIZE = re.compile(r"^([1-9][0-9]{0,4})x([1-9][0-9]{0,4})$")

Prices = tuple[tuple[int | None, float], ...]


class QuotaConfigError(ValueError):
    pass


def load_quota_config(path: Path) -> dict[str, Any]:
    """The file's tiers and prices as QuotaSettings fields. QuotaConfigError, naming the file and key."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise QuotaConfigError(f"--quota-config {path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise QuotaConfigError(f"--quota-config {path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise QuotaConfigError(f"--quota-config {path}: not valid TOML: {exc}") from None
    try:
        return quota_config(data)
    except QuotaConfigError as exc:
        raise QuotaConfigError(f"--quota-config {path}: {exc}") from None


def quota_config(data: dict[str, Any]) -> dict[str, Any]:
    _only_keys(data, ("tiers", "prices"), "the file")
    if not data:
        raise QuotaConfigError("neither [tiers] nor [prices] is given")
    tiers = _tiers(_table(data["tiers"], "tiers")) if "tiers" in data else DEFAULT_TIERS
    prices = _prices(_table(data["prices"], "prices")) if "prices" in data else DEFAULT_PRICES
    return {"tiers": tiers, "prices": prices}


def _tiers(table: dict[str, Any]) -> tuple[TierRules, ...]:
    if not table:
        raise QuotaConfigError("tiers: no tier given")
    return tuple(_tier(name, _table(rules, f"tiers.{name}")) for name, rules in table.items())


def _tier(name: str, rules: dict[str, Any]) -> TierRules:
    where = f"tiers.{name}"
    if not _TIER_NAME.match(name):
        raise QuotaConfigError(f"{where}: a tier name is 1-64 letters, digits, '.', '_' or '-'")
    _only_keys(rules, ("metered", "refill_tokens", "refill_max", "hourly_cap", "priority", "max_sessions"), where)
    given: dict[str, Any] = {}
    if "metered" in rules:
        if not isinstance(rules["metered"], bool):
            raise QuotaConfigError(f"{where}.metered must be true or false, not {rules['metered']!r}")
        given["metered"] = rules["metered"]
    for key in ("refill_tokens", "refill_max", "hourly_cap"):
        if key in rules:
            given[key] = _amount(rules[key], f"{where}.{key}", MAX_AMOUNT_TOKENS)
    if "priority" in rules:
        given["priority"] = _integer(rules["priority"], f"{where}.priority", -MAX_PRIORITY, MAX_PRIORITY)
    if "max_sessions" in rules:
        given["max_sessions"] = _integer(rules["max_sessions"], f"{where}.max_sessions", 0, MAX_SESSIONS)
    return TierRules(name, **given)


def _prices(table: dict[str, Any]) -> Prices:
    if ABOVE not in table:
        raise QuotaConfigError(f"prices.{ABOVE} is missing: the price of frames larger than every size listed")
    classes: dict[int, tuple[str, float]] = {}
    for key, value in table.items():
        if key == ABOVE:
            continue
        size = _SIZE.match(key)
        if size is None:
            raise QuotaConfigError(f"prices.{key}: a price's key is WIDTHxHEIGHT (e.g. 640x480) or {ABOVE}")
        pixels = int(size[1]) * int(size[2])
        if pixels in classes:
            raise QuotaConfigError(f"prices.{key} and prices.{classes[pixels][0]} are the same number of pixels")
        classes[pixels] = (key, _amount(value, f"prices.{key}", MAX_AMOUNT_TOKENS))
    limited = tuple((pixels, price) for pixels, (_, price) in sorted(classes.items()))
    return (*limited, (None, _amount(table[ABOVE], f"prices.{ABOVE}", MAX_AMOUNT_TOKENS)))


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise QuotaConfigError(f"{where} must be a table ([{where}]), not {value!r}")
    return value


def _only_keys(table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = [key for key in table if key not in known]
    if unknown:
        raise QuotaConfigError(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(known)}")


def _amount(value: Any, where: str, most: float) -> float:
    """Tokens: a TOML integer or float from 0 to most (bool is no number here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise QuotaConfigError(f"{where} must be a number, not {value!r}")
    if not 0 <= value <= most:
        raise QuotaConfigError(f"{where} must be from 0 to {most:,}, not {value}")
    return float(value)


def _integer(value: Any, where: str, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuotaConfigError(f"{where} must be a whole number, not {value!r}")
    if not least <= value <= most:
        raise QuotaConfigError(f"{where} must be from {least} to {most}, not {value}")
    return value
