"""DTLS cipher suites: accept a peer whose DTLS certificate is RSA.

aiortc 1.16 offers only ECDHE-ECDSA suites (its own certificate is ECDSA), so when it is the DTLS
client (it answers `a=setup:active` to an offer's `actpass`) and the peer's certificate is RSA,
the handshake fails with "no shared cipher". GStreamer's webrtcbin (1.22, Debian 12: Debian's
simple-whip-client and GStreamer WHIP/WHEP elements) uses an RSA certificate; browsers and
libdatachannel (OBS) accept either kind. The ECDHE-RSA suites are added after aiortc's own, so a
peer that can do ECDSA still gets it.

The context is made by the peer connection's certificate (`RTCCertificate._create_ssl_context`,
called from RTCDtlsTransport.start()); the wrapper is set on that certificate instance only.
"""

from __future__ import annotations

from aiortc import RTCPeerConnection
from aiortc.rtcdtlstransport import RTCCertificate
from OpenSSL import SSL

# aiortc 1.16's list, then the same suites for an RSA certificate.
CIPHERS = b":".join(
    (
        b"ECDHE-ECDSA-AES128-GCM-SHA256",
        b"ECDHE-ECDSA-CHACHA20-POLY1305",
        b"ECDHE-ECDSA-AES128-SHA",
        b"ECDHE-ECDSA-AES256-SHA",
        b"ECDHE-RSA-AES128-GCM-SHA256",
        b"ECDHE-RSA-CHACHA20-POLY1305",
        b"ECDHE-RSA-AES128-SHA",
        b"ECDHE-RSA-AES256-SHA",
    )
)


def accept_rsa_dtls_peers(pc: RTCPeerConnection) -> None:
    """Before the connection's DTLS starts: its handshakes also offer the ECDHE-RSA suites."""
    for certificate in pc._RTCPeerConnection__certificates:  # type: ignore[attr-defined]
        _widen(certificate)


def _widen(certificate: RTCCertificate) -> None:
    make_context = certificate._create_ssl_context

    def with_rsa_suites(*args, **kwargs) -> SSL.Context:
        context = make_context(*args, **kwargs)
        context.set_cipher_list(CIPHERS)
        return context

    certificate._create_ssl_context = with_rsa_suites  # type: ignore[method-assign]
