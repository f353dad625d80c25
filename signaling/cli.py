"""`facefuse serve`: flags, with FACEFUSE_* environment variables as their defaults.

Each flag's default (and most help texts) is read from the settings dataclasses, the one place
they are written. The server itself (torch, the chains, the stores) is imported only once the flags
are read: `facefuse --help` answers at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import re
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline.host_memory import keep_freed_memory
from pipeline.settings import DEVICE_CHOICES, PipelineSettings
from quota.settings import QuotaSettings
from signaling.cluster.settings import ClusterSettings
from signaling.origin_check import is_loopback_name
from signaling.settings import HttpSettings, ServerSettings
from stream.ice import IceSettings
from stream.settings import StreamSettings

ENV_PREFIX = "FACEFUSE_"
ON_OFF = ("on", "off")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The admin key guards every account: long enough that guessing it over HTTP is hopeless.
MIN_ADMIN_KEY_CHARS = 24


def _env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def _add(
    group: Any,
    flag: str,
    *,
    type=str,
    default=None,
    help: str,
    shown: str | None = None,  # noqa: A002
    choices: Sequence[str] | None = None,
    secret: bool = False,
) -> None:
    """A flag whose default comes from FACEFUSE_<FLAG> when that is set. The variable's text is
    the default as text: argparse converts it only when the flag is not given, and a bad one is
    its usual one-line error. A secret's value is not shown in --help."""
    env = os.environ.get(_env_name(flag))
    if env is not None:
        default, shown = env, env
    if secret and default:
        shown = "set"
    elif shown is None:
        shown = str(default)
    group.add_argument(
        flag, type=type, default=default, choices=choices, help=f"{help} [env {_env_name(flag)}; default: {shown}]"
    )


def _add_setting(
    group: Any,
    flag: str,
    section: type,
    name: str,
    *,
    type=str,  # noqa: A002
    choices: Sequence[str] | None = None,
    secret: bool = False,
) -> None:
    """A flag for one settings field: its default and help are the field's (see pipeline/settings.py)."""
    field = _field(section, name)
    default = field.default
    if isinstance(default, bool):
        default, choices, type = ("on" if default else "off"), ON_OFF, str.lower
    shown = field.metadata.get("default_text")
    if shown is None and type is _pixels:
        shown = _pixels_text(default)
    _add(
        group,
        flag,
        type=type,
        default=default,
        help=field.metadata["help"],
        shown=shown,
        choices=choices,
        secret=secret,
    )


def _count_or_auto(text: str) -> int | None:
    """A count, or "auto" (None): the capacity model decides."""
    if text.strip().lower() == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, not {text!r}") from None


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535, not {port}")
    return port


_port.__name__ = "port"  # argparse's "invalid port value" names the type by it

_SIZE = re.compile(r"^([0-9]+)x([0-9]+)$")


def _pixels(text: str) -> int:
    """A number of pixels, or WIDTHxHEIGHT."""
    size = _SIZE.match(text.strip().lower())
    return int(size[1]) * int(size[2]) if size else int(text)


_pixels.__name__ = "pixels"


