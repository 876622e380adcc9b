// ReadingRoom page behaviour. Loaded from static files only (the CSP forbids inline scripts).
"use strict";

// Upload progress for forms marked data-upload-progress: htmx reports XHR upload progress.
document.addEventListener("htmx:xhr:progress", function (event) {
  const form = event.target.closest("[data-upload-progress]");
  if (!form || !event.detail.lengthComputable) {
    return;
  }
  const bar = form.querySelector("progress.upload-progress");
  if (bar) {
    bar.value = Math.round((event.detail.loaded / event.detail.total) * 100);
  }
});

// Logging out clears this user's reading drafts from the browser (reading.js keeps them in
// localStorage under the user's opaque key). An expired session keeps them: the reader comes back.
document.addEventListener("submit", function (event) {
  const owner = document.body.dataset.draftOwner;
  if (!owner || !event.target.matches("form[data-logout]")) {
    return;
  }
  const prefix = "readingroom-draft:" + owner + ":";
  try {
    Object.keys(localStorage).filter(function (key) {
      return key.startsWith(prefix);
    }).forEach(function (key) {
      localStorage.removeItem(key);
    });
  } catch (error) {
    // Storage disabled: there is nothing to clear.
  }
});
