"""The camera page on a full node: its offer goes by 307 to another node, and it streams from there."""

import asyncio

import pytest

from client.facefuse_client import FacefuseClient
from support.browser import INBOUND_VIDEO_STATS_JS, chromium, chromium_flags, face_path, wait_for, write_y4m
from support.cluster_nodes import camera, cluster
from support.metering import ADMIN, create_account
from support.server import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.slow]


async def test_the_camera_page_on_a_full_node_streams_from_another(redis_server, tmp_path):
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=30)
    profile = tmp_path / "profile"
    profile.mkdir()
    with cluster(redis_server.url, tmp_path, ("--max-sessions", "1"), (), pages_of_each_other=True) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "pat", balance=100, tier="paid")
        async with FacefuseClient(nodes[0].base_url, api_key=key) as script:
            filling = await script.connect(camera(0))  # node-0 is full from now on
            await wait_until(lambda: filling.frames_received >= 3, timeout=20)
            with chromium(chromium_flags(clip, profile)) as driver:
                driver.get(nodes[0].base_url + "/")
                wait_for(lambda: driver.find_element("id", "api-key").is_displayed(), 10, "the API-key field")
                driver.find_element("id", "api-key").send_keys(key)
                driver.find_element("id", "start").click()
                session_id = wait_for(
                    lambda: driver.execute_script("return document.body.dataset.sessionId || null;"), 20, "session id"
                )
                wait_for(
                    lambda: (driver.execute_async_script(INBOUND_VIDEO_STATS_JS) or {}).get("framesDecoded"),
                    20,
                    "the first decoded frame from the other node",
                )
                listed = await script.request("GET", "/api/sessions")
                placed = {s["session_id"]: s["node_id"] for s in listed["sessions"]}
                assert placed == {filling.session_id: "node-0", session_id: "node-1"}

                driver.find_element("id", "stop").click()  # its DELETE goes to node-0, which forwards it
                for _ in range(50):
                    listed = await script.request("GET", "/api/sessions")
                    if [s["session_id"] for s in listed["sessions"]] == [filling.session_id]:
                        break
                    await asyncio.sleep(0.2)
                else:
                    pytest.fail(f"the page's session did not end on node-1: {listed}")
            await filling.close()


async def test_the_dashboard_on_one_node_previews_a_stream_published_on_another(redis_server, tmp_path):
    """The streamer's dashboard lists a session of another node, and its WHEP preview follows the
    307 to the node holding the stream (asked again with the key the browser dropped there)."""
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=30)
    profile = tmp_path / "profile"
    profile.mkdir()
    with cluster(redis_server.url, tmp_path, (), (), pages_of_each_other=True) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "uma", balance=100, tier="paid")
        async with FacefuseClient(nodes[1].base_url, api_key=key) as script:
            published = await script.connect(camera(1), options={"stream": "desk"})
            try:
                await wait_until(lambda: published.frames_received >= 3, timeout=20)
                with chromium(chromium_flags(clip, profile)) as driver:
                    driver.get(nodes[0].base_url + "/dashboard")
                    wait_for(lambda: driver.find_element("id", "key").is_displayed(), 10, "the sign-in form")
                    driver.find_element("id", "key").send_keys(key)
                    driver.find_element("css selector", "#sign-in-form button[type=submit]").click()
                    preview_js = (
                        "const v = document.querySelector(`.card[data-session='${arguments[0]}'] video.preview`);"
                        "return v && !v.hidden && v.videoWidth > 0 ? v.videoWidth : null;"
                    )
                    # polled in a thread: this loop keeps the publisher's frames going meanwhile
                    width = await asyncio.to_thread(
                        wait_for,
                        lambda: driver.execute_script(preview_js, published.session_id),
                        30,
                        "the preview plays",
                    )
                    assert width == 320
                    listed = await script.request("GET", "/api/streams")
                    (stream,) = listed["streams"]
                    assert (stream["node_id"], len(stream["viewers"])) == ("node-1", 1), stream
            finally:
                await published.close()
