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

  // Series of one panel: {key: {title, yLabel, lines: {label: {t, v}}}}.
  function group(series) {
    const panels = {};
    series.forEach((s) => {
      const dot = s.metric.indexOf(".");
      const entity = dot > 0 ? s.metric.slice(0, dot) : s.source;
      const column = dot > 0 ? s.metric.slice(dot + 1) : s.metric;
      if (CORE.test(entity)) return;
      const latency = s.source === "requests";
      // Latency: one panel per node, one line per metric; telemetry: one panel per source and column.
      const key = latency ? `latency · ${entity}` : `${s.source} · ${column}`;
      const panel = (panels[key] = panels[key] || { latency: latency, title: latency ? `${entity} · latency` : key, lines: {} });
      panel.lines[latency ? column : entity] = s;
    });
    return panels;
  }

  function draw(panels) {
    Object.keys(panels).sort().forEach((key) => {
      const p = panels[key];
      const container = document.getElementById(p.latency ? "live-latency" : "live-telemetry");
      const empty = document.getElementById(p.latency ? "no-live-latency" : "no-live-telemetry");
      if (empty) empty.remove();
      const labels = Object.keys(p.lines).sort();
      const datasets = labels.map((label, j) => ({
        label: label, data: CB.points(p.lines[label].t, p.lines[label].v), borderColor: CB.color(j), backgroundColor: CB.color(j),
        borderWidth: 1, showLine: !p.latency,
      }));
      let chart = charts[key];
      if (!chart) {
        const id = `live-${Object.keys(charts).length}`;
        const canvas = CB.panel(container, p.title, id);
        canvas.dataset.panel = key;
        chart = charts[key] = CB.timeChart(canvas, datasets, { xMin: 0, yLabel: p.latency ? "latency (s)" : "", pointRadius: p.latency ? 2 : 0 });
      } else {
        chart.data.datasets = datasets;
        chart.update("none");
      }
      chart.canvas.dataset.points = String(datasets.reduce((n, d) => n + d.data.length, 0));
    });
  }

  function poll() {
    fetch(`${section.dataset.telemetryUrl}?points=500`, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then((data) => {
        draw(group(data.series || []));
        polls += 1;
        section.dataset.livePolls = String(polls);
      })
      .catch(() => {})
      .finally(() => window.setTimeout(poll, POLL_MS));
  }
  poll();
})();
