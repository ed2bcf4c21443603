/* Compare page: overlaid latency CDFs per application and telemetry overlays, one colour per column. */
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("compare-data").textContent);
  const cdfs = document.getElementById("cdf-charts");
  const apps = [...new Set(data.columns.flatMap((c) => Object.keys(c.applications)))].sort();
  let n = 0;
  // One chart per application and latency metric (TTFT, TPOT, e2e ...), one line per column.
  apps.forEach((name) => {
    const metrics = [...new Set(data.columns.flatMap((c) => Object.keys((c.applications[name] || {}).cdfs || {})))];
    metrics.forEach((metric) => {
      const datasets = data.columns
        .map((c, j) => ({ cdf: ((c.applications[name] || {}).cdfs || {})[metric], j: j, label: c.label }))
        .filter((d) => d.cdf && d.cdf.x.length)
        .map((d) => ({ label: d.label, data: CB.points(d.cdf.x, d.cdf.p), borderColor: CB.color(d.j), stepped: true }));
      if (!datasets.length) return;
      const canvas = CB.panel(cdfs, `${name} · ${metric} CDF`, `cdf-${n++}`);
      CB.timeChart(canvas, datasets, { xLabel: `${metric} (s)`, yLabel: "fraction of requests" });
    });
  });

  // The same panels as the result page (charts.js), one colour per compared column.
  const telemetry = document.getElementById("telemetry-charts");
  const series = Object.entries(data.telemetry).flatMap(([label, list], j) =>
    list.map((s) => ({ ...s, label: label, color: CB.color(j) })));
  const constants = document.getElementById("telemetry-constant");
  if (CB.telemetryPanels(telemetry, constants, series, { xMin: 0, byEntity: true })) document.getElementById("no-telemetry").remove();
  document.getElementById("telemetry-constant-box").hidden = !constants.children.length;
})();
