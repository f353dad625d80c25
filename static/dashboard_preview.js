// A small muted live preview of a published stream: a video-only WHEP viewer of /whep/{stream}
// with the signed-in key (which plays the account's own streams). Offer making is shared with the
// watch page (webrtc_offer.js). Each preview costs the server a viewer's encoder, so the page
// opens a few at most and closes each (DELETE, not a timeout) when its stream ends or the page goes.
// The ICE servers a WHEP answer names in its Link headers (whep_links.js) are used from the next
// connection on, any preview's: the first offer goes out before the page knows them.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});
  const ICE_GATHERING_TIMEOUT_MS = 3000;
  const RETRY_MS = 5000; // not published yet, or the connection dropped: look again after this
  let iceServers = []; // the server's STUN/TURN servers, from its last WHEP answer
  ns.previewIceServers = () => iceServers;

  class Preview {
    constructor(video, stream) {
      this.video = video;
      this.stream = stream;
      this.pc = null;
      this.viewerUrl = null;
      this.retryTimer = null;
      this.stopped = false;
      this.state = "connecting"; // connecting | playing | waiting | stopped
    }

    start() {
      this.connect();
      return this;
    }

    async connect() {
      this.retryTimer = null;
      if (this.stopped) return;
      this.close();
      const pc = new RTCPeerConnection({ iceServers });
      this.pc = pc;
      window.facefuseOffer.preferVp8(pc.addTransceiver("video", { direction: "recvonly" }), "receive");
      pc.addEventListener("track", (event) => {
        if (this.pc !== pc) return;
        this.video.srcObject = new MediaStream([event.track]);
        this.video.hidden = false;
        this.video.play().catch(() => {}); // muted: autoplay is allowed
        this.state = "playing";
      });
      pc.addEventListener("connectionstatechange", () => {
        if (this.pc === pc && ["failed", "closed"].includes(pc.connectionState)) this.later();
      });
      try {
        await pc.setLocalDescription(await pc.createOffer());
        await window.facefuseOffer.waitForIceGathering(pc, ICE_GATHERING_TIMEOUT_MS);
        if (this.pc !== pc) return;
        const post = (url) =>
          fetch(url, {
            method: "POST",
            headers: ns.api.headers({ "Content-Type": "application/sdp" }),
            body: pc.localDescription.sdp,
          });
        let response = await post(`/whep/${encodeURIComponent(this.stream)}`);
        // A stream published on another node: its 307 is followed (a CORS request there) without the
        // key, which the browser drops on the way to another origin; that node's 401 is asked again with it.
        if (response.status === 401 && response.redirected && ns.api.headers().Authorization) {
          response = await post(response.url);
        }
        // the viewer's resource is on the node that answered
        const location = response.headers.get("Location");
        const viewerUrl = location ? new URL(location, response.url).href : null;
        if (this.pc !== pc || this.stopped) {
          if (response.status === 201) this.deleteViewer(viewerUrl);
          return;
        }
        if (response.status !== 201) {
          this.later();
          return;
        }
        this.viewerUrl = viewerUrl;
        iceServers = window.facefuseLinks.iceServersFrom(response.headers.get("Link"));
        await pc.setRemoteDescription({ type: "answer", sdp: await response.text() });
      } catch (_) {
        if (this.pc === pc) this.later();
      }
    }

    later() {
      this.close();
      if (this.stopped || this.retryTimer) return;
      this.state = "waiting";
      this.retryTimer = setTimeout(() => this.connect(), RETRY_MS);
    }

    deleteViewer(url, keepalive = false) {
      if (url) fetch(url, { method: "DELETE", headers: ns.api.headers(), keepalive }).catch(() => {});
    }

    close(keepalive = false) {
      if (this.pc) this.pc.close();
      this.pc = null;
      this.deleteViewer(this.viewerUrl, keepalive);
      this.viewerUrl = null;
      this.video.srcObject = null;
      this.video.hidden = true;
    }

    stop(keepalive = false) {
      this.stopped = true;
      this.state = "stopped";
      clearTimeout(this.retryTimer);
      this.close(keepalive);
    }
  }

  ns.Preview = Preview;
})();
