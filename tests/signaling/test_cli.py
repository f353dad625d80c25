"""`facefuse serve`: flags and environment, start-up errors, clean shutdown on signals."""

import asyncio
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from client.facefuse_client import FacefuseClient, ServerError
from client.image_track import ImageTrack
from pipeline.settings import PipelineSettings
from quota.settings import QuotaSettings
from signaling.cli import build_parser, main, settings_from_args
from signaling.settings import HttpSettings, ServerSettings
from stream.settings import StreamSettings
from support.server import face_rgb, free_port, wait_healthy, wait_until

FACEFUSE = str(Path(sys.executable).with_name("facefuse"))


def test_flags_build_each_section():
    args = build_parser().parse_args(
        [
            "serve",
            "--port",
            "9000",
            "--ice-host",
            "127.0.0.1",
            "--ice-host",
            "10.0.0.5",
            "--chain",
            "invert",
            "--max-batch",
            "4",
            "--max-wait-ms",
            "2.5",
            "--device",
            "cpu",
            "--ice-server",
            "stun:stun.example.org:3478",
        ]
    )
    settings = settings_from_args(args)
    assert settings.http.port == 9000
    assert settings.stream.ice.hosts == ("127.0.0.1", "10.0.0.5")
    assert settings.stream.ice.servers == ("stun:stun.example.org:3478",)
    assert (settings.pipeline.chain, settings.pipeline.max_batch, settings.pipeline.max_wait_ms) == ("invert", 4, 2.5)


def test_environment_sets_defaults_and_flags_win(monkeypatch):
    monkeypatch.setenv("FACEFUSE_PORT", "9100")
    monkeypatch.setenv("FACEFUSE_ICE_HOST", "127.0.0.1, 192.168.1.2")
    monkeypatch.setenv("FACEFUSE_MAX_WAIT_MS", "3")
    settings = settings_from_args(build_parser().parse_args(["serve", "--max-wait-ms", "1"]))
    assert settings.http.port == 9100
    assert settings.stream.ice.hosts == ("127.0.0.1", "192.168.1.2")
    assert settings.pipeline.max_wait_ms == 1


def test_hands_are_on_by_default_and_can_be_turned_off():
    assert settings_from_args(build_parser().parse_args(["serve"])).pipeline.hands is True
    assert settings_from_args(build_parser().parse_args(["serve", "--hands", "OFF"])).pipeline.hands is False


def test_frames_are_limited_to_1080p_worth_of_pixels_by_default():
    assert settings_from_args(build_parser().parse_args(["serve"])).pipeline.max_frame_pixels == 1920 * 1080
    assert (
        settings_from_args(build_parser().parse_args(["serve", "--max-frame-pixels", "0"])).pipeline.max_frame_pixels
        is None
    )
    assert settings_from_args(build_parser().parse_args(["serve"])).stream.max_decoded_pixels == 4096 * 2304


def test_face_library_limits():
    assert settings_from_args(build_parser().parse_args(["serve"])).http.max_faces_per_account == 32
    settings = settings_from_args(
        build_parser().parse_args(["serve", "--max-faces", "500", "--max-faces-per-account", "50"])
    )
    assert (settings.http.max_faces, settings.http.max_faces_per_account) == (500, 50)


