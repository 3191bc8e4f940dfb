// Keeps keyboard focus when htmx replaces the part of the page that held it: without
// this, activating "Next" in a paginated list swaps the list (and the link) out and
// focus falls back to <body>, so a keyboard or screen-reader user starts over at the
// top. Focus goes to the swapped-in element's [data-swap-focus] child or, failing that,
// to the element itself (made focusable from script only): on a run page, Cancel while
// it is there, then the run's status.
(function () {
  "use strict";

  var lostId = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    var active = document.activeElement;
    lostId = target && target.id && active && active !== document.body && target.contains(active)
      ? target.id
      : null;
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!lostId) return;
    var id = lostId;
    lostId = null;
    var active = document.activeElement;
    if (active && active !== document.body && active.isConnected) return;
    var region = document.getElementById(id);
    if (!region) return;
    var target = region.querySelector("[data-swap-focus]") || region;
    if (!target.hasAttribute("tabindex") && !target.matches("a[href], button, input, select, textarea")) {
      target.setAttribute("tabindex", "-1");
    }
    target.focus();
  });
})();
