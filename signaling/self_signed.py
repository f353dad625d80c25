"""--tls-self-signed: a certificate for a LAN demo, made at start and reused while it still fits.

It is kept in a state folder ($XDG_STATE_HOME/facefuse/tls, by default ~/.local/state/facefuse/tls),
not a temporary one: the same certificate across restarts keeps its fingerprint, so a person who
compared it and accepted the browser's warning once is not asked again at every start, and the
private key stays in a folder of this user's own (mode 0700, the file 0600) rather than in a /tmp
that every user shares. A new one is made when the old one is missing, unreadable, about to expire
or does not name every address asked for now.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from pathlib import Path

import ifaddr  # aioice's own way to list this machine's addresses
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from signaling.origin_check import WILDCARDS, host_name
from signaling.settings import HttpSettings
from signaling.tls import TlsSetupError

VALID_FOR = datetime.timedelta(days=30)  # a demo's certificate, not a site's: short, and renewed by itself
RENEW_BEFORE = datetime.timedelta(days=1)  # a server started today still serves tomorrow
FILE_NAME = "self-signed.pem"  # key and certificate in one file: replaced at once, never half


def state_folder() -> Path:
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "facefuse" / "tls"


def certificate_names(http: HttpSettings) -> list[str]:
    """localhost and the loopback addresses, --host (or, for a wildcard, this machine's name and
    addresses: the ones a LAN browser may use) and each --public-host."""
    names = ["localhost", "127.0.0.1", "::1"]
    host = host_name(http.host)
    if host in WILDCARDS:
        names.append(socket.gethostname().lower())
        for adapter in ifaddr.get_adapters():
            for ip in adapter.ips:
                address = ipaddress.ip_address(ip.ip if isinstance(ip.ip, str) else ip.ip[0])
                if not address.is_link_local:  # fe80::: a browser cannot use it without a zone
                    names.append(str(address))
    else:
        names.append(host)
    names.extend(http.public_hosts)
    return list(dict.fromkeys(names))


def self_signed_certificate(http: HttpSettings) -> tuple[Path, Path]:
    """(certificate file, key file) for the settings' names: the kept one if it fits, else a new one."""
    names = certificate_names(http)
    folder = state_folder()
    path = folder / FILE_NAME
    if not _fits(path, names):
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            _write_private(path, _new_certificate_pem(names))
        except OSError as exc:
            raise TlsSetupError(
                f"--tls-self-signed: cannot keep the certificate in {folder} ({exc.strerror}): "
                "set XDG_STATE_HOME to a folder this user may write"
            ) from None
    return path, path


def _fits(path: Path, names: list[str]) -> bool:
    try:
        data = path.read_bytes()
        certificate = x509.load_pem_x509_certificate(data)
        key = serialization.load_pem_private_key(data, password=None)
        alt = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, TypeError, x509.ExtensionNotFound):
        return False
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    held = {*alt.get_values_for_type(x509.DNSName), *(str(ip) for ip in alt.get_values_for_type(x509.IPAddress))}
    now = datetime.datetime.now(datetime.UTC)
    return (
        certificate.public_key().public_bytes(*spki) == key.public_key().public_bytes(*spki)
        and set(names) <= held
        and certificate.not_valid_before_utc <= now
        and certificate.not_valid_after_utc - now > RENEW_BEFORE
    )


def _new_certificate_pem(names: list[str]) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())  # P-256: every browser takes it, made in a millisecond
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "facefuse self-signed")])
    alt_names = [_general_name(name) for name in names]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # a browser's clock a little behind
        .not_valid_after(now + VALID_FOR)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem + certificate.public_bytes(serialization.Encoding.PEM)


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _write_private(path: Path, data: bytes) -> None:
    """Written beside and renamed over: a server starting at the same moment reads the old file or
    the new one, never half of one."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)
    os.replace(partial, path)
