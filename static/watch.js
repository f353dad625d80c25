// facefuse watch page: plays /whep/{stream} full-bleed, for OBS's Browser Source. It reconnects by
// itself: while nothing is published (409), when the network drops, and when the publisher stops
// and starts again (the server then closes every viewer), retrying after 0.5 s, 1 s, 2 s, then every
// 4 s, so a publisher back within seconds is shown again within seconds. A token the server
// refuses is said on the page and retried only slowly: it will not start working by itself.
"use strict";

(() => {
  const ICE_GATHERING_TIMEOUT_MS = 3000;
  const FIRST_RETRY_MS = 500;
  const MAX_RETRY_MS = 4000;
  const REFUSED_RETRY_MS = 30000; // a refused credential or a bad request: no retry storm
  const DISCONNECTED_GRACE_MS = 2000; // a blip in the network recovers by itself within this
  const FIRST_FRAME_TIMEOUT_MS = 10000; // answered, yet no picture: the media path never came up
  // No new frame for this long: the publisher is gone. The server closes its viewers then, yet
  // Chromium calls such a connection "disconnected" only seconds later, once its ICE checks go
  // unanswered: the stall is the first sign.
  const STALL_MS = 3000;
  const WATCHDOG_INTERVAL_MS = 1000;

  // The link's options, in its fragment (#token=…: never sent to a server) or, in older links, its query.
  const query = new URLSearchParams(window.location.search);
  const fragment = new URLSearchParams(window.location.hash.slice(1));
  const option = (name) => fragment.get(name) ?? query.get(name);
  const token = option("token") || ""; // sent only as a Bearer header, never in another URL
  document.documentElement.dataset.background = option("background") === "transparent" ? "transparent" : "black";
  const streamName = decodeURIComponent(window.location.pathname.replace(/\/+$/, "").split("/").pop());
  const whepUrl = `/whep/${encodeURIComponent(streamName)}`;

  const video = document.getElementById("video");
  const message = document.getElementById("message");
  const unmute = document.getElementById("unmute");

  // What the page is doing, for tests and for anyone debugging a Browser Source.
  const watch = {
    state: "starting", // starting | connecting | playing | waiting | reconnecting | unauthorized | error
    stream: streamName,
    attempts: 0, // offers posted
    connects: 0, // offers answered 201
    plays: 0, // connections that showed a first frame
    lastStatus: null, // the last POST's HTTP status
    retryInMs: null,
    audioMuted: false, // true when the browser refused unmuted autoplay
    pc: null,
    viewerUrl: null,
    iceServers: [],
    framesDecoded: () => framesDecoded(current),
  };
  window.facefuseWatch = watch;

  let iceServers = []; // the server's STUN/TURN servers, from its last answer's Link headers
  let current = null; // the attempt in progress: {pc, url, media, answeredAt, frames, progressAt, ...}
  let retryTimer = null;
  let nextRetryMs = FIRST_RETRY_MS;

  function setState(name, text = "") {
    watch.state = name;
    document.body.dataset.state = name;
    message.textContent = text;
    message.hidden = !text;
  }

  function headers(extra = {}) {
    return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
  }

  // ---- one connection -------------------------------------------------------------------

  async function framesDecoded(attempt) {
    if (!attempt || attempt.ended) return 0;
    try {
      const report = await attempt.pc.getStats();
      let frames = 0;
      report.forEach((entry) => {
        if (entry.type === "inbound-rtp" && (entry.kind || entry.mediaType) === "video") frames = entry.framesDecoded || 0;
      });
      return frames;
    } catch (_) {
      return 0; // closed under us
    }
  }

  // Ends an attempt: the server's viewer is deleted (not left to time out), the peer closed.
  function endAttempt(attempt, { keepalive = false } = {}) {
    if (!attempt || attempt.ended) return;
    attempt.ended = true;
    clearTimeout(attempt.disconnectTimer);
    if (attempt.url) {
      fetch(attempt.url, { method: "DELETE", headers: headers(), keepalive }).catch(() => {});
    }
    attempt.pc.close();
    if (current === attempt) {
      watch.pc = null;
      watch.viewerUrl = null;
      video.srcObject = null; // the background shows until the next picture, not a frozen frame
    }
  }

  function retryLater(delayMs) {
    clearTimeout(retryTimer);
    watch.retryInMs = delayMs;
    retryTimer = setTimeout(connect, delayMs);
  }

  function backoff() {
    const delay = nextRetryMs;
    nextRetryMs = Math.min(nextRetryMs * 2, MAX_RETRY_MS);
    return delay;
  }

  // The attempt's connection is gone (or never worked): start over, after the backoff.
  function lost(attempt) {
    if (current !== attempt || attempt.ended) return;
    endAttempt(attempt);
    setState("reconnecting");
    retryLater(backoff());
  }

  async function connect() {
    retryTimer = null;
    watch.retryInMs = null;
    endAttempt(current);
    const pc = new RTCPeerConnection({ iceServers });
    const attempt = { pc, url: null, media: new MediaStream(), answeredAt: 0, frames: 0, progressAt: 0, ended: false };
    current = attempt;
    watch.pc = pc;
    watch.attempts += 1;
    if (watch.state === "starting") setState("connecting");

    // VP8 first: every viewer costs the server an encoder, and VP8 is its cheapest
    facefuseOffer.preferVp8(pc.addTransceiver("video", { direction: "recvonly" }), "receive");
    pc.addTransceiver("audio", { direction: "recvonly" });
    pc.addEventListener("track", (event) => {
      if (current !== attempt) return;
      attempt.media.addTrack(event.track);
      event.track.addEventListener("ended", () => lost(attempt));
      if (video.srcObject !== attempt.media) {
        video.srcObject = attempt.media;
        play();
      }
    });
    pc.addEventListener("connectionstatechange", () => connectionChanged(attempt));

    let response;
    try {
      await pc.setLocalDescription(await pc.createOffer());
      await facefuseOffer.waitForIceGathering(pc, ICE_GATHERING_TIMEOUT_MS);
      if (current !== attempt) return;
      response = await fetch(whepUrl, {
        method: "POST",
        headers: headers({ "Content-Type": "application/sdp" }),
        body: pc.localDescription.sdp,
      });
    } catch (_) {
      lost(attempt); // the server cannot be reached: it may be restarting
      return;
    }
    if (current !== attempt || attempt.ended) { // replaced meanwhile: end what this offer created
      if (response.status === 201) {
        fetch(response.headers.get("Location"), { method: "DELETE", headers: headers() }).catch(() => {});
      }
      return;
    }
    watch.lastStatus = response.status;
    if (response.status === 201) {
      attempt.url = response.headers.get("Location");
      // Used from the next connection on (this one's offer went out without them): a network
      // where only TURN gets through plays from the first retry.
      iceServers = facefuseLinks.iceServersFrom(response.headers.get("Link"));
      watch.iceServers = iceServers;
      watch.viewerUrl = attempt.url;
      watch.connects += 1;
      try {
        await pc.setRemoteDescription({ type: "answer", sdp: await response.text() });
      } catch (_) {
        lost(attempt);
        return;
      }
      attempt.answeredAt = Date.now();
      return;
    }
    await refused(attempt, response);
  }

  // A POST that was not answered with a viewer: say why where it matters, and when to try again.
  async function refused(attempt, response) {
    endAttempt(attempt);
    const status = response.status;
    let detail = "";
    try {
      const body = await response.json();
      detail = (body && body.error && body.error.message) || "";
    } catch (_) {
      // not JSON: the status says enough
    }
    if (status === 409) { // nothing published under the name yet (or OBS is reconnecting)
      setState("waiting");
      retryLater(backoff());
    } else if (status === 401 || status === 403) {
      setState(
        "unauthorized",
        token
          ? `This watch link does not play "${streamName}": its token was revoked or is for another stream. Ask for a new link.`
          : `"${streamName}" needs a view token: open the watch link that has #token=… in it.`,
      );
      retryLater(REFUSED_RETRY_MS);
    } else if (status === 429 || status === 503) { // busy: as the server asks, but not faster than the backoff
      const asked = Number(response.headers.get("Retry-After")) * 1000;
      setState("waiting");
      retryLater(Math.max(backoff(), Number.isFinite(asked) ? asked : 0));
    } else if (status >= 500) {
      setState("reconnecting");
      retryLater(backoff());
    } else {
      setState("error", `The server will not play "${streamName}" (HTTP ${status})${detail ? `: ${detail}` : "."}`);
      retryLater(REFUSED_RETRY_MS);
    }
  }

  function connectionChanged(attempt) {
    if (current !== attempt || attempt.ended) return;
    const connectionState = attempt.pc.connectionState;
    if (connectionState === "failed" || connectionState === "closed") {
      lost(attempt);
    } else if (connectionState === "disconnected") {
      clearTimeout(attempt.disconnectTimer);
      attempt.disconnectTimer = setTimeout(() => {
        if (["disconnected", "failed"].includes(attempt.pc.connectionState)) lost(attempt);
      }, DISCONNECTED_GRACE_MS);
    }
  }

  // Once a second: a connection shows its first frame (playing; the backoff starts over), or is
  // given up when no picture comes after the answer or the picture stops.
  async function watchdog() {
    const attempt = current;
    if (!attempt || attempt.ended || !attempt.answeredAt) return;
    const frames = await framesDecoded(attempt);
    if (current !== attempt || attempt.ended) return;
    const now = Date.now();
    if (frames > attempt.frames) {
      if (attempt.frames === 0) {
        watch.plays += 1;
        nextRetryMs = FIRST_RETRY_MS;
        setState("playing");
      }
      attempt.frames = frames;
      attempt.progressAt = now;
    } else if (attempt.frames === 0 ? now - attempt.answeredAt > FIRST_FRAME_TIMEOUT_MS : now - attempt.progressAt > STALL_MS) {
      lost(attempt);
    }
  }

  // ---- sound ----------------------------------------------------------------------------

  // With sound: OBS's Browser Source allows it. A browser that refuses unmuted autoplay plays it
  // muted, and a click anywhere turns the sound on.
  function play() {
    video.muted = watch.audioMuted;
    video.play().catch((err) => {
      if (!err || err.name !== "NotAllowedError" || video.muted) return;
      watch.audioMuted = true;
      video.muted = true;
      unmute.hidden = false;
      video.play().catch(() => {});
    });
  }

  function turnSoundOn() {
    watch.audioMuted = false;
    video.muted = false;
    unmute.hidden = true;
    video.play().catch(() => {});
  }

  unmute.addEventListener("click", turnSoundOn);
  document.addEventListener("click", () => watch.audioMuted && turnSoundOn());
  window.addEventListener("pagehide", () => {
    clearTimeout(retryTimer);
    endAttempt(current, { keepalive: true });
  });
  setInterval(watchdog, WATCHDOG_INTERVAL_MS);
  connect();
})();
