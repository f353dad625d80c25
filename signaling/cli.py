"""`facefuse serve`: flags, with FACEFUSE_* environment variables as their defaults."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import errno
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from pipeline.chains import UnknownChain
from pipeline.device import DeviceUnavailable
from pipeline.host_memory import keep_freed_memory
from pipeline.learned import ModelFileError
from pipeline.settings import PipelineSettings
from quota.errors import StoreUnavailable
from quota.redis_store import check_redis_url
from quota.settings import QuotaSettings
from signaling.app import create_app
from signaling.origin_check import is_loopback_name
from signaling.settings import STATIC_DIR, HttpSettings, ServerSettings
from stream.ice import IceSettings
from stream.settings import StreamSettings

ENV_PREFIX = "FACEFUSE_"
SHUTDOWN_WAIT_S = 3.0
# The admin key guards every account: long enough that guessing it over HTTP is hopeless.
MIN_ADMIN_KEY_CHARS = 24

logger = logging.getLogger(__name__)


def _env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def _add(parser: argparse.ArgumentParser, flag: str, *, type=str, default=None, help: str, secret: bool = False) -> None:  # noqa: A002
    """A flag whose default comes from FACEFUSE_<FLAG> when that is set. The variable's text is
    the default as text: argparse converts it only when the flag is not given, and a bad one is
    its usual one-line error. A secret's value is not shown in --help."""
    env = os.environ.get(_env_name(flag))
    if env is not None:
        default = env
    shown = ("set" if default else "not set") if secret else repr(default)
    parser.add_argument(flag, type=type, default=default, help=f"{help} [env {_env_name(flag)}; default {shown}]")


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535, not {port}")
    return port


_port.__name__ = "port"  # argparse's "invalid port value" names the type by it


def _add_many(parser: argparse.ArgumentParser, flag: str, *, help: str) -> None:  # noqa: A002
    """A repeatable flag; FACEFUSE_<FLAG> holds a comma-separated list used when the flag is absent."""
    parser.add_argument(flag, action="append", help=f"{help} [env {_env_name(flag)}, comma-separated]")


