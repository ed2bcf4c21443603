/* Launch page: offer only the schedulers the chosen platform can run (the server refuses the others
   too), and show only the parameters of the chosen scheduler (without script, all are shown). */
"use strict";
(function () {
  const choice = document.getElementById("id_scheduler");
  if (!choice) return;
  const platform = document.getElementById("id_platform");
  const supportData = document.getElementById("scheduler-support");
  const support = supportData ? JSON.parse(supportData.textContent) : {};

  function offer() {
    const allowed = support[platform ? platform.value : ""];
    if (!allowed) return;
    Array.from(choice.options).forEach((option) => {
      const ok = allowed.includes(option.value);
      option.hidden = !ok;
      option.disabled = !ok;
    });
    if (!allowed.includes(choice.value)) choice.value = allowed[0];
  }

  function show() {
    document.querySelectorAll("[data-scheduler]").forEach((input) => {
      const row = input.closest(".field") || input;
      row.hidden = input.dataset.scheduler !== choice.value;
    });
  }
  if (platform) platform.addEventListener("change", () => { offer(); show(); });
  choice.addEventListener("change", show);
  offer();
  show();
})();
