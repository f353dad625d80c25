"""Metered sessions through the real server: the admin key, accounts, settings with short
periods, and what was processed and sent, read from the frames themselves."""

from client.facefuse_client import FacefuseClient
from client.frame_stamp import read_stamp
from client.image_track import ImageTrack
from support.server import loopback_settings

ADMIN = "admin-key-for-metering-tests"


def metered_settings(redis_url: str | None, chain: str = "invert", **quota: object):
    return loopback_settings(chain, quota={"admin_key": ADMIN, "redis_url": redis_url, **quota})


async def create_account(admin: FacefuseClient, account_id: str, balance: float, tier: str = "paid") -> str:
    body = await admin.request("POST", "/api/admin/accounts", json={"id": account_id, "tier": tier, "balance": balance})
    return body["api_key"]


class InvertedLog:
    """Which received frames the server processed (the invert chain flips the stamp)."""

    def __init__(self) -> None:
        self.frames: list[tuple[float, bool]] = []

    def __call__(self, received) -> None:
        stamp = read_stamp(received.frame)
        if stamp is not None:
            self.frames.append((received.at, stamp[1]))

    def fps(self, start: float, end: float, processed: bool) -> float:
        count = sum(1 for at, inverted in self.frames if start <= at < end and inverted == processed)
        return count / (end - start)


def sent_fps(source: ImageTrack, start: float, end: float) -> float:
    """The rate the camera really sent at (30 fps asked): the reference that fps checks compare
    with, so that they hold on a machine too slow to send every frame on time."""
    return sum(1 for at in source.sent_at.values() if start <= at < end) / (end - start)
