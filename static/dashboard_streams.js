// The streamer's streams and OBS: each stream name published or holding view tokens (live or
// not, its session, viewers, view tokens), and the URLs OBS wants: the WHIP server (with the face
// chosen) and a watch URL with a fresh view token for a Browser Source.
"use strict";

(() => {
  const ns = window.facefuseDashboard;
  const { format, setText, setData, setOptions, copyText } = ns;
  const byId = (id) => document.getElementById(id);

  class StreamsPanel {
    constructor() {
      this.rows = new ns.KeyedList(byId("stream-rows"), {
        create: (key) => this.createStreamRow(key),
        update: (entry, stream) => this.updateStreamRow(entry, stream),
      });
      byId("copy-whip").addEventListener("click", () => this.copyUrl("whip"));
      byId("copy-watch").addEventListener("click", () => this.copyUrl("watch"));
      byId("obs-form").addEventListener("submit", (event) => event.preventDefault());
    }

    show(streams, faces) {
      this.rows.sync(streams, (stream) => stream.stream, { ordered: true });
      setOptions(byId("obs-face"), [["", "none (no swap)"], ...faces.map((face) => [face.id, format.faceLabel(face)])]);
    }

    createStreamRow(key) {
      const node = document.createElement("tr");
      node.dataset.stream = key;
      const cells = ["stream", "live", "session", "viewers", "tokens"].map((name) => {
        const cell = node.insertCell();
        cell.dataset.field = name;
        if (name === "viewers" || name === "tokens") cell.className = "num";
        return cell;
      });
      setText(cells[0], key);
      const use = document.createElement("button");
      use.type = "button";
      use.className = "quiet";
      use.textContent = "OBS URLs";
      use.addEventListener("click", () => {
        byId("obs-stream").value = key;
        byId("obs-stream").focus();
      });
      node.insertCell().appendChild(use);
      return { node, cells };
    }

    updateStreamRow(entry, stream) {
      const [, live, session, viewers, tokens] = entry.cells;
      setText(live, stream.live ? "live" : "not live");
      setData(entry.node, "live", stream.live);
      setText(session, stream.session_id ? format.shortId(stream.session_id) : format.DASH);
      setText(viewers, (stream.viewers || []).length);
      setText(tokens, stream.view_tokens);
    }

    async copyUrl(kind) {
      const name = byId("obs-stream").value.trim();
      const out = byId("obs-url");
      out.hidden = false;
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) {
        setText(out, "A stream name is 1-64 letters, digits, - or _.");
        out.dataset.kind = "error";
        return;
      }
      let url;
      if (kind === "whip") {
        const face = byId("obs-face").value;
        url = `${location.origin}/whip/${encodeURIComponent(name)}${face ? `?face_id=${encodeURIComponent(face)}` : ""}`;
      } else {
        try {
          const token = await ns.api.request("POST", `/api/streams/${encodeURIComponent(name)}/view-tokens`);
          url = `${location.origin}${token.watch_url}`;
        } catch (error) {
          setText(out, ns.api.sentence("make a view token", error));
          out.dataset.kind = "error";
          return;
        }
      }
      const copied = await copyText(url);
      out.dataset.kind = "url";
      out.dataset.url = url;
      setText(out, `${url}${copied ? "  (copied)" : "  (select it and copy)"}`);
    }

    reset() {
      this.rows.clear();
      byId("obs-url").hidden = true;
    }
  }

  ns.StreamsPanel = StreamsPanel;
})();
