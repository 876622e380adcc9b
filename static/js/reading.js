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

  // Drafts live in localStorage (every tab of this browser), under the user's opaque key and the
  // item's public id: another user of the same browser never sees them; logging out clears them
  // (app.js). Without an owner key (not logged in) nothing is kept.
  function draftKey(itemKey) {
    const owner = document.body.dataset.draftOwner;
    return owner ? "readingroom-draft:" + owner + ":" + itemKey : null;
  }

  const drafts = {
    get: function (itemKey) {
      const key = draftKey(itemKey);
      try {
        return key ? JSON.parse(localStorage.getItem(key) || "null") : null;
      } catch (error) {
        return null;
      }
    },
    set: function (itemKey, draft) {
      const key = draftKey(itemKey);
      try {
        if (key) {
          localStorage.setItem(key, JSON.stringify(draft));
        }
      } catch (error) {
        // Storage may be full or disabled; the draft is a convenience only.
      }
    },
    remove: function (itemKey) {
      const key = draftKey(itemKey);
      try {
        if (key) {
          localStorage.removeItem(key);
        }
      } catch (error) {
        // As above.
      }
    },
  };

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
    drafts.set(form.dataset.draftKey, {
      rating: chosen ? chosen.value : "",
      rationale: rationale.value,
    });
  }

  function restoreDraft(form) {
    const draft = drafts.get(form.dataset.draftKey);
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
      drafts.remove(stored.dataset.storedFor);
    }
    const form = currentForm();
    if (!form || form.dataset.ready) {
      return;
    }
    form.dataset.ready = "1";
    restoreDraft(form);
    applyRationaleRule(form);
    // Choosing a label changes whether a rationale is required, never where focus is: arrow keys
    // keep moving through the choices and Tab goes on to the rationale (WCAG 3.2.2).
    form.addEventListener("change", function (event) {
      if (event.target.name === "rating") {
        applyRationaleRule(form);
      }
      saveDraft(form);
    });
    form.addEventListener("input", function () {
      saveDraft(form);
    });
  }

  // Keys act on the item only where the reader is reading it: focus inside the reading panel (its
  // heading, report or rating form) or on what holds it (the page after a click on the report
  // text, the main region after the skip link).
  // Never on the menu, a link, or a text field outside the form (WCAG 2.1.4).
  function keysApply(target) {
    const panel = document.getElementById("reading");
    if (!panel) {
      return false;
    }
    if (target.contains(panel)) {
      return true; // the page or its main region, as after the skip link
    }
    return panel.contains(target) && !target.closest("a[href]");
  }

  function isTextField(target) {
    return Boolean(target.closest("textarea, select, [contenteditable]") ||
      (target.matches("input") && !target.matches("[type=radio], [type=checkbox], [type=submit], [type=button]")));
  }

  // Single-key shortcuts: on unless the person turned them off in their settings.
  function singleKeysOn() {
    return document.body.dataset.singleKeyShortcuts !== "off";
  }

  // A control other than the item's own rating form (the Undo button, a link, the guide's
  // button): a single key pressed there is not meant for the item.
  function onAnotherControl(target) {
    const control = target.closest("a[href], button, input, select, textarea, summary, [role=button], [role=link]");
    const form = currentForm();
    return Boolean(control) && !(form && form.contains(control));
  }

  function singleKeyAllowed(event) {
    return singleKeysOn() && !isTextField(event.target) && !onAnotherControl(event.target) &&
      !event.ctrlKey && !event.metaKey && !event.altKey;
  }

  document.addEventListener("keydown", function (event) {
    if (!keysApply(event.target)) {
      return;
    }
    // U: undo the last rating while the notice offers it; a single-key shortcut like 1/2/3 (same
    // scope: focus in the rating form or on no control at all, never in a text field or with a
    // modifier, off with the person's setting).
    if (event.key === "u" || event.key === "U") {
      const undo = document.getElementById("undo-button");
      if (undo && !undo.disabled && singleKeyAllowed(event)) {
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
    if (!singleKeyAllowed(event)) {
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

  // Before the swap, while the form is still in the page (htmx:afterRequest comes after the swap,
  // on an element that is no longer the form).
  document.addEventListener("htmx:beforeSwap", function (event) {
    const form = event.detail.requestConfig && event.detail.requestConfig.elt;
    const status = event.detail.xhr.status;
    if (form && form.id === "rating-form" && status >= 200 && status < 300) {
      drafts.remove(form.dataset.draftKey);
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
        "Reload the page and submit again: your choice and rationale are kept in this browser.");
    }
  });

  document.addEventListener("htmx:sendError", function (event) {
    const form = event.detail.elt;
    if (form && form.id === "rating-form") {
      showNotSaved(form, "Your rating was not saved: the server could not be reached. " +
        "Check your connection and submit again; your choice and rationale are kept in this browser.");
    }
  });

  // Say something in the page's polite live region (it sits outside the swapped panel, so it is
  // there before and after the swap). Emptied first so the same words are announced again.
  function announce(text) {
    const region = document.getElementById("announcer");
    if (!region) {
      return;
    }
    region.textContent = "";
    window.setTimeout(function () { region.textContent = text; }, 50);
  }

  // After a panel swap the reader is on a new item (or told it was not stored): bring its heading
  // to the top of the viewport and focus it, so the next keys act on it without scrolling back.
  // After a practice rating, the reference to compare with: its heading is focused and scrolled
  // into view no further than needed, so that the report stays in sight where it fits.
  // A refused rating instead focuses the first invalid field (app.js marks and focuses it).
  function showSwappedPanel(panel) {
    if (panel.querySelector("[aria-invalid=true]")) {
      return;
    }
    const feedback = panel.querySelector("#feedback-heading");
    const heading = feedback || panel.querySelector("#reading-heading");
    if (!heading) {
      return;
    }
    heading.focus({ preventScroll: true });
    heading.scrollIntoView({ block: feedback ? "nearest" : "start", inline: "nearest", behavior: "instant" });
    const saved = panel.querySelector("#saved-notice .saved-text");
    const notice = panel.querySelector(".notice");
    // "Item 7, Task 1. Saved: Item 6, Minor Issues. <notice>"
    const parts = [heading.textContent.trim()];
    if (saved) {
      parts.push(saved.textContent.trim().replace(/\.$/, ""));
    }
    if (notice) {
      parts.push(notice.textContent.trim());
    }
    announce(parts.join(". "));
  }

  document.addEventListener("htmx:afterSettle", function (event) {
    setUp(document);
    const panel = document.getElementById("reading");
    if (panel && event.detail.target && event.detail.target.id === "reading") {
      showSwappedPanel(panel);
    }
    // Undo refused (its window had just closed): the button is gone, so focus goes to the reason.
    const refusal = document.getElementById("saved-notice");
    if (refusal && event.detail.target && event.detail.target.id === "saved-notice" && refusal.isConnected) {
      refusal.setAttribute("tabindex", "-1");
      refusal.focus();
    }
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { setUp(document); });
  } else {
    setUp(document);
  }
})();
