// Face thumbnails: /api/faces/{id}/thumbnail needs the Authorization header, which an <img> cannot
// send, so each is fetched once and shown through an object URL, released when the face is gone.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});
  const RETRY_MS = 30000; // a thumbnail that failed (an older face, a blip) is asked for again after this

  class Thumbnails {
    constructor() {
      this.sources = new Map(); // face id -> its thumbnail_url (none where the chain found no face to crop)
      this.urls = new Map(); // face id -> object URL
      this.loading = new Map(); // face id -> promise
      this.failedAt = new Map(); // face id -> when it last failed
    }

    // Shows face `faceId`'s thumbnail in `img` (an empty picture for none), now or once fetched.
    show(img, faceId) {
      const wanted = faceId || "";
      if (img.dataset.face === wanted && (img.getAttribute("src") || !wanted)) return;
      img.dataset.face = wanted;
      const url = wanted ? this.urls.get(wanted) : null;
      if (url) {
        img.src = url;
        return;
      }
      img.removeAttribute("src");
      if (!wanted || !this.sources.has(wanted)) return;
      this.load(wanted).then((loaded) => {
        if (loaded && img.dataset.face === wanted) img.src = loaded;
      });
    }

    load(faceId) {
      if (this.loading.has(faceId)) return this.loading.get(faceId);
      if (Date.now() - (this.failedAt.get(faceId) || 0) < RETRY_MS) return Promise.resolve(null);
      const promise = fetch(this.sources.get(faceId), { headers: ns.api.headers() })
        .then((response) => (response.ok ? response.blob() : null))
        .catch(() => null)
        .then((blob) => {
          this.loading.delete(faceId);
          if (!blob) {
            this.failedAt.set(faceId, Date.now());
            return null;
          }
          const url = URL.createObjectURL(blob);
          this.urls.set(faceId, url);
          return url;
        });
      this.loading.set(faceId, promise);
      return promise;
    }

    // The library now ([{id, thumbnail_url}]): every other face's thumbnail is released.
    setLibrary(faces) {
      this.sources = new Map(faces.filter((face) => face.thumbnail_url).map((face) => [face.id, face.thumbnail_url]));
      const keep = new Set(faces.map((face) => face.id));
      for (const [faceId, url] of this.urls) {
        if (keep.has(faceId)) continue;
        URL.revokeObjectURL(url);
        this.urls.delete(faceId);
      }
      for (const faceId of this.failedAt.keys()) if (!keep.has(faceId)) this.failedAt.delete(faceId);
    }

    clear() {
      this.setLibrary([]);
    }
  }

  ns.Thumbnails = Thumbnails;
})();
