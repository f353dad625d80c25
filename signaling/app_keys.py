"""Typed keys for what the app holds (aiohttp's AppKey, not strings)."""

from aiohttp import web

from pipeline.faces import FaceLibrary
from pipeline.identity.photo_analysis import PhotoAnalysis
from pipeline.runner import BatchRunner
from quota.accounts import Accounts
from quota.meter import LateReturns
from signaling.cluster.cluster_node import ClusterNode
from signaling.drain import Drain
from signaling.settings import ServerSettings
from signaling.shared_faces import SharedFaces
from stream.manager import SessionManager
from stream.node_metrics import NodeMetrics

SETTINGS = web.AppKey("settings", ServerSettings)
FACES = web.AppKey("faces", FaceLibrary)
SHARED_FACES = web.AppKey("shared_faces", SharedFaces | None)  # with --redis-url: every node's uploads
RUNNER = web.AppKey("runner", BatchRunner)
PHOTO_ANALYSIS = web.AppKey("photo_analysis", PhotoAnalysis)  # what POST /api/faces runs on a photo
SESSIONS = web.AppKey("sessions", SessionManager)
DEVICE = web.AppKey("device", str)
ACCOUNTS = web.AppKey("accounts", Accounts)
LATE_RETURNS = web.AppKey("late_returns", LateReturns)
METRICS = web.AppKey("metrics", NodeMetrics)  # GET /metrics
DRAIN = web.AppKey("drain", Drain)  # SIGTERM or the admin: no new sessions, the live ones end in time
CLUSTER = web.AppKey("cluster", ClusterNode)  # this node among the others on the same Redis (issue #28)
