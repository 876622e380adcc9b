// Reading pages: keyboard use, the rationale rule, drafts that survive a re-login, and the undo notice.
"use strict";

(function () {
  // The undo notice: when its window closes (the server said how many seconds were left), the Undo
  // button gives way to "can no longer be taken back". The server decides either way.
  let undoTimer = null;

  function setUpUndoNotice() {
    if (undoTimer !== null) {
      clearTimeout(undoTimer);
      undoTimer = null;
    }
    const notice = document.getElementById("saved-notice");
    if (!notice || !notice.dataset.undoSeconds) {
      return;
    }
    undoTimer = setTimeout(function () {
      undoTimer = null;
      const open = notice.querySelector(".undo-open");
      const closed = notice.querySelector(".undo-closed");
      if (open && closed) {
        const hadFocus = open.contains(document.activeElement);
        open.remove();
        closed.hidden = false;
        delete notice.dataset.undoSeconds;
        if (hadFocus) {
          notice.setAttribute("tabindex", "-1");
          notice.focus();
        }
      }
    }, Number(notice.dataset.undoSeconds) * 1000);
  }

  function currentForm() {
    return document.getElementById("rating-form");
  }

  function draftKey(form) {
    return "readingroom-draft:" + form.dataset.draftKey;
  }

  // The rationale is required the moment a label that needs one is chosen.
  function applyRationaleRule(form) {
    const chosen = form.querySelector("input[name=rating]:checked");
    const rationale = form.querySelector("textarea[name=rationale]");
    const needed = form.hasAttribute("data-rationale-always-required") ||
      Boolean(chosen && chosen.hasAttribute("data-needs-rationale"));
    rationale.required = needed;
    rationale.setAttribute("aria-required", needed ? "true" : "false");
    return needed;
  }

  function saveDraft(form) {
    const chosen = form.querySelector("input[name=rating]:checked");
    const rationale = form.querySelector("textarea[name=rationale]");
    try {
      sessionStorage.setItem(draftKey(form), JSON.stringify({
        rating: chosen ? chosen.value : "",
        rationale: rationale.value,
      }));
    } catch (error) {
      // Storage may be full or disabled; the draft is a convenience only.
    }
  }

  function restoreDraft(form) {
    let draft = null;
    try {
      draft = JSON.parse(sessionStorage.getItem(draftKey(form)) || "null");
    } catch (error) {
      draft = null;
    }
    if (!draft) {
      return;
    }
    const rationale = form.querySelector("textarea[name=rationale]");
    // A rating taken back fills the form; a draft is what the reader changed since.
    const takenBack = form.hasAttribute("data-taken-back");
    if ((takenBack || !rationale.value) && draft.rationale) {
      rationale.value = draft.rationale;
    }
    if (draft.rating && (takenBack || !form.querySelector("input[name=rating]:checked"))) {
      const input = form.querySelector("input[name=rating][value='" + CSS.escape(draft.rating) + "']");
      if (input) {
        input.checked = true;
      }
    }
  }

  function setUp(root) {
    setUpUndoNotice();
    const stored = root.querySelector ? root.querySelector("[data-stored-for]") : null;
    if (stored) {
      sessionStorage.removeItem("readingroom-draft:" + stored.dataset.storedFor);
    }
    const form = currentForm();
    if (!form || form.dataset.ready) {
      return;
    }
    form.dataset.ready = "1";
    restoreDraft(form);
    applyRationaleRule(form);
    form.addEventListener("change", function (event) {
      if (event.target.name === "rating") {
        if (applyRationaleRule(form)) {
          form.querySelector("textarea[name=rationale]").focus();
        }
      }
      saveDraft(form);
    });
    form.addEventListener("input", function () {
      saveDraft(form);
    });
  }

  function isTyping(event) {
    return Boolean(event.target.closest("textarea, input[type=text], select")) ||
      event.ctrlKey || event.metaKey || event.altKey;
  }

  document.addEventListener("keydown", function (event) {
    // U: undo the last rating, scoped like the label keys (never while typing or with a modifier).
    if ((event.key === "u" || event.key === "U") && !isTyping(event)) {
      const undo = document.getElementById("undo-button");
      if (undo && !undo.disabled) {
        event.preventDefault();
        undo.form.requestSubmit();
      }
      return;
    }
    const form = currentForm();
    if (!form) {
      return;
    }
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
      return;
    }
    if (isTyping(event)) {
      return;
    }
    const input = form.querySelector("input[name=rating][data-key='" + CSS.escape(event.key) + "']");
    if (input) {
      event.preventDefault();
      input.checked = true;
      input.focus();
      input.dispatchEvent(new Event("change", { bubbles: true }));
    }
  });

  // A successful submission clears its draft.
  // While a rating is being saved, a second submit (a double click faster than htmx disables
  // the button) must not fall through to a plain form post.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form && form.id === "rating-form" && form.dataset.busy) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
  document.addEventListener("htmx:beforeRequest", function (event) {
    const form = event.detail.elt;
    if (form && form.id === "rating-form") {
      form.dataset.busy = "1";
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (form && form.id === "rating-form") {
      delete form.dataset.busy;
    }
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (form && form.id === "rating-form" && event.detail.successful) {
      sessionStorage.removeItem(draftKey(form));
    }
  });

  // htmx swaps nothing for a refused request (403, 404, 500) or one that never got an answer, so
  // without this the reader's click would seem to do nothing: say that the rating was not saved.
  function showNotSaved(form, message, link) {
    let box = form.querySelector("#submit-error");
    if (!box) {
      box = document.createElement("p");
      box.id = "submit-error";
      box.className = "error";
      box.setAttribute("role", "alert");
      form.querySelector(".actions").before(box);
    }
    box.textContent = message;
    if (link) {
      const anchor = document.createElement("a");
      anchor.href = link;
      anchor.textContent = "Back to your queues";
      box.append(" ", anchor);
    }
  }

  document.addEventListener("htmx:responseError", function (event) {
    const form = event.detail.elt;
    if (!form || form.id !== "rating-form") {
      return;
    }
    const status = event.detail.xhr.status;
    if (status === 404) {
      showNotSaved(form, "This item is no longer in your queue (it was withdrawn or reassigned), " +
        "so your rating was not saved.", form.dataset.queuesUrl);
    } else {
      showNotSaved(form, "Your rating was not saved (the server answered " + status + "). " +
        "Reload the page and submit again: your choice and rationale are kept in this tab.");
    }
  });

  document.addEventListener("htmx:sendError", function (event) {
    const form = event.detail.elt;
    if (form && form.id === "rating-form") {
      showNotSaved(form, "Your rating was not saved: the server could not be reached. " +
        "Check your connection and submit again; your choice and rationale are kept in this tab.");
    }
  });

  // After a swap, set up the new item and move focus to it for keyboard and screen-reader users.
  document.addEventListener("htmx:afterSettle", function (event) {
    setUp(document);
    const panel = document.getElementById("reading");
    if (panel && event.detail.target && event.detail.target.id === "reading") {
      panel.setAttribute("tabindex", "-1");
      panel.focus({ preventScroll: false });
    }
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { setUp(document); });
  } else {
    setUp(document);
  }
})();
