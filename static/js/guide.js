// The reader guide: the Guide button of a reading page opens the guide in a modal <dialog>
// (the page, its form and its draft stay as they are); Escape or Close shuts it and focus
// returns to the button. Without a dialog on the page, the button is a plain link to the guide.
"use strict";

(function () {
  function dialog() {
    return document.getElementById("guide-dialog");
  }

  document.addEventListener("click", function (event) {
    const opener = event.target.closest("[data-opens-guide]");
    const box = dialog();
    if (opener && box && typeof box.showModal === "function") {
      event.preventDefault();
      box.showModal();
      box.querySelector("[data-closes-guide]").focus();
      return;
    }
    if (event.target.closest("[data-closes-guide]") && box) {
      box.close();
    }
  });

  document.addEventListener("close", function (event) {
    if (event.target === dialog()) {
      const opener = document.querySelector("[data-opens-guide]");
      if (opener) {
        opener.focus();
      }
    }
  }, true);

  // While the guide is open, the reading page's keys (1 2 3, Ctrl+Enter) must not rate the
  // item behind it: keep them from reaching the page's handlers.
  window.addEventListener("keydown", function (event) {
    const box = dialog();
    if (box && box.open && event.key !== "Escape" && event.key !== "Tab") {
      event.stopPropagation();
    }
  }, true);
})();
