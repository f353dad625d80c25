"""Which names the server answers to (421 otherwise) and which web pages may change things (403):
a page on any site the user visits, or one reached by DNS rebinding, must not reach the local API."""

import dataclasses

import aiohttp
import pytest

from signaling.app_keys import FACES, SESSIONS
from support.server import face_path, loopback_settings, running_server

ADMIN = "admin-key-for-the-origin-check-tests"
EVIL = "http://evil.example"
# what an offer's body would be; the refusals come before it is read
OFFER = b'{"sdp": "v=0", "type": "offer"}'


def with_http(**http: object):
    settings = loopback_settings(quota={"admin_key": ADMIN} if http.pop("keyed", False) else None)
    return dataclasses.replace(settings, http=dataclasses.replace(settings.http, **http))


async def answer(url: str, method: str, path: str, **kwargs) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http:
        async with http.request(method, url + path, **kwargs) as response:
            return response.status, await response.json(content_type=None)


def port_of(url: str) -> str:
    return url.rsplit(":", 1)[1]


async def test_dns_rebinding_is_421_in_local_mode():
    """A page at evil.example whose name now resolves to 127.0.0.1 sends Host: evil.example."""
    async with running_server(loopback_settings()) as (url, app):
        port = port_of(url)
        for method, path in (("GET", "/api/sessions"), ("GET", "/"), ("GET", "/healthz"), ("POST", "/api/offer")):
            headers = {"Host": f"evil.example:{port}", "Content-Type": "application/json"}
            status, body = await answer(url, method, path, headers=headers, data=OFFER)
            assert status == 421, (method, path, status, body)
            assert body["error"]["code"] == "misdirected_request" and "evil.example" in body["error"]["message"]
        assert app[SESSIONS].all() == []
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST", "127.0.0.2:1"):
            status, _ = await answer(url, "GET", "/api/sessions", headers={"Host": host})
            assert status == 200, host


async def test_with_a_key_the_host_is_checked_only_given_public_hosts():
    """Behind a proxy or in Kubernetes the Host can be anything (a pod IP): the API key guards
    there. Given --public-host, other names get 421, except the health probes."""
    async with running_server(with_http(keyed=True)) as (url, _app):
        status, _ = await answer(url, "GET", "/api/account", headers={"Host": "10.1.2.3:8080"})
        assert status == 401  # unchecked: on to the key
    async with running_server(with_http(keyed=True, public_hosts=("facefuse.example.com",))) as (url, _app):
        status, body = await answer(url, "GET", "/api/account", headers={"Host": "evil.example"})
        assert status == 421 and body["error"]["code"] == "misdirected_request"
        for host in ("facefuse.example.com", "FaceFuse.Example.com.:443", f"127.0.0.1:{port_of(url)}"):
            status, _ = await answer(url, "GET", "/api/account", headers={"Host": host})
            assert status == 401, host
        for probe in ("/healthz", "/livez"):
            status, _ = await answer(url, "GET", probe, headers={"Host": "10.1.2.3:8080"})
            assert status == 200, probe


async def test_a_cross_origin_page_cannot_upload_or_open_a_session():
    """A form or fetch() from another site with a text/plain body needs no CORS preflight: the
    browser sends it, so the server must refuse it itself."""
    async with running_server(loopback_settings()) as (url, app):
        photo = face_path("obama.jpg").read_bytes()
        for origin in (EVIL, "null"):  # "null": a sandboxed iframe or a file:// page
            headers = {"Origin": origin, "Content-Type": "text/plain"}
            status, body = await answer(url, "POST", "/api/faces", headers=headers, data=photo)
            assert status == 403 and body["error"]["code"] == "origin_not_allowed", (origin, status, body)
            status, body = await answer(url, "POST", "/api/offer", headers=headers, data=OFFER)
            assert status == 403 and body["error"]["code"] == "origin_not_allowed", (origin, status, body)
        assert len(app[FACES]) == 0 and app[SESSIONS].all() == []
        # reading is not refused for the Origin (the browser keeps a cross-origin answer from the page)
        status, _ = await answer(url, "GET", "/api/sessions", headers={"Origin": EVIL})
        assert status == 200


async def test_the_servers_own_pages_and_clients_without_origin_pass():
    async with running_server(loopback_settings()) as (url, app):
        photo = face_path("obama.jpg").read_bytes()
        status, body = await answer(
            url, "POST", "/api/faces", headers={"Origin": url, "Content-Type": "image/jpeg"}, data=photo
        )
        assert status == 201, body
        status, body = await answer(url, "DELETE", f"/api/faces/{body['id']}", headers={"Origin": url})
        assert status == 200, body
        status, body = await answer(url, "POST", "/api/faces", headers={"Content-Type": "image/jpeg"}, data=photo)
        assert status == 201, body  # curl, OBS, scripts send no Origin


