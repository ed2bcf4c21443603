/* Run page: live progress by polling while the run is queued or running; charts once it finished. */
"use strict";
(function () {
  const section = document.getElementById("progress-section");

  function renderProgress(data) {
    const status = document.getElementById("run-status");
    status.textContent = data.status;
    status.className = "status " + data.status;
    const error = document.getElementById("run-error");
    if (data.error) { error.textContent = data.error; error.hidden = false; }
    const wait = document.getElementById("wait-reason");
    wait.textContent = data.wait_reason ? "Waiting: " + data.wait_reason : "";
    wait.hidden = !data.wait_reason;
    (data.nodes || []).forEach((n) => {
      const row = document.querySelector(`#progress tr[data-node="${CSS.escape(n.name)}"]`);
      if (!row) return;
      row.querySelector(".st").innerHTML = "";
      row.querySelector(".st").appendChild(CB.el("span", { class: "status " + n.status }, n.status));
      row.querySelector(".done").textContent = (n.serves || []).length ? `serves ${n.serves.join(", ")}` : `${n.done} of ${n.total}`;
      row.querySelector(".last").textContent = Object.entries(n.last || {}).map(([k, v]) => `${k}=${v.toFixed(3)}s`).join(" ");
      row.querySelector(".reason").textContent = n.reason || "";
    });
  }

  function poll() {
    fetch(section.dataset.progressUrl, { headers: { Accept: "application/json" } })
      .then((r) => r.json())
      .then((data) => {
        renderProgress(data);
        if (data.finished) {
          window.location.reload();
        } else {
          window.setTimeout(poll, 1000);
        }
      })
      .catch(() => window.setTimeout(poll, 3000));
  }

  if (section && section.dataset.finished === "0") window.setTimeout(poll, 1000);

  const script = document.getElementById("chart-data");
  if (!script) return;
  const data = JSON.parse(script.textContent);
  const xMax = data.duration_s || undefined;

  // Gantt of the DAG nodes: one floating bar per node from start to end, load time in a lighter shade.
  const bars = data.gantt.filter((g) => g.start !== null);
  new Chart(document.getElementById("gantt-chart"), {
    type: "bar",
    data: {
      labels: bars.map((g) => g.node),
      datasets: [
        { label: "model load", data: bars.map((g) => [g.start, g.start + (g.load_time_s || 0)]), backgroundColor: "#93c5fd", grouped: false },
        { label: "requests", data: bars.map((g) => [g.start + (g.load_time_s || 0), g.end === null ? xMax : g.end]), backgroundColor: bars.map((g) => (g.status === "succeeded" ? "#2563eb" : g.status === "stopped" ? "#9ca3af" : "#dc2626")), grouped: false },
      ],
    },
    options: {
      animation: false, indexAxis: "y", responsive: true, maintainAspectRatio: false,
      scales: { x: { type: "linear", min: 0, max: xMax, title: { display: true, text: "time since run start (s)" } } },
      plugins: { tooltip: { callbacks: { afterLabel: (ctx) => bars[ctx.dataIndex].status + (bars[ctx.dataIndex].reason ? ": " + bars[ctx.dataIndex].reason : "") } } },
    },
  });

  const latency = document.getElementById("latency-charts");
  data.latency.forEach((s, i) => {
    const canvas = CB.panel(latency, `${s.application} · ${s.metric}`, `latency-${i}`);
    const datasets = [{ label: s.metric, data: CB.points(s.t, s.v), borderColor: CB.color(i), backgroundColor: CB.color(i), showLine: true }];
    if (s.slo_s !== null) {
      datasets.push({ label: `SLO ${s.slo_s} s`, data: [{ x: 0, y: s.slo_s }, { x: xMax || s.t[s.t.length - 1], y: s.slo_s }], borderColor: "#dc2626", borderDash: [6, 4] });
    }
    // From zero: a latency axis that starts at the smallest value blows a 0.1 ms jitter up to the
    // whole chart height.
    CB.timeChart(canvas, datasets, { xMin: 0, xMax: xMax, yMin: 0, yLabel: "latency (s)", pointRadius: 2 });
  });

  // One panel per source, column and kind of entity, all on the run's time axis (charts.js).
  const telemetry = document.getElementById("telemetry-charts");
  const constants = document.getElementById("telemetry-constant");
  const drawn = CB.telemetryPanels(telemetry, constants, data.telemetry, { xMin: 0, xMax: xMax });
  if (drawn) document.getElementById("no-telemetry").remove();
  document.getElementById("telemetry-constant-box").hidden = !constants.children.length;
})();
