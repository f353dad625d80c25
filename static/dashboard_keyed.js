// Keyed rows: one DOM node per key (a session, a face, an account), made once and then updated in
// place from each snapshot, so a list of 50 live sessions redraws no more than the text that
// changed. A key that leaves the snapshot is marked ended, then removed after `keepEndedMs`.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});

  class KeyedList {
    // create(key, item) -> entry ({node, ...whatever update needs}); update(entry, item);
    // ended(entry) when the key left; destroy(entry) when its node goes.
    constructor(container, { create, update, ended = () => {}, destroy = () => {}, keepEndedMs = 0 }) {
      this.container = container;
      this.create = create;
      this.update = update;
      this.ended = ended;
      this.destroy = destroy;
      this.keepEndedMs = keepEndedMs;
      this.entries = new Map();
    }

    get size() {
      return this.entries.size;
    }

    get(key) {
      return this.entries.get(key);
    }

    // items: this snapshot's list; ordered: keep the nodes in the list's order (moved only when
    // the order changed), else new keys are appended and the others stay where they are. now (ms):
    // the snapshot's server time, the clock the plots' 5-minute window keeps too.
    sync(items, keyOf, { ordered = false, now = Date.now() } = {}) {
      const seen = new Set();
      for (const item of items) {
        const key = keyOf(item);
        seen.add(key);
        let entry = this.entries.get(key);
        if (!entry) {
          entry = this.create(key, item);
          entry.key = key;
          this.entries.set(key, entry);
          this.container.appendChild(entry.node);
        }
        entry.endedAt = null;
        this.update(entry, item);
      }
      for (const [key, entry] of this.entries) {
        if (seen.has(key)) continue;
        if (entry.endedAt === null || entry.endedAt === undefined) {
          entry.endedAt = now;
          this.ended(entry);
        }
        if (now - entry.endedAt >= this.keepEndedMs) this.remove(key);
      }
      if (ordered) this.order(items.map(keyOf));
    }

    order(keys) {
      const nodes = keys.map((key) => this.entries.get(key).node);
      const current = Array.from(this.container.children).filter((node) => nodes.includes(node));
      if (current.every((node, index) => node === nodes[index])) return;
      for (const node of nodes) this.container.appendChild(node); // moves; ended rows drift to the end
    }

    remove(key) {
      const entry = this.entries.get(key);
      if (!entry) return;
      this.entries.delete(key);
      entry.node.remove();
      this.destroy(entry);
    }

    clear() {
      for (const key of Array.from(this.entries.keys())) this.remove(key);
    }
  }

  // The elements of a cloned <template> by their data-field, once, for in-place updates.
  ns.fieldsOf = (node) => {
    const fields = {};
    for (const element of node.querySelectorAll("[data-field]")) fields[element.dataset.field] = element;
    return fields;
  };

  ns.KeyedList = KeyedList;
})();
