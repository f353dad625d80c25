"""HTTPS served directly: --tls-cert/--tls-key with a certificate the test's own CA signs, each way
a certificate or key can be wrong said in one line at start, and --tls-self-signed's certificate
and the fingerprint `facefuse serve` prints for it."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import hashlib
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from cryptography.hazmat.primitives import serialization

from signaling.cli import build_parser, main, settings_from_args
from signaling.self_signed import certificate_names, state_folder
from signaling.settings import HttpSettings
from signaling.tls import TlsSetupError, server_tls
from support.certificates import make_certificates, write_encrypted_key, write_other_key
from support.server import free_port, loopback_settings, running_server

FACEFUSE = str(Path(sys.executable).with_name("facefuse"))


def with_tls(**http: object):
    settings = loopback_settings()
    return dataclasses.replace(settings, http=dataclasses.replace(settings.http, **http))


def trusting(ca_file: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_file))


async def test_https_is_served_with_the_given_certificate(tmp_path):
    made = make_certificates(tmp_path)
    async with running_server(with_tls(tls_cert=made.cert_file, tls_key=made.key_file)) as (url, _app):
        assert url.startswith("https://127.0.0.1:")
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/healthz", ssl=trusting(made.ca_file)) as response:
                assert response.status == 200
            served = await peer_certificate(int(url.rsplit(":", 1)[1]), trusting(made.ca_file))
            assert served == made.certificate.public_bytes(serialization.Encoding.DER)
            # a client that does not trust the test's CA refuses it: the certificate is what is checked
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await http.get(f"{url}/healthz")
            # plain HTTP on the same port is no answer
            with pytest.raises(aiohttp.ClientError):
                await http.get(url.replace("https://", "http://") + "/healthz")


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def tls_problem(tmp_path: Path, case: str) -> tuple[dict[str, Path], str]:
    """(the settings' --tls-cert/--tls-key, what the error must say) for each wrong pair."""
    made = make_certificates(tmp_path / "good")
    expired = make_certificates(
        tmp_path / "expired",
        valid_from=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=3),
        valid_for=datetime.timedelta(days=1),
    )
    cases = {
        "missing cert": ({"tls_cert": tmp_path / "nosuch.pem", "tls_key": made.key_file}, "no such file"),
        "missing key": ({"tls_cert": made.cert_file, "tls_key": tmp_path / "nosuch.pem"}, "no such file"),
        "unreadable key": ({"tls_cert": made.cert_file, "tls_key": tmp_path}, "cannot read it"),
        "another key": (
            {"tls_cert": made.cert_file, "tls_key": write_other_key(tmp_path / "other.pem")},
            "is not the key of --tls-cert",
        ),
        "encrypted key": (
            {"tls_cert": made.cert_file, "tls_key": write_encrypted_key(tmp_path / "locked.pem")},
            "is encrypted",
        ),
        "swapped": ({"tls_cert": made.key_file, "tls_key": made.cert_file}, "holds a private key"),
        "not PEM": (
            {"tls_cert": write_text(tmp_path / "junk.pem", "not a certificate"), "tls_key": made.key_file},
            "is not a PEM certificate",
        ),
        "expired": ({"tls_cert": expired.cert_file, "tls_key": expired.key_file}, "expired on"),
    }
    return cases[case]


CASES = [
    "missing cert",
    "missing key",
    "unreadable key",
    "another key",
    "encrypted key",
    "swapped",
    "not PEM",
    "expired",
]


@pytest.mark.parametrize("case", CASES)
def test_a_wrong_certificate_or_key_is_said_plainly(case, tmp_path):
    files, said = tls_problem(tmp_path, case)
    with pytest.raises(TlsSetupError, match=re.escape(said)) as caught:
        server_tls(HttpSettings(**files))
    assert "--tls-" in str(caught.value)


@pytest.mark.parametrize("case", ["another key", "encrypted key"])
def test_serve_answers_a_wrong_certificate_with_one_line_and_status_2(case, tmp_path, capsys):
    """Before the chain loads; no traceback (and an encrypted key is not a passphrase prompt)."""
    files, said = tls_problem(tmp_path, case)
    argv = [
        "serve",
        "--port",
        str(free_port()),
        "--tls-cert",
        str(files["tls_cert"]),
        "--tls-key",
        str(files["tls_key"]),
    ]
    assert main([*argv, "--chain", "passthrough", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("facefuse: --tls-") and said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-key", "k.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-self-signed", "--tls-cert", "c.pem", "--tls-key", "k.pem"], "not both"),
    ],
)
def test_flags_that_do_not_go_together_are_a_usage_error(argv, said, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["serve", *argv, "--device", "cpu"])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and said in err, err


