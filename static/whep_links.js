// The ICE servers a WHEP (or WHIP) answer names in RFC 9725's Link headers:
// <url>; rel="ice-server"; username="..."; credential="...", as RTCConfiguration.iceServers takes
// them. Shared by the watch page and the dashboard's previews.
"use strict";

(() => {
  const LINK = /<([^>]*)>((?:\s*;\s*[\w-]+\s*=\s*(?:"(?:[^"\\]|\\.)*"|[^;,]*))*)/g;
  const LINK_PARAM = /;\s*([\w-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;,]*))/g;

  function iceServersFrom(header) {
    const servers = [];
    for (const [, url, params] of (header || "").matchAll(LINK)) {
      const found = {};
      for (const [, name, quoted, bare] of params.matchAll(LINK_PARAM)) {
        found[name.toLowerCase()] = quoted !== undefined ? quoted.replace(/\\(.)/g, "$1") : bare.trim();
      }
      if (found.rel !== "ice-server") continue;
      const server = { urls: url };
      if (found.username !== undefined) Object.assign(server, { username: found.username, credential: found.credential || "" });
      servers.push(server);
    }
    return servers;
  }

  window.facefuseLinks = { iceServersFrom };
})();
