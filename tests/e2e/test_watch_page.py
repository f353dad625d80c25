"""The watch page (/watch/{stream}?token=...), OBS's Browser Source player, in headless Chromium
against a server with accounts: it plays the swapped face a Chromium publish page (/publish, WHIP)
sends under the stream name, with its audio; it comes back by itself when the publisher stops and
starts again; a token the server refuses is said on the page and nothing plays."""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from support.browser import (
    ServerProcess,
    chromium,
    chromium_flags,
    face_path,
    free_port,
    http_json,
    served,
    wait_for,
    write_y4m,
)
from support.face_identity import identity
from support.server import face_rgb
from support.stream_pages import (
    WATCH_AUDIO_JS,
    go_live,
    publish_again,
    video_frame_rgb,
    video_grey,
    watch_state,
)

pytestmark = pytest.mark.browser

ADMIN = "admin-key-for-the-watch-page-test"
# The watch page's own timings (static/watch.js): a stall it acts on, how often it looks, its longest backoff.
STALL_S = 3.0
WATCHDOG_S = 1.0
MAX_RETRY_S = 4.0
STREAM = "show"


@dataclass
class Account:
    server: ServerProcess
    api_key: str

    def view_token(self, stream: str) -> dict:
        status, body = http_json("POST", f"{self.server.base_url}/api/streams/{stream}/view-tokens", token=self.api_key)
        assert status == 201, body
        return body

    def viewers(self, stream: str) -> list[dict]:
        status, body = http_json("GET", f"{self.server.base_url}/api/streams", token=self.api_key)
        assert status == 200, body
        return next((s["viewers"] for s in body["streams"] if s["stream"] == stream), [])


@pytest.fixture(scope="module")
def account(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Account]:
    """A mesh server with accounts (so view tokens matter) and one account with tokens to spend."""
    directory = tmp_path_factory.mktemp("watch-page")
    key_file = directory / "admin.key"
    key_file.write_text(ADMIN + "\n")
    args = ("--admin-key-file", str(key_file))
    with served(directory / "server.log", chain="mesh", extra_args=args, ready_timeout=60, stop_timeout=10) as server:
        status, body = http_json(
            "POST",
            f"{server.base_url}/api/admin/accounts",
            body={"id": "streamer", "tier": "paid", "balance": 1_000_000},
            token=ADMIN,
        )
        assert status == 201, body
        yield Account(server, body["api_key"])


@contextlib.contextmanager
def browser(directory: Path, *, sound_needs_a_click: bool = False) -> Iterator[object]:
    """A headless Chromium whose fake camera shows Obama. With sound_needs_a_click, Chromium's own
    autoplay policy: a page may not start playing sound before the person clicks in it."""
    directory.mkdir()
    clip = write_y4m(face_path("obama.jpg"), directory / "camera.y4m", frames=30)
    (directory / "profile").mkdir()
    flags = chromium_flags(clip, directory / "profile")
    if sound_needs_a_click:
        flags = [flag for flag in flags if not flag.startswith("--autoplay-policy=")]
    with chromium(flags) as driver:
        yield driver


def playing_frames(viewer, after: int = 0) -> int | None:
    """The watch page's decoded frames once it plays and has more than `after` of them."""
    state = watch_state(viewer)
    assert state["state"] not in ("unauthorized", "error"), state
    return state["framesDecoded"] if state["state"] == "playing" and state["framesDecoded"] > after else None


