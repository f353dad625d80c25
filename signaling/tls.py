"""HTTPS served directly (--tls-cert/--tls-key, or --tls-self-signed): the server's SSLContext,
with each way a certificate or key can be wrong said in one line at start.

A camera page off this machine needs a secure context (https), and a reverse proxy is one more
thing to run for a LAN demo or a single box.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from signaling.settings import HttpSettings


class TlsSetupError(Exception):
    """A certificate or key that cannot serve: the message names the file and what to do."""


@dataclasses.dataclass(frozen=True)
class ServerTls:
    context: ssl.SSLContext
    certificate: x509.Certificate
    cert_path: Path
    self_signed: bool

    @property
    def fingerprint(self) -> str:
        return sha256_fingerprint(self.certificate.public_bytes(serialization.Encoding.DER))

    def names(self) -> list[str]:
        """The names and addresses in the certificate's subjectAltName."""
        try:
            alt = self.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return []
        return [*alt.get_values_for_type(x509.DNSName), *(str(ip) for ip in alt.get_values_for_type(x509.IPAddress))]


def sha256_fingerprint(der: bytes) -> str:
    """AB:CD:...: the SHA-256 of the certificate's DER bytes, as browsers show it."""
    return ":".join(f"{byte:02X}" for byte in hashlib.sha256(der).digest())


def server_tls(http: HttpSettings) -> ServerTls | None:
    """The TLS the settings ask for; None for plain HTTP. Raises TlsSetupError."""
    if http.tls_self_signed:
        from signaling.self_signed import self_signed_certificate

        cert_path, key_path = self_signed_certificate(http)
        return _load(cert_path, key_path, self_signed=True)
    if http.tls_cert is not None and http.tls_key is not None:
        return _load(Path(http.tls_cert), Path(http.tls_key), self_signed=False)
    return None


def _load(cert_path: Path, key_path: Path, *, self_signed: bool) -> ServerTls:
    """Each file read and checked here first: ssl's own errors say "PEM lib" for all of them."""
    certificates = _certificates(cert_path)
    key = _private_key(key_path)
    leaf = certificates[0]
    if leaf.public_key().public_bytes(*_SPKI) != key.public_key().public_bytes(*_SPKI):
        raise TlsSetupError(
            f"--tls-key {key_path} is not the key of --tls-cert {cert_path} (their public keys differ): "
            "give the key the certificate was issued for"
        )
    now = datetime.datetime.now(datetime.UTC)
    if leaf.not_valid_after_utc <= now:
        raise TlsSetupError(
            f"--tls-cert {cert_path} expired on {leaf.not_valid_after_utc:%Y-%m-%d %H:%M} UTC: renew it "
            "(browsers refuse it)"
        )
    if leaf.not_valid_before_utc > now:
        raise TlsSetupError(
            f"--tls-cert {cert_path} is valid only from {leaf.not_valid_before_utc:%Y-%m-%d %H:%M} UTC: "
            "check this machine's clock"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_path, key_path)
    except (OSError, ssl.SSLError) as exc:  # checked above: a file changed since, or a chain ssl refuses
        raise TlsSetupError(f"--tls-cert {cert_path} / --tls-key {key_path}: ssl refuses them: {exc}") from None
    return ServerTls(context, leaf, cert_path, self_signed)


_SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise TlsSetupError(f"{flag} {path}: no such file") from None
    except OSError as exc:
        raise TlsSetupError(f"{flag} {path}: cannot read it ({exc.strerror})") from None


def _certificates(path: Path) -> list[x509.Certificate]:
    data = _read(path, "--tls-cert")
    if b"PRIVATE KEY-----" in data and b"CERTIFICATE-----" not in data:
        raise TlsSetupError(
            f"--tls-cert {path} holds a private key: give it as --tls-key, the certificate as --tls-cert"
        )
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TlsSetupError(
            f"--tls-cert {path} is not a PEM certificate (-----BEGIN CERTIFICATE-----): "
            "convert a DER one with openssl x509 -inform der"
        ) from None


def _private_key(path: Path):
    data = _read(path, "--tls-key")
    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:  # encrypted: ssl would ask for the passphrase on the terminal
        raise TlsSetupError(
            f"--tls-key {path} is encrypted: give an unencrypted key (openssl pkey -in KEY -out KEY.plain), "
            "readable by this server's user only"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise TlsSetupError(
            f"--tls-key {path} is not a PEM private key (-----BEGIN PRIVATE KEY-----)"
            + (": it holds a certificate, give it as --tls-cert" if b"CERTIFICATE-----" in data else "")
        ) from None
