"""--quota-config: tiers and prices from an operator's TOML file, checked with errors that name
the key; the tiers it gives are the ones both stores meter by (through the real server)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from client.facefuse_client import FacefuseClient, ServerError
from quota.quota_config import QuotaConfigError, load_quota_config
from quota.settings import DEFAULT_PRICES, DEFAULT_TIERS, QuotaSettings, TierRules
from support.server import loopback_settings, running_server

OPERATOR_FILE = """
[tiers.trial]
refill_tokens = 3
refill_max = 3
hourly_cap = 7
priority = 1
max_sessions = 2

[tiers.vip]
metered = false
priority = 5
max_sessions = 9

[prices]
1280x720 = 2.5
640x480 = 0.5
above = 4
"""


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "quota.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_gives_the_tiers_and_the_prices_by_frame_size(tmp_path):
    quota = QuotaSettings(**load_quota_config(written(tmp_path, OPERATOR_FILE)))
    assert quota.tiers == (
        TierRules("trial", refill_tokens=3, refill_max=3, hourly_cap=7, priority=1, max_sessions=2),
        TierRules("vip", metered=False, priority=5, max_sessions=9),
    )
    assert quota.prices == ((640 * 480, 0.5), (1280 * 720, 2.5), (None, 4.0))  # in order of size, whatever the file's
    assert [quota.price_per_second(w, h) for w, h in ((640, 480), (480, 640), (1280, 720), (1920, 1080))] == [
        0.5,
        0.5,
        2.5,
        4.0,
    ]


def test_a_part_left_out_keeps_the_built_in_table(tmp_path):
    assert load_quota_config(written(tmp_path, "[prices]\nabove = 2\n"))["tiers"] == DEFAULT_TIERS
    assert load_quota_config(written(tmp_path, "[tiers.free]\nmax_sessions = 1\n"))["prices"] == DEFAULT_PRICES


@pytest.mark.parametrize(
    "text, said",
    [
        ("[tiers.free]\nmax_session = 1\n", "tiers.free: unknown key 'max_session'"),
        ("[tiers.free]\npriority = 1.5\n", "tiers.free.priority must be a whole number"),
        ("[tiers.free]\nmax_sessions = -1\n", "tiers.free.max_sessions must be from 0"),
        ('[tiers.free]\nhourly_cap = "60"\n', "tiers.free.hourly_cap must be a number"),
        ("[tiers.free]\nrefill_tokens = nan\n", "tiers.free.refill_tokens must be a number"),
        ("[tiers.free]\nmetered = 1\n", "tiers.free.metered must be true or false"),
        ('[tiers."free tier"]\n', "tiers.free tier: a tier name is"),
        ("[tiers]\n", "tiers: no tier given"),
        ("tiers = 3\n", "tiers must be a table"),
        ("[prices]\n640x480 = 1\n", "prices.above is missing"),
        ("[prices]\nhd = 1\nabove = 2\n", "prices.hd: a price's key is WIDTHxHEIGHT"),
        ("[prices]\n640x480 = 1\n480x640 = 2\nabove = 3\n", "the same number of pixels"),
        ("[prices]\nabove = -1\n", "prices.above must be from 0"),
        ("[price]\nabove = 1\n", "the file: unknown key 'price'"),
        ("", "neither [tiers] nor [prices]"),
        ("[tiers.free\n", "not valid TOML"),
    ],
)
def test_a_bad_file_is_one_error_naming_the_key(text, said, tmp_path):
    path = written(tmp_path, text)
    with pytest.raises(QuotaConfigError) as caught:
        load_quota_config(path)
    message = str(caught.value)
    assert message.startswith(f"--quota-config {path}: ") and said in message and "\n" not in message, message


def test_a_missing_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(QuotaConfigError, match="cannot read it"):
        load_quota_config(tmp_path / "nosuch.toml")


ADMIN = "admin-key-for-quota-config-tests"


async def test_both_stores_meter_by_the_files_tiers(store_url, tmp_path):
    """An account of the file's tier shows its cap and sessions, and refills by its rule; a built-in
    tier the file does not give is refused."""
    quota = {
        **load_quota_config(written(tmp_path, OPERATOR_FILE)),
        "admin_key": ADMIN,
        "redis_url": store_url,
        "refill_period_s": 0.5,
    }
    async with running_server(loopback_settings("passthrough", quota=quota)) as (url, _app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            created = await admin.request(
                "POST", "/api/admin/accounts", json={"id": "t1", "tier": "trial", "balance": 0}
            )
            assert (created["tier"], created["hourly_cap"], created["max_sessions"], created["metered"]) == (
                "trial",
                7,
                2,
                True,
            )
            await asyncio.sleep(1.5)  # three refill periods: 3 tokens each, held at refill_max
            assert (await admin.request("GET", "/api/admin/accounts/t1"))["balance"] == 3
            with pytest.raises(ServerError) as refused:
                await admin.request("POST", "/api/admin/accounts", json={"id": "p1", "tier": "paid", "balance": 0})
            assert refused.value.status == 400 and "unknown tier 'paid'" in str(refused.value)
