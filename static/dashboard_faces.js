// The face library: each face's thumbnail, id, face size and warnings; upload a photo, delete a
// face (the server refuses, saying why, while a live session uses it).
"use strict";

(() => {
  const ns = window.facefuseDashboard;
  const { format, setText, confirmClick } = ns;
  const byId = (id) => document.getElementById(id);

  class FaceLibrary {
    constructor(thumbnails) {
      this.thumbnails = thumbnails;
      this.tiles = new ns.KeyedList(byId("face-tiles"), {
        create: (key) => this.createFaceTile(key),
        update: (entry, face) => this.updateFaceTile(entry, face),
      });
      byId("face-upload").addEventListener("change", (event) => this.uploadFace(event.target));
    }

    show(faces) {
      this.tiles.sync(faces, (face) => face.id);
      setText(byId("faces-count"), `(${faces.length})`);
    }

    createFaceTile(key) {
      const node = document.createElement("figure");
      node.className = "tile";
      node.dataset.face = key;
      const img = document.createElement("img");
      img.className = "thumb large";
      img.alt = `face ${key}`;
      img.width = 96;
      img.height = 96;
      const caption = document.createElement("figcaption");
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "quiet danger";
      remove.textContent = "Delete";
      confirmClick(remove, "Really delete?", () => this.deleteFace(key, remove));
      node.append(img, caption, remove);
      return { node, img, caption };
    }

    updateFaceTile(entry, face) {
      this.thumbnails.show(entry.img, face.id);
      const warnings = face.warnings || [];
      const size = format.known(face.face_size) ? `, face ${face.face_size} px` : "";
      setText(entry.caption, `${format.shortId(face.id)}${size}${warnings.length ? `, ${warnings.length} warning(s)` : ""}`);
      entry.caption.title = warnings.map((w) => (typeof w === "string" ? w : w.message || w.code)).join("\n");
    }

    async deleteFace(faceId, button) {
      button.disabled = true;
      try {
        await ns.api.request("DELETE", `/api/faces/${encodeURIComponent(faceId)}`);
        setText(byId("faces-message"), `Face ${format.shortId(faceId)} deleted.`);
        this.tiles.remove(faceId);
      } catch (error) {
        setText(byId("faces-message"), ns.api.sentence(`delete face ${format.shortId(faceId)}`, error));
      } finally {
        button.disabled = false;
      }
    }

    async uploadFace(input) {
      const file = input.files && input.files[0];
      if (!file) return;
      const message = byId("faces-message");
      setText(message, `Uploading ${file.name}…`);
      try {
        const face = await ns.api.request("POST", "/api/faces", file);
        const warnings = (face.warnings || []).map((w) => (typeof w === "string" ? w : w.message || w.code));
        setText(message, `Face ${format.shortId(face.id)} added.${warnings.length ? ` Warnings: ${warnings.join("; ")}` : ""}`);
      } catch (error) {
        setText(message, ns.api.sentence(`add ${file.name}`, error));
      } finally {
        input.value = "";
      }
    }

    reset() {
      this.tiles.clear();
      setText(byId("faces-message"), "");
    }
  }

  ns.FaceLibrary = FaceLibrary;
})();
