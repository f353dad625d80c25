"""Metering when Redis misbehaves, and two server nodes spending one account."""

import asyncio
import re
import signal
import time

import aiohttp
import pytest
import redis.asyncio as redis_asyncio

from client.facefuse_client import FacefuseClient, ServerError
from client.image_track import ImageTrack
from signaling.app_keys import SESSIONS
from support.browser import ServerProcess
from support.metering import ADMIN, InvertedLog, create_account, metered_settings, sent_fps
from support.server import face_rgb, running_server, wait_until

pytestmark = pytest.mark.redis


def meter_levels(session) -> list[tuple[str, str | None]]:
    return [(e["level"], e.get("reason")) for e in session.events if e.get("type") == "meter"]


async def test_redis_stopped_mid_session_fails_closed_and_charges_once(redis_server):
    settings = metered_settings(redis_server.url, lease_s=2.0, slow_below_s=1.0, crawl_below_s=0.5, grace_s=30.0)
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "lee", balance=100)
        async with FacefuseClient(url, api_key=key) as lee:
            log = InvertedLog()
            source = ImageTrack(face_rgb("obama.jpg"), tag=4)
            session = await lee.connect(source, on_frame=log)
            server_session = app[SESSIONS].get(session.session_id)
            await asyncio.sleep(1.0)
            redis_server.stop(kill=True)
            killed = time.monotonic()
            await wait_until(lambda: ("stopped", "quota_store_unavailable") in meter_levels(session), timeout=10)
            ran_on = time.monotonic() - killed
            print(f"processed on the lease for {ran_on:.1f} s after Redis died")
            assert ran_on < 3.5, "no more than the lease (at most 1.4 x 2 s of video) is spent without the store"
            await asyncio.sleep(1.2)  # a second to judge by, after frames in flight (0.2 s)
            now = time.monotonic()
            assert log.fps(now - 1.0, now, processed=True) == 0, "fail closed: nothing processed without the store"
            # at least half of what the camera sent: the point is that it flows (the slack covers
            # frames dropped on a busy or slow machine)
            original, sent = log.fps(now - 1.0, now, processed=False), sent_fps(source, killed, now)
            assert original >= 0.5 * sent, (
                f"the original video keeps flowing: {original:.1f} fps, the camera sent {sent:.1f}"
            )

            redis_server.start()
            await wait_until(lambda: meter_levels(session)[-1][0] == "full", timeout=10)
            await asyncio.sleep(1.0)
            await lee.request("DELETE", f"/api/sessions/{session.session_id}")
            await session.close()
            sent = server_session.stats.frames_charged  # processed frames the encoder took
            account = await lee.request("GET", "/api/account")
            charged = 100 - account["balance"]
            print(f"sent {sent} processed frames, charged {charged:.4f} tokens")
            assert charged == pytest.approx(sent / 30, abs=0.01), "charged exactly once for what was sent"


async def test_a_redis_that_hangs_is_the_stop_reason_from_the_first_event(redis_server):
    """With Redis stopped (SIGSTOP) the lease ran dry while its renewal waited, and the client was
    told `exhausted` (the balance was 100) for 2.5 s before `quota_store_unavailable`."""
    settings = metered_settings(redis_server.url, lease_s=1.0, slow_below_s=1.0, crawl_below_s=0.5, grace_s=30.0)
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "sam", balance=100)
        async with FacefuseClient(url, api_key=key) as sam:
            session = await sam.connect(ImageTrack(face_rgb("obama.jpg"), tag=6))
            await wait_until(lambda: session.frames_received >= 30, timeout=20)
            redis_server.process.send_signal(signal.SIGSTOP)
            try:
                await wait_until(lambda: any(level == "stopped" for level, _ in meter_levels(session)), timeout=10)
            finally:
                redis_server.process.send_signal(signal.SIGCONT)
            stops = [reason for level, reason in meter_levels(session) if level == "stopped"]
            told = [e["reason"] for e in session.events if e.get("type") == "exhausted"]
            assert stops[0] == "quota_store_unavailable", stops
            assert told and told[0] == "quota_store_unavailable", told
            await sam.request("DELETE", f"/api/sessions/{session.session_id}")
            await session.close()


async def health(url: str, path: str = "/healthz") -> tuple[int, dict, float]:
    started = time.monotonic()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}{path}") as response:
            return response.status, await response.json(), time.monotonic() - started


