/* DAG editor: show the chosen type's options, add cards, live preview with the engine's errors.
   Everything here is an enhancement: without JavaScript the buttons post the form and the server
   re-renders it (Add application, Check, Save). */
"use strict";
(function () {
  const form = document.getElementById("editor-form");
  if (!form) return;
  const cards = document.getElementById("cards");
  const total = form.querySelector('input[name="cards-TOTAL_FORMS"]');

  function showOptions(card) {
    const type = card.querySelector('select[name$="-type"]').value;
    card.querySelectorAll("fieldset.options").forEach((fs) => { fs.hidden = fs.dataset.appType !== type; });
  }

  function nodeNames() {
    return [...cards.querySelectorAll('input[name$="-node"]')]
      .filter((input) => !(input.closest("[data-card]").querySelector('input[name$="-DELETE"]') || {}).checked)
      .map((input) => input.value.trim()).filter(Boolean);
  }

  function refreshDependencyChoices(names) {
    cards.querySelectorAll("[data-card]").forEach((card) => {
      const self = card.querySelector('input[name$="-node"]').value.trim();
      const select = card.querySelector('select[name$="-depend_on"]');
      const chosen = new Set([...select.selectedOptions].map((o) => o.value));
      select.innerHTML = "";
      names.filter((n) => n !== self).forEach((n) => {
        const option = new Option(n, n, false, chosen.has(n));
        select.appendChild(option);
      });
    });
  }

  function showErrors(errors) {
    form.querySelectorAll("ul.errorlist[data-errors-for]").forEach((ul) => { ul.innerHTML = ""; });
    const general = document.getElementById("preview-errors");
    general.innerHTML = "";
    errors.forEach((e) => {
      const target = e.field && form.querySelector(`ul.errorlist[data-errors-for="${CSS.escape(e.field)}"]`);
      const text = (target || !e.field ? "" : e.field + ": ") + e.message;
      (target || general).appendChild(Object.assign(document.createElement("li"), { textContent: text }));
    });
  }

  let timer = null;
  let inflight = null;
  function preview() {
    if (inflight) inflight.abort();
    inflight = new AbortController();
    const body = new FormData(form);
    body.set("action", "check");
    fetch(form.dataset.previewUrl, {
      method: "POST", body: body, signal: inflight.signal,
      headers: { "X-CSRFToken": form.querySelector('input[name="csrfmiddlewaretoken"]').value, Accept: "application/json" },
    })
      .then((r) => r.json())
      .then((data) => {
        if (data.svg) document.getElementById("dag-preview").innerHTML = data.svg;
        showErrors(data.errors);
        form.dataset.previewed = String(Number(form.dataset.previewed || 0) + 1);
      })
      .catch(() => {});
  }
  function schedulePreview() {
    window.clearTimeout(timer);
    timer = window.setTimeout(preview, 350);
  }

  function wire(card) {
    showOptions(card);
    card.querySelector('select[name$="-type"]').addEventListener("change", () => showOptions(card));
    card.querySelector('input[name$="-node"]').addEventListener("change", () => refreshDependencyChoices(nodeNames()));
  }

  cards.querySelectorAll("[data-card]").forEach(wire);
  document.getElementById("add-card").addEventListener("click", (event) => {
    event.preventDefault();
    const index = Number(total.value);
    const html = document.getElementById("card-template").innerHTML.replace(/__prefix__/g, String(index));
    const holder = document.createElement("div");
    holder.innerHTML = html.trim();
    const card = holder.firstElementChild;
    card.querySelector('input[name$="-node"]').value = "app" + (index + 1);
    cards.appendChild(card);
    total.value = String(index + 1);
    wire(card);
    refreshDependencyChoices(nodeNames());
    schedulePreview();
  });
  form.addEventListener("input", schedulePreview);
  form.addEventListener("change", schedulePreview);
  schedulePreview();
})();
