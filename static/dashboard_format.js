// The dashboard's figures in words and units a person reads at a glance, and the one way the page
// writes text into the DOM: only when it changed, so a snapshot a second causes no layout churn.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});
  const DASH = "–";
  // the reasons stream/metering.py's throttle() gives
  const THROTTLE_REASONS = {
    low_balance: "tokens running low",
    exhausted: "out of tokens",
    quota_store_unavailable: "the token store is not answering",
  };

  function known(value) {
    return value !== null && value !== undefined && !Number.isNaN(value);
  }

  ns.format = {
    DASH,
    known,

    number(value, digits = 1) {
      return known(value) ? Number(value).toFixed(digits) : DASH;
    },

    tokens(value) {
      if (!known(value)) return DASH;
      const digits = Math.abs(value) >= 1e5 ? 0 : 2; // cents show a balance falling second by second
      return `${Number(value).toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits })} tokens`;
    },

    rate(value) {
      return known(value) ? `${Number(value).toFixed(3)} tokens/s` : DASH;
    },

    ms(value) {
      if (!known(value)) return DASH;
      return value < 10 ? `${Number(value).toFixed(1)} ms` : `${Math.round(value)} ms`;
    },

    pair(a, b, unit = "") {
      return known(a) || known(b) ? `${ns.format.number(a, 0)} / ${ns.format.number(b, 0)}${unit}` : DASH;
    },

    bitrate(bps) {
      if (!known(bps)) return DASH;
      return bps >= 1e6 ? `${(bps / 1e6).toFixed(2)} Mbit/s` : `${Math.round(bps / 1e3)} kbit/s`;
    },

    bytes(value) {
      if (!known(value)) return DASH;
      const units = ["B", "KiB", "MiB", "GiB", "TiB"];
      let size = value;
      let unit = 0;
      while (size >= 1024 && unit < units.length - 1) {
        size /= 1024;
        unit += 1;
      }
      return `${size.toFixed(unit ? 1 : 0)} ${units[unit]}`;
    },

    percent(ratio) {
      return known(ratio) ? `${(ratio * 100).toFixed(ratio < 0.1 ? 1 : 0)} %` : DASH;
    },

    // "1 h 05 min", "4 min 10 s", "12 s": how long a balance lasts
    duration(seconds) {
      if (!known(seconds) || !Number.isFinite(seconds)) return DASH;
      const s = Math.max(0, Math.round(seconds));
      if (s >= 86400) return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
      if (s >= 3600) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
      if (s >= 60) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
      return `${s} s`;
    },

    time(unixSeconds) {
      if (!known(unixSeconds)) return DASH;
      return new Date(unixSeconds * 1000).toLocaleString("en-GB", { hour12: false });
    },

    // The meter's throttle as a person reads it: "slow: tokens running low"
    throttle(throttle) {
      if (!throttle || !throttle.level) return "none: full rate";
      const reason = THROTTLE_REASONS[throttle.reason] || (throttle.reason || "").replaceAll("_", " ");
      return reason ? `${throttle.level}: ${reason}` : throttle.level;
    },

    // a face as a <select> lists it: its short id and when it was uploaded
    faceLabel(face) {
      return `${ns.format.shortId(face.id)} (${new Date(face.created_at * 1000).toLocaleTimeString("en-GB")})`;
    },

    shortId(id) {
      return id ? String(id).slice(0, 8) : DASH;
    },
  };

  // Writes text only when it differs: unchanged figures touch nothing.
  ns.setText = (node, text) => {
    const value = String(text);
    if (node.textContent !== value) node.textContent = value;
  };

  ns.setData = (node, name, value) => {
    const text = String(value);
    if (node.dataset[name] !== text) node.dataset[name] = text;
  };
})();
