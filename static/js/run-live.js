// The live part of a run page (#run-live), swapped by htmx while the run is active.
// "running for N s" counts up every second from data-elapsed-since; without this script
// the server-rendered value stays (and the page refreshes itself). Focus across the swaps
// (Cancel while it is there, then the run's status) is swap-focus.js's, steered by the
// data-swap-focus marks in the template.
(function () {
  "use strict";

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
