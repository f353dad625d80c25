// A still of a session not published under a stream name (no WHEP stream to preview): its newest
// processed frame, GET /api/sessions/{id}/still, once a second while its card is on screen. The
// request needs the key, which an <img> cannot send: each still is fetched and shown from an object
// URL, and the one before it revoked, so a page left open holds one picture per card.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});
  const REFRESH_MS = 1000;

  class Still {
    constructor(img, card, sessionId) {
      this.img = img;
      this.sessionId = sessionId;
      this.url = null;
      this.timer = null;
      this.visible = false;
      this.stopped = false;
      this.onScreen = new IntersectionObserver((changes) => {
        this.visible = changes[changes.length - 1].isIntersecting;
        if (this.visible && !this.timer) this.refresh();
      });
      this.onScreen.observe(card);
    }

    async refresh() {
      this.timer = null;
      if (this.stopped || !this.visible) return;
      try {
        const response = await fetch(`/api/sessions/${encodeURIComponent(this.sessionId)}/still`, {
          headers: ns.api.headers(),
          cache: "no-store",
        });
        // 404 no_frame_yet: nothing sent on yet; the next second asks again
        if (response.ok) this.show(await response.blob());
      } catch (_) {
        // a network blip: the next second asks again
      }
      if (!this.stopped) this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
    }

    show(blob) {
      if (this.stopped) return;
      const previous = this.url;
      this.url = URL.createObjectURL(blob);
      this.img.src = this.url;
      this.img.hidden = false;
      if (previous) URL.revokeObjectURL(previous);
    }

    stop() {
      this.stopped = true;
      clearTimeout(this.timer);
      this.onScreen.disconnect();
      if (this.url) URL.revokeObjectURL(this.url);
      this.url = null;
      this.img.removeAttribute("src");
      this.img.hidden = true;
    }
  }

  ns.Still = Still;
})();
