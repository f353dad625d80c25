"""The node's Prometheus metrics (GET /metrics, docs/metrics.md): their definitions, and a collector
that reads the sessions, the runner and the chain when the metrics are scraped.

The frame path is not slowed for them: what is counted already (each session's SessionStats, the
runner's batch sizes, the chain's StageTimer, the meters' spending) is read at scrape time, with the
ended sessions' totals (node_totals.py) added so that no counter goes back. Only the histograms see
each frame, where the frame is timed already: one observation each (a lock and a bucket search).
No metric has a label per session or per account: their number has no bound.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from pipeline.device_memory import device_memory
from pipeline.runner import BatchRunner, BatchTimes
from stream.load_shedding import STEPS
from stream.manager import SessionManager
from stream.node_totals import FRAME_RESULTS, frames_by_result, tokens_spent
from stream.webrtc_counts import PeerCounts

# Server latency is 17-113 ms on the 2-core CPUs measured (README's "at a glance"), a few ms on a
# GPU: buckets from 5 ms to 500 ms, and two beyond for a node in trouble.
LATENCY_BUCKETS_S = (0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5)
BATCH_SIZE_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
SESSION_STATES = ("new", "connecting", "live", "closing")
THROTTLE_LEVELS = ("full", "slow", "crawl", "stopped")


@dataclass(frozen=True)
class NodeFacts:
    """What build info and the limits say about this node."""

    chain: str
    device: str
    max_sessions: int | None  # None: auto (the capacity model)


class NodeMetrics:
    """One app's metrics, in a registry of its own: apps in one process (the tests) keep theirs apart."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.server_latency = Histogram(
            "facefuse_server_latency_seconds",
            "Decode done -> processed frame handed to the encoder, each frame sent",
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        stages = Histogram(
            "facefuse_frame_stage_seconds",
            "A frame's time in a stage of the server: queue_wait (arrival at the scheduler -> its batch "
            "starts computing), chain (its batch's compute), encode (an encoder's encoding and sending of it)",
            ["stage"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self._queue_wait = stages.labels(stage="queue_wait")
        self._chain = stages.labels(stage="chain")
        self._encode = stages.labels(stage="encode")
        self.http_requests = Counter(
            "facefuse_http_requests",
            "HTTP requests answered, by method, route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_duration = Histogram(
            "facefuse_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template",
            ["method", "route"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.quota_store_up = Gauge(
            "facefuse_quota_store_up", "1 if the quota store answered a ping at the last scrape", registry=self.registry
        )
        self.quota_store_rtt = Gauge(
            "facefuse_quota_store_rtt_seconds",
            "The quota store's ping round trip at the last scrape (NaN when it did not answer)",
            registry=self.registry,
        )

    def latency(self, seconds: float) -> None:
        """A frame sent: decode done -> handed to the encoder (stream.frame_timings.FrameTimings)."""
        self.server_latency.observe(seconds)

    def encode(self, seconds: float) -> None:
        """An encoder's time on a frame (each viewer's encoder too)."""
        self._encode.observe(seconds)

    def observe_batch(self, times: BatchTimes) -> None:
        """The runner's `on_batch` (its compute thread): each frame's queue wait and chain time."""
        for wait_s in times.queue_waits_s:
            self._queue_wait.observe(wait_s)
            self._chain.observe(times.chain_s)

    def watch(self, runner: BatchRunner, sessions: SessionManager, facts: NodeFacts) -> None:
        """Reads these from now on, at each scrape."""
        self.registry.register(_NodeCollector(runner, sessions, facts))


class _NodeCollector:
    """Builds the scrape-time metrics from what the node counts already."""

    def __init__(self, runner: BatchRunner, sessions: SessionManager, facts: NodeFacts) -> None:
        self._runner = runner
        self._sessions = sessions
        self._facts = facts

    def collect(self) -> Iterator[Metric]:
        capacity = self._sessions.capacity.describe(self._sessions.all())
        yield from self._session_metrics(capacity)
        yield from self._capacity_metrics(capacity)
        yield from self._scheduler_metrics()
        yield from self._node_metrics()

    def _session_metrics(self, capacity: dict[str, object]) -> Iterator[Metric]:
        live = self._sessions.all()
        viewers = self._sessions.viewers()
        ended = self._sessions.ended
        states = dict.fromkeys(SESSION_STATES, 0)
        levels = dict.fromkeys(THROTTLE_LEVELS, 0)
        frames = {result: ended.frames[result] for result in FRAME_RESULTS}
        received, sent = ended.frames_received, ended.frames_sent
        tokens = dict(ended.tokens_by_tier)
        webrtc = PeerCounts()
        webrtc.add(ended.webrtc)
        for session in live:
            states[session.state] = states.get(session.state, 0) + 1
            for result, count in frames_by_result(session.stats).items():
                frames[result] += count
            received += session.stats.frames_in
            sent += session.stats.frames_out
            webrtc.add(session.webrtc.counts)
            event = session.meter.event() if session.meter is not None else None
            if (spent := tokens_spent(event)) is not None:
                tokens[spent[0]] = tokens.get(spent[0], 0.0) + spent[1]
                levels[str(event["level"])] = levels.get(str(event["level"]), 0) + 1
        for viewer in viewers:
            webrtc.add(viewer.webrtc.counts)

        yield _by_label(GaugeMetricFamily, "facefuse_sessions", "Sessions on this node, by state", "state", states)
        fits = capacity["fits_more"]
        limit = self._facts.max_sessions
        processed_limit = int(capacity["processed"]) + fits["480p"]  # type: ignore[call-overload, index]
        yield GaugeMetricFamily(
            "facefuse_sessions_limit",
            "The most sessions this node processes: --max-sessions, or with auto what the capacity model "
            "says fits (480p sessions)",
            limit if limit is not None else processed_limit,
        )
        yield GaugeMetricFamily("facefuse_viewers", "WHEP viewers on this node", len(viewers))
        yield CounterMetricFamily("facefuse_sessions_ended", "Sessions that have ended", ended.sessions)
        yield _by_label(
            CounterMetricFamily,
            "facefuse_frames",
            "Frames by what became of them: processed, dropped (replaced by a newer one), failed (sent on "
            "unprocessed), passed_through (the chain left it as it was: no face), throttled (out of tokens)",
            "result",
            frames,
        )
        yield CounterMetricFamily("facefuse_frames_received", "Decoded frames received from publishers", received)
        yield CounterMetricFamily(
            "facefuse_frames_sent", "Frames handed to an encoder (each once): the latency histogram's count", sent
        )
        yield _by_label(CounterMetricFamily, "facefuse_tokens_charged", "Tokens charged, by tier", "tier", tokens)
        yield _by_label(
            GaugeMetricFamily, "facefuse_throttle_sessions", "Metered sessions by throttle level", "level", levels
        )
        yield CounterMetricFamily(
            "facefuse_webrtc_packets_received", "RTP packets received (audio and video)", webrtc.packets_received
        )
        yield CounterMetricFamily(
            "facefuse_webrtc_packets_lost",
            "RTP packets lost on the way in, as the receivers count them",
            webrtc.packets_lost,
        )
        yield CounterMetricFamily(
            "facefuse_webrtc_nacks_sent", "NACKs sent (asking for lost packets)", webrtc.nacks_sent
        )
        yield CounterMetricFamily("facefuse_webrtc_plis_sent", "PLIs sent (asking for a keyframe)", webrtc.plis_sent)
        yield CounterMetricFamily(
            "facefuse_webrtc_received_bytes", "Bytes received on the peer connections", webrtc.bytes_received
        )
        yield CounterMetricFamily("facefuse_webrtc_sent_bytes", "Bytes sent on the peer connections", webrtc.bytes_sent)

    def _capacity_metrics(self, described: dict[str, object]) -> Iterator[Metric]:
        """The capacity model (stream/capacity.py) and what it did: docs/running.md explains it."""
        capacity = self._sessions.capacity
        yield _by_label(
            GaugeMetricFamily,
            "facefuse_capacity_fits_more",
            "More sessions of each frame size the model says this node can process at its floor rate",
            "size",
            described["fits_more"],  # type: ignore[arg-type]
        )
        yield GaugeMetricFamily(
            "facefuse_capacity_device_busy",
            "Seconds of chain time a second of the processed sessions' video takes, as planned (1: all of it)",
            described["device_busy"],  # type: ignore[arg-type]
        )
        yield GaugeMetricFamily(
            "facefuse_capacity_planned_fps",
            "The rate each processed session is planned to get (the target while the device keeps up)",
            described["planned_fps"],  # type: ignore[arg-type]
        )
        cost = described["chain_cost"] or {"per_batch_ms": 0.0, "per_frame_ms": 0.0}
        yield _by_label(
            GaugeMetricFamily,
            "facefuse_capacity_chain_cost_seconds",
            "What a batch costs the chain as measured: per batch and per frame in it",
            "part",
            {"batch": cost["per_batch_ms"] / 1000, "frame": cost["per_frame_ms"] / 1000},  # type: ignore[index]
        )
        yield GaugeMetricFamily("facefuse_queue_sessions", "Sessions waiting in line for capacity", len(capacity.line))
        yield CounterMetricFamily(
            "facefuse_queue_admitted", "Sessions let in from the line as room freed", capacity.admitted_from_line
        )
        yield CounterMetricFamily(
            "facefuse_queue_refused", "Sessions answered 503 because the line was full", capacity.refused
        )
        shed = GaugeMetricFamily(
            "facefuse_shed_sessions", "Processed sessions at a shed step (rate, resolution)", labels=["step"]
        )
        for step in STEPS[1:3]:
            shed.add_metric([step], described["shed"].get(step, 0))  # type: ignore[union-attr]
        yield shed
        taken = CounterMetricFamily(
            "facefuse_shed_steps", "Steps taken to shed load, by step and tier priority", labels=["step", "priority"]
        )
        for (step, priority), count in sorted(capacity.steps_taken.items()):
            taken.add_metric([step, priority], count)
        yield taken
        yield _by_label(
            CounterMetricFamily,
            "facefuse_shed_steps_undone",
            "Shed steps undone as the load fell, by the step undone",
            "step",
            dict(capacity.steps_undone),
        )

    def _scheduler_metrics(self) -> Iterator[Metric]:
        stats = self._runner.stats()
        sizes = {int(size): count for size, count in stats["batch_sizes"].items()}  # type: ignore[union-attr]
        buckets: list[tuple[str, float]] = []
        for bound in BATCH_SIZE_BUCKETS:
            buckets.append((str(float(bound)), sum(n for size, n in sizes.items() if size <= bound)))
        buckets.append(("+Inf", sum(sizes.values())))
        batch_size = HistogramMetricFamily("facefuse_batch_size", "Frames in each batch the chain ran")
        batch_size.add_metric([], buckets, sum_value=sum(size * n for size, n in sizes.items()))
        yield batch_size
        yield GaugeMetricFamily(
            "facefuse_worker_up", "1 while the chain's worker threads run", int(self._runner.running)
        )
        yield CounterMetricFamily(
            "facefuse_batch_oom_splits",
            "Batches run again in halves because the device ran out of memory",
            stats["oom_splits"],  # type: ignore[arg-type]
        )

        timer = getattr(self._runner.chain, "timer", None)  # face chains time their stages
        stage_time = SummaryMetricFamily(
            "facefuse_chain_stage_seconds",
            "The face chain's time per stage, summed over its batches (count: batches)",
            labels=["stage"],
        )
        if timer is not None:
            batches, seconds = timer.totals()
            for stage, total in seconds.items():
                stage_time.add_metric([stage], batches, total)
        yield stage_time

    def _node_metrics(self) -> Iterator[Metric]:
        device = self._facts.device
        memory = device_memory(device)
        yield _by_label(
            GaugeMetricFamily,
            "facefuse_device_memory_in_use_bytes",
            "Memory the chain's device holds: torch's CUDA tensors, or the process's resident memory on the CPU",
            "device",
            {device: memory.in_use_bytes},
        )
        yield _by_label(
            GaugeMetricFamily,
            "facefuse_device_memory_peak_bytes",
            "The most of facefuse_device_memory_in_use_bytes since the start",
            "device",
            {device: memory.peak_bytes},
        )
        build = {
            "version": _version("facefuse"),
            "python": platform.python_version(),
            "torch": _version("torch"),
            "aiortc": _version("aiortc"),
            "chain": self._facts.chain,
            "device": device,
        }
        info = GaugeMetricFamily(
            "facefuse_build_info", "Versions and the chain this node runs (always 1)", labels=list(build)
        )
        info.add_metric(list(build.values()), 1)
        yield info


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def _by_label(
    family_type: type[GaugeMetricFamily] | type[CounterMetricFamily],
    name: str,
    documentation: str,
    label: str,
    values: dict[str, float],
) -> Metric:
    """A gauge or counter with one label: {label value: number}."""
    family = family_type(name, documentation, labels=[label])
    for label_value, number in values.items():
        family.add_metric([label_value], number)
    return family
