"""A node's preStop hook (deploy/kubernetes/facefuse.yaml): drain, then wait for the sessions to end.

Kubernetes sends SIGTERM once this exits, which stops the node. So this first asks the node to
drain (POST /api/admin/nodes/self/drain: no new sessions, /healthz 503) and then waits
until /livez counts no session, at most FACEFUSE_DRAIN_TIMEOUT seconds (the node's own
--drain-timeout: it closes the sessions left then). A node that refuses the request still gets
the wait: a terminating pod leaves the Service's endpoints at once, so no new session reaches it
meanwhile. Standard library only: it runs in the node's image.

Environment: FACEFUSE_PORT (8080), FACEFUSE_ADMIN_KEY, FACEFUSE_DRAIN_TIMEOUT (300).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

POLL_EVERY_S = 2.0
REQUEST_TIMEOUT_S = 5.0


def log(message: str) -> None:
    # a preStop hook's output shows only in the pod's events when it fails: say what happened anyway
    print(f"drain_before_stop: {message}", file=sys.stderr, flush=True)


def ask_to_drain(base: str, admin_key: str | None) -> None:
    request = urllib.request.Request(f"{base}/api/admin/nodes/self/drain", method="POST")
    if admin_key:
        request.add_header("Authorization", f"Bearer {admin_key}")
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as answer:
            log(f"draining: {answer.read().decode(errors='replace')}")
    except urllib.error.HTTPError as error:  # 404: a node without the endpoint; the wait still helps
        log(f"the drain request got {error.code}; waiting for the sessions all the same")
    except OSError as error:
        log(f"the drain request failed ({error}); waiting for the sessions all the same")


def live_sessions(base: str) -> int | None:
    """The node's session count; None when it does not answer (stopped: nothing left to wait for)."""
    try:
        with urllib.request.urlopen(f"{base}/livez", timeout=REQUEST_TIMEOUT_S) as answer:
            return int(json.load(answer)["sessions"])
    except urllib.error.HTTPError as error:  # 503: the worker stopped, the count is still there
        return int(json.load(error)["sessions"])
    except (OSError, ValueError, KeyError):
        return None


def main() -> int:
    base = f"http://127.0.0.1:{os.environ.get('FACEFUSE_PORT', '8080')}"
    deadline = time.monotonic() + float(os.environ.get("FACEFUSE_DRAIN_TIMEOUT", "300"))
    ask_to_drain(base, os.environ.get("FACEFUSE_ADMIN_KEY"))
    while (sessions := live_sessions(base)) and time.monotonic() < deadline:
        time.sleep(POLL_EVERY_S)
    if sessions is None:
        log("the node does not answer: nothing to wait for")
    elif sessions:
        log(f"{sessions} session(s) left at the drain timeout: SIGTERM closes them")
    else:
        log("no session left")
    return 0


if __name__ == "__main__":
    sys.exit(main())
