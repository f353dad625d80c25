"""GET /api/ice-servers: the STUN/TURN servers a web page gives its RTCPeerConnection."""

from __future__ import annotations

import dataclasses

import aiohttp

from support.metering import ADMIN, metered_settings
from support.server import loopback_settings, running_server

SERVERS = ("stun:stun.example.net:3478", "turn:ana:s3cr%40t@turn.example.net:3478?transport=tcp")


def with_ice_servers(settings):
    ice = dataclasses.replace(settings.stream.ice, servers=SERVERS)
    return dataclasses.replace(settings, stream=dataclasses.replace(settings.stream, ice=ice))


async def test_the_servers_come_as_rtc_configuration_has_them_credentials_split_off():
    async with running_server(with_ice_servers(loopback_settings())) as (url, _), aiohttp.ClientSession() as http:
        async with http.get(f"{url}/api/ice-servers") as response:
            assert response.status == 200 and response.headers["Cache-Control"] == "no-store"
            listed = (await response.json())["ice_servers"]
    assert listed == [
        {"urls": "stun:stun.example.net:3478"},
        {"urls": "turn:turn.example.net:3478?transport=tcp", "username": "ana", "credential": "s3cr@t"},
    ]


async def test_none_configured_is_an_empty_list():
    async with running_server(loopback_settings()) as (url, _), aiohttp.ClientSession() as http:
        async with http.get(f"{url}/api/ice-servers") as response:
            assert (await response.json()) == {"ice_servers": []}


async def test_turn_credentials_only_with_a_key_where_there_are_accounts():
    async with running_server(with_ice_servers(metered_settings(None))) as (url, _), aiohttp.ClientSession() as http:
        async with http.get(f"{url}/api/ice-servers") as response:
            assert response.status == 401
        async with http.post(
            f"{url}/api/admin/accounts",
            json={"id": "eve", "tier": "paid"},
            headers={"Authorization": f"Bearer {ADMIN}"},
        ) as response:
            key = (await response.json())["api_key"]
        async with http.get(f"{url}/api/ice-servers", headers={"Authorization": f"Bearer {key}"}) as response:
            assert response.status == 200 and len((await response.json())["ice_servers"]) == 2
