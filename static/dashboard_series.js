// Time series for the plots: the last 5 minutes of points per series and no more, and series of
// ended sessions forgotten after a while, so a page left open for hours holds flat memory.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});
  const WINDOW_S = 300;

  // Columnar, as uPlot takes it: [times, values...]; points older than the window are dropped.
  class Series {
    constructor(width) {
      this.columns = Array.from({ length: width + 1 }, () => []);
    }

    push(t, ...values) {
      const [times] = this.columns;
      if (times.length && t <= times[times.length - 1]) return; // a repeated snapshot time
      times.push(t);
      values.forEach((value, index) => this.columns[index + 1].push(ns.format.known(value) ? value : null));
      let old = 0;
      while (old < times.length && times[old] < t - WINDOW_S) old += 1;
      if (old) for (const column of this.columns) column.splice(0, old);
    }

    get length() {
      return this.columns[0].length;
    }
  }

  // Series by key (a session id, "account", "node"), each dropped `forgetAfterS` after its last point.
  class SeriesStore {
    constructor(forgetAfterS = 120) {
      this.forgetAfterS = forgetAfterS;
      this.series = new Map();
    }

    push(key, t, ...values) {
      let series = this.series.get(key);
      if (!series) {
        series = new Series(values.length);
        this.series.set(key, series);
      }
      series.push(t, ...values);
      return series;
    }

    get(key) {
      return this.series.get(key);
    }

    forgetStale(now) {
      for (const [key, series] of this.series) {
        const times = series.columns[0];
        if (!times.length || times[times.length - 1] < now - this.forgetAfterS) this.series.delete(key);
      }
    }

    clear() {
      this.series.clear();
    }
  }

  ns.WINDOW_S = WINDOW_S;
  ns.Series = Series;
  ns.SeriesStore = SeriesStore;
})();