async def test_healthz_tells_a_load_balancer_when_the_quota_store_is_gone(redis_server):
    """Without Redis a metered node accepts no offer (503): its health check must say so, and
    answer in time also when Redis takes connections but never replies (stopped with SIGSTOP)."""
    async with running_server(metered_settings(redis_server.url)) as (url, _app):
        status, body, _ = await health(url)
        assert (status, body["status"], body["quota_store"]) == (200, "ok", "ok")

        redis_server.process.send_signal(signal.SIGSTOP)
        try:
            status, body, took = await health(url)
            alive, alive_body, alive_took = await health(url, "/livez")
        finally:
            redis_server.process.send_signal(signal.SIGCONT)
        print(
            f"healthz with a silent Redis: {status} {body['status']!r} in {took:.2f} s; livez {alive} in {alive_took:.2f} s"
        )
        assert (status, body["status"], body["quota_store"]) == (503, "quota store unavailable", "unavailable")
        assert took < 1.8, "the probe answers before a load balancer gives up on it"
        # not a reason to restart the node (and end its live sessions): the liveness probe says alive
        assert (alive, alive_body["status"]) == (200, "ok") and alive_took < 0.5

        redis_server.stop(kill=True)
        status, body, _ = await health(url)
        assert (status, body["quota_store"]) == (503, "unavailable")

        redis_server.start()
        deadline = time.monotonic() + 10
        while (status := (await health(url))[0]) != 200 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert status == 200, "healthy again once Redis is back"


async def test_a_redis_that_refuses_the_probe_reads_as_unavailable(redis_server):
    """A Redis reply the store gives no meaning to (an ACL user not allowed PING: NOPERM) made
    /healthz a 500 with a traceback in the log; it is the store being unusable: 503."""
    admin = redis_asyncio.from_url(redis_server.url)
    await admin.execute_command("ACL", "SETUSER", "no-ping", "on", ">secret", "~*", "&*", "+@all", "-ping")
    try:
        url = redis_server.url.replace("redis://", "redis://no-ping:secret@", 1)
        async with running_server(metered_settings(url)) as (base_url, _app):
            status, body, _ = await health(base_url)
        assert (status, body["status"], body["quota_store"]) == (503, "quota store unavailable", "unavailable")
    finally:
        await admin.execute_command("ACL", "DELUSER", "no-ping")
        await admin.aclose()


async def test_stopping_with_a_silent_redis_still_stops_the_server_soon(redis_server, tmp_path):
    """A Redis that takes connections but never answers (SIGSTOP) held shutdown 26-28 s, close to
    the 30 s after which an orchestrator kills the process: each lease return waited on its socket
    timeout three times, then once more at the last try."""
    node = ServerProcess(
        tmp_path / "node.log", chain="invert", extra_args=("--admin-key", ADMIN, "--redis-url", redis_server.url)
    )
    exit_code = None
    try:
        node.wait_ready()
        async with FacefuseClient(node.base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "sol", balance=100)
        async with FacefuseClient(node.base_url, api_key=key) as sol:
            sessions = [
                await sol.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240, tag=n)) for n in range(2)
            ]
            await wait_until(lambda: all(s.frames_received >= 5 for s in sessions), timeout=10)
            redis_server.process.send_signal(signal.SIGSTOP)
            try:
                started = time.monotonic()
                exit_code = await asyncio.to_thread(node.terminate, 30)
                took = time.monotonic() - started
            finally:
                redis_server.process.send_signal(signal.SIGCONT)
            for session in sessions:
                await session.close()
    finally:
        if exit_code is None:
            node.terminate()
    log = node.log_path.read_text(errors="replace")  # closed by terminate
    print(f"stopped with a silent Redis: exit {exit_code} after {took:.1f} s")
    assert exit_code == 0, log[-4000:]
    assert took < 12, "shutdown waits a bounded time for a store that does not answer"
    assert "could not return lease" in log, "the unreturned leases are logged"


async def test_script_flush_mid_session_is_survived(redis_server):
    settings = metered_settings(redis_server.url, lease_s=0.5, slow_below_s=1.0, crawl_below_s=0.5)
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "max", balance=100)
        async with FacefuseClient(url, api_key=key) as max_:
            session = await max_.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            server_session = app[SESSIONS].get(session.session_id)
            client = redis_asyncio.from_url(redis_server.url)
            for _ in range(3):
                await asyncio.sleep(0.7)
                await client.script_flush()
            await client.aclose()
            await asyncio.sleep(0.7)
            # the meter's level in every stats event (once a second) while the scripts were flushed:
            # a meter event for "full" may come before the data channel opens, so these are the record
            levels = [e["meter"]["level"] for e in session.events if e.get("type") == "stats" and e.get("meter")]
            assert len(levels) >= 2 and all(level == "full" for level in levels), levels
            assert all(level == "full" for level, _ in meter_levels(session))
            await max_.request("DELETE", f"/api/sessions/{session.session_id}")
            await session.close()
            account = await max_.request("GET", "/api/account")
            sent = server_session.stats.frames_charged  # processed frames the encoder took
            assert sent > 60
            assert 100 - account["balance"] == pytest.approx(sent / 30, abs=0.01)


