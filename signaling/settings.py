"""The server's settings: one section per package, built once by the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.settings import PipelineSettings
from quota.settings import QuotaSettings
from signaling.origin_check import checked_allowed_origin, checked_public_host
from stream.settings import StreamSettings

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"


@dataclass(frozen=True)
class HttpSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    max_upload_bytes: int = 10 * 1024 * 1024
    max_faces: int = 256
    max_faces_per_account: int = 32
    static_dir: Path = STATIC_DIR
    public_hosts: tuple[str, ...] = ()  # names the server answers to besides loopback and its address
    allowed_origins: tuple[str, ...] = ()  # other sites' pages that may change things (a dashboard)

    def __post_init__(self) -> None:
        if self.max_faces < 1 or self.max_faces_per_account < 1:
            raise ValueError("--max-faces and --max-faces-per-account must be at least 1")
        object.__setattr__(self, "public_hosts", tuple(checked_public_host(name) for name in self.public_hosts))
        object.__setattr__(self, "allowed_origins", tuple(checked_allowed_origin(origin) for origin in self.allowed_origins))
        if not (Path(self.static_dir) / "index.html").is_file():
            raise ValueError(f"--static-dir {self.static_dir} has no index.html")


@dataclass(frozen=True)
class ServerSettings:
    http: HttpSettings = field(default_factory=HttpSettings)
    stream: StreamSettings = field(default_factory=StreamSettings)
    pipeline: PipelineSettings = field(default_factory=PipelineSettings)
    quota: QuotaSettings = field(default_factory=QuotaSettings)

    @property
    def local_mode(self) -> bool:
        """No admin key: one unmetered local account, no auth (only allowed on loopback)."""
        return self.quota.admin_key is None
