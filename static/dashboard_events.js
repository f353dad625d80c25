// The dashboard's one stream of live updates: GET /api/events read with fetch() and a stream
// reader (EventSource cannot send an Authorization header), parsed as Server-Sent Events, and
// reconnected with backoff: 0.5 s, 1 s, 2 s, ... up to 8 s, or as a 429/503's Retry-After asks.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});
  const FIRST_RETRY_MS = 500;
  const MAX_RETRY_MS = 8000;
  // The server sends a snapshot a second and a keepalive comment every 15 s when it cannot: this
  // long without a byte, the connection is dead even if the browser has not noticed.
  const SILENCE_MS = 35000;

  // The SSE wire format: lines end in \n, \r\n or \r; a blank line ends an event; lines starting
  // with ":" are comments (keepalives); "event:" names the event, "data:" lines are joined by \n.
  class SseParser {
    constructor(onEvent) {
      this.onEvent = onEvent;
      this.buffer = "";
      this.event = "";
      this.data = [];
    }

    push(text) {
      this.buffer += text;
      // a "\r" at the end may be half of a "\r\n" split across chunks: wait for the next one
      const end = this.buffer.endsWith("\r") ? this.buffer.length - 1 : this.buffer.length;
      const lines = this.buffer.slice(0, end).split(/\r\n|\r|\n/);
      this.buffer = lines.pop() + this.buffer.slice(end);
      for (const line of lines) this.line(line);
    }

    line(line) {
      if (line === "") {
        if (this.data.length) this.onEvent({ event: this.event || "message", data: this.data.join("\n") });
        this.event = "";
        this.data = [];
        return;
      }
      if (line.startsWith(":")) return;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") this.event = value;
      else if (field === "data") this.data.push(value);
    }
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // handlers: onSnapshot(object), onOpen(), onDown(message), onRefused(message) (401/403: no retry)
  class EventStream {
    constructor(url, handlers) {
      this.url = url;
      this.handlers = handlers;
      this.stopped = false;
      this.controller = null;
      this.nextRetryMs = FIRST_RETRY_MS;
      this.stats = { connects: 0, snapshots: 0, lastStatus: null };
    }

    start() {
      this.run();
      return this;
    }

    stop() {
      this.stopped = true;
      if (this.controller) this.controller.abort();
    }

    backoff() {
      const delay = this.nextRetryMs;
      this.nextRetryMs = Math.min(this.nextRetryMs * 2, MAX_RETRY_MS);
      return delay;
    }

    async run() {
      while (!this.stopped) {
        const wait = await this.once();
        if (wait === null || this.stopped) return;
        await sleep(wait);
      }
    }

    // One connection, read to its end; resolves to the wait before the next, or null for none.
    async once() {
      this.controller = new AbortController();
      let response;
      try {
        response = await fetch(this.url, {
          headers: ns.api.headers({ Accept: "text/event-stream" }),
          cache: "no-store",
          signal: this.controller.signal,
        });
      } catch (_) {
        if (this.stopped) return null;
        this.handlers.onDown("The server cannot be reached: retrying…");
        return this.backoff();
      }
      this.stats.lastStatus = response.status;
      if (response.status === 401 || response.status === 403) {
        const error = await ns.api.errorOf(response);
        this.handlers.onRefused(error.message);
        return null;
      }
      if (!response.ok) {
        const error = await ns.api.errorOf(response);
        const asked = Number(response.headers.get("Retry-After")) * 1000;
        this.handlers.onDown(`Live updates are refused for now: ${error.message}. Retrying…`);
        return Math.max(this.backoff(), Number.isFinite(asked) ? asked : 0);
      }
      this.stats.connects += 1;
      this.handlers.onOpen();
      await this.read(response.body);
      if (this.stopped) return null;
      this.handlers.onDown("The live updates stopped: reconnecting…");
      return this.backoff();
    }

    async read(body) {
      const parser = new SseParser((event) => {
        if (event.event !== "snapshot") return; // types this page does not know
        let snapshot;
        try {
          snapshot = JSON.parse(event.data);
        } catch (_) {
          return;
        }
        this.nextRetryMs = FIRST_RETRY_MS; // a working stream: the backoff starts over
        this.stats.snapshots += 1;
        this.handlers.onSnapshot(snapshot);
      });
      const reader = body.pipeThrough(new TextDecoderStream()).getReader();
      let silence = setTimeout(() => this.controller.abort(), SILENCE_MS);
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          clearTimeout(silence);
          silence = setTimeout(() => this.controller.abort(), SILENCE_MS);
          parser.push(value);
        }
      } catch (_) {
        // aborted, or the connection broke: the caller reconnects
      } finally {
        clearTimeout(silence);
      }
    }
  }

  ns.SseParser = SseParser;
  ns.EventStream = EventStream;
})();
