// The streamer's view: the account (balance, burn rate, time left, the hourly cap, history) and
// each live session as a card (figures, source face, a muted preview, 5-minute plots, actions);
// with the streams (dashboard_streams.js) and the face library (dashboard_faces.js). Fed one
// snapshot a second by dashboard.js.
"use strict";

(() => {
  const ns = window.facefuseDashboard;
  const { format, setText, setData, confirmClick, setOptions, historyRows } = ns;
  const byId = (id) => document.getElementById(id);

  const ENDED_KEEP_MS = 60000; // an ended session's card stays, marked ended, this long
  const MAX_PREVIEWS = 4; // each preview costs the server a viewer's encoder
  const HISTORY_REFRESH_MS = 15000; // while the history is open
  const SWAP_WORDS = { all: "every face", largest: "the largest face", reference: "one person" };

  function endedWords(session) {
    const reason = session && session.close_reason;
    return reason ? `This session has ended: ${reason}.` : "This session has ended.";
  }

  class StreamerView {
    constructor() {
      this.series = new ns.SeriesStore();
      this.thumbnails = new ns.Thumbnails();
      this.faces = [];
      this.accountPlot = null;
      this.historyTimer = null;
      this.template = byId("session-card");
      this.sessions = new ns.KeyedList(byId("session-cards"), {
        create: (key) => this.createCard(key),
        update: (entry, session) => this.updateCard(entry, session),
        ended: (entry) => this.markEnded(entry, endedWords(entry.session)),
        destroy: (entry) => this.destroyCard(entry),
        keepEndedMs: ENDED_KEEP_MS,
      });
      this.streams = new ns.StreamsPanel();
      this.library = new ns.FaceLibrary(this.thumbnails);
      this.bindForms();
    }

    // ---- one snapshot -----------------------------------------------------------------

    show(snapshot) {
      const t = snapshot.t;
      this.t = t;
      this.faces = snapshot.faces || [];
      this.thumbnails.setLibrary(this.faces);
      this.showAccount(snapshot.account, t);
      const sessions = snapshot.sessions || [];
      this.sessions.sync(sessions, (session) => session.session_id, { now: t * 1000 });
      setText(byId("sessions-count"), sessions.length ? `(${sessions.length})` : "");
      byId("sessions-empty").hidden = this.sessions.size > 0;
      this.streams.show(snapshot.streams || [], this.faces);
      this.library.show(this.faces);
      this.series.forgetStale(t);
    }

    showAccount(account, t) {
      if (!account) return;
      setText(byId("acc-id"), account.id);
      setText(byId("acc-balance"), format.tokens(account.balance));
      setText(byId("acc-burn"), format.rate(account.burn_rate));
      let left;
      if (account.metered === false) left = "unmetered";
      else if (account.burn_rate > 0) left = format.duration(account.balance / account.burn_rate);
      else left = "not spending now";
      setText(byId("acc-left"), left);
      setText(byId("acc-tier"), account.tier);
      setText(byId("acc-sessions"), `${account.active_sessions} of at most ${account.max_sessions}`);
      const capped = format.known(account.hourly_cap);
      setText(
        byId("acc-hour"),
        capped
          ? `${format.number(account.hourly_spend, 2)} of ${account.hourly_cap} tokens`
          : `${format.number(account.hourly_spend, 2)} tokens (no hourly cap)`,
      );
      const bar = byId("acc-hour-bar");
      bar.hidden = !capped;
      if (capped) bar.value = Math.min(1, account.hourly_cap > 0 ? account.hourly_spend / account.hourly_cap : 1);
      const series = this.series.push("account", t, account.burn_rate);
      if (!this.accountPlot) {
        this.accountPlot = new ns.LivePlot(byId("acc-plot"), [{ label: "tokens/s", stroke: "#1f5fbf" }], {
          height: 120,
          timeLabels: true,
          minTop: 0.1,
        });
      }
      this.accountPlot.update(series);
    }

    // ---- session cards ----------------------------------------------------------------

    createCard(key) {
      const node = this.template.content.firstElementChild.cloneNode(true);
      const fields = ns.fieldsOf(node);
      node.dataset.session = key;
      setText(fields.id, format.shortId(key));
      fields.id.title = key;
      const entry = { node, fields, plots: null, preview: null, still: null, session: null, chosen: { face: false, swap: false } };
      node.querySelector("[data-action=set-face]").addEventListener("click", () => this.setFace(entry));
      node.querySelector("[data-action=set-swap]").addEventListener("click", () => this.setSwap(entry));
      confirmClick(node.querySelector("[data-action=end]"), "Click again to end it", () => this.endSession(entry));
      fields["face-select"].addEventListener("change", () => (entry.chosen.face = true));
      fields["swap-select"].addEventListener("change", () => {
        entry.chosen.swap = true;
        fields["reference-select"].hidden = fields["swap-select"].value !== "reference";
      });
      fields["reference-select"].addEventListener("change", () => (entry.chosen.swap = true));
      return entry;
    }

    updateCard(entry, s) {
      const { fields, node } = entry;
      entry.session = s;
      const live = !["closing", "closed"].includes(s.state);
      setData(node, "state", s.state);
      setText(fields.state, s.state);
      setText(fields.stream, s.stream ? `stream "${s.stream}"` : "not published");
      const latency = s.latency_ms || {};
      setText(fields.fps, format.pair(s.fps_in, s.fps_out));
      setText(fields.latency, format.pair(latency.p50, latency.p99, " ms"));
      setText(fields.video, s.width ? `${s.width}×${s.height} ${s.codec || ""}`.trim() : format.DASH);
      setText(fields.swap, this.swapWords(s));
      const net = s.network || {};
      setText(fields.bitrate, `${format.bitrate(net.bitrate_in_bps)} / ${format.bitrate(net.bitrate_out_bps)}`);
      setText(fields.network, `${format.percent(net.packets_lost_ratio)} lost, RTT ${format.ms(net.rtt_ms)}`);
      setText(fields.viewers, format.known(s.viewers) ? s.viewers : format.DASH);
      setText(fields.spent, s.meter ? format.tokens(s.meter.spent) : "not metered");
      const throttle = s.throttle;
      setText(fields.throttle, format.throttle(throttle));
      setData(fields.throttle, "level", (throttle && throttle.level) || "full");
      this.thumbnails.show(fields.thumb, s.face_id);
      fields.thumb.title = s.face_id ? `source face ${s.face_id}` : "no source face: not swapping";
      this.updateChoices(entry, s);
      for (const button of node.querySelectorAll("button")) button.disabled = !live || entry.busy;
      if (s.state === "closing") setText(fields.message, `Ending: ${s.close_reason || "closing"}.`);

      const series = this.series.push(s.session_id, this.t, s.fps_out, latency.p50, s.meter ? s.meter.spent : null);
      if (!entry.plots) {
        entry.plots = [
          new ns.LivePlot(fields["plot-fps"], [{ label: "fps", stroke: "#1b7a3d" }], { minTop: 5 }),
          new ns.LivePlot(fields["plot-latency"], [{ label: "ms", stroke: "#8a5a00" }], { minTop: 10 }),
          new ns.LivePlot(fields["plot-tokens"], [{ label: "tokens", stroke: "#1f5fbf" }], { minTop: 0.1 }),
        ];
      }
      entry.plots[0].update(columnsOf(series, 1));
      entry.plots[1].update(columnsOf(series, 2));
      entry.plots[2].update(columnsOf(series, 3));
      this.updatePreview(entry, s, live);
    }

    swapWords(s) {
      if (!s.face_id) return "none: not swapping";
      const options = s.options || {};
      const who = SWAP_WORDS[options.swap || "all"] || options.swap;
      const reference = options.swap === "reference" && options.reference_face_id ? ` (${format.shortId(options.reference_face_id)})` : "";
      return `${who}${reference} → ${format.shortId(s.face_id)}`;
    }

    // The face and swap choices show the session's own until the person picks another.
    updateChoices(entry, s) {
      const { fields } = entry;
      const faces = this.faces.map((face) => [face.id, format.faceLabel(face)]);
      setOptions(fields["face-select"], [["", "none (stop swapping)"], ...faces]);
      setOptions(fields["reference-select"], faces);
      if (!entry.chosen.face) fields["face-select"].value = s.face_id || "";
      if (!entry.chosen.swap) {
        const options = s.options || {};
        fields["swap-select"].value = options.swap || "all";
        if (options.reference_face_id) fields["reference-select"].value = options.reference_face_id;
        fields["reference-select"].hidden = fields["swap-select"].value !== "reference";
      }
    }

    // A published stream plays as a WHEP preview; a session not published shows a still a second.
    updatePreview(entry, s, live) {
      const wanted = live && s.stream && s.state === "live";
      if (wanted && !entry.preview && this.previewCount() < MAX_PREVIEWS) {
        entry.preview = new ns.Preview(entry.fields.preview, s.stream).start();
      } else if (!wanted && entry.preview) {
        entry.preview.stop();
        entry.preview = null;
      }
      const still = live && !s.stream && s.state === "live";
      if (still && !entry.still) {
        entry.still = new ns.Still(entry.fields.still, entry.node, s.session_id);
      } else if (!still) {
        this.stopStill(entry);
      }
    }

    stopStill(entry) {
      if (entry.still) entry.still.stop();
      entry.still = null;
    }

    previewCount() {
      let count = 0;
      for (const entry of this.sessions.entries.values()) if (entry.preview) count += 1;
      return count;
    }

    markEnded(entry, message) {
      setData(entry.node, "state", "ended");
      setText(entry.fields.state, "ended");
      setText(entry.fields.message, message);
      for (const button of entry.node.querySelectorAll("button")) button.disabled = true;
      if (entry.preview) {
        entry.preview.stop();
        entry.preview = null;
      }
      this.stopStill(entry);
    }

    destroyCard(entry) {
      if (entry.preview) entry.preview.stop();
      this.stopStill(entry);
      for (const plot of entry.plots || []) plot.destroy();
    }

    // ---- session actions --------------------------------------------------------------

    async act(entry, what, call, done) {
      const id = entry.session.session_id;
      entry.busy = true;
      for (const button of entry.node.querySelectorAll("button")) button.disabled = true;
      setText(entry.fields.message, `${what[0].toUpperCase()}${what.slice(1)}…`);
      try {
        const answer = await call(`/api/sessions/${encodeURIComponent(id)}`);
        setText(entry.fields.message, done);
        return answer;
      } catch (error) {
        if (error.status === 404) {
          this.markEnded(entry, "This session is gone: it ended before the change reached it.");
          entry.endedAt = entry.endedAt || this.t * 1000;
        } else {
          setText(entry.fields.message, ns.api.sentence(what, error));
        }
        return null;
      } finally {
        entry.busy = false;
        const live = entry.node.dataset.state !== "ended";
        for (const button of entry.node.querySelectorAll("button")) button.disabled = !live;
      }
    }

    async setFace(entry) {
      const faceId = entry.fields["face-select"].value || null;
      const answer = await this.act(
        entry,
        "switch the face",
        (path) => ns.api.request("POST", `${path}/face`, { face_id: faceId }),
        faceId ? `Now swapping to ${format.shortId(faceId)}.` : "Swapping stopped.",
      );
      if (answer) entry.chosen.face = false;
    }

    async setSwap(entry) {
      const swap = entry.fields["swap-select"].value;
      const body = { swap };
      if (swap === "reference") body.reference_face_id = entry.fields["reference-select"].value || null;
      const answer = await this.act(
        entry,
        "change which faces are swapped",
        (path) => ns.api.request("POST", `${path}/swap`, body),
        `Now swapping ${SWAP_WORDS[swap]}.`,
      );
      if (answer) entry.chosen.swap = false;
    }

    async endSession(entry) {
      await this.act(entry, "end the session", (path) => ns.api.request("DELETE", path), "Ending the session…");
    }

    // ---- history ----------------------------------------------------------------------

    async loadHistory() {
      const message = byId("history-message");
      try {
        const body = await ns.api.request("GET", "/api/account/history");
        const entries = body.history || [];
        historyRows(byId("history-rows"), entries);
        setText(message, entries.length ? "" : "Nothing yet.");
      } catch (error) {
        setText(message, ns.api.sentence("load the history", error));
      }
    }

    bindForms() {
      byId("history-refresh").addEventListener("click", () => this.loadHistory());
      byId("history").addEventListener("toggle", (event) => {
        clearInterval(this.historyTimer);
        if (!event.target.open) return;
        this.loadHistory();
        this.historyTimer = setInterval(() => this.loadHistory(), HISTORY_REFRESH_MS);
      });
    }

    // The page is going away: each preview's viewer is deleted (keepalive), not left to time out.
    stopPreviews(keepalive = false) {
      for (const entry of this.sessions.entries.values()) {
        if (entry.preview) entry.preview.stop(keepalive);
        entry.preview = null;
      }
    }

    // Signed out: nothing of this account stays in the page.
    reset() {
      clearInterval(this.historyTimer);
      byId("history").open = false;
      this.sessions.clear();
      this.streams.reset();
      this.library.reset();
      this.thumbnails.clear();
      this.series.clear();
      if (this.accountPlot) this.accountPlot.destroy();
      this.accountPlot = null;
      byId("history-rows").replaceChildren();
    }
  }

  // One value column of a session's series as its own [times, values], for a one-line plot.
  function columnsOf(series, index) {
    return { columns: [series.columns[0], series.columns[index]] };
  }

  ns.StreamerView = StreamerView;
})();
