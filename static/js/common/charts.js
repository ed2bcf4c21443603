/* Shared Chart.js helpers for the run and compare pages (Chart.js is served from node_modules). */
"use strict";
window.CB = (function () {
  const palette = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];

  function color(i) { return palette[i % palette.length]; }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    if (text) node.textContent = text;
    return node;
  }

  // A titled canvas inside a grid container; returns the canvas.
  function panel(container, title, id) {
    const box = el("div", { class: "chart" });
    box.appendChild(el("h3", {}, title));
    const canvas = el("canvas", { id: id, "aria-label": title });
    box.appendChild(canvas);
    container.appendChild(box);
    return canvas;
  }

  function points(t, v) { return t.map((x, i) => ({ x: x, y: v[i] })); }

  // Line chart on a linear time axis (seconds since the run started); animation off so that the
  // chart is drawn at once (and the browser test sees pixels).
  function timeChart(canvas, datasets, opts) {
    opts = opts || {};
    return new Chart(canvas, {
      type: "line",
      data: { datasets: datasets },
      options: {
        animation: false, parsing: false, normalized: true, responsive: true, maintainAspectRatio: false,
        elements: { point: { radius: opts.pointRadius || 0 } },
        plugins: { legend: { display: datasets.length > 1 }, decimation: { enabled: false } },
        scales: {
          x: { type: "linear", min: opts.xMin, max: opts.xMax, title: { display: true, text: opts.xLabel || "time since run start (s)" } },
          y: { title: { display: !!opts.yLabel, text: opts.yLabel || "" } },
        },
      },
    });
  }

  return { color: color, el: el, panel: panel, points: points, timeChart: timeChart };
})();
