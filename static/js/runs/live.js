/* Run page while the run is queued or running: latency and telemetry charts that grow as it goes.
   Polls the telemetry API every 2 s: the source "requests" holds each served request's latencies
   (metric "<node>.<metric>", at the request's end), the other sources the monitor's samples. The
   page reloads itself once the run finished (detail.js), showing the result's charts instead. */
"use strict";
(function () {
  const section = document.getElementById("progress-section");
  if (!section || section.dataset.finished !== "0") return;
  const POLL_MS = 2000;
  const CORE = /^cpu\d+$/; // one panel per logical CPU would drown the page (the API still has them)
  const charts = {};
  let polls = 0;
  const nodesData = document.getElementById("live-nodes");
  // Each node's SLO thresholds, drawn as a dashed line on its latency panel.
  const slos = {};
  (nodesData ? JSON.parse(nodesData.textContent) : []).forEach((n) => { slos[n.name] = n.slo || {}; });
  // Series of one panel: {key: {title, yLabel, lines: {label: {t, v}}}}.
  function group(series) {
    const panels = {};
    series.forEach((s) => {
      const dot = s.metric.indexOf(".");
      const entity = dot > 0 ? s.metric.slice(0, dot) : s.source;
      const column = dot > 0 ? s.metric.slice(dot + 1) : s.metric;
      if (CORE.test(entity)) return;
      const latency = s.source === "requests";
      // Latency: one panel per node, one line per metric; telemetry: the result page's panels (one per
      // source and column, the applications' CPU % apart from the machine's) with its axes.
      const key = latency ? `latency · ${entity}` : CB.telemetryKey(s.source, entity, column);
      const panel = (panels[key] = panels[key] || {
        latency: latency, node: entity, title: latency ? `${entity} · latency` : key, lines: {}, column: column,
        axis: latency ? { title: "latency (s)", tick: (v) => v } : CB.axisOf(column, entity.startsWith("app:")),
      });
      panel.lines[latency ? column : entity] = s;
    });
    return panels;
  }

  // A telemetry panel whose every value so far is one constant is listed, not drawn (as on the result
  // page: "swap used: 0 B"), until a value differs; a panel once drawn stays drawn.
  const constantList = document.getElementById("live-constant");
  function constantSoFar(key, p) {
    if (p.latency || charts[key]) return false;
    const values = Object.values(p.lines).flatMap((s) => s.v);
    const lo = Math.min(...values);
    let item = constantList.querySelector(`li[data-panel="${CSS.escape(key)}"]`);
    if (values.length && lo === Math.max(...values)) {
      if (!item) item = constantList.appendChild(CB.el("li", { "data-panel": key }, ""));
      const none = p.column === "swap_used_bytes" && lo === 0 ? ": no swap used" : "";
      item.textContent = `${key}: ${(p.axis.text || p.axis.tick)(lo)} so far${none}`;
      return true;
    }
    if (item) item.remove();
    return !values.length;
  }

  function draw(panels) {
    // One time axis for every panel: up to the latest sample of any series.
    let tMax = 0;
    Object.values(panels).forEach((p) => Object.values(p.lines).forEach((s) => { if (s.t.length) tMax = Math.max(tMax, s.t[s.t.length - 1]); }));
    tMax = Math.ceil(tMax);
    Object.keys(panels).sort().forEach((key) => {
      const p = panels[key];
      const container = document.getElementById(p.latency ? "live-latency" : "live-telemetry");
      const empty = document.getElementById(p.latency ? "no-live-latency" : "no-live-telemetry");
      if (empty) empty.remove();
      if (constantSoFar(key, p)) return;
      const labels = Object.keys(p.lines).sort();
      const datasets = labels.map((label, j) => ({
        label: label, data: CB.points(p.lines[label].t, p.lines[label].v), borderColor: CB.color(j), backgroundColor: CB.color(j),
        borderWidth: 1, showLine: !p.latency,
      }));
      const nodeSlos = p.latency ? slos[p.node] || {} : {};
      labels.forEach((label) => {
        if (nodeSlos[label] !== undefined) {
          datasets.push({ label: `SLO ${label} ${nodeSlos[label]} s`, data: [{ x: 0, y: nodeSlos[label] }, { x: tMax, y: nodeSlos[label] }], borderColor: "#dc2626", borderDash: [6, 4], pointRadius: 0, slo: true });
        }
      });
      let chart = charts[key];
      if (!chart) {
        const id = `live-${Object.keys(charts).length}`;
        const canvas = CB.panel(container, p.title, id);
        canvas.dataset.panel = key;
        chart = charts[key] = CB.timeChart(canvas, datasets, { xMin: 0, xMax: tMax, yLabel: p.axis.title, pointRadius: p.latency ? 2 : 0 });
        chart.options.scales.y.ticks = { callback: p.axis.tick };
        // From zero: a flat series (no swap in use) reads as 0, not as a band around it.
        chart.options.scales.y.beginAtZero = true;
        if (p.axis.max !== undefined) chart.options.scales.y.suggestedMax = p.axis.max;
      } else {
        chart.data.datasets = datasets;
        chart.options.scales.x.max = tMax;
      }
      if (p.column.endsWith("_bytes")) {
        // Round steps in the unit the labels use; a series flat at zero (no swap used) gets a 5 MiB axis.
        const values = datasets.flatMap((d) => d.data.map((pt) => pt.y));
        const lo = Math.min(0, ...values);
        const hi = Math.max(lo + 5 * 1024 ** 2, ...values);
        chart.options.scales.y.suggestedMax = hi;
        chart.options.scales.y.ticks.stepSize = CB.byteStep(lo, hi);
      }
      chart.update("none");
      chart.canvas.dataset.points = String(datasets.filter((d) => !d.slo).reduce((n, d) => n + d.data.length, 0));
    });
  }

  function poll() {
    fetch(`${section.dataset.telemetryUrl}?points=500`, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then((data) => {
        draw(group(data.series || []));
        document.getElementById("live-constant-box").hidden = !constantList.children.length;
        polls += 1;
        section.dataset.livePolls = String(polls);
      })
      .catch(() => {})
      .finally(() => window.setTimeout(poll, POLL_MS));
  }
  poll();
})();
