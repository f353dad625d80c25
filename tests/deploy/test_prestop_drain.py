"""deploy/kubernetes/drain_before_stop.py, the nodes' preStop hook, run against a real server: it
waits while a session lives and returns once the session has ended, or at its timeout.
Kubernetes sends SIGTERM (which closes every session) as soon as the hook returns."""

from __future__ import annotations

import asyncio
import os
import sys
from urllib.parse import urlsplit

import aiohttp
import pytest

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from signaling.cli import ENV_PREFIX
from support.deploy_files import KUBERNETES
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, free_port, running_server, wait_until

HOOK = KUBERNETES / "drain_before_stop.py"
# Longer than any wait below: the hook must end because the session did, not because of this.
LONG_DRAIN_S = 120


async def start_hook(url: str, drain_timeout_s: float) -> asyncio.subprocess.Process:
    env = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}
    env |= {
        "FACEFUSE_PORT": str(urlsplit(url).port),
        "FACEFUSE_ADMIN_KEY": ADMIN,
        "FACEFUSE_DRAIN_TIMEOUT": str(drain_timeout_s),
    }
    return await asyncio.create_subprocess_exec(sys.executable, str(HOOK), env=env, stderr=asyncio.subprocess.PIPE)


async def hook_output(hook: asyncio.subprocess.Process) -> str:
    """Its log, once it has returned (bounded: a hook that never returns fails the test)."""
    _, stderr = await asyncio.wait_for(hook.communicate(), timeout=30)
    assert hook.returncode == 0, stderr
    return stderr.decode()


async def test_the_hook_waits_while_a_session_lives_and_returns_once_it_ended():
    async with running_server(metered_settings(None, chain="passthrough")) as (url, _app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "ada", balance=1000)
        async with FacefuseClient(url, api_key=key) as ada:
            session = await ada.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            try:
                await wait_until(lambda: session.frames_received >= 3, timeout=10)
                hook = await start_hook(url, LONG_DRAIN_S)
                # its first line is the drain request's answer; then it polls /livez every 2 s
                said = await asyncio.wait_for(hook.stderr.readline(), timeout=30)
                assert b"draining:" in said, said
                async with aiohttp.ClientSession() as http, http.get(f"{url}/healthz") as health:
                    assert health.status == 503  # the load balancer stops sending the node new sessions
                with pytest.raises(TimeoutError):  # still waiting for the session after two polls and more
                    await asyncio.wait_for(asyncio.shield(hook.wait()), timeout=5)
            finally:
                await ada.request("DELETE", f"/api/sessions/{session.session_id}")
                await session.close()
            assert "no session left" in await hook_output(hook)


async def test_the_hook_returns_at_its_timeout_with_the_session_still_live():
    async with running_server(metered_settings(None, chain="passthrough")) as (url, _app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "ada", balance=1000)
        async with FacefuseClient(url, api_key=key) as ada:
            session = await ada.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            try:
                await wait_until(lambda: session.frames_received >= 3, timeout=10)
                output = await hook_output(await start_hook(url, drain_timeout_s=1))
                assert "1 session(s) left at the drain timeout" in output
            finally:
                await session.close()


async def test_the_hook_returns_at_once_on_a_node_without_sessions():
    async with running_server(metered_settings(None, chain="passthrough")) as (url, _app):
        assert "no session left" in await hook_output(await start_hook(url, LONG_DRAIN_S))


async def test_the_hook_returns_when_the_node_does_not_answer():
    """The process already stopped (or never listened): nothing to wait for."""
    assert "does not answer" in await hook_output(await start_hook(f"http://127.0.0.1:{free_port()}", LONG_DRAIN_S))
