/* Compare page: overlaid latency CDFs per application and telemetry overlays, one colour per column. */
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("compare-data").textContent);
  const cdfs = document.getElementById("cdf-charts");
  const apps = [...new Set(data.columns.flatMap((c) => Object.keys(c.applications)))].sort();
  apps.forEach((name, i) => {
    const datasets = data.columns
      .map((c, j) => ({ c: c.applications[name], j: j, label: c.label }))
      .filter((d) => d.c && d.c.cdf.x.length)
      .map((d) => ({ label: d.label, data: CB.points(d.c.cdf.x, d.c.cdf.p), borderColor: CB.color(d.j), stepped: true }));
    if (!datasets.length) return;
    const metric = data.columns.map((c) => c.applications[name]).find(Boolean).metric;
    const canvas = CB.panel(cdfs, `${name} · ${metric} CDF`, `cdf-${i}`);
    CB.timeChart(canvas, datasets, { xLabel: `${metric} (s)`, yLabel: "fraction of requests" });
  });

  const telemetry = document.getElementById("telemetry-charts");
  const series = {};
  Object.entries(data.telemetry).forEach(([label, list], j) => {
    list.forEach((s) => {
      const key = `${s.source} · ${s.metric}`;
      (series[key] = series[key] || []).push({ label: label, data: CB.points(s.t, s.v), borderColor: CB.color(j), borderWidth: 1 });
    });
  });
  const keys = Object.keys(series).sort();
  if (keys.length) document.getElementById("no-telemetry").remove();
  keys.forEach((key, i) => CB.timeChart(CB.panel(telemetry, key, `telemetry-${i}`), series[key], { xMin: 0 }));
})();