def test_the_watch_page_plays_the_swap_and_comes_back_when_the_publisher_restarts(account: Account, tmp_path: Path):
    token = account.view_token(STREAM)
    with browser(tmp_path / "publisher") as publisher, browser(tmp_path / "viewer") as viewer:
        go_live(publisher, account.server.base_url, STREAM, "grace_hopper.jpg", api_key=account.api_key)
        opened = time.monotonic()
        viewer.get(f"{account.server.base_url}{token['watch_url']}")
        wait_for(lambda: playing_frames(viewer), 30, "the watch page plays")
        first_play_s = time.monotonic() - opened
        state = watch_state(viewer)
        assert state["dataState"] == "playing" and state["connects"] == 1 and state["message"] == "", state
        print(f"\nfirst picture {first_play_s:.1f} s after the page opened")
        # full-bleed on black, no controls, the sound on
        assert viewer.execute_script(
            "const v = document.getElementById('video'), r = v.getBoundingClientRect();"
            "return [r.width === innerWidth, r.height === innerHeight, getComputedStyle(v).objectFit,"
            " v.controls, v.muted, getComputedStyle(document.body).backgroundColor];"
        ) == [True, True, "contain", False, False, "rgb(0, 0, 0)"]

        # the swapped face, in the publisher's scene
        def swapped_scene() -> float | None:
            shown, camera = video_grey(viewer, "video"), video_grey(publisher, "local-video")
            if shown is None or camera is None:
                return None
            r = float(np.corrcoef(shown.ravel(), camera.ravel())[0, 1])
            face = float(np.abs(shown - camera)[6:30, 16:48].mean())
            return r if face > 4 else None  # a passthrough measures 1-2 grey levels here (codec noise)

        r = wait_for(swapped_scene, 30, "the watch page shows a changed face", 0.5)
        assert r > 0.6, f"the publisher's scene (correlation {r:.2f})"
        shown = video_frame_rgb(viewer, "video")
        to_source = float(identity(shown) @ identity(face_rgb("grace_hopper.jpg")))
        to_target = float(identity(shown) @ identity(face_rgb("obama.jpg")))
        print(f"watched face: SFace {to_source:.3f} to the source, {to_target:.3f} to the target")
        assert to_source > to_target, "the watch page shows the source's identity"

        # the publisher's microphone comes along, unmuted
        audio = wait_for(
            lambda: (
                (viewer.execute_async_script(WATCH_AUDIO_JS) or {}).get("packets", 0) > 10
                and viewer.execute_async_script(WATCH_AUDIO_JS)
            ),
            15,
            "audio packets on the watch page",
        )
        assert audio["muted"] is False, audio

        # the publisher stops and is back 2 s later: the page plays again by itself, on a new connection
        publisher.find_element("id", "stop").click()
        wait_for(lambda: publisher.execute_script("return document.body.dataset.state;") == "stopped", 10, "stopped")
        time.sleep(2.0)
        publish_again(publisher)
        back = time.monotonic()
        again = wait_for(
            lambda: watch_state(viewer)["connects"] >= 2 and playing_frames(viewer),
            60,
            "the watch page plays again",
            0.25,
        )
        recovered_s = time.monotonic() - back
        # what the page may take, all of it: notice the stall, wait out its longest backoff, then
        # connect as it did the first time (measured above); twice that for a slower machine
        bound_s = 2 * (STALL_S + WATCHDOG_S + MAX_RETRY_S + first_play_s)
        print(f"plays again {recovered_s:.1f} s after the publisher was back (bound {bound_s:.1f} s)")
        assert recovered_s < bound_s
        time.sleep(2.0)
        later = watch_state(viewer)
        assert later["state"] == "playing" and later["framesDecoded"] >= again + 10, later
        assert len(account.viewers(STREAM)) == 1, "the page deleted its old viewer"


def assert_refused_and_not_playing(viewer, base_url: str, watch_url: str) -> None:
    """The page says the link does not work, shows no picture, and does not retry in a loop."""
    viewer.get(f"{base_url}{watch_url}")
    state = wait_for(
        lambda: (s := watch_state(viewer))["state"] == "unauthorized" and s, 15, "the page says the link is refused"
    )
    assert state["dataState"] == "unauthorized" and state["lastStatus"] == 401, state
    assert "token" in state["message"] and viewer.find_element("id", "message").is_displayed(), state
    time.sleep(3.0)  # three of the fastest retries' worth: a refused token is retried only slowly
    state = watch_state(viewer)
    assert (state["attempts"], state["connects"], state["framesDecoded"]) == (1, 0, 0), state
    assert viewer.execute_script("return document.getElementById('video').readyState;") == 0


def test_a_revoked_or_other_streams_token_is_said_and_plays_nothing(account: Account, tmp_path: Path):
    revoked = account.view_token(STREAM)
    status, body = http_json(
        "DELETE", f"{account.server.base_url}/api/streams/{STREAM}/view-tokens/{revoked['id']}", token=account.api_key
    )
    assert status == 200, body
    other = account.view_token("another-show")
    with browser(tmp_path / "publisher") as publisher, browser(tmp_path / "viewer") as viewer:
        go_live(publisher, account.server.base_url, STREAM, "grace_hopper.jpg", api_key=account.api_key)
        assert_refused_and_not_playing(viewer, account.server.base_url, revoked["watch_url"])
        assert_refused_and_not_playing(
            viewer, account.server.base_url, other["watch_url"].replace("/watch/another-show", f"/watch/{STREAM}")
        )
        assert account.viewers(STREAM) == []


def test_where_sound_needs_a_click_it_plays_muted_until_one(account: Account, tmp_path: Path):
    """As a desktop browser (not OBS) would: muted playback, and a click turns the sound on. With
    ?background=transparent the page lets what is below it show."""
    token = account.view_token(STREAM)
    with (
        browser(tmp_path / "publisher") as publisher,
        browser(tmp_path / "viewer", sound_needs_a_click=True) as viewer,
    ):
        go_live(publisher, account.server.base_url, STREAM, None, api_key=account.api_key)
        viewer.get(f"{account.server.base_url}{token['watch_url']}&background=transparent")
        frames = wait_for(lambda: playing_frames(viewer), 30, "the watch page plays")
        assert watch_state(viewer)["audioMuted"] is True
        assert viewer.execute_script("return document.getElementById('video').muted;") is True
        assert viewer.execute_script("return getComputedStyle(document.body).backgroundColor;") == "rgba(0, 0, 0, 0)"
        button = viewer.find_element("id", "unmute")
        assert button.is_displayed()

        button.click()
        wait_for(lambda: not watch_state(viewer)["audioMuted"], 5, "the sound is on after the click")
        assert viewer.execute_script("const v = document.getElementById('video'); return [v.muted, v.paused];") == [
            False,
            False,
        ]
        assert not button.is_displayed()
        wait_for(lambda: watch_state(viewer)["framesDecoded"] > frames + 10, 10, "it goes on playing")


