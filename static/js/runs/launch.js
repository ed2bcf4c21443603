/* Launch page: show only the parameters of the chosen scheduler (without script, all are shown). */
"use strict";
(function () {
  const choice = document.getElementById("id_scheduler");
  if (!choice) return;
  function show() {
    document.querySelectorAll("[data-scheduler]").forEach((input) => {
      const row = input.closest(".field") || input;
      row.hidden = input.dataset.scheduler !== choice.value;
    });
  }
  choice.addEventListener("change", show);
  show();
})();
