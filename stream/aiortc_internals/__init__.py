"""Every change facefuse makes to aiortc's and aioice's private internals, in one place.

aiortc has no settings for what a real-time server needs from its receive and send paths or its
ICE agent, so these reach past its API, always on one instance (no class is patched globally).
Importing this package fails with an ImportError naming both versions unless the installed aiortc
and aioice are the ones it was written for (versions.py); touched.py lists every private or
undocumented name used here, and tests/stream/test_aiortc_internals.py checks them against the
installed packages. The rest of the project calls the functions below, never the internals.

The changes, and why each exists:

- Receiver jitter buffer -> MarkerJitterBuffer (jitter_buffer.py; set by
  stream/receiver_tuning.py). aiortc knows a video frame is complete only when the next frame's
  first packet arrives: one frame interval (33 ms at 30 fps) per receive hop. The RTP marker bit
  already says "last packet": a single hop's median latency is 77 ms stock and 11 ms with the
  marker-bit release (docs/architecture.md has the figures behind each change). It also drops
  padding-only frames: Chrome sends them, and an empty packet given to PyAV's decoder means
  "flush", after which the stream dies silently.
- Audio receiver jitter buffer -> ArrivalJitterBuffer (audio_jitter_buffer.py; set by
  stream/receiver_tuning.py). aiortc holds each audio packet until four newer ones arrived (80 ms);
  a server that relays the audio needs none of it (the viewer's player buffers), and the relay's
  delay could not make up for it when the chain is faster than 80 ms.
- Receiver decoder queue -> stream.bounded_queues.DecoderInputQueue (receiver.py). aiortc's is
  unbounded: a slow decoder turned into ever-growing latency (7.5 s after 15 s). Ours drops a
  backlog and sets the receiver's decoder-error event, which aiortc turns into a PLI (a fresh
  keyframe); its `admit` hook refuses a frame whose header declares a size over the decode limit
  before the decoder allocates for it (stream/decode_size_limit.py).
- Remote track queue -> stream.bounded_queues.LatestFramesQueue (receiver.py): drop-oldest,
  the latest frame wins, for the same reason.
  Ordering: setRemoteDescription() creates the receiver and its track; receive(), which hands
  the queues to the decoder thread, runs only once ICE and DTLS connect. Tuning right after
  setRemoteDescription() is therefore always in time.
- Sender encoder -> FastH264Encoder (encoder.py; set by stream/encoder.py). aiortc's H264Encoder
  runs libx264 at preset medium, 4-6x the CPU per frame of ultrafast; ours uses ultrafast,
  zerolatency, baseline. It overrides the parent's `_encode_frame`, and is put in the sender's
  encoder slot before the sender creates its own.
- Sender encoder -> OneThreadVp8Encoder (vp8_encoder.py; set by stream/encoder.py). aiortc gives
  libvpx two threads above 640x480 on 3 cores or more, which took more CPU a frame than one (13-18 %
  here, 3.5-4.7x on a larger machine) for nothing a loaded server sees; ours encodes on one thread
  at every size. It overrides the
  parent's `encode` (reusing its `_packetize`), in the same encoder slot.
- The negotiated codec list of a transceiver (encoder.py: negotiated_codecs): which codec a
  sender encodes with, for tune_sender and the session's stats.
- Sender RTCP handler wrapped (rtcp.py; used by stream/retransmit_limit.py). aiortc resends
  every sequence number a NACK names, duplicates included; one NACK can name 5,000 packets in
  1.2 KB, and 25 such NACKs a second from one peer took a session beside it to 6-10 fps and
  1.7 s of latency. The wrapper shortens each NACK's list to what the limit allows.
- Receiver RTCP send wrapped (rtcp.py; used by stream/webrtc_counts.py): aiortc counts no NACKs or
  PLIs it sends, and the node's metrics report both.
- DTLS cipher suites widened (dtls.py; called by stream/negotiation.py). aiortc offers only
  ECDHE-ECDSA suites, so a peer with an RSA certificate (GStreamer's webrtcbin: Debian's
  simple-whip-client) fails with "no shared cipher"; the ECDHE-RSA suites follow aiortc's own.
- ICE gathering (ice.py; used by stream/ice.py). aioice enumerates every non-loopback interface
  and never offers 127.0.0.1; a server needs an address allow-list and, behind 1:1 NAT, a public
  address advertised in place of the host one. We gather on the given addresses through the
  gatherer's private Connection and mark it gathered, so aiortc's own gather() is a no-op.
- ICE checks guarded (ice.py). A peer also sends checks from its other interfaces, and aioice
  learns those as peer-reflexive candidates and sends media there (seen with Chromium: eth0 ->
  our 127.0.0.1); the Connection's `request_received` is wrapped to ignore checks from outside
  the allowed networks.
- ICE consent by media (consent.py; used by stream/ice.py for publishers). aioice closes a
  connection after six unanswered consent checks (about 30 s); FFmpeg's WHIP muxer answers none
  while its media keeps arriving, and was cut after 33 s. The Connection's consent loop is
  replaced by one in which anything from the nominated pair's remote address since the last round
  counts as an answer.
- STUN/TURN url parsing (ice.py: parse_stun_turn_uri), to validate --ice-server urls at start
  with aiortc's own rules.
- aiortc's SDP parser and its codec and fingerprint tables (sdp.py; used by stream/sdp.py), to
  refuse with a clear 400 an offer that aiortc would crash on or refuse halfway through.
"""

