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
