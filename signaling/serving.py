"""Running the server the command line has configured: the lines an operator sees at start and
stop, start-up errors as one line, a drain on SIGTERM and shutdown on SIGINT. Imported by the CLI
only once the flags are read (it pulls in torch and the chains)."""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import signal
import socket
import sys

from aiohttp import web

from pipeline.chains import UnknownChain
from pipeline.device import DeviceUnavailable
from pipeline.learned import ModelFileError
from quota.errors import StoreUnavailable
from signaling.app import create_app
from signaling.app_keys import DEVICE, DRAIN, RUNNER
from signaling.settings import ServerSettings
from signaling.tls import ServerTls, TlsSetupError, server_tls

SHUTDOWN_WAIT_S = 3.0

SECOND_SIGNAL = (
    "facefuse: a second signal during shutdown: stopped at once; sessions not yet closed were "
    "dropped (the store settles their leases after its TTL)"
)
STOPPED = "facefuse: stopped"


def serve_until_stopped(settings: ServerSettings) -> int:
    """Serves until SIGINT/SIGTERM; the exit status (2: it could not start)."""
    try:
        # run_app handles SIGINT/SIGTERM: stops accepting, closes sessions, stops the worker. It
        # waits SHUTDOWN_WAIT_S for requests in progress (a stalled upload held sessions 15 s).
        tls = server_tls(settings.http)  # a wrong certificate or key is said before the chain loads
        if tls is not None and tls.self_signed:
            _say_self_signed(tls)
        app = create_app(settings)
        app.on_startup.append(_sigterm_drains)
        app.on_shutdown.append(_second_signal_stops_at_once)
        web.run_app(
            app,
            host=settings.http.host,
            port=settings.http.port,
            shutdown_timeout=SHUTDOWN_WAIT_S,
            ssl_context=tls.context if tls is not None else None,
            print=functools.partial(_say_serving, app, settings, "https" if tls is not None else "http"),
        )
    except web.GracefulExit:  # a second signal before the first one's shutdown began
        print(SECOND_SIGNAL, file=sys.stderr)
        return 1
    except (UnknownChain, DeviceUnavailable, ModelFileError, StoreUnavailable, TlsSetupError) as exc:
        print(f"facefuse: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if not _cannot_listen(exc):
            raise  # not a start-up problem of the socket: a bug, with its traceback
        print(f"facefuse: cannot listen on {settings.http.host}:{settings.http.port}: {exc}", file=sys.stderr)
        return 2
    print(STOPPED, flush=True)
    return 0


def _say_serving(app: web.Application, settings: ServerSettings, scheme: str, _aiohttp_banner: str) -> None:
    """One line once the socket listens (run_app calls it then, in place of its own banner)."""
    host = settings.http.host
    url = f"{scheme}://[{host}]:{settings.http.port}/" if ":" in host else f"{scheme}://{host}:{settings.http.port}/"
    store = "redis" if settings.quota.redis_url else "memory"
    accounts = "one local account" if settings.local_mode else "accounts with API keys"
    print(
        f"facefuse: open {url} (chain {app[RUNNER].chain.name}, device {app[DEVICE]}, quota store {store}, "
        f"{accounts}); Ctrl+C stops it",
        flush=True,
    )


def _say_self_signed(tls: ServerTls) -> None:
    """What a person needs to trust a self-signed certificate: the fingerprint to compare with the
    one the browser shows on its warning page, and where the certificate is kept."""
    print(
        f"facefuse: HTTPS with a self-signed certificate for {', '.join(tls.names())}, valid until "
        f"{tls.certificate.not_valid_after_utc:%Y-%m-%d} UTC, kept in {tls.cert_path}; the browser warns "
        f"about it: check that the certificate it shows has SHA-256 fingerprint {tls.fingerprint}",
        flush=True,
    )


async def _sigterm_drains(app: web.Application) -> None:
    """SIGTERM (an orchestrator stopping the node) drains it (signaling/drain.py) and stops the
    process once no session is left; another SIGTERM, or SIGINT (run_app's own handler), stops
    it at once: the shutdown below, which tells the sessions left `server_shutdown`."""
    loop = asyncio.get_running_loop()
    drain = app[DRAIN]

    def on_sigterm() -> None:
        if drain.draining:
            _stop_serving()
        print(f"facefuse: draining: no new sessions; live ones end within {drain.timeout_s:g} s", flush=True)
        drain.start(then=lambda: loop.call_soon(_stop_serving))

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)


def _stop_serving() -> None:
    """Ends run_app as its own signal handler does: GracefulExit out of the loop, then the shutdown."""
    raise web.GracefulExit


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
