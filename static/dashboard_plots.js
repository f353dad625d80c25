// Small live plots of the last 5 minutes, drawn by uPlot (vendored in static/vendor/uplot/: a
// canvas plot of ~50 KB, fast at redrawing a series a point longer each second). A plot off screen
// is not redrawn until it scrolls into view, so 50 sessions' plots cost only what shows.
"use strict";

(() => {
  const ns = (window.facefuseDashboard ||= {});
  const HEIGHT = 80;
  const FONT = "10px system-ui, sans-serif";

  const plots = new Map(); // container -> plot, for the observers below
  const onScreen = new IntersectionObserver((changes) => {
    for (const change of changes) {
      const plot = plots.get(change.target);
      if (!plot) continue;
      plot.visible = change.isIntersecting;
      if (plot.visible && plot.pending) plot.draw();
    }
  });
  const onResize = new ResizeObserver((changes) => {
    for (const change of changes) {
      const plot = plots.get(change.target);
      const width = Math.floor(change.contentRect.width);
      if (plot && width > 0 && width !== plot.width) {
        plot.width = width;
        plot.chart.setSize({ width, height: plot.height });
      }
    }
  });

  // One line of labels: uPlot's default time axis adds the date on a second line.
  const clock = (u, ticks) => ticks.map((t) => new Date(t * 1000).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit" }));

  // lines: [{label, stroke}], one per value column of the Series that update() is given. A small
  // plot (a session card's) has no time labels: its caption says it is the last 5 minutes.
  class LivePlot {
    constructor(container, lines, { height = HEIGHT, minTop = 1, timeLabels = false } = {}) {
      this.container = container;
      this.height = height;
      this.width = Math.max(120, Math.floor(container.clientWidth) || 160);
      this.visible = true;
      this.pending = false;
      this.series = null;
      const options = {
        width: this.width,
        height,
        legend: { show: false },
        cursor: { show: false },
        scales: {
          x: { time: true, range: (u, min, max) => [max - ns.WINDOW_S, max] },
          y: { range: (u, min, max) => [0, Math.max(minTop, (max || 0) * 1.15)] },
        },
        axes: [
          timeLabels
            ? { font: FONT, size: 20, space: 60, values: clock, stroke: "#56606c", grid: { stroke: "#eceff2" }, ticks: { show: false } }
            : { size: 4, values: () => [], grid: { stroke: "#eceff2" }, ticks: { show: false } },
          { font: FONT, size: 34, space: 20, stroke: "#56606c", grid: { stroke: "#eceff2" }, ticks: { show: false } },
        ],
        series: [{}, ...lines.map((line) => ({ label: line.label, stroke: line.stroke, width: 1.5, points: { show: false } }))],
      };
      this.chart = new uPlot(options, [[], ...lines.map(() => [])], container);
      plots.set(container, this);
      onScreen.observe(container);
      onResize.observe(container);
    }

    update(series) {
      this.series = series;
      this.pending = true;
      if (this.visible) this.draw();
    }

    draw() {
      this.pending = false;
      if (this.series) this.chart.setData(this.series.columns);
    }

    destroy() {
      onScreen.unobserve(this.container);
      onResize.unobserve(this.container);
      plots.delete(this.container);
      this.chart.destroy();
    }
  }

  ns.LivePlot = LivePlot;
})();