async def test_a_node_restarted_after_a_crash_gives_its_sessions_slots_back_at_once(redis_server, tmp_path):
    """A killed node's leases kept their accounts' session slots for the lease TTL (60 s): a user
    whose server restarted got 429 reconnecting at once. The node settles them at start; another
    node leaves them (they may be a live node's), and its 429 says when the slot frees up."""

    def node(name: str, node_id: str) -> ServerProcess:
        args = ("--admin-key", ADMIN, "--redis-url", redis_server.url, "--node-id", node_id)
        return ServerProcess(tmp_path / f"{name}.log", chain="invert", extra_args=args)

    def track(tag: int) -> ImageTrack:
        return ImageTrack(face_rgb("obama.jpg"), width=320, height=240, tag=tag)

    crashed = node("crashed", "node-a")
    try:
        crashed.wait_ready()
        async with FacefuseClient(crashed.base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "ora", balance=100, tier="free")  # one session at a time
        async with FacefuseClient(crashed.base_url, api_key=key) as ora:
            session = await ora.connect(track(1))
            await wait_until(lambda: session.frames_received >= 5, timeout=10)
            crashed.process.kill()  # no close, no lease returned
            crashed.process.wait()
            await session.close()
    finally:
        crashed.terminate()

    other, restarted = node("other", "node-b"), None  # node-a's next run starts once node-b has answered
    try:
        other.wait_ready()
        async with FacefuseClient(other.base_url, api_key=key) as ora:
            with pytest.raises(ServerError) as refused:
                await ora.connect(track(2))
        assert (refused.value.status, refused.value.code) == (429, "too_many_sessions")
        frees_in_s = int(re.search(r"in (\d+) s", refused.value.message).group(1))
        assert 30 <= frees_in_s <= 60, refused.value.message  # the killed session's lease TTL, less its age

        restarted = node("restarted", "node-a")
        restarted.wait_ready()
        async with FacefuseClient(restarted.base_url, api_key=key) as ora:
            session = await ora.connect(track(3))  # at once: no 429
            await wait_until(lambda: session.frames_received >= 5, timeout=10)
            await ora.request("DELETE", f"/api/sessions/{session.session_id}")
            await session.close()
        async with FacefuseClient(restarted.base_url, api_key=ADMIN) as admin:
            history = (await admin.request("GET", "/api/admin/accounts/ora"))["history"]
        assert [entry["open"] for entry in history if entry["kind"] == "session"] == [False, False]
        assert "settled the 1 lease(s) its previous run left open" in restarted.log_tail()
    finally:
        started = [process for process in (other, restarted) if process is not None]
        exit_codes = [process.terminate() for process in started]
    assert exit_codes == [0, 0], "".join(process.log_path.read_text(errors="replace")[-3000:] for process in started)


async def test_two_server_processes_spend_one_account_consistently(redis_server, tmp_path):
    """Two `facefuse serve` processes on one Redis, one session each, spending one account down."""
    args = ("--admin-key", ADMIN, "--redis-url", redis_server.url, "--quota-setting", "lease_s=1",
            "--quota-setting", "slow_below_s=0.1", "--quota-setting", "crawl_below_s=0.05",
            "--quota-setting", "grace_s=1")  # fmt: skip
    nodes = [ServerProcess(tmp_path / f"node-{n}.log", chain="invert", extra_args=args) for n in range(2)]
    try:
        for node in nodes:
            node.wait_ready()
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "nia", balance=3)
            logs = [InvertedLog(), InvertedLog()]
            clients = [FacefuseClient(node.base_url, api_key=key) for node in nodes]
            sessions = [
                await client.connect(ImageTrack(face_rgb("obama.jpg"), width=480, height=360, tag=n), on_frame=log)
                for n, (client, log) in enumerate(zip(clients, logs))
            ]
            await wait_until(lambda: all(s.pc.connectionState in ("closed", "failed") for s in sessions), timeout=40)
            for session, client in zip(sessions, clients):
                await session.close()
                await client.close()
            account = await admin.request("GET", "/api/admin/accounts/nia")
        spent = {e["session_id"]: e["spent"] for e in account["history"] if e["kind"] == "session"}
        received = [sum(inverted for _, inverted in log.frames) for log in logs]
        print(f"balance left {account['balance']:.4f}; spent per session {spent}; processed frames received {received}")
        assert account["balance"] >= 0
        assert set(spent) == {s.session_id for s in sessions}
        assert sum(spent.values()) == pytest.approx(3 - account["balance"], abs=1e-6), "history adds up to the charge"
        assert 3 - account["balance"] > 3 - 2 / 30, "the account was spent down, never below zero"
        for session, frames in zip(sessions, received):
            # what the client saw processed, give or take frames in flight and the last unpaid one
            assert spent[session.session_id] * 30 == pytest.approx(frames, abs=4)
    finally:
        exit_codes = [node.terminate() for node in nodes]  # both stopped before either is judged
    for node, exit_code in zip(nodes, exit_codes):
        assert exit_code == 0, node.log_tail()
