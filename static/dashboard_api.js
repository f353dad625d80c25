// The dashboard's requests to the server's API: the signed-in key as a Bearer header (never in a
// URL), and errors turned into sentences that say what failed and what to do.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  const api = {
    key: "", // the API key or the admin key; empty on the loopback local account
    onUnauthorized: (message) => {}, // set by dashboard.js: an expired or revoked key signs out

    headers(extra = {}) {
      return api.key ? { ...extra, Authorization: `Bearer ${api.key}` } : extra;
    },

    // JSON in (a plain object, or a Blob sent as is), JSON out; throws ApiError.
    async request(method, path, body) {
      const init = { method, headers: api.headers(), cache: "no-store" };
      if (body instanceof Blob) {
        init.headers["Content-Type"] = body.type || "application/octet-stream";
        init.body = body;
      } else if (body !== undefined) {
        init.headers["Content-Type"] = "application/json";
        init.body = JSON.stringify(body);
      }
      let response;
      try {
        response = await fetch(path, init);
      } catch (_) {
        throw new ApiError(0, "unreachable", "the server cannot be reached: check the network, or whether it is running");
      }
      if (response.ok) return response.status === 204 ? null : response.json();
      const error = await api.errorOf(response);
      if (error.status === 401) api.onUnauthorized(error.message);
      throw error;
    },

    // The server's {"error": {"code", "message"}} as an ApiError (its messages say what to do).
    async errorOf(response) {
      let code = `http_${response.status}`;
      let message = `the server answered HTTP ${response.status}`;
      try {
        const body = await response.json();
        if (body && body.error) {
          code = body.error.code || code;
          message = body.error.message || message;
        }
      } catch (_) {
        // not JSON: the status says enough
      }
      return new ApiError(response.status, code, message);
    },

    // "Could not end the session: <why>"
    sentence(what, error) {
      return `Could not ${what}: ${error && error.message ? error.message : String(error)}.`.replace(/\.\.$/, ".");
    },
  };

  ns.ApiError = ApiError;
  ns.api = api;
})();