def _many(args: argparse.Namespace, flag: str) -> tuple[str, ...]:
    given = getattr(args, flag.lstrip("-").replace("-", "_"))
    if given is not None:
        return tuple(given)
    env = os.environ.get(_env_name(flag), "")
    return tuple(part.strip() for part in env.split(",") if part.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="facefuse", description="Real-time streaming face-swap server.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="start the HTTP + WebRTC server")
    _add(serve, "--host", default="127.0.0.1", help="address to listen on")
    _add(serve, "--port", type=_port, default=8080, help="port to listen on")
    _add_many(serve, "--ice-host", help="restrict ICE host candidates to this address (repeatable)")
    _add(serve, "--ice-public-address", help="advertise this address instead of the host's (1:1 NAT)")
    _add_many(serve, "--ice-server", help="STUN/TURN URL, e.g. stun:host:3478 or turn:user:pass@host:3478 (repeatable)")
    _add_many(serve, "--ice-allow-remote", help="CIDR that offered candidates must be in (repeatable; default: loopback only when every --ice-host is loopback)")
    _add(serve, "--chain", default="mesh", help="chain to run: mesh (the face swap), inswapper (with --models-dir), passthrough, invert, fixed-cost:BATCH_MS:FRAME_MS")
    _add(serve, "--models-dir", type=Path, default=None, help="folder with the models you bring, for --chain inswapper")
    _add(serve, "--keep-eyes-mouth", default="on", help="'on': the target's own open eyes and mouth show through the swap")
    _add(serve, "--hands", default="on", help="'off' stops keeping hands in front of the face in front of the swap (a little faster)")
    _add(serve, "--badge", default="on", help="'off' removes the 'AI' disclosure badge from swapped video (operators only)")
    _add(serve, "--device", default="auto", help="cpu, cuda or auto (CUDA if present)")
    _add(serve, "--max-batch", type=int, default=8, help="frames per batch at most")
    _add(serve, "--max-wait-ms", type=float, default=4.0, help="how long a batch waits for more frames")
    _add(serve, "--cpu-threads", type=int, default=None, help="torch threads on the CPU (default: all cores but one)")
    _add(serve, "--max-decoded-pixels", type=int, default=4096 * 2304, help="a peer whose video declares larger frames is refused before decoding")
    _add(serve, "--max-faces", type=int, default=256, help="uploaded faces the server keeps, all accounts together")
    _add(serve, "--max-faces-per-account", type=int, default=32, help="uploaded faces one account may keep (local mode: --max-faces)")
    _add(serve, "--max-frame-pixels", type=int, default=1920 * 1080, help="larger frames are scaled down to this many pixels before the chain (0: no limit)")
    _add(serve, "--max-in-flight", type=int, default=1, help="frames of one session in flight at once")
    _add(serve, "--max-sessions", type=int, default=32, help="concurrent sessions at most")
    _add(serve, "--idle-timeout", type=float, default=10.0, help="seconds without video before a session is closed")
    _add(serve, "--redis-url", secret=True, help="quota store, e.g. redis://127.0.0.1:6379/0 (default: in memory)")
    _add(serve, "--redis-max-connections", type=int, default=16, help="connections to Redis this node opens at most")
    _add(serve, "--node-id", help="this node's name in the quota store, unique among live nodes; at start it settles the leases its previous run left (default HOST:PORT)")
    _add_admin_key(serve)
    _add_many(serve, "--quota-setting", help="a quota number as NAME=VALUE, e.g. grace_s=5, lease_s=2, slow_below_s=30 (repeatable)")
    _add_many(serve, "--public-host", help="a name this server answers to besides loopback names and its --host address, e.g. facefuse.example.com (repeatable); other Host headers get 421 (DNS rebinding): always without an admin key, with one only when this is given, the probes /healthz and /livez excepted")
    _add_many(serve, "--allow-origin", help="another site's page that may use the API (POST/PUT/PATCH/DELETE, CORS), e.g. https://dash.example.com (repeatable); such requests from other pages than this server's own get 403")
    _add(serve, "--static-dir", type=Path, default=STATIC_DIR, help="folder with index.html")
    _add(serve, "--log-level", default="INFO", help="logging level")
    return parser


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    if args.device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda, not {args.device!r}")
    if args.log_level.upper() not in logging.getLevelNamesMapping():
        raise ValueError(f"--log-level must be one of DEBUG, INFO, WARNING, ERROR, not {args.log_level!r}")
    if args.redis_url:
        check_redis_url(args.redis_url)
    allowed = _many(args, "--ice-allow-remote")
    return ServerSettings(
        http=HttpSettings(
            host=args.host, port=args.port, static_dir=args.static_dir,
            max_faces=args.max_faces, max_faces_per_account=args.max_faces_per_account,
            public_hosts=_many(args, "--public-host"), allowed_origins=_many(args, "--allow-origin"),
        ),
        stream=StreamSettings(
            ice=IceSettings(
                hosts=_many(args, "--ice-host"),
                public_address=args.ice_public_address,
                servers=_many(args, "--ice-server"),
                allowed_remote=allowed or None,
            ),
            idle_timeout_s=args.idle_timeout,
            max_sessions=args.max_sessions,
            max_decoded_pixels=args.max_decoded_pixels,
        ),
        pipeline=PipelineSettings(
            chain=args.chain,
            device=args.device,
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
            redis_url=args.redis_url, admin_key=_admin_key(args), node_id=args.node_id,
            redis_max_connections=args.redis_max_connections, **_quota_numbers(_many(args, "--quota-setting"))
        ),
    )


def _add_admin_key(parser: argparse.ArgumentParser) -> None:
    """Not with _add: where the key came from matters (a flag wins over the environment, and the
    key itself on the command line is visible to every user of the machine in ps)."""
    key_set = "set" if os.environ.get(_env_name("--admin-key")) else "not set"
    parser.add_argument(
        "--admin-key-file", type=Path, metavar="PATH",
        help=f"file whose first line is the key for /api/admin/*, at least {MIN_ADMIN_KEY_CHARS} characters; or the key "
        "itself in FACEFUSE_ADMIN_KEY. Without a key the server runs one unmetered local account without auth, and "
        f"only on loopback [env {_env_name('--admin-key-file')}; FACEFUSE_ADMIN_KEY default {key_set}]",
    )
    parser.add_argument(
        "--admin-key", help="deprecated: the admin key on the command line is visible to every user in ps; "
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
        raise ValueError(f"the admin key has {len(key)} characters: it must have at least {MIN_ADMIN_KEY_CHARS} "
                         "(e.g. openssl rand -hex 16)")
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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.admin_key is not None:
        logger.warning("--admin-key is deprecated: the key is visible to every user of this machine in ps; "
                       "use FACEFUSE_ADMIN_KEY or --admin-key-file")
    if settings.local_mode and not is_loopback_name(settings.http.host):
        parser.error(
            f"refusing to serve on {settings.http.host} without --admin-key-file or FACEFUSE_ADMIN_KEY: the local account has no auth "
            "and is meant for 127.0.0.1 only"
        )
    try:
        # run_app handles SIGINT/SIGTERM: stops accepting, closes sessions, stops the worker. It
        # waits SHUTDOWN_WAIT_S for requests in progress (a stalled upload held sessions 15 s).
        app = create_app(settings)
        app.on_shutdown.append(_second_signal_stops_at_once)
        web.run_app(app, host=settings.http.host, port=settings.http.port, print=None, shutdown_timeout=SHUTDOWN_WAIT_S)
    except web.GracefulExit:  # a second signal before the first one's shutdown began
        print(SECOND_SIGNAL, file=sys.stderr)
        return 1
    except (UnknownChain, DeviceUnavailable, ModelFileError, StoreUnavailable) as exc:
        print(f"facefuse: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if not _cannot_listen(exc):
            raise  # not a start-up problem of the socket: a bug, with its traceback
        print(f"facefuse: cannot listen on {settings.http.host}:{settings.http.port}: {exc}", file=sys.stderr)
        return 2
    return 0


SECOND_SIGNAL = (
    "facefuse: a second signal during shutdown: stopped at once; sessions not yet closed were "
    "dropped (the store settles their leases after its TTL)"
)


async def _second_signal_stops_at_once(_app: web.Application) -> None:
    """From the first signal's shutdown on, SIGINT/SIGTERM end the process there and then. Left to
    aiohttp, a second signal cancelled the shutdown's tasks, and a request handler cancelled that
    way (a stalled upload's) sometimes logged aiohttp's own InvalidStateError traceback."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, _exit_now)


def _exit_now() -> None:
    print(SECOND_SIGNAL, file=sys.stderr, flush=True)
    os._exit(1)  # no cleanup to wait on: that is what the second signal asks for


def _cannot_listen(exc: OSError) -> bool:
    """A socket that cannot be opened where asked: the port taken or privileged, an address that
    is not this machine's or a name that does not resolve."""
    return isinstance(exc, socket.gaierror) or exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)


if __name__ == "__main__":
    sys.exit(main())
