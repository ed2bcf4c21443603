/* Launch page: offer only the schedulers the chosen platform can run (the server refuses the others
   too); common/scheduler_params.js shows only the chosen scheduler's parameters. */
"use strict";
(function () {
  const choice = document.getElementById("id_scheduler");
  const platform = document.getElementById("id_platform");
  const supportData = document.getElementById("scheduler-support");
  if (!choice || !platform || !supportData) return;
  const support = JSON.parse(supportData.textContent);

  function offer() {
    const allowed = support[platform.value];
    if (!allowed) return;
    Array.from(choice.options).forEach((option) => {
      const ok = allowed.includes(option.value);
      option.hidden = !ok;
      option.disabled = !ok;
    });
    if (!allowed.includes(choice.value)) {
      choice.value = allowed[0];
      choice.dispatchEvent(new Event("change"));
    }
  }
  platform.addEventListener("change", offer);
  offer();
})();
