// What the publish and watch pages share in making their one-shot offer (no trickle): VP8 put
// first, and waiting for the ICE candidates to be gathered into the offer.
"use strict";

window.facefuseOffer = {
  // VP8 first, the others after it in the browser's order. `direction` says whose codecs:
  // "send" (the page's camera goes out) or "receive" (the page plays what comes in).
  preferVp8(transceiver, direction) {
    const side = direction === "send" ? window.RTCRtpSender : window.RTCRtpReceiver;
    if (!("setCodecPreferences" in transceiver) || !side || !side.getCapabilities) return;
    const codecs = side.getCapabilities("video").codecs;
    const vp8 = codecs.filter((codec) => codec.mimeType.toLowerCase() === "video/vp8");
    transceiver.setCodecPreferences([...vp8, ...codecs.filter((codec) => !vp8.includes(codec))]);
  },

  // Resolves when gathering is complete, or after timeoutMs with what was gathered by then.
  waitForIceGathering(pc, timeoutMs) {
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        pc.removeEventListener("icegatheringstatechange", onChange);
        resolve();
      };
      const onChange = () => pc.iceGatheringState === "complete" && done();
      const timer = setTimeout(done, timeoutMs);
      pc.addEventListener("icegatheringstatechange", onChange);
    });
  },
};
