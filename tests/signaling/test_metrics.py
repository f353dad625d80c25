"""GET /metrics: a real server and a real aiortc session, the exposition read with prometheus-client's
own parser; who may read it; and the Grafana dashboard and alert rules naming only metrics a real
scrape has."""

from __future__ import annotations

import asyncio
import json
import math
import re

import aiohttp
import pytest
from aiohttp.test_utils import make_mocked_request
from prometheus_client.parser import text_string_to_metric_families

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from quota.settings import QuotaSettings
from signaling.app import create_app
from signaling.app_keys import RUNNER, SESSIONS
from signaling.cli import build_parser, main, settings_from_args
from signaling.errors import ApiError, json_errors
from signaling.routes.metrics import check_metrics_access, metrics
from signaling.settings import HttpSettings, ServerSettings
from support.metering import ADMIN, create_account, metered_settings
from support.server import REPO_ROOT, face_rgb, loopback_settings, one_live_session, running_server, wait_until
from support.whep_viewer import whep_viewer
from support.whip_publisher import offer_like_obs, post_offer

ADMIN_KEY = "metrics-test-admin-key-0123456789"
# A label like these would make one series per session or account: their number has no bound.
UNBOUNDED_LABEL = re.compile(r"session|account|viewer|face|user|key|token", re.IGNORECASE)
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "facefuse.json"
ALERTS = REPO_ROOT / "deploy" / "prometheus" / "alerts.yml"


