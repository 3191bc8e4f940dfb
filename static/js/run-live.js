// The live part of a run page (#run-live), swapped by htmx while the run is active.
// - Focus survives the swap: a person who pressed Cancel (or was on any control in it)
//   lands on the run's status, not on <body>, so a screen reader says what happened.
// - "running for N s" counts up every second from data-elapsed-since; without this
//   script the server-rendered value stays (and the page refreshes itself).
(function () {
  "use strict";

  var hadFocus = false;
  document.addEventListener("htmx:beforeSwap", function (event) {
    var live = document.getElementById("run-live");
    hadFocus = !!live && live.contains(document.activeElement);
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!hadFocus) return;
    hadFocus = false;
    var target = document.getElementById("cancel-run") || document.getElementById("run-status");
    if (target) target.focus();
  });

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-elapsed-since]").forEach(function (el) {
      var since = Date.parse(el.getAttribute("data-elapsed-since"));
      if (isNaN(since)) return;
      var seconds = Math.max(0, Math.round((now - since) / 1000));
      el.textContent = "running for " + seconds + " s";
    });
  }
  setInterval(tick, 1000);
})();
