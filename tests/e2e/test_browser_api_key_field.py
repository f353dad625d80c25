"""The camera page asks for an API key only where the server has accounts: a local server (no
admin key) runs one account without auth, and the field only confused its user."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.browser import chromium, chromium_flags, face_path, http_json, served, wait_for, write_y4m

pytestmark = pytest.mark.browser

ADMIN = "admin-key-for-the-api-key-field-test"


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    directory = tmp_path_factory.mktemp("browser")
    clip = write_y4m(face_path("obama.jpg"), directory / "obama.y4m", frames=2)
    profile = directory / "profile"
    profile.mkdir()
    with chromium(chromium_flags(clip, profile)) as browser:
        yield browser


def field_after_the_page_asked(driver, base_url: str) -> tuple[bool, object]:
    """(whether the API-key field shows, what the page learned of the server's accounts)."""
    driver.get(base_url + "/")
    local = wait_for(
        lambda: driver.execute_script(
            "return window.facefuse.localAccount === null ? null : String(window.facefuse.localAccount);"
        ),
        timeout=10,
        message="the page did not learn whether the server runs the local account",
    )
    return driver.find_element("id", "api-key").is_displayed(), local


def test_a_local_server_page_has_no_api_key_field(driver, tmp_path: Path):
    with served(tmp_path / "local.log", chain="passthrough") as server:
        assert http_json("GET", f"{server.base_url}/healthz")[1]["local_account"] is True
        assert field_after_the_page_asked(driver, server.base_url) == (False, "true")


def test_a_server_with_accounts_asks_for_the_key(driver, tmp_path: Path):
    with served(tmp_path / "keyed.log", chain="passthrough", extra_args=("--admin-key", ADMIN)) as server:
        assert http_json("GET", f"{server.base_url}/healthz")[1]["local_account"] is False
        assert field_after_the_page_asked(driver, server.base_url) == (True, "false")


def test_the_key_typed_in_is_kept_in_this_tab_only(driver, tmp_path: Path):
    """Before: the camera and publish pages kept it in localStorage, where it outlived the tab."""
    with served(tmp_path / "keyed.log", chain="passthrough", extra_args=("--admin-key", ADMIN)) as server:
        for page in ("/", "/publish"):
            driver.get(server.base_url + page)
            field = wait_for(lambda: driver.find_element("id", "api-key"), 10, "the API-key field")
            field.clear()
            field.send_keys("ff_typed-in-key")
            driver.execute_script("arguments[0].dispatchEvent(new Event('change'));", field)
            kept = driver.execute_script("return [sessionStorage.getItem('facefuse.apiKey'), localStorage.length];")
            assert kept == ["ff_typed-in-key", 0], (page, kept)
            driver.execute_script("sessionStorage.clear();")
