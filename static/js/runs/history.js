/* History page: per application, SLO attainment and the p50/p99 of each key latency over the points
   (time or commit order), 95 % CIs as shaded bands where a point holds several runs, regressions as
   red triangles on the regressed metric's p50 line. Data: run_history in cbweb/runs/selectors.py. */
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("history-data").textContent);
  const container = document.getElementById("history-charts");
  const labels = data.points.map((p) => p.label);

  function figure(point, app, key) {
    const f = (point.applications[app] || {})[key];
    return f ? f : null;
  }

  // A line of one figure, and when any point has a CI a translucent band between its bounds.
  function withBand(app, key, label, color, scale, regressedAt) {
    const values = data.points.map((p) => { const f = figure(p, app, key); return f ? f.mean * scale : null; });
    const line = {
      label: label, data: values, borderColor: color, backgroundColor: color, spanGaps: true,
      pointRadius: values.map((_, i) => (regressedAt && regressedAt[i] ? 8 : 3)),
      pointStyle: values.map((_, i) => (regressedAt && regressedAt[i] ? "triangle" : "circle")),
      pointBackgroundColor: values.map((_, i) => (regressedAt && regressedAt[i] ? "#dc2626" : color)),
      pointBorderColor: values.map((_, i) => (regressedAt && regressedAt[i] ? "#dc2626" : color)),
    };
    const hasCi = data.points.some((p) => { const f = figure(p, app, key); return f && f.low !== null; });
    if (!hasCi) return [line];
    // The bounds are cut to the figure's range by the server (an attainment stays in 0-100 %).
    const bound = (side) => data.points.map((p) => {
      const f = figure(p, app, key);
      return f ? (f[side] === null ? f.mean : f[side]) * scale : null;
    });
    const band = { borderWidth: 0, pointRadius: 0, backgroundColor: color + "33", spanGaps: true };
    return [
      { ...band, label: `${label} 95 % CI low`, data: bound("low"), fill: false },
      { ...band, label: `${label} 95 % CI high`, data: bound("high"), fill: "-1" },
      line,
    ];
  }

  function chart(title, id, datasets, yLabel, yMax) {
    const canvas = CB.panel(container, title, id);
    return new Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        plugins: { legend: { labels: { filter: (item) => !item.text.includes("95 % CI") } } },
        scales: {
          x: { title: { display: true, text: data.order === "commit" ? "commit (first run's time order)" : "run (time order)" } },
          // Latencies and attainment are never negative: a wide t interval (n=2) is cut at 0.
          y: { min: 0, max: yMax, title: { display: true, text: yLabel } },
        },
      },
    });
  }

  Object.entries(data.applications).forEach(([app, info], i) => {
    if (info.slo) {
      chart(`${app} · SLO attainment`, `history-attainment-${i}`,
        withBand(app, "attainment", "attainment", CB.color(0), 100, null), "% of requests", 100);
    }
    const datasets = [];
    info.metrics.forEach((metric, j) => {
      const regressedAt = data.points.map((p) => p.regressions.some((r) => r.application === app && r.metric === metric));
      // Colours other than the palette's red, which marks regressions.
      datasets.push(...withBand(app, `${metric} p50`, `${metric} p50`, CB.color(3 * j), 1, regressedAt));
      datasets.push(...withBand(app, `${metric} p99`, `${metric} p99`, CB.color(3 * j + 2), 1, null));
    });
    if (datasets.length) chart(`${app} · key latencies (▲ regression)`, `history-latency-${i}`, datasets, "seconds");
  });
})();