def test_no_stun_server_by_default():
    settings = settings_from_args(build_parser().parse_args(["serve"]))
    assert settings.stream.ice.servers == ()


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--device", "tpu"],
        ["serve", "--max-batch", "0"],
        ["serve", "--port", "x"],
        ["serve", "--hands", "maybe"],
        ["serve", "--max-frame-pixels", "100"],
        ["serve", "--max-decoded-pixels", "100"],
        ["serve", "--max-faces-per-account", "0"],
    ],
)
def test_bad_values_are_refused_before_starting(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert "error:" in capsys.readouterr().err


def start_server(*extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [FACEFUSE, "serve", "--port", str(port), "--ice-host", "127.0.0.1", "--device", "cpu", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, f"http://127.0.0.1:{port}"


def test_unknown_chain_fails_at_start_with_a_message():
    process, _ = start_server("--chain", "nosuch")
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "unknown chain 'nosuch'" in output


@pytest.mark.parametrize(
    ("sig", "extra"),
    [(signal.SIGINT, ()), (signal.SIGTERM, ("--drain-timeout", "0"))],
    ids=["SIGINT", "SIGTERM, no drain time"],
)
async def test_signal_stops_the_server_cleanly_with_a_live_session(sig, extra):
    process, url = start_server(*extra)
    try:
        async with FacefuseClient(url) as client:
            await wait_healthy(client, process)
            session = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            deadline = time.monotonic() + 10
            while session.frames_received < 5:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            process.send_signal(sig)
            output, _ = await asyncio.to_thread(process.communicate, timeout=15)
            await session.close()
        assert process.returncode == 0, output
        assert "closing: server shutting down" in output or "drain timeout was reached" in output, output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_sigterm_drains_the_live_session_then_stops():
    """An orchestrator's SIGTERM: the live session goes on for the drain timeout while the node takes
    no new session and fails its readiness check; then the session is told and closed, and the
    process stops by itself."""
    process, url = start_server("--drain-timeout", "3")
    try:
        async with FacefuseClient(url) as client:
            await wait_healthy(client, process)
            session = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            await wait_until(lambda: session.frames_received >= 5, timeout=10)
            process.send_signal(signal.SIGTERM)
            await wait_until(lambda: any(e.get("type") == "draining" for e in session.events), timeout=5)
            before = session.frames_received
            with pytest.raises(ServerError) as refused:
                await client.connect(ImageTrack(face_rgb("biden.jpg"), width=320, height=240))
            assert (refused.value.status, refused.value.code) == (503, "node_draining")
            with pytest.raises(ServerError) as not_ready:
                await client.request("GET", "/healthz")
            assert not_ready.value.status == 503
            await asyncio.sleep(0.5)
            assert session.frames_received > before, "the live session goes on while the node drains"
            await wait_until(lambda: any(e.get("type") == "closed" for e in session.events), timeout=10)
            closed = next(e for e in session.events if e.get("type") == "closed")
            output, _ = await asyncio.to_thread(process.communicate, timeout=15)
            await session.close()
        assert closed["code"] == "server_shutdown", closed
        assert process.returncode == 0, output
        assert "facefuse: draining" in output and output.rstrip().splitlines()[-1] == "facefuse: stopped", output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_a_second_sigterm_during_the_drain_stops_at_once():
    process, url = start_server("--drain-timeout", "300")
    try:
        async with FacefuseClient(url) as client:
            await wait_healthy(client, process)
            session = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            await wait_until(lambda: session.frames_received >= 5, timeout=10)
            process.send_signal(signal.SIGTERM)
            await wait_until(lambda: any(e.get("type") == "draining" for e in session.events), timeout=5)
            assert process.poll() is None  # the drain holds the live session
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            output, _ = await asyncio.to_thread(process.communicate, timeout=15)
            took = time.monotonic() - started
            await session.close()
        assert took < 5, "the second signal did not stop it at once"
        assert process.returncode == 0, output
        assert "closing: server shutting down" in output, output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_second_signal_during_shutdown_stops_at_once_and_says_so():
    """An operator pressing Ctrl+C twice: the first shutdown is held by an upload in progress (up
    to 3 s); the second signal ends it at once, with a line that says what was skipped."""
    process, url = start_server("--chain", "passthrough")
    try:
        asyncio.run(wait_healthy_once(url, process))
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as stalled:  # an upload that stops sending
            stalled.sendall(
                b"POST /api/faces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                b"Content-Length: 100000\r\n\r\n--b\r\n"
            )
            time.sleep(0.3)
            process.send_signal(signal.SIGINT)
            time.sleep(0.5)
            assert process.poll() is None, "the first signal's shutdown waits for the upload"
            started = time.monotonic()
            process.send_signal(signal.SIGINT)
            output, _ = process.communicate(timeout=10)
        assert time.monotonic() - started < 2, "the second signal did not stop it at once"
        assert process.returncode == 1, output
        assert "a second signal during shutdown" in output and "Traceback" not in output, output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def wait_healthy_once(url: str, process: subprocess.Popen) -> None:
    async with FacefuseClient(url) as client:
        await wait_healthy(client, process)


@pytest.mark.parametrize(
    "env, argv",
    [
        ({"FACEFUSE_PORT": "abc"}, ["serve"]),
        ({}, ["serve", "--port", "70000"]),
        ({}, ["serve", "--log-level", "nosuch"]),
        ({}, ["serve", "--redis-url", "http://127.0.0.1:6379"]),
        ({}, ["serve", "--redis-url", "redis://h:notaport/0"]),
        ({}, ["serve", "--redis-url", "redis://h:6379/notadb"]),
        ({}, ["serve", "--static-dir", "/nonexistent"]),
        ({}, ["serve", "--quota-setting", "nominal_fps=0"]),
        ({}, ["serve", "--quota-setting", "lease_s=nan"]),
        ({}, ["serve", "--quota-setting", "grace_s=-5"]),
        ({}, ["serve", "--idle-timeout", "nan"]),
        ({}, ["serve", "--cpu-threads", "100000"]),
        ({}, ["serve", "--chain", "fixed-cost:-5:-1"]),
        ({}, ["serve", "--public-host", "https://facefuse.example.com"]),
        ({"FACEFUSE_PUBLIC_HOST": "a.example:443"}, ["serve"]),
        ({}, ["serve", "--allow-origin", "dash.example.com"]),
        ({"FACEFUSE_ALLOW_ORIGIN": "null"}, ["serve"]),
    ],
)
def test_bad_values_from_flags_or_the_environment_are_one_line_errors(env, argv, monkeypatch, capsys):
    """Each of these once started a broken server or ended in a traceback (a helper's probe)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        code = main([*argv, "--device", "cpu"])  # what only start-up finds is told by main, not argparse
    except SystemExit as caught:
        code = caught.code
    err = capsys.readouterr().err
    assert code == 2 and ("error:" in err or "facefuse:" in err) and "Traceback" not in err, err


def test_a_flag_wins_over_a_bad_environment_value_and_help_keeps_secrets(monkeypatch, capsys):
    monkeypatch.setenv("FACEFUSE_PORT", "abc")
    assert settings_from_args(build_parser().parse_args(["serve", "--port", "9000"])).http.port == 9000
    monkeypatch.setenv("FACEFUSE_ADMIN_KEY", "s3cr3t-admin-key-of-32-characters")
    monkeypatch.setenv("FACEFUSE_REDIS_URL", "redis://:hunter2@127.0.0.1:6399/0")
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = capsys.readouterr().out
    assert "s3cr3t" not in shown and "hunter2" not in shown and "default set" in shown


def test_a_port_in_use_is_a_one_line_error(capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--chain", "passthrough", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err, err


def test_public_hosts_and_allowed_origins_from_flags_or_the_environment(monkeypatch):
    args = [
        "serve",
        "--public-host",
        "FaceFuse.Example.com",
        "--public-host",
        "[2001:db8::1]",
        "--allow-origin",
        "https://dash.example.com:443/",
    ]
    http = settings_from_args(build_parser().parse_args(args)).http
    assert http.public_hosts == ("facefuse.example.com", "2001:db8::1")
    assert http.allowed_origins == ("https://dash.example.com",)
    monkeypatch.setenv("FACEFUSE_PUBLIC_HOST", "a.example, b.example")
    monkeypatch.setenv("FACEFUSE_ALLOW_ORIGIN", "http://obs.local:8000")
    http = settings_from_args(build_parser().parse_args(["serve"])).http
    assert (http.public_hosts, http.allowed_origins) == (("a.example", "b.example"), ("http://obs.local:8000",))


ADMIN_KEY = "a-long-enough-admin-key-0123456789"


def admin_key_of(argv: list[str]) -> str | None:
    return settings_from_args(build_parser().parse_args(["serve", *argv])).quota.admin_key


def test_the_admin_key_comes_from_the_environment_or_a_file(monkeypatch, tmp_path):
    """Not from the command line, where every user of the machine sees it in ps."""
    key_file = tmp_path / "admin.key"
    key_file.write_text(f"  {ADMIN_KEY}  \nsecond line ignored\n")
    assert admin_key_of(["--admin-key-file", str(key_file)]) == ADMIN_KEY
    assert admin_key_of([]) is None
    monkeypatch.setenv("FACEFUSE_ADMIN_KEY", ADMIN_KEY + "-env")
    assert admin_key_of([]) == ADMIN_KEY + "-env"
    assert admin_key_of(["--admin-key-file", str(key_file)]) == ADMIN_KEY  # a flag wins over the environment
    monkeypatch.delenv("FACEFUSE_ADMIN_KEY")
    monkeypatch.setenv("FACEFUSE_ADMIN_KEY_FILE", str(key_file))
    assert admin_key_of([]) == ADMIN_KEY


@pytest.mark.parametrize(
    "env, argv, said",
    [
        ({"FACEFUSE_ADMIN_KEY": "short-key"}, [], "at least 24"),
        ({}, ["--admin-key", "x" * 23], "at least 24"),
        ({}, ["--admin-key-file", "KEYFILE"], "at least 24"),
        ({}, ["--admin-key-file", "/nonexistent/key"], "cannot read"),
        ({}, ["--admin-key", ADMIN_KEY, "--admin-key-file", "KEYFILE"], "not both"),
        ({"FACEFUSE_ADMIN_KEY": ADMIN_KEY, "FACEFUSE_ADMIN_KEY_FILE": "KEYFILE"}, [], "not both"),
        ({"FACEFUSE_ADMIN_KEY": "schlüssel-mit-umlauten-und-mehr"}, [], "ASCII"),
    ],
)
def test_bad_admin_keys_are_one_line_errors(env, argv, said, monkeypatch, tmp_path, capsys):
    key_file = tmp_path / "short.key"
    key_file.write_text("short-key\n")
    for name, value in env.items():
        monkeypatch.setenv(name, value.replace("KEYFILE", str(key_file)))
    with pytest.raises(SystemExit) as caught:
        main(["serve", *(arg.replace("KEYFILE", str(key_file)) for arg in argv), "--device", "cpu"])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and said in err and len(err.strip().splitlines()) <= 2, err  # usage + the error
    assert "short-key" not in err and "Traceback" not in err, err  # the key itself is never shown


def test_the_admin_key_flag_still_works_and_warns_it_is_seen_in_ps(caplog):
    assert admin_key_of(["--admin-key", ADMIN_KEY]) == ADMIN_KEY
    # an unknown chain ends the start-up after the flags are taken: no server to stop
    assert main(["serve", "--admin-key", ADMIN_KEY, "--chain", "nosuch", "--device", "cpu"]) == 2
    assert any("visible" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records), caplog.text
    assert ADMIN_KEY not in caplog.text


def test_help_says_how_to_give_the_admin_key_and_which_hosts_are_answered(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for said in (
        "--admin-key-file",
        "FACEFUSE_ADMIN_KEY",
        "at least 24 characters",
        "visible",
        "--public-host",
        "421",
        "--allow-origin",
        "403",
    ):
        assert said in shown, said


REPO = Path(__file__).resolve().parents[2]
HELP_THEN_LIST_MODULES = """
import sys
from signaling.cli import main
try:
    main(["serve", "--help"])
except SystemExit:
    pass
print("LOADED", *sorted(name for name in ("torch", "pipeline.chains", "pipeline.device", "redis") if name in sys.modules))
"""


def test_help_answers_without_importing_torch_or_the_chains():
    """--help took 5-8 s because the command line imported torch and the chains before reading
    its arguments; only `serve` itself needs them."""
    done = subprocess.run(
        [sys.executable, "-c", HELP_THEN_LIST_MODULES], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "LOADED", done.stdout[-300:]


def test_version_names_the_installed_package(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out.strip() == f"facefuse {version('facefuse')}"


def serve_help(capsys) -> str:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_serve_help_is_grouped_with_choices_sizes_and_no_python_reprs(capsys):
    shown = serve_help(capsys)
    for group in (
        "network:",
        "chain:",
        "scheduler:",
        "accounts and metering:",
        "limits:",
        "ICE (WebRTC connectivity):",
    ):
        assert group in shown, group
    assert "--hands {on,off}" in shown and "--device {auto,cpu,cuda}" in shown
    assert "default: 1920x1080" in shown and "default: 4096x2304" in shown  # the pixel limits as sizes
    assert "default: all cores but one" in shown and "default: HOST:PORT" in shown and "default: in memory" in shown
    for not_for_users in ("None", "PosixPath", "default: '", str(REPO)):  # reprs, install paths
        assert not_for_users not in shown, not_for_users


# The flags whose default a settings field holds: (flag's dest, section, field, another valid default, as set).
FIELD_DEFAULTS = [
    ("host", HttpSettings, "host", "127.0.0.2", "127.0.0.2"),
    ("port", HttpSettings, "port", 9123, 9123),
    ("max_faces", HttpSettings, "max_faces", 99, 99),
    ("max_faces_per_account", HttpSettings, "max_faces_per_account", 9, 9),
    ("idle_timeout", StreamSettings, "idle_timeout_s", 7.5, 7.5),
    ("max_sessions", StreamSettings, "max_sessions", 5, 5),
    ("target_fps", StreamSettings, "target_fps", 25.0, 25.0),
    ("floor_fps", StreamSettings, "floor_fps", 20.0, 20.0),
    ("max_queue", StreamSettings, "max_queue", 3, 3),
    ("max_viewers_per_stream", StreamSettings, "max_viewers_per_stream", 7, 7),
    ("max_viewers", StreamSettings, "max_viewers", 9, 9),
    ("max_viewers_per_token", StreamSettings, "max_viewers_per_token", 4, 4),
    ("max_decoded_pixels", StreamSettings, "max_decoded_pixels", 1280 * 720, 1280 * 720),
    ("chain", PipelineSettings, "chain", "invert", "invert"),
    ("device", PipelineSettings, "device", "cpu", "cpu"),
    ("max_batch", PipelineSettings, "max_batch", 3, 3),
    ("max_wait_ms", PipelineSettings, "max_wait_ms", 2.0, 2.0),
    ("max_in_flight", PipelineSettings, "max_in_flight", 2, 2),
    ("badge", PipelineSettings, "badge", False, False),
    ("keep_eyes_mouth", PipelineSettings, "keep_eyes_mouth", False, False),
    ("hands", PipelineSettings, "hands", False, False),
    ("max_frame_pixels", PipelineSettings, "max_frame_pixels", 640 * 480, 640 * 480),
    ("cpu_threads", PipelineSettings, "cpu_threads", 3, 3),
    ("redis_max_connections", QuotaSettings, "redis_max_connections", 4, 4),
]


@pytest.mark.parametrize("dest, section, name, other, expected", FIELD_DEFAULTS, ids=[row[0] for row in FIELD_DEFAULTS])
def test_each_flag_default_is_read_from_its_settings_field(dest, section, name, other, expected, monkeypatch):
    """One place holds each default: change the field's and the flag follows (they were written twice)."""
    monkeypatch.setattr(section.__dataclass_fields__[name], "default", other)
    settings = settings_from_args(build_parser().parse_args(["serve"]))
    part = {
        HttpSettings: settings.http,
        StreamSettings: settings.stream,
        PipelineSettings: settings.pipeline,
        QuotaSettings: settings.quota,
    }[section]
    assert getattr(part, name) == expected


def test_without_flags_the_settings_are_the_dataclass_defaults():
    assert settings_from_args(build_parser().parse_args(["serve"])) == ServerSettings()


def test_max_sessions_takes_a_count_or_auto(capsys):
    parse = build_parser().parse_args
    assert settings_from_args(parse(["serve"])).stream.max_sessions is None  # auto: the capacity model decides
    assert settings_from_args(parse(["serve", "--max-sessions", "12"])).stream.max_sessions == 12
    assert settings_from_args(parse(["serve", "--max-sessions", "AUTO"])).stream.max_sessions is None
    with pytest.raises(SystemExit):
        parse(["serve", "--max-sessions", "many"])
    assert "expected a number or auto" in capsys.readouterr().err


def test_pixel_limits_take_a_size():
    settings = settings_from_args(
        build_parser().parse_args(["serve", "--max-frame-pixels", "1280x720", "--max-decoded-pixels", "3840x2160"])
    )
    assert (settings.pipeline.max_frame_pixels, settings.stream.max_decoded_pixels) == (1280 * 720, 3840 * 2160)


@pytest.mark.parametrize(
    "argv", [["serve", "--max-batch", "0"], ["serve", "--hands", "maybe"], ["serve", "--device", "tpu"]]
)
def test_a_bad_value_is_answered_with_serves_usage(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 2
    assert err.startswith("usage: facefuse serve") and "facefuse serve: error:" in err, err


def test_quota_config_gives_the_tiers_and_prices(tmp_path):
    config = tmp_path / "quota.toml"
    config.write_text("[tiers.vip]\nmetered = false\nmax_sessions = 2\n[prices]\n640x480 = 0.25\nabove = 1\n")
    quota = settings_from_args(build_parser().parse_args(["serve", "--quota-config", str(config)])).quota
    assert [tier.name for tier in quota.tiers] == ["vip"] and quota.tiers[0].max_sessions == 2
    assert quota.prices == ((640 * 480, 0.25), (None, 1.0))


@pytest.mark.parametrize(
    "text, said",
    [
        ("[tiers.free]\npriority = 'high'\n", "tiers.free.priority must be a whole number"),
        ("[tiers.free]\nmax_sessions = 1\n", "the local account (no admin key) runs on tier 'vip'"),
    ],
)
def test_a_bad_quota_config_is_a_one_line_error_at_start(text, said, tmp_path, capsys):
    config = tmp_path / "quota.toml"
    config.write_text(text)
    with pytest.raises(SystemExit) as caught:
        main(["serve", "--quota-config", str(config), "--device", "cpu"])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and said in err and len(err.strip().splitlines()) == 2, err  # usage + the error


def test_start_says_the_url_to_open_and_stop_says_it_stopped():
    process, url = start_server("--chain", "passthrough")
    try:
        asyncio.run(wait_healthy_once(url, process))
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, output
    assert f"facefuse: open {url}/ (chain passthrough, device cpu, quota store memory, one local account)" in output, (
        output
    )
    assert output.rstrip().splitlines()[-1] == "facefuse: stopped", output