from .versions import check_installed_versions

check_installed_versions()

# The submodules import aiortc's internals: only once the versions are known to match.
from .audio_jitter_buffer import ArrivalJitterBuffer  # noqa: E402
from .consent import count_media_as_consent  # noqa: E402
from .dtls import accept_rsa_dtls_peers  # noqa: E402
from .encoder import FastH264Encoder, negotiated_codecs, sender_encoder, set_sender_encoder  # noqa: E402
from .ice import (  # noqa: E402
    advertised_as,
    claim_gathering,
    gather_candidates_on,
    gatherer_connection,
    gathering_addresses,
    guard_incoming_checks,
    machine_host_addresses,
    parse_stun_turn_uri,
    publish_candidates,
)
from .jitter_buffer import MarkerJitterBuffer  # noqa: E402
from .receiver import (  # noqa: E402
    decoder_error_event,
    decoder_queue,
    decoder_thread,
    jitter_buffer,
    receiver_kind,
    receiver_started,
    set_decoder_queue,
    set_jitter_buffer,
    set_track_queue,
    track_queue,
)
from .rtcp import count_feedback_sent, filter_nacks  # noqa: E402
from .sdp import MediaDescription, digest_algorithm_supported, parse_sdp, video_codecs_in_common  # noqa: E402
from .touched import TOUCHED, Touched  # noqa: E402
from .vp8_encoder import OneThreadVp8Encoder  # noqa: E402

__all__ = [
    "TOUCHED",
    "ArrivalJitterBuffer",
    "FastH264Encoder",
    "OneThreadVp8Encoder",
    "MarkerJitterBuffer",
    "MediaDescription",
    "Touched",
    "accept_rsa_dtls_peers",
    "advertised_as",
    "claim_gathering",
    "count_feedback_sent",
    "count_media_as_consent",
    "decoder_error_event",
    "decoder_queue",
    "decoder_thread",
    "digest_algorithm_supported",
    "filter_nacks",
    "gather_candidates_on",
    "gatherer_connection",
    "gathering_addresses",
    "guard_incoming_checks",
    "jitter_buffer",
    "machine_host_addresses",
    "negotiated_codecs",
    "parse_sdp",
    "parse_stun_turn_uri",
    "publish_candidates",
    "receiver_kind",
    "receiver_started",
    "sender_encoder",
    "set_decoder_queue",
    "set_jitter_buffer",
    "set_sender_encoder",
    "set_track_queue",
    "track_queue",
    "video_codecs_in_common",
]
