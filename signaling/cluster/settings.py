"""The cluster's settings: how other nodes and clients reach this node."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(frozen=True)
class ClusterSettings:
    advertise_url: str | None = field(
        default=None,
        metadata={
            "help": (
                "the URL clients and the other nodes reach this node at, e.g. http://10.0.0.5:8080 (a 307 sends "
                "clients there; forwarded API requests go there)"
            ),
            "default_text": "http://HOST:PORT from --host and --port",
        },
    )

    hop_secret: str | None = field(
        default=None,
        metadata={
            "help": (
                "the secret the nodes sign forwarded requests with (signaling/cluster/hops.py); by default one "
                "kept in Redis, shared by every node that reaches it"
            ),
            "default_text": "one kept in Redis",
        },
    )

    def __post_init__(self) -> None:
        if self.hop_secret is not None and len(self.hop_secret) < 16:
            raise ValueError("--cluster-secret must be at least 16 characters")
        if self.advertise_url is not None:
            parts = urlsplit(self.advertise_url)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
                raise ValueError(
                    f"--advertise-url must be http(s)://HOST[:PORT] without a path, not {self.advertise_url!r}"
                )
            object.__setattr__(self, "advertise_url", self.advertise_url.rstrip("/"))
