// facefuse browser client: upload a face, send the camera to the server over WebRTC,
// show the processed video it sends back and the live numbers from the "events" data channel.
// Standard APIs only (Chromium and Firefox); no trickle ICE, because the server does not do it.
"use strict";

(() => {
  const ICE_GATHERING_TIMEOUT_MS = 3000;
  const COMMAND_ANSWER_TIMEOUT_MS = 5000; // a data-channel command still unanswered then: the page says so
  const CLIENT_STATS_INTERVAL_MS = 1000;
  const CAMERA_CONSTRAINTS = {
    audio: false,
    video: {
      width: { ideal: 640 },
      height: { ideal: 480 },
      frameRate: { ideal: 30 },
    },
  };

  const byId = (id) => document.getElementById(id);
  const ui = {
    faceFile: byId("face-file"),
    faceState: byId("face-state"),
    faceWarnings: byId("face-warnings"),
    swapMode: byId("swap-mode"),
    swapModeHint: byId("swap-mode-hint"),
    referenceField: byId("reference-field"),
    referenceFile: byId("reference-file"),
    referenceState: byId("reference-state"),
    start: byId("start"),
    stop: byId("stop"),
    status: byId("status"),
    capacity: byId("capacity"),
    error: byId("error"),
    localVideo: byId("local-video"),
    remoteVideo: byId("remote-video"),
    fpsIn: byId("stat-fps-in"),
    fpsOut: byId("stat-fps-out"),
    latencyP50: byId("stat-latency-p50"),
    latencyP99: byId("stat-latency-p99"),
    dropped: byId("stat-dropped"),
    failed: byId("stat-failed"),
    codec: byId("stat-codec"),
    resolution: byId("stat-resolution"),
    framesDecoded: byId("stat-frames-decoded"),
    recvFps: byId("stat-recv-fps"),
    recvResolution: byId("stat-recv-resolution"),
    session: byId("stat-session"),
    apiKey: byId("api-key"),
    apiKeyField: byId("api-key-field"),
    level: byId("stat-level"),
    balance: byId("stat-balance"),
    burn: byId("stat-burn"),
    timeLeft: byId("stat-time-left"),
    tier: byId("stat-tier"),
  };

  // The API key (empty on a local server) goes with every request; kept in this tab only
  // (sessionStorage, as the dashboard): a key left in localStorage outlives the visit and the tab.
  const API_KEY_STORAGE = "facefuse.apiKey";
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

  // The server's STUN/TURN servers (--ice-server): behind a strict NAT only its TURN gets through.
  // None (an older server, an error) is what the page did before: host candidates only.
  async function serverIceServers() {
    try {
      const response = await fetch("/api/ice-servers", { headers: authHeaders() });
      return response.ok ? (await response.json()).ice_servers || [] : [];
    } catch (_) {
      return [];
    }
  }

  function authHeaders(headers = {}) {
    const key = ui.apiKeyField.hidden ? "" : ui.apiKey.value.trim();
    return key ? { ...headers, Authorization: `Bearer ${key}` } : headers;
  }

  // Everything the page knows, in one place; exposed for debugging and for tests.
  const state = {
    sessionId: null,
    waiting: false, // in the server's line: its video comes back unprocessed
    faceId: null,
    pc: null,
    channel: null,
    stream: null,
    upload: null, // the pending upload's promise, awaited by start()
    uploadSeq: 0,
    serverStats: null, // the latest {"type": "stats"} message
    clientStats: null, // {framesDecoded, fps, width, height} from getStats
    previousInbound: null,
    statsTimer: null,
    statsBusy: false,
    meterLevel: null, // the last throttle level told to the person
    lastMeter: null, // the last meter update from the server
    referenceId: null, // the uploaded photo of the one person to swap (swap mode "reference")
    referenceUpload: null,
    cancelStart: null, // while Start waits for photos: Stop calls it
    onPhotoChosen: null, // while Start waits: a newer photo choice ends the wait on the one it replaced
    referenceSeq: 0,
    swapPending: null, // the options of a set_swap awaiting the server's answer
    sessionSwap: null, // the {swap, reference_face_id?} the session was last offered or told
    switchingTo: null, // {faceId, name} of a mid-stream face switch awaiting the server's answer
    sessionFaceId: null, // the face the server last said this session swaps to
    uploadedPhotos: [], // the face and reference photos this page uploaded and has not deleted yet
    localAccount: null, // whether the server runs the local account (no API key); null until /healthz answered
  };
  window.facefuse = state;

  // A local server (no admin key) runs one account without auth: no key to ask for. /healthz says
  // so also when it answers 503; if it cannot be asked, the field stays.
  fetch("/healthz")
    .then((response) => response.json())
    .then((health) => {
      state.localAccount = health.local_account === true;
      ui.apiKeyField.hidden = state.localAccount;
    })
    .catch(() => {
      state.localAccount = false;
    });

  // ---- messages -------------------------------------------------------------------------

  function setStatus(text, kind = "info") {
    ui.status.textContent = text;
    ui.status.dataset.kind = kind;
    ui.status.hidden = false;
    // an error's summary is also in the alert below, which screen readers announce: not twice
    ui.status.setAttribute("aria-live", kind === "error" ? "off" : "polite");
  }

  // The server's capacity (docs/running.md): waiting in line, or processed at a lower rate or size.
  const SHED_TEXT = {
    rate: "The server is busy: your video is processed at a lower frame rate for now.",
    resolution: "The server is busy: your video is processed at a lower frame rate and size for now.",
    line: "The server is busy: your session went back into the line. Your own video shows until it is processed again.",
  };

  function waitText(seconds) {
    if (seconds === null || seconds === undefined || !Number.isFinite(Number(seconds))) {
      return "waiting for a free place";
    }
    const s = Math.max(1, Math.round(Number(seconds)));
    return s < 90 ? `about ${s} s to wait` : `about ${Math.round(s / 60)} min to wait`;
  }

  function showCapacity(message) {
    const notice = ui.capacity;
    notice.dataset.kind = message.type;
    state.waiting = message.type === "queued";
    if (message.type === "queued") {
      setStatus("Connected: waiting in line for the server.", "busy");
      const position = Number(message.position) || 1;
      const ahead = position === 1 ? "You are next" : `${position - 1} ahead of you`;
      notice.textContent = `The server is full: you are number ${position} in line (${ahead}; ${waitText(message.estimated_wait_s)}). ` +
        "Your own video shows, unprocessed and not charged, until the swap starts by itself.";
    } else if (message.type === "admitted") {
      setStatus("Connected: processing at full rate.", "ok");
      notice.textContent = "Your place came up: the swap has started.";
    } else if (message.type === "degraded") {
      notice.textContent = SHED_TEXT[message.step] || "The server is busy: your video is processed at a lower quality for now.";
    } else if (message.type === "restored") {
      notice.textContent = message.step === "full" ? "The server has room again: full quality." : SHED_TEXT[message.step] || "";
    }
    notice.hidden = !notice.textContent;
  }

  function clearCapacity() {
    state.waiting = false;
    ui.capacity.textContent = "";
    ui.capacity.hidden = true;
    delete ui.capacity.dataset.kind;
  }

  function showError(summary, detail) {
    setStatus(summary, "error");
    ui.error.textContent = detail ? `${summary} ${detail}` : summary;
    // the alert box says it all, right below: the same summary twice on screen reads as two errors
    ui.status.hidden = true;
  }

  // Clears the alert; a status line still showing an error goes back to what is going on now.
  function clearError() {
    ui.error.textContent = "";
    if (ui.status.dataset.kind !== "error") return;
    if (!state.pc) setStatus("Ready.", "info");
    else if (state.pc.connectionState === "connected") setStatus("Connected: streaming.", "ok");
    else setStatus("Connecting…", "busy");
  }

  // Reads the server's {"error": {"code", "message"}} body; falls back to the raw text.
  async function readServerError(response) {
    let text = "";
    try {
      text = await response.text();
    } catch (_) {
      // body unreadable: the status line is all we have
    }
    let code = null;
    let message = text.trim();
    try {
      const body = JSON.parse(text);
      if (body && body.error) {
        code = body.error.code || null;
        message = body.error.message || message;
      }
    } catch (_) {
      // not JSON: keep the text
    }
    if (!message) message = response.statusText || "no details given";
    return { status: response.status, code, message };
  }

  function describeServerError(err) {
    const code = err.code ? `, ${err.code}` : "";
    return `(HTTP ${err.status}${code}): ${err.message}`;
  }

  function cameraErrorMessage(err) {
    switch (err && err.name) {
      case "NotAllowedError":
      case "PermissionDeniedError":
      case "SecurityError":
        return [
          "Camera access was denied.",
          "Allow camera access for this page in the browser's site settings, then press Start again.",
        ];
      case "NotFoundError":
      case "DevicesNotFoundError":
        return ["No camera was found.", "Connect a camera, then press Start again."];
      case "OverconstrainedError":
        return ["The camera cannot deliver a usable video format.", "Try another camera."];
      case "NotReadableError":
      case "TrackStartError":
      case "AbortError":
        return [
          "The camera could not be started.",
          "Another application may be using it; close that application and press Start again.",
        ];
      default:
        return ["The camera could not be opened.", `${(err && err.name) || "Error"}: ${(err && err.message) || err}`];
    }
  }

  // ---- face upload ----------------------------------------------------------------------

  // POSTs a photo to /api/faces: {id, warnings} when stored, {error: [summary, detail]} when not.
  async function postPhoto(file, what) {
    let response;
    try {
      response = await fetch("/api/faces", {
        method: "POST",
        headers: authHeaders({ "Content-Type": file.type || "application/octet-stream" }),
        body: file,
      });
    } catch (err) {
      return { error: [`The ${what} upload failed: the server could not be reached.`, String(err.message || err)] };
    }
    if (!response.ok) {
      const err = await readServerError(response);
      return { error: [`The ${what} was rejected ${describeServerError(err)}`] };
    }
    try {
      const face = await response.json();
      return { id: face.id, warnings: Array.isArray(face.warnings) ? face.warnings : [] };
    } catch (err) {
      return { error: [`The ${what} upload got an answer that is not JSON.`, String(err.message || err)] };
    }
  }

  // What the server found weak in the chosen photo (a turned head, shut eyes, uneven light): shown
  // under it as advice, not as an error; the photo is used all the same.
  function showFaceWarnings(warnings) {
    ui.faceWarnings.replaceChildren(
      ...warnings.map((warning) => {
        const item = document.createElement("li");
        item.textContent = warning.charAt(0).toUpperCase() + warning.slice(1) + ".";
        return item;
      }),
    );
    ui.faceWarnings.hidden = warnings.length === 0;
  }

  function uploadFace(file) {
    const seq = ++state.uploadSeq;
    state.faceId = null;
    showFaceWarnings([]);
    clearError();
    if (!file) {
      ui.faceState.textContent = "No face chosen: the video is processed without one.";
      state.upload = null;
      photoChosen();
      if (!state.pc) setStatus("Ready.", "info");
      switchFace(null, null); // mid-stream: stop swapping now
      return null;
    }
    ui.faceState.textContent = `Uploading ${file.name}…`;
    if (!state.pc) setStatus(`Uploading ${file.name}…`, "busy");
    const upload = (async () => {
      const body = await postPhoto(file, "face photo");
      if (body.id) state.uploadedPhotos.push(body.id);
      if (seq !== state.uploadSeq) { // a newer choice replaced this one
        forgetUnusedPhotos();
        return;
      }
      if (body.error) {
        ui.faceState.textContent = `${file.name} was not accepted.`;
        showError(...body.error);
        return;
      }
      state.faceId = body.id;
      ui.faceState.textContent = `Face ready: ${file.name}.`;
      showFaceWarnings(body.warnings);
      if (!state.pc) setStatus("Face uploaded. Press Start camera.", "ok");
      switchFace(body.id, file.name); // mid-stream: swap to it now
      forgetUnusedPhotos();
    })();
    state.upload = upload;
    photoChosen();
    return upload;
  }

  // ---- which faces to swap ---------------------------------------------------------------

  // options.swap of the offer: every face, the largest, or one person (a reference photo of them).
  // Mid-stream a change goes to the session at once (the "set_swap" command).
  const SWAP_MODE_NAMES = { all: "every face", largest: "the largest face", reference: "only the person in the photo" };

  function showReferenceField() {
    ui.referenceField.hidden = ui.swapMode.value !== "reference";
  }

  function chooseSwapMode() {
    showReferenceField();
    // 'only one person' without their photo yet: nothing to send until it is uploaded
    ui.swapModeHint.textContent = state.pc && !desiredSwap() ? "Choose their photo: the swap changes once it is uploaded." : "";
    sendSwapOptions();
  }

  function sendSwapOptions() {
    const channel = state.channel;
    if (!state.pc || !channel || channel.readyState !== "open") return;
    const options = desiredSwap();
    if (!options) return;
    state.swapPending = options;
    channel.send(JSON.stringify({ type: "set_swap", ...options }));
    ui.swapModeHint.textContent = "Changing…";
    setTimeout(() => {
      if (state.swapPending === options) ui.swapModeHint.textContent = "No answer from the server yet about the change.";
    }, COMMAND_ANSWER_TIMEOUT_MS);
  }

  // What the page's controls ask for: {swap, reference_face_id?}, or null while 'only one
  // person' has no photo yet.
  function desiredSwap() {
    const mode = ui.swapMode.value;
    if (mode !== "reference") return { swap: mode };
    return state.referenceId ? { swap: mode, reference_face_id: state.referenceId } : null;
  }

  function sameSwap(a, b) {
    return Boolean(a && b) && a.swap === b.swap && (a.reference_face_id || null) === (b.reference_face_id || null);
  }

  function swapChanged(message) {
    state.swapPending = null;
    state.sessionSwap = { swap: message.swap, reference_face_id: message.reference_face_id };
    ui.swapModeHint.textContent = `Now swapping ${SWAP_MODE_NAMES[message.swap] || message.swap}.`;
    forgetUnusedPhotos();
  }

  function uploadReference(file) {
    const seq = ++state.referenceSeq;
    state.referenceId = null;
    clearError();
    if (!file) {
      ui.referenceState.textContent = state.sessionSwap?.swap === "reference"
        ? "No photo chosen: the session keeps the previous one until another photo or choice of faces."
        : "Choose a photo of the person whose face is to be swapped.";
      state.referenceUpload = null;
      photoChosen();
      return null;
    }
    ui.referenceState.textContent = `Uploading ${file.name}…`;
    const upload = (async () => {
      const body = await postPhoto(file, "reference photo");
      if (body.id) state.uploadedPhotos.push(body.id);
      if (seq !== state.referenceSeq) {
        forgetUnusedPhotos();
        return;
      }
      if (body.error) {
        ui.referenceState.textContent = `${file.name} was not accepted.`;
        showError(...body.error);
        return;
      }
      state.referenceId = body.id;
      ui.referenceState.textContent = `Reference ready: ${file.name}.`;
      if (ui.swapMode.value === "reference") sendSwapOptions(); // mid-stream: at once
      forgetUnusedPhotos();
    })();
    state.referenceUpload = upload;
    photoChosen();
    return upload;
  }

  // The offer's options, or null (with the error shown) when the chosen mode cannot be used yet.
  function swapOptions() {
    const options = desiredSwap();
    if (!options) {
      showError(
        "No reference photo for 'only one person'.",
        "Choose a photo of the person whose face is to be swapped, or another choice of faces, then press Start again.",
      );
      return null;
    }
    return options;
  }

  // Mid-stream, the session takes the new face at once (the "set_face" command on the data
  // channel; the server answers with {"type": "face"} or an error). Before Start there is
  // nothing to switch: the offer carries the face.
  function switchFace(faceId, name) {
    const channel = state.channel;
    if (!state.pc || !channel || channel.readyState !== "open") return;
    const pending = { faceId, name };
    state.switchingTo = pending;
    channel.send(JSON.stringify({ type: "set_face", face_id: faceId }));
    ui.faceState.textContent = faceId ? `Switching to ${name}…` : "Stopping the swap…";
    setTimeout(() => {
      if (state.switchingTo === pending) ui.faceState.textContent = "No answer from the server yet about the face.";
    }, COMMAND_ANSWER_TIMEOUT_MS);
  }

  function faceSwitched(faceId) {
    const pending = state.switchingTo;
    state.switchingTo = null;
    state.sessionFaceId = faceId;
    if (!faceId) {
      ui.faceState.textContent = "No face chosen: the video is processed without one.";
    } else {
      const name = pending && pending.faceId === faceId ? pending.name : "the chosen face";
      ui.faceState.textContent = `Face ready: ${name} (swapping now).`;
    }
    forgetUnusedPhotos();
  }

  // Each upload takes a place in the server's face library (a few dozen per account): the photos
  // this page uploaded that no choice on the page, the session, or a pending change uses are
  // deleted.
  function forgetUnusedPhotos() {
    const used = new Set([
      state.faceId, state.sessionFaceId, state.switchingTo && state.switchingTo.faceId,
      state.referenceId, state.sessionSwap && state.sessionSwap.reference_face_id,
      state.swapPending && state.swapPending.reference_face_id,
    ]);
    const unused = state.uploadedPhotos.filter((id) => !used.has(id));
    state.uploadedPhotos = state.uploadedPhotos.filter((id) => used.has(id));
    for (const id of unused) {
      fetch(`/api/faces/${encodeURIComponent(id)}`, { method: "DELETE", headers: authHeaders() }).catch(() => {});
    }
  }

  // ---- session --------------------------------------------------------------------------

  function waitForIceGathering(pc, timeoutMs) {
    if (pc.iceGatheringState === "complete") return Promise.resolve(true);
    return new Promise((resolve) => {
      const finish = (complete) => {
        clearTimeout(timer);
        pc.removeEventListener("icegatheringstatechange", onStateChange);
        pc.removeEventListener("icecandidate", onCandidate);
        resolve(complete);
      };
      const onStateChange = () => {
        if (pc.iceGatheringState === "complete") finish(true);
      };
      const onCandidate = (event) => {
        if (!event.candidate) finish(true);
      };
      const timer = setTimeout(() => finish(false), timeoutMs);
      pc.addEventListener("icegatheringstatechange", onStateChange);
      pc.addEventListener("icecandidate", onCandidate);
    });
  }

  function setSession(sessionId) {
    state.sessionId = sessionId;
    state.meterLevel = null;
    state.lastMeter = null;
    if (sessionId) {
      document.body.dataset.sessionId = sessionId;
    } else {
      delete document.body.dataset.sessionId;
    }
    ui.session.textContent = sessionId || "–";
  }

  function handleConnectionState(pc, connectionState) {
    if (state.pc !== pc) return;
    switch (connectionState) {
      case "connected":
      case "completed":
        clearError();
        setStatus("Connected: streaming.", "ok");
        // the meter may have spoken first (its channel can open before ICE reports connected)
        if (state.lastMeter) announceMeterLevel(state.lastMeter);
        break;
      case "disconnected":
        setStatus("The connection was interrupted; waiting for it to recover…", "busy");
        break;
      case "failed":
        showError(
          "The connection to the server failed.",
          "The server stopped answering, or no media path could be set up (ICE or DTLS failed). " +
            "Check the network, then press Start again.",
        );
        stop({ keepMessages: true });
        break;
      default:
        break;
    }
  }

  function handleChannelMessage(data) {
    if (typeof data !== "string") return;
    let message;
    try {
      message = JSON.parse(data);
    } catch (_) {
      return;
    }
    if (!message || typeof message !== "object") return;
    if (message.type === "stats") {
      state.serverStats = message;
      renderServerStats(message);
      if (message.meter) showMeter(message.meter);
    } else if (message.type === "meter") {
      showMeter(message);
    } else if (message.type === "face") {
      faceSwitched(message.face_id || null);
    } else if (message.type === "swap") {
      swapChanged(message);
    } else if (message.type === "draining") {
      // the server restarts (an operator or orchestrator drains it): the video goes on until then
      const seconds = Math.max(0, Math.round(Number(message.closes_in_s) || 0));
      setStatus(`The server is restarting: this session ends within ${seconds} s. Press Start again after it ends.`, "busy");
    } else if (["queued", "admitted", "degraded", "restored"].includes(message.type)) {
      showCapacity(message);
    } else if (message.type === "closed") {
      sessionEndedByServer(message);
    } else if (message.type === "error") {
      if (message.command === "set_face" && state.switchingTo) {
        ui.faceState.textContent = `${state.switchingTo.name || "The face"} could not be used; the previous face stays.`;
        state.switchingTo = null;
      }
      if (message.command === "set_swap" && state.swapPending) {
        ui.swapModeHint.textContent = "The change could not be applied; the session keeps its previous choice.";
        state.swapPending = null;
      }
      const code = message.code ? ` (${message.code})` : "";
      showError(`The server reported an error${code}:`, message.message || "no details given");
    }
    // Other types belong to later features: ignored here.
  }

  const CLOSED_TEXT = {
    tokens_exhausted: ["The session ended: you are out of tokens.", "Add tokens to the account, then press Start again."],
    quota_store_unavailable: ["The session ended: token accounting was unavailable.", "Press Start again in a moment."],
    idle: ["The session ended: the server received no video.", "Check the camera, then press Start again."],
    server_shutdown: ["The session ended: the server is shutting down.", "Press Start again once it is back."],
    video_too_large: ["The session ended: the video is larger than this server decodes.", ""],
    closed_by_request: ["The session was ended from elsewhere (another page, or the API).", "Press Start to begin again."],
  };

  // The server closed the session and said why: told at once, and the page is ready to start again.
  // (After this page's own Stop there is no session left to tell.)
  function sessionEndedByServer(message) {
    if (!state.pc) return;
    const [summary, detail] = CLOSED_TEXT[message.code] || [`The session ended: ${message.reason || "closed by the server"}.`, ""];
    const toldAlready = message.code === "video_too_large" && ui.error.textContent; // its error event said more
    if (!toldAlready) showError(summary, detail);
    stop({ keepMessages: true, sessionGone: true });
  }

  // Waits for the photos a session needs, ones chosen while waiting included (an earlier upload's
  // end must not start the session without the newer choice). Stop cancels the wait at once (the
  // upload itself goes on): false then.
  async function waitForUploads() {
    let cancel;
    const cancelled = new Promise((resolve) => { cancel = () => resolve("cancelled"); });
    state.cancelStart = cancel;
    ui.stop.disabled = false;
    try {
      let face = null;
      let reference = null;
      while (face !== state.upload || reference !== state.referenceUpload) {
        face = state.upload;
        reference = state.referenceUpload;
        // a newer choice ends the wait on the one it replaced: that upload may take long or hang
        const rechosen = new Promise((resolve) => { state.onPhotoChosen = () => resolve("rechosen"); });
        if (face) {
          setStatus("Waiting for the face upload… (Stop cancels)", "busy");
          if ((await Promise.race([face, cancelled, rechosen])) === "cancelled") return false;
        }
        if (reference) { // after a newer choice, `rechosen` has already ended this wait too
          setStatus("Waiting for the reference photo… (Stop cancels)", "busy");
          if ((await Promise.race([reference, cancelled, rechosen])) === "cancelled") return false;
        }
      }
      return true;
    } finally {
      state.cancelStart = null;
      state.onPhotoChosen = null;
      if (!state.pc) ui.stop.disabled = true;
    }
  }

  function photoChosen() {
    if (state.onPhotoChosen) state.onPhotoChosen();
  }

  async function start() {
    if (state.pc) return;
    const hadFocus = document.activeElement === ui.start;
    clearError();
    ui.start.disabled = true;
    try {
      if (!(await waitForUploads())) {
        setStatus("Start cancelled (the photo still uploads).", "info");
        ui.start.disabled = false;
        ui.start.focus(); // Stop, just pressed, is disabled again
        return;
      }
      const options = swapOptions();
      if (!options) {
        ui.start.disabled = false;
        return;
      }
      if (ui.faceFile.files.length > 0 && !state.faceId) {
        showError(
          "The chosen face photo was not accepted.",
          "Choose another photo (or clear the choice to run without a face), then press Start again.",
        );
        ui.start.disabled = false;
        return;
      }
      if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
        showError(
          "This browser cannot open the camera here.",
          "The page must be served over HTTPS (or from localhost) in a current browser.",
        );
        ui.start.disabled = false;
        return;
      }
      setStatus("Asking for the camera…", "busy");
      let stream;
      try {
        stream = await navigator.mediaDevices.getUserMedia(CAMERA_CONSTRAINTS);
      } catch (err) {
        const [summary, detail] = cameraErrorMessage(err);
        showError(summary, detail);
        ui.start.disabled = false;
        return;
      }
      state.stream = stream;
      ui.localVideo.srcObject = stream;
      playQuietly(ui.localVideo);

      const iceServers = await serverIceServers();
      if (state.stream !== stream) return; // stopped meanwhile
      const pc = new RTCPeerConnection({ iceServers });
      state.pc = pc;
      ui.stop.disabled = false;
      if (hadFocus) ui.stop.focus(); // the pressed button is disabled now: keyboard focus moves on
      clearStats();

      const channel = pc.createDataChannel("events");
      state.channel = channel;
      channel.addEventListener("message", (event) => handleChannelMessage(event.data));
      // choices made after the offer went out, before the channel opened: sent now (a face still
      // uploading is sent when its upload ends)
      channel.addEventListener("open", () => {
        const noFaceChosen = ui.faceFile.files.length === 0;
        if ((state.faceId || noFaceChosen) && state.faceId !== state.sessionFaceId) {
          switchFace(state.faceId, ui.faceFile.files[0]?.name || "the new face");
        }
        const swap = desiredSwap();
        if (swap && !sameSwap(swap, state.sessionSwap)) {
          sendSwapOptions();
        }
      });

      pc.addEventListener("track", (event) => {
        if (state.pc !== pc || event.track.kind !== "video") return;
        ui.remoteVideo.srcObject = event.streams[0] || new MediaStream([event.track]);
        playQuietly(ui.remoteVideo);
      });
      if ("connectionState" in pc) {
        pc.addEventListener("connectionstatechange", () => handleConnectionState(pc, pc.connectionState));
      } else {
        pc.addEventListener("iceconnectionstatechange", () => handleConnectionState(pc, pc.iceConnectionState));
      }
      for (const track of stream.getVideoTracks()) pc.addTrack(track, stream);

      setStatus("Connecting to the server…", "busy");
      await pc.setLocalDescription(await pc.createOffer());
      await waitForIceGathering(pc, ICE_GATHERING_TIMEOUT_MS);
      if (state.pc !== pc) return; // stopped meanwhile

      const current = desiredSwap() || options; // the controls may have changed during the camera prompt
      const offer = { sdp: pc.localDescription.sdp, type: pc.localDescription.type, options: current };
      state.sessionSwap = current;
      if (state.faceId) offer.face_id = state.faceId;
      state.sessionFaceId = state.faceId;
      const postOffer = (url) =>
        fetch(url, {
          method: "POST",
          headers: authHeaders({ "Content-Type": "application/json" }),
          body: JSON.stringify(offer),
        });
      let response;
      try {
        response = await postOffer("/api/offer");
        // A full node sends the offer on to another node by 307: fetch follows it (a CORS request there) but
        // drops the key on the way to the other origin, so that node's 401 is asked again, with the key.
        if (response.status === 401 && response.redirected && authHeaders().Authorization) {
          response = await postOffer(response.url);
        }
      } catch (err) {
        if (state.pc !== pc) return;
        showError("The connection failed: the server could not be reached.", String(err.message || err));
        stop({ keepMessages: true });
        return;
      }
      if (!response.ok) {
        const err = await readServerError(response);
        if (state.pc !== pc) return;
        showError(`The connection failed: the server refused the offer ${describeServerError(err)}`);
        if (err.code === "face_not_found") forgetMissingPhoto(err.message || "");
        stop({ keepMessages: true });
        return;
      }
      const answer = await response.json();
      if (state.pc !== pc) {
        // Stop was pressed while the offer was in flight: end the session it created.
        deleteSession(answer.session_id);
        return;
      }
      setSession(answer.session_id);
      await pc.setRemoteDescription({ type: answer.type, sdp: answer.sdp });
      setStatus("Connecting media…", "busy");
      startClientStats();
    } catch (err) {
      showError("The session could not be started.", `${err.name || "Error"}: ${err.message || err}`);
      stop({ keepMessages: true });
    }
  }

  // The server no longer has a photo this page uploaded (it restarted, or the photo was deleted):
  // the choice is cleared so that choosing the file again uploads it again.
  function forgetMissingPhoto(serverMessage) {
    if (state.faceId && serverMessage.includes(state.faceId)) {
      state.faceId = null;
      ui.faceFile.value = "";
      ui.faceState.textContent = "The face photo is no longer on the server: choose it again.";
    } else if (state.referenceId && serverMessage.includes(state.referenceId)) {
      state.referenceId = null;
      ui.referenceFile.value = "";
      ui.referenceState.textContent = "The reference photo is no longer on the server: choose it again.";
    }
  }

  function playQuietly(video) {
    const played = video.play();
    if (played && played.catch) played.catch(() => {});
  }

  // Ends the server's session; `quiet` when the page already shows why it stopped (that message
  // stays: a server that is gone cannot be reached to end it either).
  async function deleteSession(sessionId, { keepalive = false, quiet = false } = {}) {
    if (!sessionId) return true;
    try {
      const response = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}`, {
        method: "DELETE",
        headers: authHeaders(),
        keepalive,
      });
      if (!response.ok && response.status !== 404) {
        const err = await readServerError(response);
        if (!quiet) showError(`The server did not end the session ${describeServerError(err)}`);
        return false;
      }
    } catch (err) {
      if (!quiet) showError("The server could not be reached to end the session.", String(err.message || err));
      return false;
    }
    return true;
  }

  // Closes the peer connection and the camera, and ends the server's session (asked first, so the
  // server hears the DELETE before it notices the peer going).
  async function stop({ keepMessages = false, sessionGone = false } = {}) {
    if (!state.pc && state.cancelStart) { // Start is waiting for a photo: no session yet
      state.cancelStart();
      return;
    }
    const sessionId = state.sessionId;
    const hadSession = Boolean(state.pc);
    const hadFocus = document.activeElement === ui.stop;
    const ending = sessionGone ? Promise.resolve(true) : deleteSession(sessionId, { quiet: keepMessages });
    stopClientStats();
    if (state.channel) state.channel.close();
    if (state.pc) state.pc.close();
    if (state.stream) for (const track of state.stream.getTracks()) track.stop();
    state.channel = null;
    state.pc = null;
    state.stream = null;
    state.sessionFaceId = null;
    state.switchingTo = null;
    state.swapPending = null;
    state.sessionSwap = null;
    ui.swapModeHint.textContent = "";
    state.lastSessionId = sessionId || state.lastSessionId || null;
    setSession(null);
    clearCapacity();
    ui.localVideo.srcObject = null;
    ui.remoteVideo.srcObject = null;
    ui.stop.disabled = true;
    ui.start.disabled = false;
    if (hadFocus) ui.start.focus();
    clearStats();
    if (state.faceId && ui.faceState.textContent.endsWith("(swapping now).")) {
      ui.faceState.textContent = ui.faceState.textContent.replace(" (swapping now).", ".");
    }
    if (!keepMessages) {
      clearError();
      if (hadSession) setStatus("Stopping…", "busy");
    }
    const ended = await ending;
    // not when Start was pressed meanwhile: the new session's status stays
    if (!keepMessages && ended && hadSession && !state.pc) setStatus("Stopped.", "info");
  }

  // ---- numbers --------------------------------------------------------------------------

  const dash = "–";
  const formatNumber = (value, digits) =>
    typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : dash;
  const formatMs = (value) => (typeof value === "number" && Number.isFinite(value) ? `${value.toFixed(1)} ms` : dash);
  const formatSize = (width, height) => (width && height ? `${width}×${height}` : dash);

  function renderServerStats(stats) {
    const latency = stats.latency_ms || {};
    ui.fpsIn.textContent = formatNumber(stats.fps_in, 1);
    ui.fpsOut.textContent = formatNumber(stats.fps_out, 1);
    ui.latencyP50.textContent = formatMs(latency.p50);
    ui.latencyP99.textContent = formatMs(latency.p99);
    ui.dropped.textContent = formatNumber(stats.frames_dropped, 0);
    ui.failed.textContent = formatNumber(stats.frames_failed, 0);
    ui.codec.textContent = stats.codec || dash;
    ui.resolution.textContent = formatSize(stats.width, stats.height);
  }

  const LEVEL_TEXT = {
    full: "Full rate",
    slow: "Slowed (tokens running low)",
    crawl: "Crawling (tokens nearly gone)",
    stopped: "Stopped: original video",
  };

  function renderMeter(meter) {
    ui.level.textContent = LEVEL_TEXT[meter.level] || meter.level || dash;
    ui.level.dataset.level = meter.level || "";
    ui.balance.textContent = meter.tier === "vip" ? "unmetered" : `${formatNumber(meter.balance, 2)} tokens`;
    ui.burn.textContent = `${formatNumber(meter.burn_rate, 3)} tokens/s`;
    ui.timeLeft.textContent = meter.tier === "vip" ? dash : formatSeconds(timeLeft(meter));
    ui.tier.textContent = meter.tier || dash;
  }

  // Seconds of video the balance buys at the rate the session spends now (throttled, a token
  // lasts longer than the server's full-rate seconds_left says); the full-rate figure until
  // the session has a rate.
  function timeLeft(meter) {
    if (meter.level !== "stopped" && typeof meter.balance === "number" && meter.burn_rate > 0) {
      return meter.balance / meter.burn_rate;
    }
    return meter.seconds_left;
  }

  const formatSeconds = (value) => (typeof value === "number" && Number.isFinite(value) ? `${value.toFixed(0)} s` : dash);

  // Every live number back to a dash: a new session (or none) does not show the last one's.
  function clearStats() {
    for (const element of [ui.fpsIn, ui.fpsOut, ui.latencyP50, ui.latencyP99, ui.dropped, ui.failed, ui.codec,
      ui.resolution, ui.level, ui.balance, ui.burn, ui.timeLeft, ui.tier, ui.framesDecoded, ui.recvFps,
      ui.recvResolution]) {
      element.textContent = dash;
    }
    ui.level.dataset.level = "";
  }

  // Renders every update; tells the person only when the level changes.
  function showMeter(meter) {
    state.lastMeter = meter;
    renderMeter(meter);
    if (meter.level !== state.meterLevel) {
      state.meterLevel = meter.level;
      announceMeterLevel(meter);
    } else if (meter.level === "stopped") {
      showCountdown(meter);
    }
  }

  // Under the alert that says why, the status line counts down (said once each, not twice).
  function showCountdown(meter) {
    if (typeof meter.grace_s === "number") setStatus(`The session ends in ${meter.grace_s.toFixed(0)} s.`, "error");
  }

  function stoppedWhy(meter) {
    return meter.reason === "quota_store_unavailable" ? "Token accounting is unavailable right now." : "You are out of tokens.";
  }

  function announceMeterLevel(meter) {
    if (meter.level === "stopped") {
      showError(`${stoppedWhy(meter)} Showing your original video; the session ends unless tokens are added.`);
      showCountdown(meter);
    } else if (meter.level === "slow" || meter.level === "crawl") {
      clearError();
      const fps = typeof meter.fps_cap === "number" ? ` at ${meter.fps_cap} fps` : "";
      setStatus(`Tokens running low: processing${fps}.`, "busy");
    } else if (meter.level === "full") {
      clearError();
      if (state.pc && !state.waiting) setStatus("Connected: processing at full rate.", "ok");
    }
  }

  function renderClientStats(stats) {
    ui.framesDecoded.textContent = formatNumber(stats.framesDecoded, 0);
    ui.recvFps.textContent = formatNumber(stats.fps, 1);
    ui.recvResolution.textContent = formatSize(stats.width, stats.height);
  }

  async function pollClientStats() {
    const pc = state.pc;
    if (!pc || state.statsBusy) return;
    state.statsBusy = true;
    try {
      const report = await pc.getStats();
      let inbound = null;
      report.forEach((entry) => {
        if (entry.type === "inbound-rtp" && (entry.kind || entry.mediaType) === "video") inbound = entry;
      });
      if (!inbound || state.pc !== pc) return;
      const framesDecoded = inbound.framesDecoded || 0;
      let fps = typeof inbound.framesPerSecond === "number" ? inbound.framesPerSecond : null;
      const previous = state.previousInbound;
      if (previous && inbound.timestamp > previous.timestamp) {
        fps = ((framesDecoded - previous.framesDecoded) * 1000) / (inbound.timestamp - previous.timestamp);
      }
      state.previousInbound = { framesDecoded, timestamp: inbound.timestamp };
      state.clientStats = {
        framesDecoded,
        fps,
        width: inbound.frameWidth || null,
        height: inbound.frameHeight || null,
      };
      renderClientStats(state.clientStats);
    } catch (_) {
      // the connection closed under us; the next poll (if any) tries again
    } finally {
      state.statsBusy = false;
    }
  }

  function startClientStats() {
    stopClientStats();
    state.statsTimer = setInterval(pollClientStats, CLIENT_STATS_INTERVAL_MS);
  }

  function stopClientStats() {
    if (state.statsTimer !== null) clearInterval(state.statsTimer);
    state.statsTimer = null;
    state.previousInbound = null;
  }

  // ---- wiring ---------------------------------------------------------------------------

  ui.faceFile.addEventListener("change", () => uploadFace(ui.faceFile.files[0] || null));
  ui.swapMode.addEventListener("change", chooseSwapMode);
  showReferenceField(); // a browser may restore the select's value on reload
  ui.referenceFile.addEventListener("change", () => uploadReference(ui.referenceFile.files[0] || null));
  ui.start.addEventListener("click", () => start());
  ui.stop.addEventListener("click", () => stop());
  window.addEventListener("pagehide", () => {
    // Best effort: the page is going away, so do not wait for the answer.
    const sessionId = state.sessionId;
    if (state.pc) state.pc.close();
    if (sessionId) deleteSession(sessionId, { keepalive: true });
  });

  state.start = start;
  state.stop = stop;
})();
