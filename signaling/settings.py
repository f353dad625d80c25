"""The server's settings: one section per package, built once by the CLI. A field that is a flag
carries its help text in its metadata (see pipeline/settings.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.settings import PipelineSettings
from quota.accounts import LOCAL_TIER
from quota.settings import QuotaSettings
from signaling.client_address import checked_trusted_proxy
from signaling.cluster.settings import ClusterSettings
from signaling.event_streams import EventStreamSettings
from signaling.metrics_access import checked_network
from signaling.origin_check import checked_allowed_origin, checked_public_host
from stream.settings import StreamSettings

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"


@dataclass(frozen=True)
class HttpSettings:
    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int = field(default=8080, metadata={"help": "port to listen on"})
    max_upload_bytes: int = 10 * 1024 * 1024
    max_faces: int = field(default=256, metadata={"help": "uploaded faces the server keeps, all accounts together"})
    max_faces_per_account: int = field(
        default=32, metadata={"help": "uploaded faces one account may keep (local mode: --max-faces)"}
    )
    static_dir: Path = field(
        default=STATIC_DIR,
        metadata={"help": "folder with index.html", "default_text": "the page shipped with facefuse"},
    )
    # names the server answers to besides loopback and its address
    public_hosts: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": (
                "a name this server answers to besides loopback names and its --host address, e.g. facefuse.example.com "
                "(repeatable); other Host headers get 421 (DNS rebinding): always without an admin key, with one only when "
                "this is given, the probes /healthz and /livez excepted"
            )
        },
    )
    # other sites' pages that may change things (a dashboard)
    allowed_origins: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": (
                "another site's page that may use the API (POST/PUT/PATCH/DELETE, CORS), e.g. https://dash.example.com "
                "(repeatable); such requests from other pages than this server's own get 403"
            )
        },
    )

    # who reads GET /metrics without the admin key, besides loopback (signaling/metrics_access.py)
    metrics_allow: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": (
                "a network whose addresses may read GET /metrics without the admin key, e.g. 10.0.0.0/8 for a "
                "Prometheus on the private network (repeatable); loopback always may, others get 403"
            )
        },
    )

    # proxies whose X-Forwarded-For/-Proto are believed (signaling/client_address.py)
    trusted_proxies: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": (
                "a network of reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed, e.g. "
                "127.0.0.1/32 for a proxy on this machine (repeatable); from other peers these headers are ignored"
            )
        },
    )
    # HTTPS served here (signaling/tls.py): a certificate given, or one made for a LAN demo
    tls_cert: Path | None = field(
        default=None,
        metadata={
            "help": "PEM certificate (its chain after it) to serve HTTPS with; needs --tls-key",
            "default_text": "none: plain HTTP",
        },
    )
    tls_key: Path | None = field(
        default=None, metadata={"help": "PEM private key of --tls-cert, unencrypted", "default_text": "none"}
    )
    tls_self_signed: bool = field(
        default=False,
        metadata={
            "help": (
                "serve HTTPS with a self-signed certificate for --host, --public-host and localhost, made at start "
                "(kept in $XDG_STATE_HOME/facefuse/tls and reused while valid); its SHA-256 fingerprint is printed "
                "to compare with the browser's"
            )
        },
    )

    def __post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key go together: give the certificate and its private key")
        if self.tls_self_signed and self.tls_cert is not None:
            raise ValueError("give --tls-cert/--tls-key or --tls-self-signed, not both")
        object.__setattr__(self, "trusted_proxies", tuple(checked_trusted_proxy(cidr) for cidr in self.trusted_proxies))
        if self.max_faces < 1 or self.max_faces_per_account < 1:
            raise ValueError("--max-faces and --max-faces-per-account must be at least 1")
        object.__setattr__(self, "public_hosts", tuple(checked_public_host(name) for name in self.public_hosts))
        object.__setattr__(
            self, "allowed_origins", tuple(checked_allowed_origin(origin) for origin in self.allowed_origins)
        )
        object.__setattr__(self, "metrics_allow", tuple(checked_network(cidr) for cidr in self.metrics_allow))
        if not (Path(self.static_dir) / "index.html").is_file():
            raise ValueError(f"--static-dir {self.static_dir} has no index.html")


@dataclass(frozen=True)
class ServerSettings:
    http: HttpSettings = field(default_factory=HttpSettings)
    stream: StreamSettings = field(default_factory=StreamSettings)
    pipeline: PipelineSettings = field(default_factory=PipelineSettings)
    quota: QuotaSettings = field(default_factory=QuotaSettings)
    events: EventStreamSettings = field(default_factory=EventStreamSettings)  # the dashboards' GET /api/events
    cluster: ClusterSettings = field(default_factory=ClusterSettings)  # several nodes on one Redis

    def __post_init__(self) -> None:
        if self.local_mode and LOCAL_TIER not in self.quota.tiers_by_name:
            raise ValueError(
                f"the local account (no admin key) runs on tier {LOCAL_TIER!r}, which --quota-config "
                f"does not define (tiers: {', '.join(self.quota.tiers_by_name)})"
            )

    @property
    def local_mode(self) -> bool:
        """No admin key: one unmetered local account, no auth (only allowed on loopback)."""
        return self.quota.admin_key is None