async def test_a_tls_proxys_origin_is_the_servers_own():
    """Behind a proxy that ends TLS the server sees http, the page's Origin says https."""
    settings = with_http(keyed=True, public_hosts=("facefuse.example.com",))
    async with running_server(settings) as (url, _app):
        for origin in ("https://facefuse.example.com", "http://facefuse.example.com:80"):
            headers = {"Host": "facefuse.example.com", "Origin": origin, "Content-Type": "application/json"}
            status, body = await answer(url, "POST", "/api/offer", headers=headers, data=OFFER)
            assert status == 401, (origin, body)  # past the Origin check, on to the key
        # a proxy that passes its upstream's address as Host: a --public-host's pages are still its own
        headers = {
            "Host": f"127.0.0.1:{port_of(url)}",
            "Origin": "https://facefuse.example.com",
            "Content-Type": "application/json",
        }
        status, body = await answer(url, "POST", "/api/offer", headers=headers, data=OFFER)
        assert status == 401, body
        headers = {"Host": "facefuse.example.com", "Origin": "https://facefuse.example.com:8443"}
        status, body = await answer(url, "POST", "/api/offer", headers=headers, data=OFFER)
        assert status == 403 and body["error"]["code"] == "origin_not_allowed"


async def test_allow_origin_lets_a_listed_page_through():
    async with running_server(with_http(allowed_origins=(EVIL + "/",))) as (url, app):
        photo = face_path("obama.jpg").read_bytes()
        status, body = await answer(
            url, "POST", "/api/faces", headers={"Origin": EVIL, "Content-Type": "image/jpeg"}, data=photo
        )
        assert status == 201, body
        # past the Origin check; the JSON endpoint still takes JSON only
        status, body = await answer(
            url, "POST", "/api/offer", headers={"Origin": EVIL, "Content-Type": "text/plain"}, data=OFFER
        )
        assert status == 415 and body["error"]["code"] == "unsupported_media_type", body
        status, body = await answer(url, "POST", "/api/faces", headers={"Origin": "http://evil.example:81"}, data=photo)
        assert status == 403, body
        assert len(app[FACES]) == 1


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/octet-stream"]
)
async def test_json_endpoints_take_application_json_only(content_type):
    async with running_server(loopback_settings()) as (url, app):
        status, body = await answer(url, "POST", "/api/offer", headers={"Content-Type": content_type}, data=OFFER)
        assert status == 415 and body["error"]["code"] == "unsupported_media_type", body
        assert "application/json" in body["error"]["message"]
        assert app[SESSIONS].all() == []


@pytest.mark.parametrize(
    "field, value",
    [
        ("public_hosts", ("http://facefuse.example.com",)),
        ("public_hosts", ("a b",)),
        ("public_hosts", ("",)),
        ("allowed_origins", ("evil.example",)),
        ("allowed_origins", ("null",)),
        ("allowed_origins", ("ftp://x",)),
        ("allowed_origins", ("https://x/page",)),
    ],
)
def test_bad_names_and_origins_are_refused_in_the_settings(field, value):
    with pytest.raises(ValueError):
        with_http(**{field: value})


async def test_a_listed_origin_gets_cors_so_its_page_can_send_json_and_read_answers():
    """A dashboard elsewhere sends JSON with an Authorization header: the browser asks first
    (OPTIONS, the preflight) and shows the page an answer only with Access-Control-Allow-Origin."""
    async with running_server(with_http(allowed_origins=("https://dash.example.com",))) as (url, app):
        preflight = {
            "Origin": "https://dash.example.com",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        }
        async with aiohttp.ClientSession() as http:
            async with http.options(url + "/api/offer", headers=preflight) as response:
                assert response.status == 204
                assert response.headers["Access-Control-Allow-Origin"] == "https://dash.example.com"
                assert "POST" in response.headers["Access-Control-Allow-Methods"]
                assert "authorization" in response.headers["Access-Control-Allow-Headers"].lower()
            whep_trickle = {**preflight, "Access-Control-Request-Method": "PATCH"}
            whep_trickle["Access-Control-Request-Headers"] = "authorization, content-type, if-match"
            async with http.options(url + "/whep/cam/some-viewer", headers=whep_trickle) as response:
                assert response.status == 204
                assert "PATCH" in response.headers["Access-Control-Allow-Methods"]
                assert "if-match" in response.headers["Access-Control-Allow-Headers"].lower()
            async with http.get(url + "/api/sessions", headers={"Origin": "https://dash.example.com"}) as response:
                assert (
                    response.status == 200
                    and response.headers["Access-Control-Allow-Origin"] == "https://dash.example.com"
                )
                # a WHEP player elsewhere reads Location and ETag of its 201
                exposed = response.headers["Access-Control-Expose-Headers"].lower()
                assert "location" in exposed and "etag" in exposed
            # errors too: the page can read why
            async with http.post(
                url + "/api/offer", headers={"Origin": "https://dash.example.com"}, json={}
            ) as response:
                assert (
                    response.status == 400
                    and response.headers["Access-Control-Allow-Origin"] == "https://dash.example.com"
                )
            # other pages get no CORS headers: the browser keeps the answer from them
            for origin in (EVIL, url):
                async with http.get(url + "/api/sessions", headers={"Origin": origin}) as response:
                    assert "Access-Control-Allow-Origin" not in response.headers, origin
            async with http.options(url + "/api/offer", headers={**preflight, "Origin": EVIL}) as response:
                assert "Access-Control-Allow-Origin" not in response.headers
