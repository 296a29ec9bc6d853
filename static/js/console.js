/* Approval console: expiry countdowns, keyboard shortcuts, confirmations. No dependencies. */
(function () {
  "use strict";

  // --- countdowns: <time data-expires="ISO"> -------------------------------------------------
  function formatLeft(ms) {
    if (ms <= 0) return "expired";
    var s = Math.floor(ms / 1000);
    var d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
    var m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (d > 0) return "in " + d + "d " + h + "h";
    if (h > 0) return "in " + h + "h " + m + "m";
    if (m > 0) return "in " + m + "m " + (sec < 10 ? "0" : "") + sec + "s";
    return "in " + sec + "s";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-expires]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("data-expires"));
      if (isNaN(at)) return;
      var left = at - now;
      var text = formatLeft(left);
      if (el.textContent !== text) el.textContent = text;
      el.classList.toggle("soon", left > 0 && left < 15 * 60 * 1000);
      el.classList.toggle("expired", left <= 0);
    });
  }

  // --- keyboard --------------------------------------------------------------------------------
  function typing(event) {
    var t = event.target;
    if (!t || !t.tagName) return false;
    var tag = t.tagName.toLowerCase();
    return t.isContentEditable || tag === "input" || tag === "textarea" || tag === "select";
  }

  var selectedKey = null;

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-keyboard-list] tr[data-row]"));
  }

  function select(row) {
    rows().forEach(function (r) { r.classList.remove("selected"); r.removeAttribute("aria-selected"); });
    if (!row) return;
    row.classList.add("selected");
    row.setAttribute("aria-selected", "true");
    selectedKey = row.getAttribute("data-key");
    var link = row.querySelector("a.row-link");
    if (link) link.focus();
  }

  function move(delta) {
    var list = rows();
    if (!list.length) return;
    var index = list.findIndex(function (r) { return r.classList.contains("selected"); });
    index = index < 0 ? (delta > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, index + delta));
    select(list[index]);
  }

  function openDetails(id, focusSelector) {
    var group = document.getElementById(id);
    if (!group) return false;
    group.open = true;
    var target = group.querySelector(focusSelector || "input, select, textarea, button");
    if (target) target.focus();
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || typing(event)) return;
    var key = event.key;
    if (document.querySelector("[data-keyboard-list]")) {
      if (key === "j") { move(1); event.preventDefault(); return; }
      if (key === "k") { move(-1); event.preventDefault(); return; }
      if (key === "Enter") {
        var row = document.querySelector("[data-keyboard-list] tr.selected");
        if (row && document.activeElement === document.body) { window.location.href = row.getAttribute("data-href"); }
        return;
      }
    }
    // Shortcuts only move focus: a decision always takes a deliberate Enter or click.
    if (key === "a") {
      var approve = document.querySelector("#decide-approve button[type=submit]");
      if (approve && !approve.disabled) { approve.focus(); event.preventDefault(); }
    } else if (key === "e") {
      if (openDetails("edit-group", "#edit-form input:not([type=hidden]), #edit-form select, #edit-form textarea")) event.preventDefault();
    } else if (key === "r") {
      if (openDetails("reject-group", "textarea")) event.preventDefault();
    }
  });

  // Rows are clickable as a whole; the link inside stays the accessible target.
  document.addEventListener("click", function (event) {
    var row = event.target.closest && event.target.closest("[data-keyboard-list] tr[data-row]");
    if (!row || event.target.closest("a, button, input, select, textarea")) return;
    window.location.href = row.getAttribute("data-href");
  });

  // --- confirmations: <form data-confirm="..."> -------------------------------------------------
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var message = form.getAttribute && form.getAttribute("data-confirm");
    if (message && !window.confirm(message)) event.preventDefault();
  }, true);

  // --- live updates --------------------------------------------------------------------------------
  document.addEventListener("htmx:afterSwap", function (event) {
    // Keep the keyboard selection across queue refreshes.
    if (selectedKey) {
      var again = document.querySelector('[data-keyboard-list] tr[data-key="' + selectedKey + '"]');
      if (again) { again.classList.add("selected"); again.setAttribute("aria-selected", "true"); }
    }
    // Someone else decided while this page was open: close the decision panel.
    var status = document.getElementById("approval-status");
    if (status && status.getAttribute("data-status") !== "pending") {
      document.querySelectorAll(".decision-panel button, .decision-panel textarea, .decision-panel input, .decision-panel select")
        .forEach(function (el) { el.disabled = true; });
      var panel = document.querySelector(".decision-panel");
      if (panel && !panel.querySelector(".closed-note")) {
        var note = document.createElement("p");
        note.className = "alert alert-danger closed-note";
        note.setAttribute("role", "alert");
        note.textContent = "This approval was decided meanwhile (see Status). No further decision can be made.";
        panel.insertBefore(note, panel.firstChild.nextSibling);
      }
    }
    tick();
  });

  // Any change to an edit after its preview hides the stale confirmation.
  document.addEventListener("input", function (event) {
    var form = event.target.closest && event.target.closest("#edit-form");
    var diff = form && form.querySelector("#edit-diff");
    if (diff) diff.remove();
  });

  tick();
  setInterval(tick, 1000);
})();
