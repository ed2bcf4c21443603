/* Launch form and workflow editor: show only the parameters of the chosen scheduler (without script,
   all are shown, each labelled with its scheduler). */
"use strict";
(function () {
  const choice = document.getElementById("id_scheduler");
  if (!choice) return;
  function show() {
    document.querySelectorAll("[data-scheduler]").forEach((input) => {
      const row = input.closest("[data-field], p") || input;
      row.hidden = input.dataset.scheduler !== choice.value;
    });
    const none = document.getElementById("no-scheduler-params");
    if (none) none.hidden = !!document.querySelector(`[data-scheduler="${CSS.escape(choice.value)}"]`);
  }
  choice.addEventListener("change", show);
  show();
})();
