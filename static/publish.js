// facefuse publish page: the camera (and microphone) sent to the server over WHIP under a stream
// name, with the chosen face; the processed video comes back on the same video transceiver
// (sendrecv). The server's WHIP answer is the whole negotiation: no trickle, so the offer waits
// for its candidates.
"use strict";

(() => {
  const ICE_GATHERING_TIMEOUT_MS = 3000;
  const SESSION_CHECK_MS = 2000;
  // How long Stop waits for the DELETE's answer before closing the peer anyway (a server that
  // does not answer ends the session once no video arrives).
  const DELETE_WAIT_MS = 2000;
  const VIDEO_CONSTRAINTS = { width: { ideal: 640 }, height: { ideal: 480 }, frameRate: { ideal: 30 } };
  const STREAM_NAME = /^[A-Za-z0-9_-]{1,64}$/; // the server's rule for stream names
  const API_KEY_STORAGE = "facefuse.apiKey"; // shared with the camera page, in this tab only (sessionStorage)

  const byId = (id) => document.getElementById(id);
  const ui = {
    faceFile: byId("face-file"),
    faceState: byId("face-state"),
    streamName: byId("stream-name"),
    apiKey: byId("api-key"),
    apiKeyField: byId("api-key-field"),
    goLive: byId("go-live"),
    stop: byId("stop"),
    status: byId("status"),
    error: byId("error"),
    sessionUrl: byId("session-url"),
    watchUrl: byId("watch-url"),
    localVideo: byId("local-video"),
    remoteVideo: byId("remote-video"),
  };

  // Everything the page knows, for debugging and tests (window.facefuse, as on the camera page).
  const state = {
    state: "idle", // idle | uploading | connecting | live | stopping | stopped | ended | error
    faceId: null,
    upload: null, // the pending face upload, awaited by goLive()
    uploadSeq: 0,
    pc: null,
    media: null,
    sessionUrl: null, // the WHIP session's Location
    sessionId: null,
    lastStatus: null, // the HTTP status of the last WHIP request
    sessionCheck: null, // the timer that asks the server whether the session still runs
    localAccount: null,
  };
  window.facefuse = state;

  function setState(name) {
    state.state = name;
    document.body.dataset.state = name;
  }

  try {
    ui.apiKey.value = window.sessionStorage.getItem(API_KEY_STORAGE) || "";
  } catch (_) {
    // storage may be disabled: the field still works for this visit
  }
  ui.apiKey.addEventListener("change", () => {
    try {
      window.sessionStorage.setItem(API_KEY_STORAGE, ui.apiKey.value.trim());
    } catch (_) {
      // ignored: see above
    }
  });

  // A local server (no admin key) needs no key: the field is hidden there, as on the camera page.
  fetch("/healthz")
    .then((response) => response.json())
    .then((health) => {
      state.localAccount = health.local_account === true;
      ui.apiKeyField.hidden = state.localAccount;
    })
    .catch(() => {
      state.localAccount = false;
    });

  function authHeaders(headers = {}) {
    const key = ui.apiKeyField.hidden ? "" : ui.apiKey.value.trim();
    return key ? { ...headers, Authorization: `Bearer ${key}` } : headers;
  }

  // ---- messages -------------------------------------------------------------------------

  function setStatus(text, kind = "info") {
    ui.status.textContent = text;
    ui.status.dataset.kind = kind;
  }

  function showError(summary, detail) {
    setStatus(summary, "error");
    ui.error.textContent = detail ? `${summary} ${detail}` : summary;
  }

  function clearError() {
    ui.error.textContent = "";
  }

  // The server's {"error": {"code", "message"}} as one line; the raw text when it is not JSON.
  async function serverError(response) {
    let text = "";
    try {
      text = await response.text();
    } catch (_) {
      // unreadable body: the status is all there is
    }
    let message = text.trim() || response.statusText || "no details given";
    let code = "";
    try {
      const body = JSON.parse(text);
      if (body && body.error) {
        code = body.error.code ? `, ${body.error.code}` : "";
        message = body.error.message || message;
      }
    } catch (_) {
      // not JSON: keep the text
    }
    return `(HTTP ${response.status}${code}): ${message}`;
  }

  // ---- face upload ----------------------------------------------------------------------

  // As the camera page: the photo goes to /api/faces when chosen; Go live waits for it.
  function uploadFace(file) {
    const seq = ++state.uploadSeq;
    state.faceId = null;
    clearError();
    if (!file) {
      ui.faceState.textContent = "No face chosen: the video is processed without one.";
      state.upload = null;
      return;
    }
    ui.faceState.textContent = `Uploading ${file.name}…`;
    state.upload = (async () => {
      let response;
      try {
        response = await fetch("/api/faces", {
          method: "POST",
          headers: authHeaders({ "Content-Type": file.type || "application/octet-stream" }),
          body: file,
        });
      } catch (err) {
        if (seq === state.uploadSeq) showError("The face upload failed: the server could not be reached.", String(err));
        return;
      }
      if (seq !== state.uploadSeq) return; // a newer choice replaced this one
      if (!response.ok) {
        ui.faceState.textContent = `${file.name} was not accepted.`;
        showError(`The face photo was rejected ${await serverError(response)}`);
        return;
      }
      state.faceId = (await response.json()).id;
      ui.faceState.textContent = `Face ready: ${file.name}.`;
    })();
  }

  // ---- publishing -----------------------------------------------------------------------

  // Camera and microphone; the camera alone when there is no microphone (a stream without audio).
  async function openCamera() {
    try {
      return await navigator.mediaDevices.getUserMedia({ video: VIDEO_CONSTRAINTS, audio: true });
    } catch (err) {
      if (err && (err.name === "NotFoundError" || err.name === "NotReadableError")) {
        return navigator.mediaDevices.getUserMedia({ video: VIDEO_CONSTRAINTS, audio: false });
      }
      throw err;
    }
  }

  async function goLive() {
    if (state.pc) return;
    const name = ui.streamName.value.trim();
    clearError();
    if (!STREAM_NAME.test(name)) {
      showError("The stream name is not valid.", "Use 1 to 64 letters, digits, - or _.");
      return;
    }
    ui.goLive.disabled = true;
    try {
      if (state.upload) {
        setState("uploading");
        setStatus("Waiting for the face upload…", "busy");
        await state.upload;
      }
      if (ui.faceFile.files.length > 0 && !state.faceId) {
        setState("error");
        showError("The chosen face photo was not accepted.", "Choose another photo, then press Go live again.");
        return;
      }
      setState("connecting");
      setStatus("Asking for the camera…", "busy");
      const media = await openCamera();
      state.media = media;
      ui.localVideo.srcObject = media;
      ui.localVideo.play().catch(() => {});

      const pc = new RTCPeerConnection();
      state.pc = pc;
      ui.stop.disabled = false;
      pc.addEventListener("track", (event) => {
        if (state.pc !== pc || event.track.kind !== "video") return;
        ui.remoteVideo.srcObject = new MediaStream([event.track]);
        ui.remoteVideo.play().catch(() => {});
      });
      pc.addEventListener("connectionstatechange", () => connectionChanged(pc));
      const [videoTrack] = media.getVideoTracks();
      // VP8 first: the server decodes VP8 and baseline H.264 only, and a browser's first H.264 may be another profile
      facefuseOffer.preferVp8(pc.addTransceiver(videoTrack, { direction: "sendrecv", streams: [media] }), "send");
      for (const track of media.getAudioTracks()) pc.addTransceiver(track, { direction: "sendonly", streams: [media] });

      setStatus("Connecting to the server…", "busy");
      await pc.setLocalDescription(await pc.createOffer());
      await facefuseOffer.waitForIceGathering(pc, ICE_GATHERING_TIMEOUT_MS);
      if (state.pc !== pc) return; // stopped meanwhile

      const query = state.faceId ? `?face_id=${encodeURIComponent(state.faceId)}` : "";
      const response = await fetch(`/whip/${encodeURIComponent(name)}${query}`, {
        method: "POST",
        headers: authHeaders({ "Content-Type": "application/sdp" }),
        body: pc.localDescription.sdp,
      });
      state.lastStatus = response.status;
      if (response.status !== 201) {
        const detail = await serverError(response);
        if (state.pc !== pc) return;
        await stop({ quiet: true });
        setState("error");
        showError(`The server refused to publish ${detail}`);
        return;
      }
      const sessionUrl = response.headers.get("Location");
      const answer = await response.text();
      if (state.pc !== pc) { // Stop was pressed while the offer was in flight: end what it created
        fetch(sessionUrl, { method: "DELETE", headers: authHeaders() }).catch(() => {});
        return;
      }
      state.sessionUrl = sessionUrl;
      state.sessionId = response.headers.get("X-Facefuse-Session");
      ui.sessionUrl.textContent = sessionUrl;
      ui.watchUrl.textContent = `/watch/${name}`;
      await pc.setRemoteDescription({ type: "answer", sdp: answer });
      setStatus("Connecting media…", "busy");
      state.sessionCheck = setInterval(checkSession, SESSION_CHECK_MS);
    } catch (err) {
      await stop({ quiet: true });
      setState("error");
      showError("Publishing could not start.", `${(err && err.name) || "Error"}: ${(err && err.message) || err}`);
    } finally {
      if (!state.pc) ui.goLive.disabled = false;
    }
  }

  function connectionChanged(pc) {
    if (state.pc !== pc) return;
    if (pc.connectionState === "connected") {
      setState("live");
      setStatus(`Live: publishing as ${ui.streamName.value.trim()}.`, "ok");
    } else if (pc.connectionState === "disconnected") {
      setStatus("The connection was interrupted; waiting for it to recover…", "busy");
    } else if (pc.connectionState === "failed" || pc.connectionState === "closed") {
      // the server ended the session (another publisher took the name, or it went idle) or the network did
      stop({ quiet: true }).then(() => {
        setState("error");
        showError("The stream ended: the connection to the server was lost.", "Press Go live to publish again.");
      });
    }
  }

  // WHIP gives the server no way to tell the page that it ended the session (another publisher
  // took the name, no video arrived, it was deleted), and the peer connection looks alive for
  // seconds after: the page asks.
  async function checkSession() {
    const sessionId = state.sessionId;
    if (!sessionId) return;
    let snapshot = null;
    try {
      const response = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}`, { headers: authHeaders() });
      if (response.status === 404) snapshot = { state: "closed", close_reason: "the server no longer has it" };
      else if (response.ok) snapshot = await response.json();
    } catch (_) {
      return; // the server did not answer: the connection's own state says whether it is gone
    }
    if (!snapshot || state.sessionId !== sessionId || !["closing", "closed"].includes(snapshot.state)) return;
    await stop({ quiet: true, sessionGone: true });
    setState("ended");
    showError(`The stream ended: ${snapshot.close_reason || "the server closed the session"}.`, "Press Go live to publish again.");
  }

  // Ends the WHIP session (DELETE, answered before the peer closes, so the server ends it for the
  // DELETE and not for a vanished peer), then closes the peer and the camera.
  async function stop({ quiet = false, sessionGone = false } = {}) {
    const { pc, media, sessionUrl } = state;
    if (!pc && !media) return;
    clearInterval(state.sessionCheck);
    state.sessionCheck = null;
    state.pc = null;
    state.media = null;
    state.sessionUrl = null;
    state.sessionId = null;
    if (!quiet) {
      setState("stopping");
      setStatus("Stopping…", "busy");
    }
    const ended = sessionUrl && !sessionGone
      ? fetch(sessionUrl, { method: "DELETE", headers: authHeaders() }).then(
        (response) => response.ok || response.status === 404,
        () => false,
      )
      : Promise.resolve(true);
    ui.stop.disabled = true;
    await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, DELETE_WAIT_MS))]);
    if (pc) pc.close();
    for (const track of media ? media.getTracks() : []) track.stop();
    ui.localVideo.srcObject = null;
    ui.remoteVideo.srcObject = null;
    ui.sessionUrl.textContent = "–";
    ui.watchUrl.textContent = "–";
    ui.stop.disabled = true;
    ui.goLive.disabled = false;
    const ok = await ended;
    if (quiet || state.pc) return; // Go live pressed again meanwhile: its status stays
    setState("stopped");
    if (ok) setStatus("Stopped.", "info");
    else showError("The server could not be told to end the session.", "It ends by itself once no video arrives.");
  }

  ui.faceFile.addEventListener("change", () => uploadFace(ui.faceFile.files[0] || null));
  ui.goLive.addEventListener("click", () => goLive());
  ui.stop.addEventListener("click", () => stop());
  window.addEventListener("pagehide", () => {
    // the page is going away: end the session without waiting for the answer
    if (state.sessionUrl) fetch(state.sessionUrl, { method: "DELETE", headers: authHeaders(), keepalive: true });
    if (state.pc) state.pc.close();
  });
})();