async def scrape(http: aiohttp.ClientSession, url: str) -> dict[str, object]:
    """{family name: family} of one scrape, parsed by prometheus-client."""
    async with http.get(f"{url}/metrics") as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "text/plain"
        text = await response.text()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families: dict[str, object], sample_name: str, **labels: str) -> float:
    """The one sample of that name with those labels (others may have more labels)."""
    family_name = re.sub(r"_(total|bucket|count|sum)$", "", sample_name)
    matches = [
        sample.value
        for sample in families[family_name].samples
        if sample.name == sample_name and all(sample.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(matches) == 1, (sample_name, labels, matches)
    return matches[0]


def counter_samples(families: dict[str, object]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every counter's (and histogram's and summary's count and sum) samples: what must never go back."""
    samples = {}
    for family in families.values():
        for sample in family.samples:
            if family.type == "counter" and sample.name.endswith("_total") or sample.name.endswith(("_count", "_sum")):
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
            elif family.type == "histogram" and sample.name.endswith("_bucket"):
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def assert_monotonic(before: dict[str, object], after: dict[str, object]) -> None:
    earlier, later = counter_samples(before), counter_samples(after)
    for key, number in earlier.items():
        assert key in later, f"{key} vanished"
        assert later[key] >= number, f"{key} went back: {number} -> {later[key]}"


async def test_counters_move_as_frames_flow_and_never_go_back():
    async with running_server(loopback_settings()) as (url, app):
        async with FacefuseClient(url) as client, aiohttp.ClientSession() as http:
            session = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            await wait_until(lambda: session.frames_received >= 10, timeout=10)
            first = await scrape(http, url)
            received = session.frames_received
            await wait_until(lambda: session.frames_received >= received + 15, timeout=10)
            second = await scrape(http, url)

            assert all(name.startswith("facefuse_") for name in second), sorted(second)
            for family in second.values():
                for sample in family.samples:
                    unbounded = [label for label in sample.labels if UNBOUNDED_LABEL.search(label)]
                    assert not unbounded, (sample.name, unbounded)
            assert_monotonic(first, second)
            assert value(second, "facefuse_sessions", state="live") == 1
            capacity = app[SESSIONS].capacity.describe(app[SESSIONS].all())  # --max-sessions auto: the model's
            assert value(second, "facefuse_sessions_limit") == capacity["processed"] + capacity["fits_more"]["480p"]
            assert value(second, "facefuse_capacity_fits_more", size="480p") == capacity["fits_more"]["480p"] >= 1
            assert value(second, "facefuse_queue_sessions") == 0
            assert value(second, "facefuse_quota_store_up") == 1
            assert value(second, "facefuse_worker_up") == 1
            assert value(second, "facefuse_batch_oom_splits_total") == 0  # a CPU that never ran out
            assert value(second, "facefuse_build_info", chain="passthrough", device="cpu") == 1
            assert value(second, "facefuse_throttle_sessions", level="full") == 1
            assert value(second, "facefuse_device_memory_in_use_bytes", device="cpu") > 0
            # the passthrough chain hands back each frame as it is: processed
            moved = [
                "facefuse_frames_received_total",
                "facefuse_frames_sent_total",
                "facefuse_server_latency_seconds_count",
                "facefuse_batch_size_count",
                "facefuse_webrtc_packets_received_total",
                "facefuse_webrtc_received_bytes_total",
                "facefuse_webrtc_sent_bytes_total",
                "facefuse_tokens_charged_total",
            ]
            for name in moved:
                assert value(second, name) > value(first, name), name
            assert value(second, "facefuse_frames_total", result="processed") > value(
                first, "facefuse_frames_total", result="processed"
            )
            for stage in ("queue_wait", "chain", "encode"):
                assert value(second, "facefuse_frame_stage_seconds_count", stage=stage) > 0
            # one latency observation for each frame handed to an encoder, in the same scrape
            assert value(second, "facefuse_server_latency_seconds_count") == value(second, "facefuse_frames_sent_total")
            assert value(second, "facefuse_http_requests_total", method="POST", route="/api/offer", status="200") == 1
            assert value(second, "facefuse_http_requests_total", method="GET", route="/metrics", status="200") == 1

            # The session ends: its counts move to the node's totals, and nothing goes back.
            ended = await client.request("DELETE", f"/api/sessions/{session.session_id}")
            await session.close()
            third = await scrape(http, url)
            assert_monotonic(second, third)
            assert value(third, "facefuse_sessions", state="live") == 0
            assert value(third, "facefuse_sessions_ended_total") == 1
            assert value(third, "facefuse_frames_sent_total") == ended["frames_out"]
            assert value(third, "facefuse_server_latency_seconds_count") == ended["frames_out"]
            assert value(third, "facefuse_frames_received_total") == ended["frames_in"]
            assert value(third, "facefuse_frames_total", result="processed") == ended["frames_processed"]
            charged = value(third, "facefuse_tokens_charged_total", tier=ended["meter"]["tier"])
            assert charged == pytest.approx(ended["meter"]["spent"], abs=1e-3)

            # The frames the chain ran: the batch sizes' sum, and each stage histogram's count. The
            # runner observes a batch just after releasing its lock: wait out a batch still finishing.
            async def runner_frames() -> tuple[float, float, float]:
                families = await scrape(http, url)
                return (
                    value(families, "facefuse_batch_size_sum"),
                    value(families, "facefuse_frame_stage_seconds_count", stage="queue_wait"),
                    value(families, "facefuse_frame_stage_seconds_count", stage="chain"),
                )

            counts = await runner_frames()
            for _ in range(20):
                if len(set(counts)) == 1:
                    break
                await asyncio.sleep(0.1)
                counts = await runner_frames()
            assert len(set(counts)) == 1, counts
            # passthrough processes every frame it runs; a frame whose session ended meanwhile is not delivered
            assert 0 < ended["frames_processed"] <= counts[0]


async def test_a_session_out_of_tokens_shows_as_stopped_and_its_frames_as_throttled():
    """An account's tokens run out: the meter stops processing, and the frames shown unprocessed
    count as throttled; the tokens charged are the tier's, and the account's spending."""
    settings = metered_settings(None, lease_s=1.0, slow_below_s=0.0, crawl_below_s=0.0, grace_s=5.0)
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin, aiohttp.ClientSession() as http:
            key = await create_account(admin, "pia", balance=0.5)
            async with FacefuseClient(url, api_key=key) as pia:
                session = await pia.connect(ImageTrack(face_rgb("obama.jpg"), tag=3))

                def stopped() -> bool:
                    return any(e.get("type") == "meter" and e["level"] == "stopped" for e in session.events)

                await wait_until(stopped, timeout=15)
                await asyncio.sleep(0.5)  # a few frames shown unprocessed
                families = await scrape(http, url)  # loopback: no key needed, also with an admin key set
                assert value(families, "facefuse_throttle_sessions", level="stopped") == 1
                assert value(families, "facefuse_throttle_sessions", level="full") == 0
                assert value(families, "facefuse_frames_total", result="throttled") > 0
                account = await pia.request("GET", "/api/account")
                charged = value(families, "facefuse_tokens_charged_total", tier="paid")
                assert charged == pytest.approx(0.5 - account["balance"], abs=1 / 30)  # within one frame's price
                await session.close()


async def test_whip_and_whep_requests_and_a_viewers_bytes_are_counted():
    """A WHIP publisher sending only (as OBS) and a WHEP viewer: what the viewer received the node
    counts as sent, and keeps counting once the viewer has gone."""
    async with running_server(loopback_settings()) as (url, app), aiohttp.ClientSession() as http:
        camera = ImageTrack(face_rgb("obama.jpg"), width=320, height=240)
        publisher = await post_offer(http, f"{url}/whip/live", *await offer_like_obs(camera))
        try:
            assert publisher.status == 201, publisher.body
            async with whep_viewer(http, f"{url}/whep/live") as viewer:
                assert viewer.status == 201, viewer.body
                await wait_until(lambda: viewer.video_frames >= 10, timeout=15)
                report = await viewer.pc.getStats()
                received = sum(stats.bytesReceived for stats in report.values() if stats.type == "transport")
                watched = await scrape(http, url)
            await wait_until(lambda: app[SESSIONS].viewers() == [], timeout=10)
            left = await scrape(http, url)
        finally:
            await publisher.close()
    assert value(watched, "facefuse_viewers") == 1 and value(left, "facefuse_viewers") == 0
    assert value(watched, "facefuse_webrtc_sent_bytes_total") >= received > 0
    assert_monotonic(watched, left)  # the viewer's bytes stay in the node's totals
    for method, route, status in (
        ("POST", "/whip/{stream}", "201"),
        ("POST", "/whep/{stream}", "201"),
        ("DELETE", "/whep/{stream}/{viewer_id}", "200"),
    ):
        assert value(left, "facefuse_http_requests_total", method=method, route=route, status=status) == 1


async def test_the_nacks_and_plis_the_server_sends_are_counted():
    """aiortc counts neither. On loopback nothing is lost, so the test has the server's video
    receiver send them itself, through aiortc's own (private) senders, as a loss would."""
    async with one_live_session() as live, aiohttp.ClientSession() as http:
        before = await scrape(http, live.client.base_url)
        pc = live.server_session._pc
        receiver = next(t.receiver for t in pc.getTransceivers() if t.kind == "video")
        ssrc = receiver.getSynchronizationSources()[0].source
        await receiver._send_rtcp_nack(ssrc, [1, 2, 3])
        for _ in range(2):
            await receiver._send_rtcp_pli(ssrc)
        after = await scrape(http, live.client.base_url)
    nacks = value(after, "facefuse_webrtc_nacks_sent_total") - value(before, "facefuse_webrtc_nacks_sent_total")
    plis = value(after, "facefuse_webrtc_plis_sent_total") - value(before, "facefuse_webrtc_plis_sent_total")
    assert nacks >= 1 and plis >= 2, (nacks, plis)  # loopback may add its own, never fewer


@pytest.mark.redis
async def test_the_quota_store_shows_down_while_redis_is_away(redis_server):
    async with running_server(loopback_settings(quota={"redis_url": redis_server.url})) as (url, app):
        async with aiohttp.ClientSession() as http:
            up = await scrape(http, url)
            assert value(up, "facefuse_quota_store_up") == 1
            assert 0 < value(up, "facefuse_quota_store_rtt_seconds") < 1
            redis_server.stop(kill=True)
            down = await scrape(http, url)
            assert value(down, "facefuse_quota_store_up") == 0
            assert math.isnan(value(down, "facefuse_quota_store_rtt_seconds"))
            redis_server.start()
            assert value(await scrape(http, url), "facefuse_quota_store_up") == 1


async def test_an_unknown_path_is_counted_by_template_not_by_path():
    async with running_server(loopback_settings()) as (url, app):
        async with aiohttp.ClientSession() as http:
            for face_id in ("a", "b", "c"):
                async with http.get(f"{url}/api/faces/{face_id}") as response:
                    assert response.status == 404
            async with http.get(f"{url}/no/such/page") as response:
                assert response.status == 404
            families = await scrape(http, url)
    assert (
        value(families, "facefuse_http_requests_total", method="GET", route="/api/faces/{face_id}", status="404") == 3
    )
    assert value(families, "facefuse_http_requests_total", method="GET", route="unmatched", status="404") == 1


async def test_a_stopped_worker_shows_as_down():
    """What FacefuseWorkerStopped alerts on: the chain's threads stopped, the node processes nothing."""
    async with running_server(loopback_settings()) as (url, app), aiohttp.ClientSession() as http:
        assert value(await scrape(http, url), "facefuse_worker_up") == 1
        await asyncio.to_thread(app[RUNNER].stop)
        assert value(await scrape(http, url), "facefuse_worker_up") == 0


def scrape_request(app, peer: str, authorization: str | None = None):
    """GET /metrics as it arrives from `peer`: the tests' servers listen on 127.0.0.1 only."""

    class Transport:  # what aiohttp reads the peer address from
        def get_extra_info(self, name: str, default: object = None) -> object:
            return (peer, 50000) if name == "peername" else default

    headers = {"Authorization": authorization} if authorization is not None else {}
    return make_mocked_request("GET", "/metrics", headers=headers, app=app, transport=Transport())


def admin_settings(*allowed: str) -> ServerSettings:
    return ServerSettings(http=HttpSettings(metrics_allow=allowed), quota=QuotaSettings(admin_key=ADMIN_KEY))


@pytest.mark.parametrize(
    ("peer", "authorization", "status"),
    [
        ("127.0.0.1", None, None),
        ("::1", None, None),
        ("10.1.2.3", None, None),  # in --metrics-allow 10.1.0.0/16
        ("10.0.0.5", f"Bearer {ADMIN_KEY}", None),
        ("10.0.0.5", None, 403),
        ("10.0.0.5", "Bearer not-the-admin-key-at-all-000000", 401),
        ("::ffff:10.0.0.5", None, 403),
        ("2001:db8::5", None, 403),
    ],
)
def test_who_may_read_the_metrics(peer, authorization, status):
    app = create_app(admin_settings("10.1.0.0/16", "fd00::/8"))
    request = scrape_request(app, peer, authorization)
    if status is None:
        check_metrics_access(request)
        return
    with pytest.raises(ApiError) as refused:
        check_metrics_access(request)
    assert refused.value.status == status


async def test_a_refusal_is_a_json_error():
    app = create_app(admin_settings())
    response = await json_errors(scrape_request(app, "192.0.2.7"), metrics)
    assert response.status == 403
    body = json.loads(response.body)
    assert body["error"]["code"] == "forbidden" and "--metrics-allow" in body["error"]["message"]
    # without an admin key on the server, no key opens it from elsewhere
    local = create_app(ServerSettings())
    response = await json_errors(scrape_request(local, "192.0.2.7", f"Bearer {ADMIN_KEY}"), metrics)
    assert response.status == 403


def test_metrics_allow_takes_networks_only():
    with pytest.raises(ValueError, match="--metrics-allow"):
        HttpSettings(metrics_allow=("10.0.0.5/8",))  # host bits set: a typo for 10.0.0.0/8 or /32?
    with pytest.raises(ValueError, match="--metrics-allow"):
        HttpSettings(metrics_allow=("prometheus.internal",))
    assert HttpSettings(metrics_allow=(" 10.0.0.0/8",)).metrics_allow == ("10.0.0.0/8",)


def test_metrics_allow_from_the_flag_or_the_environment(monkeypatch, capsys):
    flags = ["serve", "--metrics-allow", "10.0.0.0/8", "--metrics-allow", "192.0.2.7/32"]
    assert settings_from_args(build_parser().parse_args(flags)).http.metrics_allow == ("10.0.0.0/8", "192.0.2.7/32")
    monkeypatch.setenv("FACEFUSE_METRICS_ALLOW", "10.0.0.0/8, fd00::/8")
    assert settings_from_args(build_parser().parse_args(["serve"])).http.metrics_allow == ("10.0.0.0/8", "fd00::/8")
    with pytest.raises(SystemExit) as refused:  # serve's one-line error, not a traceback
        main(["serve", "--metrics-allow", "10.0.0.5/8", "--device", "cpu"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "--metrics-allow '10.0.0.5/8'" in err and "Traceback" not in err


# -- the dashboard and the alert rules ------------------------------------------------------------

SUFFIXES = {  # the sample names prometheus-client exposes for a family of each type
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum"),
    "summary": ("", "_count", "_sum"),
    "info": ("_info",),
}


def exposed_names(families: dict[str, object]) -> set[str]:
    return {family.name + suffix for family in families.values() for suffix in SUFFIXES[family.type]}


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                expressions.append(node["expr"])
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(dashboard)
    return expressions


def alert_expressions() -> list[str]:
    """The rules' `expr:` values (a folded `>-` block or one line)."""
    expressions, block = [], None
    for line in ALERTS.read_text().splitlines():
        if block is not None:
            if line.strip() and len(line) - len(line.lstrip()) > block[0]:
                block[1].append(line.strip())
                continue
            expressions.append(" ".join(block[1]))
            block = None
        match = re.match(r"^(\s*)expr:\s*(.*)$", line)
        if match:
            if match[2].strip() in (">-", "|", ">", "|-"):
                block = (len(match[1]), [])
            else:
                expressions.append(match[2].strip())
    if block is not None:
        expressions.append(" ".join(block[1]))
    return expressions


# What the files call: a misspelt function or a bracket left open is a query Grafana or Prometheus refuses.
PROMQL_FUNCTIONS = {"rate", "sum", "min", "max", "avg", "histogram_quantile"}
PROMQL_GROUPING = {"by", "on", "without", "ignoring"}


def assert_plausible_promql(expression: str) -> None:
    """No PromQL parser is at hand here: the calls are known functions and the brackets pair up."""
    code = re.sub(r'"[^"]*"', '""', expression)  # a label's value may hold any character
    calls = set(re.findall(r"\b([a-z_]+)\s*\(", code)) - PROMQL_GROUPING
    assert calls <= PROMQL_FUNCTIONS, (expression, calls - PROMQL_FUNCTIONS)
    depth = {"(": 0, "[": 0, "{": 0}
    closing = {")": "(", "]": "[", "}": "{"}
    for char in code:
        if char in depth:
            depth[char] += 1
        elif char in closing:
            depth[closing[char]] -= 1
            assert depth[closing[char]] >= 0, expression
    assert not any(depth.values()), expression


def alert_names() -> list[str]:
    return re.findall(r"^\s*-\s*alert:\s*(\S+)", ALERTS.read_text(), re.MULTILINE)


async def test_the_dashboard_and_the_alerts_name_only_metrics_a_scrape_has():
    async with running_server(loopback_settings()) as (url, app):
        async with FacefuseClient(url) as client, aiohttp.ClientSession() as http:
            session = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            await wait_until(lambda: session.frames_received >= 3, timeout=10)
            await scrape(http, url)  # the HTTP counters have a /metrics child from now on
            families = await scrape(http, url)
            await session.close()
    exposed = exposed_names(families)
    dashboard, alerts = dashboard_expressions(), alert_expressions()
    assert len(dashboard) >= 12 and len(alerts) >= 4, (dashboard, alerts)
    for expression in dashboard + alerts:
        for name in re.findall(r"\bfacefuse_\w+", expression):
            assert name in exposed, f"{name} (in {expression!r}) is not in a scrape"
        assert_plausible_promql(expression)
    # every family has a panel (a family's samples are its name and its type's suffixes)
    used = {name for expression in dashboard for name in re.findall(r"\bfacefuse_\w+", expression)}
    shown = {
        family for family in families if any(family + suffix in used for suffix in SUFFIXES[families[family].type])
    }
    created = {family for family in families if family.endswith("_created")}  # prometheus-client's start times
    assert set(families) - shown - created == set(), "families the dashboard has no panel for"
    assert {"FacefuseLatencyP99High", "FacefuseFramesFailing", "FacefuseQuotaStoreDown", "FacefuseNodeFull"} <= set(
        alert_names()
    )


def test_the_dashboard_is_grafana_json():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["title"] and dashboard["uid"] and dashboard["panels"]
    datasources = {json.dumps(panel.get("datasource")) for panel in dashboard["panels"] if panel["type"] != "row"}
    assert datasources == {json.dumps({"type": "prometheus", "uid": "${datasource}"})}
    for panel in dashboard["panels"]:
        assert panel.get("title") and panel.get("gridPos"), panel