def test_a_self_signed_certificate_is_kept_and_reused_while_it_fits(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert state_folder() == tmp_path / "state" / "facefuse" / "tls"
    first = server_tls(HttpSettings(tls_self_signed=True, public_hosts=("demo.lan",)))
    assert first is not None and first.self_signed
    assert {"localhost", "127.0.0.1", "::1", "demo.lan"} <= set(first.names())
    assert first.cert_path.parent == state_folder()
    assert first.cert_path.stat().st_mode & 0o077 == 0  # the key in it: this user's only
    lifetime = first.certificate.not_valid_after_utc - first.certificate.not_valid_before_utc
    assert datetime.timedelta(days=1) < lifetime <= datetime.timedelta(days=31)
    # restarted: the same certificate, so the fingerprint a person compared still holds
    again = server_tls(HttpSettings(tls_self_signed=True, public_hosts=("demo.lan",)))
    assert again.fingerprint == first.fingerprint
    # asked for a name it lacks: a new one that has it
    other = server_tls(HttpSettings(tls_self_signed=True, public_hosts=("other.lan",)))
    assert other.fingerprint != first.fingerprint and "other.lan" in other.names()


def test_serve_with_a_self_signed_certificate_prints_the_fingerprint_it_serves(tmp_path):
    """What a person compares with the browser's warning page is the certificate's that is served."""
    port = free_port()
    process = subprocess.Popen(
        [FACEFUSE, "serve", "--port", str(port), "--ice-host", "127.0.0.1", "--device", "cpu"]
        + ["--chain", "passthrough", "--tls-self-signed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
    )
    try:
        served = asyncio.run(served_certificate(port, process))
        process.terminate()
        output, _ = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    printed = re.search(r"SHA-256 fingerprint ([0-9A-F:]{95})", output)
    assert printed, output
    assert printed[1] == ":".join(f"{b:02X}" for b in hashlib.sha256(served).digest())
    assert f"open https://127.0.0.1:{port}/" in output
    assert str(tmp_path / "facefuse" / "tls") in output  # where it is kept, said


async def served_certificate(port: int, process: subprocess.Popen, timeout: float = 60) -> bytes:
    """The DER certificate the server presents, once it answers /healthz over TLS (not verified:
    comparing the fingerprint is the check, as it is for the person at the browser)."""
    unverified = ssl.create_default_context()
    unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                async with http.get(f"https://127.0.0.1:{port}/healthz", ssl=unverified) as response:
                    if response.status == 200:
                        return await peer_certificate(port, unverified)
            except aiohttp.ClientConnectionError:
                pass
            assert time.monotonic() < deadline, "the server did not answer over HTTPS"
            await asyncio.sleep(0.2)


async def peer_certificate(port: int, context: ssl.SSLContext) -> bytes:
    """The DER certificate a TLS server on 127.0.0.1:`port` presents."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        return writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        await writer.wait_closed()


def test_the_flags_and_their_environment_variables(monkeypatch):
    args = ["serve", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--trusted-proxy", "127.0.0.1/32"]
    http = settings_from_args(build_parser().parse_args(args)).http
    assert (http.tls_cert, http.tls_key, http.tls_self_signed) == (Path("c.pem"), Path("k.pem"), False)
    assert http.trusted_proxies == ("127.0.0.1/32",)
    monkeypatch.setenv("FACEFUSE_TLS_SELF_SIGNED", "on")
    monkeypatch.setenv("FACEFUSE_TRUSTED_PROXY", "127.0.0.1/32, 10.0.0.0/8")
    http = settings_from_args(build_parser().parse_args(["serve"])).http
    assert http.tls_self_signed and http.trusted_proxies == ("127.0.0.1/32", "10.0.0.0/8")


def test_a_self_signed_certificate_about_to_expire_is_made_anew(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    names = ("localhost", "127.0.0.1", "::1")
    expiring = make_certificates(tmp_path / "old", names=names, valid_for=datetime.timedelta(hours=1))
    state_folder().mkdir(parents=True)
    kept = state_folder() / "self-signed.pem"
    kept.write_bytes(expiring.key_file.read_bytes() + expiring.cert_file.read_bytes())
    fresh = server_tls(HttpSettings(tls_self_signed=True))
    assert fresh.certificate.serial_number != expiring.certificate.serial_number
    assert fresh.certificate.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > datetime.timedelta(days=7)


def test_on_every_address_the_self_signed_certificate_names_this_machine():
    """--host 0.0.0.0 for a LAN demo: the browser reaches it by this machine's name or an address."""
    names = certificate_names(HttpSettings(host="0.0.0.0"))
    assert socket.gethostname().lower() in names and "127.0.0.1" in names
    assert not [name for name in names if name.startswith("fe80")]  # link-local: unusable in a URL
    assert certificate_names(HttpSettings(host="192.0.2.9", public_hosts=("demo.lan",)))[3:] == [
        "192.0.2.9",
        "demo.lan",
    ]
