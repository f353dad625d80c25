// The dashboard page: sign-in (the key kept in this tab's sessionStorage only; none on the loopback
// local account), the one event stream, and which view its snapshots go to: the operator's for the
// admin key (the snapshot has "node"), the streamer's otherwise. Problems are said in a banner.
"use strict";

(() => {
  const ns = window.facefuseDashboard;
  const { setText, setData } = ns;
  const byId = (id) => document.getElementById(id);
  const KEY_STORAGE = "facefuse.dashboard.key";

  // What the page is doing, for tests and for anyone debugging it.
  const state = {
    view: "starting", // starting | connecting | sign-in | streamer | operator
    localAccount: null, // whether the server runs the loopback local account (no key); null until /healthz answered
    snapshots: 0,
    lastSnapshot: null,
    connection: "off", // off | connecting | live | down
    events: null, // the EventStream
  };
  ns.state = state;

  const streamer = new ns.StreamerView();
  const operator = new ns.OperatorView();
  ns.views = { streamer, operator };
  let connectionProblem = "";
  let snapshotErrors = [];

  function setView(view) {
    state.view = view;
    document.body.dataset.view = view;
    byId("sign-in").hidden = view !== "sign-in";
    byId("streamer").hidden = view !== "streamer";
    byId("operator").hidden = view !== "operator";
    byId("sign-out").hidden = !["streamer", "operator"].includes(view) || state.localAccount === true;
    byId("who").hidden = !["streamer", "operator"].includes(view);
  }

  function setConnection(name, text) {
    state.connection = name;
    const live = byId("live");
    setData(live, "state", name);
    setText(live, text);
  }

  function renderBanner() {
    const banner = byId("banner");
    const lines = [connectionProblem, ...snapshotErrors.map((error) => error.message || error.code)].filter(Boolean);
    setText(banner, lines.join(" "));
    setData(banner, "codes", snapshotErrors.map((error) => error.code).join(" "));
    banner.hidden = lines.length === 0;
  }

  // ---- the event stream -------------------------------------------------------------------

  function connect(key) {
    ns.api.key = key;
    setView("connecting");
    setConnection("connecting", "Connecting…");
    state.events = new ns.EventStream("/api/events", {
      onOpen: () => {
        if (key) sessionStorage.setItem(KEY_STORAGE, key); // kept only once the server took it
        setConnection("live", "Live");
      },
      onSnapshot,
      onDown: (message) => {
        connectionProblem = `${message} The figures below are from before.`;
        setConnection("down", "Reconnecting…");
        renderBanner();
      },
      onRefused: (message) => signOut(`The server refused the key: ${message}`),
    }).start();
  }

  function onSnapshot(snapshot) {
    state.snapshots += 1;
    state.lastSnapshot = snapshot;
    connectionProblem = "";
    const admin = Boolean(snapshot.node);
    const view = admin ? "operator" : "streamer";
    if (state.view !== view) setView(view);
    let who = "Operator (admin key)";
    if (!admin) who = state.localAccount ? "The local account (no sign-in on this machine)" : `Account ${snapshot.account ? snapshot.account.id : ""}`;
    setText(byId("who"), who);
    (admin ? operator : streamer).show(snapshot);
    snapshotErrors = Array.isArray(snapshot.errors) ? snapshot.errors : [];
    renderBanner();
    setConnection("live", `Live · ${new Date(snapshot.t * 1000).toLocaleTimeString("en-GB")}`);
  }

  function stopEvents() {
    if (state.events) state.events.stop();
    state.events = null;
  }

  // An expired or revoked key (or a sign-out): back to sign-in, with why, and nothing kept.
  function signOut(message) {
    stopEvents();
    sessionStorage.removeItem(KEY_STORAGE);
    ns.api.key = "";
    streamer.reset();
    operator.reset();
    state.lastSnapshot = null;
    connectionProblem = "";
    snapshotErrors = [];
    renderBanner();
    setConnection("off", "");
    if (state.localAccount) {
      // no key to ask for on the local account: say it, and try again later
      connectionProblem = message;
      renderBanner();
      setTimeout(() => connect(""), 5000);
      return;
    }
    const note = byId("sign-in-message");
    setText(note, message || "");
    note.hidden = !message;
    setView("sign-in");
    byId("key").focus();
  }

  byId("sign-in-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = byId("key").value.trim();
    byId("key").value = "";
    byId("sign-in-message").hidden = true;
    if (key) connect(key);
  });
  byId("sign-out").addEventListener("click", () => signOut(""));
  ns.api.onUnauthorized = (message) => signOut(`The server refused the key: ${message}`);
  window.addEventListener("pagehide", () => streamer.stopPreviews(true));

  // A local server (no admin key) runs one account without auth: no sign-in. /healthz says so
  // also when it answers 503; if it cannot be asked, the sign-in shows.
  async function start() {
    try {
      const response = await fetch("/healthz", { cache: "no-store" });
      state.localAccount = (await response.json()).local_account === true;
    } catch (_) {
      state.localAccount = false;
    }
    const saved = sessionStorage.getItem(KEY_STORAGE);
    if (state.localAccount) connect("");
    else if (saved) connect(saved);
    else signOut("");
  }

  start();
})();
