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
          y: { min: opts.yMin, title: { display: !!opts.yLabel, text: opts.yLabel || "" } },
        },
      },
    });
  }

  // Bytes in IEC units (KiB, MiB, GiB: powers of 1024), as the tables show them.
  // ``extra`` decimals more than the tables show: axis ticks of a narrow range stay distinct.
  function bytes(v, extra) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    let x = Math.abs(v);
    while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    const text = i === 0 ? String(Math.round(x)) : x.toFixed((x < 10 ? 2 : x < 100 ? 1 : 0) + (extra || 0));
    return (v < 0 ? "-" : "") + text + " " + units[i];
  }

  // A tick step for a byte axis that is round in the unit its labels use (1, 2 or 5 x 10^n MiB, not
  // 50,000,000 bytes = 47.68 MiB), about five ticks over the range.
  function byteStep(lo, hi) {
    let unit = 1;
    while (Math.max(Math.abs(lo), Math.abs(hi)) >= unit * 1024 && unit < 1024 ** 4) unit *= 1024;
    const raw = (hi - lo) / unit / 5;
    const magnitude = 10 ** Math.floor(Math.log10(raw));
    const nice = [1, 2, 5, 10].find((f) => f * magnitude >= raw) * magnitude;
    return nice * unit;
  }

  // How a telemetry column (docs/monitor.md) reads on an axis: its title and tick format. Columns
  // follow the monitor's naming: *_bytes, *_pct, *_w, *_j, *_mhz, *_c; cpu_percent is the machine's
  // share of all its cores for the system row and one core per 100 % for an application's processes.
  function axisOf(column, perApplication) {
    if (column.endsWith("_bytes")) return { title: "memory", tick: (v) => bytes(v, 1), text: bytes };
    if (column === "cpu_percent") {
      return perApplication
        ? { title: "CPU % (100 % = one core)", tick: (v) => v + " %", min: 0 }
        : { title: "CPU % of all cores", tick: (v) => v + " %", min: 0, max: 100 };
    }
    if (column.endsWith("_pct")) return { title: "%", tick: (v) => v + " %", min: 0 };
    if (column.endsWith("_w")) return { title: "power (W)", tick: (v) => v + " W" };
    if (column.endsWith("_j")) return { title: "energy (J)", tick: (v) => v + " J" };
    if (column.endsWith("_mhz")) return { title: "clock (MHz)", tick: (v) => v + " MHz" };
    if (column.endsWith("_c")) return { title: "temperature (°C)", tick: (v) => v + " °C" };
    if (column === "processes") return { title: "processes", tick: (v) => (Number.isInteger(v) ? String(v) : ""), min: 0 };
    return { title: "", tick: (v) => v };
  }

  // The panel of a telemetry series that is not drawn per entity: one per source and column, with the
  // applications' CPU % apart from the machine's (one core per 100 % against all cores).
  function telemetryKey(source, entity, column) {
    const perApplication = entity.startsWith("app:");
    return `${source} · ${column}${perApplication && column === "cpu_percent" ? " of each application" : ""}`;
  }

  // Telemetry panels: one per source, column and kind of entity (the machine's rows, or the
  // applications' processes); one line per entity (or per compared run). A panel whose every value
  // is one constant carries no information: it is listed under ``constants`` instead of drawn
  // ("swap used: 0 B throughout: no swap used").
  // ``series``: [{source, metric, t, v, label?, color?}]; ``opts.byEntity``: one panel per entity
  // too (the compare page, whose lines are the compared runs); returns the number of panels drawn.
  function telemetryPanels(container, constants, series, opts) {
    const panels = {};
    series.forEach((s) => {
      const dot = s.metric.indexOf(".");
      const entity = dot > 0 ? s.metric.slice(0, dot) : s.source;
      const column = dot > 0 ? s.metric.slice(dot + 1) : s.metric;
      const perApplication = entity.startsWith("app:");
      const key = opts.byEntity ? `${s.source} · ${s.metric}` : telemetryKey(s.source, entity, column);
      const p = (panels[key] = panels[key] || { column: column, perApplication: perApplication, lines: [] });
      p.lines.push({ label: s.label || entity, t: s.t, v: s.v, color: s.color });
    });
    let drawn = 0;
    Object.keys(panels).sort().forEach((key) => {
      const p = panels[key];
      const axis = axisOf(p.column, p.perApplication);
      const values = p.lines.flatMap((l) => l.v);
      if (!values.length) return;
      const lo = Math.min(...values);
      if (lo === Math.max(...values)) {
        const none = p.column === "swap_used_bytes" && lo === 0 ? ": no swap used" : "";
        constants.appendChild(el("li", { "data-panel": key }, `${key}: ${(axis.text || axis.tick)(lo)} throughout the run${none}`));
        return;
      }
      const datasets = p.lines.map((l, j) => ({ label: l.label, data: points(l.t, l.v), borderColor: l.color || color(j), borderWidth: 1 }));
      const chart = timeChart(panel(container, key, `telemetry-${drawn}`), datasets, { xMin: opts.xMin, xMax: opts.xMax, yLabel: axis.title });
      chart.options.scales.y.ticks = { callback: axis.tick };
      if (p.column.endsWith("_bytes")) chart.options.scales.y.ticks.stepSize = byteStep(lo, Math.max(...values));
      if (axis.min !== undefined) chart.options.scales.y.min = axis.min;
      if (axis.max !== undefined) chart.options.scales.y.suggestedMax = axis.max;
      chart.update();
      drawn++;
    });
    return drawn;
  }

  return {
    axisOf: axisOf, byteStep: byteStep, bytes: bytes, color: color, el: el, panel: panel, points: points,
    telemetryKey: telemetryKey, telemetryPanels: telemetryPanels, timeChart: timeChart,
  };
})();
