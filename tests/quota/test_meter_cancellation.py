"""A meter's loop ends when cancelled, even in the same loop turn as a renewal request.

On Python 3.11, asyncio.wait_for returned the awaited event's result when the cancellation came
in the same turn as the event, so a cancelled meter went on renewing its lease for good and its
session stayed `closing`. The race is run in this interpreter and, since the bug lived in one
Python version's asyncio, in each supported version found on the machine (quota/ needs only the
standard library).
"""

import asyncio
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quota.memory_store import MemoryStore
from quota.meter import SessionMeter
from quota.settings import QuotaSettings, to_micro
from support.required import cannot_run_here

REPO = Path(__file__).resolve().parents[2]

# Prints "ended" or "still running" for a meter cancelled as charge_frame asks for a renewal.
RACE = """
import asyncio
from quota.memory_store import MemoryStore
from quota.meter import SessionMeter
from quota.settings import QuotaSettings, to_micro

async def race():
    settings = QuotaSettings()
    store = MemoryStore()
    await store.create_account("acct", "paid", to_micro(1000), "hash")
    meter = SessionMeter(store, "acct", settings.tier("paid"), "s1", settings)
    await meter.open()
    task = asyncio.ensure_future(meter.run())
    await asyncio.sleep(0.05)
    meter._renew_wanted.set()  # as charge_frame does when the lease runs low
    task.cancel()  # in the same turn
    done, _ = await asyncio.wait([task], timeout=3)
    meter._closed = True  # a loop that survived ends at its next wake
    return "ended" if done else "still running"

print(asyncio.run(race()))
"""


async def test_a_meter_cancelled_in_the_turn_it_is_asked_to_renew_ends():
    settings = QuotaSettings()
    store = MemoryStore()
    await store.create_account("acct", "paid", to_micro(1000), "hash")
    meter = SessionMeter(store, "acct", settings.tier("paid"), "s1", settings)
    await meter.open()
    for _ in range(20):
        task = asyncio.ensure_future(meter.run())
        await asyncio.sleep(0.01)
        meter._renew_wanted.set()
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=3)
        assert done, f"the meter ran on after its cancellation (Python {sys.version.split()[0]})"
        assert task.cancelled()


def _interpreter(version: str) -> str | None:
    """A python{version} that runs (pyenv's shims exist for versions it will not run), or None."""
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


@pytest.mark.parametrize("version", ["3.11", "3.12"])
def test_the_race_in_each_supported_python(version):
    python = _interpreter(version)
    if python is None:
        cannot_run_here(f"Python {version} is not installed here")
    result = subprocess.run(
        [python, "-c", RACE],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ended", f"Python {version}: the cancelled meter was {result.stdout.strip()!r}"
