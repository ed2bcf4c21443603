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
    // Common fields that only some types read (a model server's name, for its clients' types).
    card.querySelectorAll(".field[data-app-types]").forEach((f) => { f.hidden = !f.dataset.appTypes.split(" ").includes(type); });
  }

  function nodeNames() {
    return [...cards.querySelectorAll('input[name$="-node"]')]
      .filter((input) => !(input.closest("[data-card]").querySelector('input[name$="-DELETE"]') || {}).checked)
      .map((input) => input.value.trim()).filter(Boolean);
  }

  // Rebuild every card's dependency list from the current node names, without the card's own name.
  // ``renamed`` maps an old node name to its new one, so that a chosen dependency follows a rename
  // instead of silently disappearing with the old name.
  function refreshDependencyChoices(names, renamed) {
    renamed = renamed || {};
    cards.querySelectorAll("[data-card]").forEach((card) => {
      const self = card.querySelector('input[name$="-node"]').value.trim();
      const select = card.querySelector('select[name$="-depend_on"]');
      const chosen = new Set([...select.selectedOptions].map((o) => renamed[o.value] || o.value));
      select.innerHTML = "";
      names.filter((n) => n !== self).forEach((n) => {
        const option = new Option(n, n, false, chosen.has(n));
        select.appendChild(option);
      });
    });
  }

  // Follow a node's name as it is typed; a blank name keeps the last one until a new one is typed.
  function renameNode(input) {
    const before = input.dataset.name || "";
    const after = input.value.trim();
    if (!after || after === before) return;
    input.dataset.name = after;
    refreshDependencyChoices(nodeNames(), before ? { [before]: after } : {});
  }

  // Fields the user has typed in or changed; "required" is held back on the others, so that a fresh
  // form does not open with errors about what nobody has filled in yet.
  const touched = new Set();
  function showErrors(errors) {
    form.querySelectorAll("ul.errorlist[data-errors-for]").forEach((ul) => { ul.innerHTML = ""; });
    const general = document.getElementById("preview-errors");
    general.innerHTML = "";
    errors.forEach((e) => {
      if (e.code === "required" && e.field && !touched.has(e.field)) return;
      const target = e.field && form.querySelector(`ul.errorlist[data-errors-for="${CSS.escape(e.field)}"]`);
      const text = (target || !e.field ? "" : e.field + ": ") + e.message;
      (target || general).appendChild(Object.assign(document.createElement("li"), { textContent: text }));
      const box = target && target.closest(".field");
      if (box) box.classList.add("error");
    });
    form.querySelectorAll(".field.error").forEach((box) => {
      if (!box.querySelector("ul.errorlist li")) box.classList.remove("error");
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
    const node = card.querySelector('input[name$="-node"]');
    node.dataset.name = node.value.trim();
    node.addEventListener("input", () => renameNode(node));
    node.addEventListener("change", () => renameNode(node));
  }

  cards.querySelectorAll("[data-card]").forEach(wire);
  document.getElementById("add-card").addEventListener("click", (event) => {
    event.preventDefault();
    const index = Number(total.value);
    const html = document.getElementById("card-template").innerHTML.replace(/__prefix__/g, String(index));
    const holder = document.createElement("div");
    holder.innerHTML = html.trim();
    const card = holder.firstElementChild;
    const node = card.querySelector('input[name$="-node"]');
    node.value = "app" + (index + 1);
    cards.appendChild(card);
    total.value = String(index + 1);
    wire(card);
    refreshDependencyChoices(nodeNames());
    schedulePreview();
  });
  function onEdit(event) {
    if (event.target.name) touched.add(event.target.name);
    schedulePreview();
  }
  form.addEventListener("input", onEdit);
  form.addEventListener("change", onEdit);
  // Check and Save post the whole form: from then on every field counts as touched.
  form.addEventListener("submit", () => form.querySelectorAll("[name]").forEach((f) => touched.add(f.name)));
  schedulePreview();
})();