def _pixels_text(pixels: int | None) -> str:
    """1920x1080 for 2073600: a pixel limit as the frame size it admits (16:9 or 4:3), else the number."""
    if not pixels:
        return "no limit"
    for wide, high in ((16, 9), (4, 3)):
        unit = math.isqrt(pixels // (wide * high))
        if wide * high * unit * unit == pixels:
            return f"{wide * unit}x{high * unit}"
    return str(pixels)


def _add_many(group: Any, flag: str, *, help: str) -> None:  # noqa: A002
    """A repeatable flag; FACEFUSE_<FLAG> holds a comma-separated list used when the flag is absent."""
    group.add_argument(flag, action="append", help=f"{help} [env {_env_name(flag)}, comma-separated]")


def _add_switch(group: Any, flag: str, *, help: str) -> None:  # noqa: A002
    """A flag without a value; FACEFUSE_<FLAG>=on (or 1, true, yes) sets it too."""
    env = os.environ.get(_env_name(flag), "")
    on = env.strip().lower() in ("on", "1", "true", "yes")
    group.add_argument(flag, action="store_true", default=on, help=f"{help} [env {_env_name(flag)}=on]")


def _many(args: argparse.Namespace, flag: str) -> tuple[str, ...]:
    given = getattr(args, flag.lstrip("-").replace("-", "_"))
    if given is not None:
        return tuple(given)
    env = os.environ.get(_env_name(flag), "")
    return tuple(part.strip() for part in env.split(",") if part.strip())


def _version() -> str:
    try:
        return metadata.version("facefuse")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command line and its `serve` command (whose usage answers a bad value)."""
    parser = argparse.ArgumentParser(prog="facefuse", description="Real-time streaming face-swap server.")
    parser.add_argument("--version", action="version", version=f"facefuse {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="start the HTTP + WebRTC server",
        usage="%(prog)s [options]  (facefuse serve --help lists them)",
        description="Start the HTTP + WebRTC server. Every flag can also be set by the environment variable named "
        "in its help.",
    )
    network = serve.add_argument_group("network")
    _add_setting(network, "--host", HttpSettings, "host")
    _add_setting(network, "--port", HttpSettings, "port", type=_port)
    _add_many(network, "--public-host", help=_help(HttpSettings, "public_hosts"))
    _add_many(network, "--allow-origin", help=_help(HttpSettings, "allowed_origins"))
    _add_many(network, "--metrics-allow", help=_help(HttpSettings, "metrics_allow"))
    _add_setting(network, "--static-dir", HttpSettings, "static_dir", type=Path)
    _add_many(network, "--trusted-proxy", help=_help(HttpSettings, "trusted_proxies"))

    tls = serve.add_argument_group("HTTPS (docs/running.md#https)")
    _add_setting(tls, "--tls-cert", HttpSettings, "tls_cert", type=Path)
    _add_setting(tls, "--tls-key", HttpSettings, "tls_key", type=Path)
    _add_switch(tls, "--tls-self-signed", help=_help(HttpSettings, "tls_self_signed"))
    _add_setting(network, "--advertise-url", ClusterSettings, "advertise_url")
    _add_setting(network, "--cluster-secret", ClusterSettings, "hop_secret", secret=True)

    chain = serve.add_argument_group("chain")
    _add_setting(chain, "--chain", PipelineSettings, "chain")
    _add_setting(chain, "--models-dir", PipelineSettings, "models_dir", type=Path)
    _add_setting(chain, "--keep-eyes-mouth", PipelineSettings, "keep_eyes_mouth")
    _add_setting(chain, "--hands", PipelineSettings, "hands")
    _add_setting(chain, "--badge", PipelineSettings, "badge")
    _add_setting(chain, "--device", PipelineSettings, "device", type=str.lower, choices=DEVICE_CHOICES)
    _add_setting(chain, "--cpu-threads", PipelineSettings, "cpu_threads", type=int)

    scheduler = serve.add_argument_group("scheduler")
    _add_setting(scheduler, "--max-batch", PipelineSettings, "max_batch", type=int)
    _add_setting(scheduler, "--max-wait-ms", PipelineSettings, "max_wait_ms", type=float)
    _add_setting(scheduler, "--max-in-flight", PipelineSettings, "max_in_flight", type=int)

    accounts = serve.add_argument_group("accounts and metering")
    _add_admin_key(accounts)
    _add_setting(accounts, "--redis-url", QuotaSettings, "redis_url", secret=True)
    _add_setting(accounts, "--redis-max-connections", QuotaSettings, "redis_max_connections", type=int)
    _add_setting(accounts, "--node-id", QuotaSettings, "node_id")
    _add(
        accounts,
        "--quota-config",
        type=Path,
        help="TOML file with the tiers (refill, cap, priority, sessions at once) and the prices by frame size",
        shown="the built-in tiers free, paid, vip",
    )
    _add_many(
        accounts,
        "--quota-setting",
        help="a quota number as NAME=VALUE, e.g. grace_s=5, lease_s=2, slow_below_s=30 (repeatable)",
    )

    limits = serve.add_argument_group("limits")
    _add_setting(limits, "--max-sessions", StreamSettings, "max_sessions", type=_count_or_auto)
    _add_setting(limits, "--target-fps", StreamSettings, "target_fps", type=float)
    _add_setting(limits, "--floor-fps", StreamSettings, "floor_fps", type=float)
    _add_setting(limits, "--max-queue", StreamSettings, "max_queue", type=int)
    _add_setting(limits, "--idle-timeout", StreamSettings, "idle_timeout_s", type=float)
    _add_setting(limits, "--drain-timeout", StreamSettings, "drain_timeout_s", type=float)
    _add_setting(limits, "--max-viewers-per-stream", StreamSettings, "max_viewers_per_stream", type=int)
    _add_setting(limits, "--max-viewers", StreamSettings, "max_viewers", type=int)
    _add_setting(limits, "--max-viewers-per-token", StreamSettings, "max_viewers_per_token", type=int)
    _add_setting(limits, "--max-frame-pixels", PipelineSettings, "max_frame_pixels", type=_pixels)
    _add_setting(limits, "--max-decoded-pixels", StreamSettings, "max_decoded_pixels", type=_pixels)
    _add_setting(limits, "--max-faces", HttpSettings, "max_faces", type=int)
    _add_setting(limits, "--max-faces-per-account", HttpSettings, "max_faces_per_account", type=int)

    ice = serve.add_argument_group("ICE (WebRTC connectivity)")
    _add_many(
        ice,
        "--ice-host",
        help="restrict ICE host candidates to this address (repeatable; default: every address but loopback)",
    )
    _add(ice, "--ice-public-address", help="advertise this address instead of the host's (1:1 NAT)", shown="none")
    _add_many(
        ice,
        "--ice-server",
        help="STUN/TURN URL, e.g. stun:host:3478 or turn:user:pass@host:3478 (repeatable; default: none)",
    )
    _add_many(
        ice,
        "--ice-allow-remote",
        help="CIDR that offered candidates must be in (repeatable; default: loopback "
        "only when every --ice-host is loopback, else any)",
    )

    _add(serve, "--log-level", type=str.upper, choices=LOG_LEVELS, default="INFO", help="what the log shows")

    from client.cam.cli import DESCRIPTION, add_cam_arguments  # argparse only: --help stays instant

    cam = commands.add_parser(
        "cam", help="stream a camera through a server to a virtual camera", description=DESCRIPTION
    )
    add_cam_arguments(cam)
    return parser, serve


def build_parser() -> argparse.ArgumentParser:
    return build_parsers()[0]


def _field(section: type, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(section) if f.name == name)


def _help(section: type, name: str) -> str:
    return _field(section, name).metadata["help"]


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    if args.device.lower() not in DEVICE_CHOICES:  # from the environment: argparse checks only what is given
        raise ValueError(f"--device must be auto, cpu or cuda, not {args.device!r}")
    if args.log_level.upper() not in LOG_LEVELS:
        raise ValueError(f"--log-level must be one of {', '.join(LOG_LEVELS)}, not {args.log_level!r}")
    if args.redis_url:
        from quota.redis_store import check_redis_url  # redis is imported when a store is used

        check_redis_url(args.redis_url)
    quota_file = {}
    if args.quota_config is not None:
        from quota.quota_config import load_quota_config

        quota_file = load_quota_config(args.quota_config)
    allowed = _many(args, "--ice-allow-remote")
    return ServerSettings(
        http=HttpSettings(
            host=args.host,
            port=args.port,
            static_dir=args.static_dir,
            max_faces=args.max_faces,
            max_faces_per_account=args.max_faces_per_account,
            public_hosts=_many(args, "--public-host"),
            allowed_origins=_many(args, "--allow-origin"),
            metrics_allow=_many(args, "--metrics-allow"),
            trusted_proxies=_many(args, "--trusted-proxy"),
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_self_signed=args.tls_self_signed,
        ),
        stream=StreamSettings(
            ice=IceSettings(
                hosts=_many(args, "--ice-host"),
                public_address=args.ice_public_address,
                servers=_many(args, "--ice-server"),
                allowed_remote=allowed or None,
            ),
            idle_timeout_s=args.idle_timeout,
            drain_timeout_s=args.drain_timeout,
            max_sessions=args.max_sessions,
            target_fps=args.target_fps,
            floor_fps=args.floor_fps,
            max_queue=args.max_queue,
            max_viewers_per_stream=args.max_viewers_per_stream,
            max_viewers=args.max_viewers,
            max_viewers_per_token=args.max_viewers_per_token,
            max_decoded_pixels=args.max_decoded_pixels,
        ),
        pipeline=PipelineSettings(
            chain=args.chain,
            device=args.device.lower(),
            max_batch=args.max_batch,
            max_wait_ms=args.max_wait_ms,
            max_in_flight=args.max_in_flight,
            max_frame_pixels=args.max_frame_pixels or None,
            cpu_threads=args.cpu_threads,
            models_dir=args.models_dir,
            badge=_on_off(args.badge, "--badge"),
            keep_eyes_mouth=_on_off(args.keep_eyes_mouth, "--keep-eyes-mouth"),
            hands=_on_off(args.hands, "--hands"),
        ),
        quota=QuotaSettings(
            redis_url=args.redis_url,
            admin_key=_admin_key(args),
            node_id=args.node_id,
            redis_max_connections=args.redis_max_connections,
            **quota_file,
            **_quota_numbers(_many(args, "--quota-setting")),
        ),
        cluster=ClusterSettings(advertise_url=args.advertise_url or None, hop_secret=args.cluster_secret or None),
    )


def _add_admin_key(parser: argparse.ArgumentParser) -> None:
    """Not with _add: where the key came from matters (a flag wins over the environment, and the
    key itself on the command line is visible to every user of the machine in ps)."""
    key_set = "set" if os.environ.get(_env_name("--admin-key")) else "not set"
    parser.add_argument(
        "--admin-key-file",
        type=Path,
        metavar="PATH",
        help=f"file whose first line is the key for /api/admin/*, at least {MIN_ADMIN_KEY_CHARS} characters; or the key "
        "itself in FACEFUSE_ADMIN_KEY. Without a key the server runs one unmetered local account without auth, and "
        f"only on loopback [env {_env_name('--admin-key-file')}; FACEFUSE_ADMIN_KEY default {key_set}]",
    )
    parser.add_argument(
        "--admin-key",
        help="deprecated: the admin key on the command line is visible to every user in ps; "
        "use FACEFUSE_ADMIN_KEY or --admin-key-file",
    )


def _admin_key(args: argparse.Namespace) -> str | None:
    """The admin key from the flags, else from the environment; None: local mode."""
    if args.admin_key is not None and args.admin_key_file is not None:
        raise ValueError("give --admin-key-file or --admin-key, not both")
    key_file, key = args.admin_key_file, args.admin_key
    if key_file is None and key is None:
        key_file, key = os.environ.get(_env_name("--admin-key-file")), os.environ.get(_env_name("--admin-key"))
        if key_file and key:
            raise ValueError("set FACEFUSE_ADMIN_KEY or FACEFUSE_ADMIN_KEY_FILE, not both")
        key_file, key = key_file or None, key or None  # an empty variable is no key, as before
    if key_file is not None:
        try:
            key = Path(key_file).read_text(encoding="utf-8").partition("\n")[0]
        except OSError as exc:
            raise ValueError(f"--admin-key-file {key_file}: cannot read it ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise ValueError(f"--admin-key-file {key_file}: not UTF-8 text") from None
    if key is None:
        return None
    key = key.strip()
    if len(key) < MIN_ADMIN_KEY_CHARS:  # the key itself is never echoed: this line may end up in a log
        raise ValueError(
            f"the admin key has {len(key)} characters: it must have at least {MIN_ADMIN_KEY_CHARS} "
            "(e.g. openssl rand -hex 16)"
        )
    if not (key.isascii() and key.isprintable()):  # other bytes could never match an Authorization header
        raise ValueError("the admin key must be printable ASCII")
    return key


def _quota_numbers(pairs: tuple[str, ...]) -> dict[str, float]:
    """NAME=VALUE pairs for the numeric fields of QuotaSettings."""
    numeric = {f.name for f in dataclasses.fields(QuotaSettings) if f.type in ("float", float)}
    numbers: dict[str, float] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name not in numeric:
            raise ValueError(f"--quota-setting {pair!r}: NAME is one of {', '.join(sorted(numeric))}")
        try:
            numbers[name] = float(value)
        except ValueError:
            raise ValueError(f"--quota-setting {pair!r}: VALUE must be a number") from None
    return numbers


def _on_off(value: str, flag: str) -> bool:
    if value.lower() not in ("on", "off"):
        raise ValueError(f"{flag} must be on or off, not {value!r}")
    return value.lower() == "on"


def main(argv: Sequence[str] | None = None) -> int:
    keep_freed_memory()  # before the server starts its threads (pipeline/host_memory.py)
    parser, serve = build_parsers()
    args = parser.parse_args(argv)
    if args.command == "cam":  # the client: none of the server's settings
        from client.cam.cli import run_cam_command

        return run_cam_command(args)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        serve.error(str(exc))
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.admin_key is not None:
        logging.getLogger(__name__).warning(
            "--admin-key is deprecated: the key is visible to every user of this machine in ps; "
            "use FACEFUSE_ADMIN_KEY or --admin-key-file"
        )
    if settings.local_mode and not is_loopback_name(settings.http.host):
        serve.error(
            f"refusing to serve on {settings.http.host} without --admin-key-file or FACEFUSE_ADMIN_KEY: the local account has no auth "
            "and is meant for 127.0.0.1 only"
        )
    from signaling.serving import serve_until_stopped  # torch, the chains, the stores: only now

    return serve_until_stopped(settings)


if __name__ == "__main__":
    sys.exit(main())
