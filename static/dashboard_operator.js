// The operator's view (signed in with the admin key): this node's readiness, scheduler, chain
// stages, memory, device busy share and quota store; the nodes sharing the Redis; every session on
// every node with its node, account and batch share; the accounts by burn rate; and the operator's actions: end a session, credit an account, create an account.
"use strict";

(() => {
  const ns = window.facefuseDashboard;
  const { format, setText, setData } = ns;
  const byId = (id) => document.getElementById(id);
  const ENDED_KEEP_MS = 30000; // an ended session's row stays, marked ended, this long

  // crypto.randomUUID exists in secure contexts only (https, or 127.0.0.1); a LAN address over
  // plain http still gets a random key, from getRandomValues.
  function idempotencyKey() {
    if (crypto.randomUUID) return crypto.randomUUID();
    return Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, "0")).join("");
  }

  function cellsOf(row, names, numeric = []) {
    const cells = {};
    for (const name of names) {
      const cell = row.insertCell();
      if (numeric.includes(name)) cell.className = "num";
      cells[name] = cell;
    }
    return cells;
  }

  function button(text, className = "quiet") {
    const element = document.createElement("button");
    element.type = "button";
    element.className = className;
    element.textContent = text;
    return element;
  }

  // "node-0 (this one) 1 / 8 · node-1 2 / 8 draining": every node sharing the Redis, from the registry.
  // The capacity model (docs/running.md): how many more of each size fit, at what rate.
  function capacityWords(capacity) {
    if (!capacity.fits_more) return format.DASH;
    const fits = Object.entries(capacity.fits_more).map(([size, count]) => `${count} × ${size}`).join(", ");
    const shed = Object.entries(capacity.shed || {}).map(([step, count]) => `${count} at lower ${step}`).join(", ");
    return `${capacity.processed} processed at ${capacity.planned_fps} fps (floor ${capacity.floor_fps}); room for ${fits}` +
      (shed ? `; shedding: ${shed}` : "");
  }

  function lineWords(capacity) {
    const line = capacity.line || [];
    if (!line.length) return `nobody waits (at most ${capacity.max_queue ?? format.DASH})`;
    const longest = Math.max(...line.map((place) => place.waited_s || 0));
    return `${line.length} waiting of at most ${capacity.max_queue}, the longest for ${Math.round(longest)} s: ` +
      line.map((place) => `${place.session_id} (priority ${place.priority})`).join(", ");
  }

  function nodesWords(node) {
    const nodes = node.nodes || [];
    if (!nodes.length) return format.DASH;
    return nodes
      .map((n) => `${n.id}${n.id === node.node_id ? " (this one)" : ""} ${n.sessions} / ${n.capacity}${n.draining ? " draining" : ""}`)
      .join(" · ");
  }

  class OperatorView {
    constructor() {
      this.series = new ns.SeriesStore();
      this.plot = null;
      this.tiers = new Map(); // account id -> tier, from the snapshot's accounts
      this.stages = new ns.KeyedList(byId("stage-figures"), {
        create: (key) => {
          const node = document.createElement("div");
          const name = node.appendChild(document.createElement("dt"));
          const ms = node.appendChild(document.createElement("dd"));
          setText(name, key);
          return { node, ms };
        },
        update: (entry, [, ms]) => setText(entry.ms, format.ms(ms)),
      });
      this.sessions = new ns.KeyedList(byId("op-session-rows"), {
        create: (key) => this.createSessionRow(key),
        update: (entry, session) => this.updateSessionRow(entry, session),
        ended: (entry) => this.markEnded(entry),
        keepEndedMs: ENDED_KEEP_MS,
      });
      this.accounts = new ns.KeyedList(byId("account-rows"), {
        create: (key) => this.createAccountRow(key),
        update: (entry, account) => this.updateAccountRow(entry, account),
      });
      byId("create-form").addEventListener("submit", (event) => {
        event.preventDefault();
        this.createAccount();
      });
      byId("created-copy").addEventListener("click", () => {
        ns.copyText(byId("created-key").textContent);
      });
    }

    show(snapshot) {
      const node = snapshot.node || {};
      this.tiers = new Map((node.accounts || []).map((account) => [account.id, account.tier]));
      this.showNode(node, snapshot.t);
      const sessions = snapshot.sessions || [];
      this.sessions.sync(sessions, (session) => session.session_id, { now: snapshot.t * 1000 });
      setText(byId("node-sessions-count"), `(${sessions.length})`);
      this.accounts.sync(node.accounts || [], (account) => account.id, { ordered: true });
      this.series.forgetStale(snapshot.t);
    }

    showNode(node, t) {
      const ready = byId("node-ready");
      setText(ready, node.ready ? "ready" : "not ready");
      setData(ready, "ok", Boolean(node.ready));
      setText(byId("node-status"), node.status || format.DASH);
      setText(byId("node-chain"), `${node.chain || format.DASH} on ${node.device || format.DASH}`);
      const store = node.quota_store || {};
      setText(byId("node-store"), store.ok ? `answering, ${format.ms(store.rtt_ms)} round trip` : "NOT answering: balances may be stale");
      setData(byId("node-store"), "ok", Boolean(store.ok));
      const memory = node.memory || {};
      const device = format.known(memory.device_bytes)
        ? `, device ${format.bytes(memory.device_bytes)} (peak ${format.bytes(memory.device_peak_bytes)})`
        : "";
      setText(byId("node-memory"), `resident ${format.bytes(memory.resident_bytes)}${device}`);
      const scheduler = node.scheduler || {};
      const sizes = Object.entries(scheduler.batch_sizes || {}).map(([size, count]) => `${size}×${count}`);
      setText(byId("node-batches"), sizes.length ? sizes.join(" · ") : "none yet");
      const queue = scheduler.queue_wait_ms || {};
      const chain = scheduler.chain_ms || {};
      setText(byId("node-queue"), format.pair(queue.p50, queue.p99, " ms"));
      setText(byId("node-chain-ms"), format.pair(chain.p50, chain.p99, " ms"));
      setText(byId("node-frames"), `${scheduler.frames ?? format.DASH}, ${scheduler.failed_frames ?? format.DASH} failed`);
      setText(byId("node-busy"), format.percent(scheduler.busy_share));
      const capacity = node.capacity || {};
      setText(byId("node-capacity"), capacityWords(capacity));
      setText(byId("node-line"), lineWords(capacity));
      setText(byId("node-nodes"), nodesWords(node));
      this.stages.sync(Object.entries(node.chain_stages_ms || {}), ([name]) => name, { ordered: true });
      const series = this.series.push("node", t, chain.p50, queue.p50);
      if (!this.plot) {
        this.plot = new ns.LivePlot(
          byId("node-plot"),
          [
            { label: "chain p50", stroke: "#1f5fbf" },
            { label: "queue wait p50", stroke: "#8a5a00" },
          ],
          { height: 120, minTop: 10, timeLabels: true },
        );
      }
      this.plot.update(series);
    }

    // ---- sessions ---------------------------------------------------------------------

    createSessionRow(key) {
      const node = document.createElement("tr");
      node.dataset.session = key;
      const cells = cellsOf(
        node,
        ["id", "node", "account", "tier", "state", "fps", "latency", "video", "throttle", "share"],
        ["fps", "latency", "share"],
      );
      setText(cells.id, format.shortId(key));
      cells.id.title = key;
      const end = button("End", "quiet danger");
      const entry = { node, cells, end };
      ns.confirmClick(end, "Really end?", () => this.endSession(entry));
      node.insertCell().appendChild(end);
      return entry;
    }

    updateSessionRow(entry, s) {
      const { cells } = entry;
      entry.session = s;
      setData(entry.node, "state", s.state);
      setText(cells.account, s.account_id || format.DASH);
      setText(cells.tier, this.tiers.get(s.account_id) || format.DASH);
      setText(cells.state, s.state);
      setText(cells.fps, format.pair(s.fps_in, s.fps_out));
      const latency = s.latency_ms || {};
      setText(cells.latency, format.pair(latency.p50, latency.p99, " ms"));
      setText(cells.video, s.width ? `${s.width}×${s.height} ${s.codec || ""}`.trim() : format.DASH);
      const throttle = s.throttle;
      setText(cells.throttle, format.throttle(throttle));
      setText(cells.node, s.node_id || format.DASH);
      setText(cells.share, format.percent(s.batch_share));
      entry.end.disabled = ["closing", "closed"].includes(s.state);
    }

    markEnded(entry) {
      setData(entry.node, "state", "ended");
      setText(entry.cells.state, "ended");
      entry.end.disabled = true;
    }

    async endSession(entry) {
      entry.end.disabled = true;
      try {
        await ns.api.request("DELETE", `/api/sessions/${encodeURIComponent(entry.session.session_id)}`);
      } catch (error) {
        if (error.status === 404) this.markEnded(entry);
        else setText(byId("accounts-message"), ns.api.sentence(`end session ${format.shortId(entry.session.session_id)}`, error));
        entry.end.disabled = error.status === 404;
      }
    }

    // ---- accounts ---------------------------------------------------------------------

    createAccountRow(key) {
      const node = document.createElement("tr");
      node.dataset.account = key;
      const cells = cellsOf(node, ["id", "tier", "balance", "burn", "sessions"], ["balance", "burn", "sessions"]);
      const history = button(key, "link");
      history.title = "Show this account's history";
      history.addEventListener("click", () => this.showHistory(key));
      cells.id.appendChild(history);
      const credit = node.insertCell();
      const amount = document.createElement("input");
      amount.type = "number";
      amount.min = "0";
      amount.step = "any";
      amount.placeholder = "tokens";
      amount.setAttribute("aria-label", `tokens to credit to ${key}`);
      const go = button("Credit");
      go.addEventListener("click", () => this.credit(key, amount, go));
      credit.append(amount, go);
      return { node, cells };
    }

    updateAccountRow(entry, account) {
      const { cells } = entry;
      setText(cells.tier, account.tier);
      setText(cells.balance, format.number(account.balance, 2));
      setText(cells.burn, format.rate(account.burn_rate));
      setText(cells.sessions, account.active_sessions);
    }

    async credit(accountId, input, go) {
      const amount = Number(input.value);
      const message = byId("accounts-message");
      if (!(amount > 0)) {
        setText(message, "Type how many tokens to credit (a number above 0).");
        return;
      }
      go.disabled = true;
      try {
        // a fresh key per click: a retry of this same request by the network is not credited twice
        const account = await ns.api.request("POST", `/api/admin/accounts/${encodeURIComponent(accountId)}/credit`, {
          amount,
          idempotency_key: idempotencyKey(),
        });
        setText(message, `Credited ${amount} tokens to ${accountId}: the balance is now ${format.tokens(account.balance)}.`);
        input.value = "";
      } catch (error) {
        setText(message, ns.api.sentence(`credit ${accountId}`, error));
      } finally {
        go.disabled = false;
      }
    }

    async showHistory(accountId) {
      const details = byId("account-history");
      setText(byId("account-history-id"), accountId);
      try {
        const body = await ns.api.request("GET", `/api/admin/accounts/${encodeURIComponent(accountId)}`);
        ns.historyRows(byId("account-history-rows"), body.history || []);
        details.open = true;
      } catch (error) {
        setText(byId("accounts-message"), ns.api.sentence(`load ${accountId}'s history`, error));
      }
    }

    async createAccount() {
      const body = { tier: byId("create-tier").value.trim() || "free", balance: Number(byId("create-balance").value) || 0 };
      const id = byId("create-id").value.trim();
      if (id) body.id = id;
      const message = byId("accounts-message");
      byId("created").hidden = true;
      try {
        const account = await ns.api.request("POST", "/api/admin/accounts", body);
        setText(byId("created-id"), account.id);
        setText(byId("created-key"), account.api_key);
        byId("created").hidden = false;
        setText(message, "");
        byId("create-id").value = "";
      } catch (error) {
        setText(message, ns.api.sentence("create the account", error));
      }
    }

    reset() {
      this.sessions.clear();
      this.accounts.clear();
      this.stages.clear();
      this.series.clear();
      if (this.plot) this.plot.destroy();
      this.plot = null;
      byId("created").hidden = true;
      setText(byId("created-key"), "");
      byId("account-history-rows").replaceChildren();
    }
  }

  ns.OperatorView = OperatorView;
})();
