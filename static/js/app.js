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

// --- Rejected forms ---------------------------------------------------------------------------
// A rejected submit focuses the first invalid field, which is marked aria-invalid and described by
// its message. Django marks the fields of its own forms; a message from a service (a refused
// import, reassignment, voiding) names its field with data-error-for. A refusal that concerns no
// field is focused itself, so it is read out where the person is.
// A field can stay in the page while only its form's result is swapped (the import form keeps
// the chosen file): a mark whose message is gone is taken away again.
function clearStaleMarks() {
  document.querySelectorAll("[data-invalid-by]").forEach(function (field) {
    const messageId = field.dataset.invalidBy;
    if (document.getElementById(messageId)) {
      return;
    }
    field.removeAttribute("aria-invalid");
    delete field.dataset.invalidBy;
    const described = (field.getAttribute("aria-describedby") || "").split(/\s+/).filter(function (id) {
      return id && id !== messageId;
    });
    if (described.length) {
      field.setAttribute("aria-describedby", described.join(" "));
    } else {
      field.removeAttribute("aria-describedby");
    }
  });
}

// Marks the fields named by the messages in root, which may lie outside root; returns them.
function markInvalidFields(root) {
  clearStaleMarks();
  const marked = [];
  root.querySelectorAll("[data-error-for]").forEach(function (message) {
    const field = document.getElementById(message.dataset.errorFor);
    if (!field || !message.id) {
      return;
    }
    field.setAttribute("aria-invalid", "true");
    field.dataset.invalidBy = message.id;
    const described = (field.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
    if (!described.includes(message.id)) {
      field.setAttribute("aria-describedby", [message.id].concat(described).join(" "));
    }
    marked.push(field);
  });
  return marked;
}

function focusFirstProblem(root) {
  const marked = markInvalidFields(root);
  const field = root.querySelector("[aria-invalid=true]") || marked[0];
  if (field) {
    field.focus({ preventScroll: true });
    field.scrollIntoView({ block: "center", inline: "nearest", behavior: "instant" });
    return true;
  }
  const refusal = root.querySelector(".error[role=alert]");
  if (refusal) {
    refusal.setAttribute("tabindex", "-1");
    refusal.focus({ preventScroll: true });
    refusal.scrollIntoView({ block: "center", inline: "nearest", behavior: "instant" });
    return true;
  }
  return false;
}

// The element a swap put in place of its target (an outerHTML swap leaves the old one detached).
function swappedElement(detail) {
  const target = detail.target;
  if (target && target.isConnected) {
    return target;
  }
  return target && target.id ? document.getElementById(target.id) : null;
}

// After a form's answer is swapped in (forms post; panels refresh and filter with GET).
document.addEventListener("htmx:afterSettle", function (event) {
  const config = event.detail.requestConfig;
  if (!config || config.verb !== "post") {
    return;
  }
  const swapped = swappedElement(event.detail);
  if (swapped && !focusFirstProblem(swapped)) {
    focusLostToStatus(swapped);
  }
});

// A form swapped out with its submit button takes the focus with it: the answer's status message
// (role=status) gets it, so keyboard and screen-reader users stay where the answer is.
function focusLostToStatus(root) {
  const active = document.activeElement;
  if (active && active !== document.body && active.isConnected) {
    return;
  }
  const status = root.querySelector("[role=status]");
  if (status) {
    status.setAttribute("tabindex", "-1");
    status.focus({ preventScroll: true });
    status.scrollIntoView({ block: "center", inline: "nearest", behavior: "instant" });
  }
}

// A form posted without htmx comes back as a whole page.
document.addEventListener("DOMContentLoaded", function () {
  const main = document.getElementById("main");
  if (main) {
    focusFirstProblem(main);
  }
});

// --- Panels that refresh themselves -----------------------------------------------------------
// Coordinator panels poll (hx-trigger="every ..."). A refresh must not take away the person's
// place: it waits while they work in the panel, can be paused, and afterwards focus, open
// <details> and the scroll position are where they were (WCAG 2.2.2, 2.4.3).
const REFRESH_QUIET_MS = 10000;
const refreshState = { paused: new Set(), lastActivity: new Map(), saved: new Map(), restoring: false };

function isAutoRefreshPanel(element) {
  return Boolean(element && element.id && /\bevery\b/.test(element.getAttribute("hx-trigger") || ""));
}

function refreshPanelOf(element) {
  let node = element instanceof Element ? element : null;
  while (node) {
    if (isAutoRefreshPanel(node)) {
      return node;
    }
    node = node.parentElement;
  }
  return null;
}

function noteActivity(event) {
  if (refreshState.restoring) {
    return;
  }
  const panel = refreshPanelOf(event.target);
  if (panel) {
    refreshState.lastActivity.set(panel.id, Date.now());
  }
}
["keydown", "pointerdown", "pointermove", "focusin", "input", "wheel"].forEach(function (type) {
  document.addEventListener(type, noteActivity, { capture: true, passive: true });
});

function isInteracting(panel) {
  const active = document.activeElement;
  if (active && panel.contains(active) && active.matches("input, select, textarea, summary")) {
    return true;
  }
  const selection = window.getSelection();
  if (selection && !selection.isCollapsed && panel.contains(selection.anchorNode)) {
    return true;
  }
  return Date.now() - (refreshState.lastActivity.get(panel.id) || 0) < REFRESH_QUIET_MS;
}

// Where the person is inside a panel, described so it can be found again in the new copy.
function placeIn(panel) {
  const active = document.activeElement;
  const place = {
    scrollX: window.scrollX,
    scrollY: window.scrollY,
    openDetails: Array.from(panel.querySelectorAll("details")).map(function (details) { return details.open; }),
    focus: null,
  };
  if (active && active !== panel && panel.contains(active)) {
    const focusables = Array.from(panel.querySelectorAll("a[href], button, input, select, textarea, summary, [tabindex]"));
    place.focus = {
      id: active.id,
      href: active.getAttribute("href"),
      text: active.textContent.trim(),
      index: focusables.indexOf(active),
      panelHadFocus: false,
    };
  } else if (active === panel) {
    place.focus = { panelHadFocus: true };
  }
  return place;
}

function restorePlace(panel, place) {
  panel.querySelectorAll("details").forEach(function (details, index) {
    if (index < place.openDetails.length) {
      details.open = place.openDetails[index];
    }
  });
  const focus = place.focus;
  if (focus) {
    let target = null;
    if (focus.panelHadFocus) {
      target = panel;
    } else if (focus.id) {
      target = document.getElementById(focus.id);
    }
    if (!target && focus.href) {
      target = Array.from(panel.querySelectorAll("a[href]")).find(function (link) {
        return link.getAttribute("href") === focus.href && link.textContent.trim() === focus.text;
      }) || null;
    }
    if (!target && focus.index >= 0) {
      target = panel.querySelectorAll("a[href], button, input, select, textarea, summary, [tabindex]")[focus.index] || null;
    }
    if (!target || !panel.contains(target)) {
      // Whatever had focus is gone: keep focus in the panel rather than dropping it to the page.
      panel.setAttribute("tabindex", "-1");
      target = panel;
    }
    refreshState.restoring = true;
    target.focus({ preventScroll: true });
    refreshState.restoring = false;
  }
  window.scrollTo(place.scrollX, place.scrollY);
}

function refreshControlFor(panel) {
  return document.querySelector(".auto-refresh[data-panel='" + CSS.escape(panel.id) + "']");
}

function updateRefreshControl(control) {
  const paused = refreshState.paused.has(control.dataset.panel);
  const button = control.querySelector("button");
  button.textContent = paused ? "Resume automatic updates" : "Pause automatic updates";
  control.querySelector(".auto-refresh-state").textContent = paused
    ? "Updates are paused."
    : "Updates wait while you work in the panel.";
}

// A Pause/Resume button before each refreshing panel, outside it, so it survives the refreshes.
function setUpRefreshControls() {
  document.querySelectorAll("[hx-trigger]").forEach(function (panel) {
    if (!isAutoRefreshPanel(panel) || refreshControlFor(panel)) {
      return;
    }
    const control = document.createElement("p");
    control.className = "auto-refresh";
    control.dataset.panel = panel.id;
    const button = document.createElement("button");
    button.type = "button";
    button.setAttribute("aria-controls", panel.id);
    const state = document.createElement("span");
    state.className = "auto-refresh-state meta";
    control.append(button, state);
    button.addEventListener("click", function () {
      if (refreshState.paused.has(panel.id)) {
        refreshState.paused.delete(panel.id);
      } else {
        refreshState.paused.add(panel.id);
      }
      updateRefreshControl(control);
    });
    panel.before(control);
    updateRefreshControl(control);
  });
  // A panel that stopped refreshing (a release build finished) needs no control.
  document.querySelectorAll(".auto-refresh[data-panel]").forEach(function (control) {
    const panel = document.getElementById(control.dataset.panel);
    control.hidden = !isAutoRefreshPanel(panel);
  });
}

document.addEventListener("htmx:beforeRequest", function (event) {
  const panel = event.detail.elt;
  if (!isAutoRefreshPanel(panel)) {
    return;
  }
  if (refreshState.paused.has(panel.id) || isInteracting(panel)) {
    event.preventDefault();
  }
});

document.addEventListener("htmx:beforeSwap", function (event) {
  const panel = event.detail.target;
  if (isAutoRefreshPanel(panel) && event.detail.elt === panel) {
    refreshState.saved.set(panel.id, placeIn(panel));
  }
});

document.addEventListener("htmx:afterSwap", function (event) {
  const target = event.detail.target;
  const id = target && target.id;
  if (!id || !refreshState.saved.has(id)) {
    return;
  }
  const place = refreshState.saved.get(id);
  refreshState.saved.delete(id);
  const panel = document.getElementById(id);
  if (panel) {
    restorePlace(panel, place);
  }
});

document.addEventListener("htmx:afterSettle", setUpRefreshControls);
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", setUpRefreshControls);
} else {
  setUpRefreshControls();
}

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