@pytest.mark.slow  # the server's own gathering waits on the unanswered servers: some 40 s in all
def test_it_waits_for_the_stream_then_gathers_with_the_servers_stun_and_turn_from_the_next_connection(tmp_path: Path):
    """The Link headers of a WHEP answer name the server's ICE servers; the page's later
    connections gather with them (the first offer went out before it knew them). A local server:
    the page needs no token there, and it waits for a stream not published yet."""
    unanswered = free_port()  # nothing answers there: gathering gives up on it, the host candidates stay
    args = (
        "--ice-server",
        f"stun:127.0.0.1:{unanswered}",
        "--ice-server",
        f"turn:viewer:s3cret@127.0.0.1:{unanswered}",
    )
    with (
        served(tmp_path / "server.log", chain="passthrough", extra_args=args) as server,
        browser(tmp_path / "publisher") as publisher,
        browser(tmp_path / "viewer") as viewer,
    ):
        # opened before anything is published: it waits, showing nothing, and asks again with a backoff
        viewer.get(f"{server.base_url}/watch/ice")
        wait_for(lambda: watch_state(viewer)["lastStatus"] == 409, 15, "the page heard that nothing is published")
        time.sleep(4.0)
        waiting = watch_state(viewer)
        assert (waiting["state"], waiting["dataState"], waiting["message"]) == ("waiting", "waiting", ""), waiting
        assert 2 <= waiting["attempts"] <= 6, f"0.5, 1, 2, 4 s apart, not in a loop: {waiting}"
        go_live(publisher, server.base_url, "ice", None)
        wait_for(lambda: playing_frames(viewer), 30, "the watch page plays once the stream is published")
        expected = [
            {"urls": f"stun:127.0.0.1:{unanswered}"},
            {"urls": f"turn:127.0.0.1:{unanswered}", "username": "viewer", "credential": "s3cret"},
        ]
        assert viewer.execute_script("return window.facefuseWatch.iceServers;") == expected
        assert viewer.execute_script("return window.facefuseWatch.pc.getConfiguration().iceServers;") == []

        publisher.find_element("id", "stop").click()
        wait_for(lambda: publisher.execute_script("return document.body.dataset.state;") == "stopped", 10, "stopped")
        publish_again(publisher)
        wait_for(lambda: watch_state(viewer)["connects"] >= 2 and playing_frames(viewer), 60, "the page plays again")
        configured = viewer.execute_script("return window.facefuseWatch.pc.getConfiguration().iceServers;")
        assert [(s["urls"], s["username"] or None, s["credential"] or None) for s in configured] == [
            ([f"stun:127.0.0.1:{unanswered}"], None, None),
            ([f"turn:127.0.0.1:{unanswered}"], "viewer", "s3cret"),
        ], configured


def test_no_view_token_reaches_the_servers_log_or_a_referer(account: Account, tmp_path: Path):
    """Before: each load of a watch link wrote its token into 7 access-log lines (the page's URL,
    and the Referer of its CSS, scripts, WHEP POST and DELETE)."""
    quiet = "nobody-live"  # nothing published: the page asks WHEP, gets 409, and keeps asking
    link = account.view_token(quiet)
    secret = link["token"]
    assert link["watch_url"] == f"/watch/{quiet}#token={secret}"
    older_link = f"/watch/{quiet}?token={secret}"
    with browser(tmp_path / "viewer") as viewer:
        for url in (link["watch_url"], older_link):
            viewer.get(f"{account.server.base_url}{url}")
            wait_for(lambda: watch_state(viewer)["lastStatus"] == 409, 15, "the page asked WHEP with the token")
    log = account.server.log_tail(10**7)
    assert secret not in log and secret[:12] not in log, "a view token in the server's log"
    whep_posts = [r for r in account.server.requests(f"/whep/{quiet}") if r[0] == "POST"]
    assert len(whep_posts) >= 2, whep_posts  # the page did send the token, as a Bearer header
    assert f"GET /watch/{quiet}?token=*** " in log, "the older link's request line, masked"

    with urllib.request.urlopen(f"{account.server.base_url}/watch/{quiet}") as page:
        assert page.headers["Referrer-Policy"] == "no-referrer"
        assert page.headers["X-Frame-Options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    with urllib.request.urlopen(f"{account.server.base_url}/static/watch.js") as script:
        assert script.headers["Referrer-Policy"] == "no-referrer"
