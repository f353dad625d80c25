"""NetworkStats: rates over the last seconds from aiortc's cumulative getStats() figures, built
here from aiortc's own stats types as its reports hold them."""

from __future__ import annotations

import datetime

from aiortc.stats import RTCInboundRtpStreamStats, RTCRemoteInboundRtpStreamStats, RTCStatsReport, RTCTransportStats

from stream.network_stats import NetworkStats

NOW = datetime.datetime.now(datetime.UTC)


def report(bytes_in: int, bytes_out: int, received: int, lost: int, rtt_s: float | None = None) -> RTCStatsReport:
    stats = RTCStatsReport()
    stats.add(RTCTransportStats(NOW, "transport", "transport_1", 0, 0, bytes_out, bytes_in, "controlled", "connected"))
    stats.add(
        RTCInboundRtpStreamStats(NOW, "inbound-rtp", "inbound-rtp_1", 1, "video", "transport_1", received, lost, 0)
    )
    if rtt_s is not None:
        stats.add(
            RTCRemoteInboundRtpStreamStats(
                NOW, "remote-inbound-rtp", "remote-inbound-rtp_1", 2, "video", "transport_1", 0, 0, 0, rtt_s, 0.0
            )
        )
    return stats


def test_nothing_is_known_from_one_sample():
    network = NetworkStats()
    assert network.as_dict() == {
        "bitrate_in_bps": None,
        "bitrate_out_bps": None,
        "packets_lost_ratio": None,
        "rtt_ms": None,
    }
    network.add(report(1000, 500, 10, 0), now=100.0)
    assert network.as_dict()["bitrate_in_bps"] is None and network.as_dict()["rtt_ms"] is None


def test_rates_and_loss_over_the_window():
    network = NetworkStats(window_s=3.0)
    network.add(report(0, 0, 0, 0), now=0.0)
    network.add(report(125_000, 25_000, 90, 10, rtt_s=0.0421), now=1.0)
    assert network.as_dict() == {
        "bitrate_in_bps": 1_000_000,
        "bitrate_out_bps": 200_000,
        "packets_lost_ratio": 0.1,
        "rtt_ms": 42.1,
    }
    # four seconds on, nothing lost since the first second: the window forgets that loss
    for second in range(2, 6):
        network.add(report(125_000 * second, 25_000 * second, 90 + 100 * (second - 1), 10), now=float(second))
    figures = network.as_dict()
    assert figures["packets_lost_ratio"] == 0.0 and figures["bitrate_in_bps"] == 1_000_000
    assert figures["rtt_ms"] is None  # no receiver report in the last sample


def test_no_packets_expected_is_no_ratio():
    network = NetworkStats()
    network.add(report(100, 100, 50, 5), now=0.0)
    network.add(report(100, 100, 50, 5), now=1.0)
    assert network.as_dict()["packets_lost_ratio"] is None and network.as_dict()["bitrate_in_bps"] == 0
