"""A session knows its meter only through stream.metering.Meter: stream/ imports nothing of quota/."""

from quota.meter import CLOSE_WAIT_S
from stream.metering import RETURN_LEASE_LIMIT_S
from support.imports import REPO, imports_of


def test_stream_does_not_import_quota():
    assert imports_of(REPO / "stream", "quota") == []


def test_closing_waits_longer_for_the_lease_than_the_meter_does():
    """The meter hands a slow return to the background after CLOSE_WAIT_S; the session's closing
    step must not cut it off before (stream/ cannot import the figure, so it is checked here)."""
    assert RETURN_LEASE_LIMIT_S >= CLOSE_WAIT_S + 0.5
