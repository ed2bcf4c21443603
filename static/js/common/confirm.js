// Forms marked data-confirm="question" ask before they submit (deleting a run, revoking a token).
// One listener for every page: the Content-Security-Policy allows no inline handlers.
"use strict";
document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form instanceof HTMLFormElement ? form.dataset.confirm : undefined;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
