// When an htmx request (Cancel, live updates, filters) gets no answer or an error status,
// say so instead of failing silently: the console may be down or restarting.
(function () {
  "use strict";

  function show(text) {
    var box = document.getElementById("request-error");
    if (!box) return;
    box.textContent = text;
    box.hidden = false;
  }

  function hide() {
    var box = document.getElementById("request-error");
    if (box) box.hidden = true;
  }

  document.addEventListener("htmx:sendError", function () {
    show(
      "The console did not answer, so your last action may not have happened. " +
        "It may be restarting: try again in a moment."
    );
  });
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail && event.detail.xhr ? event.detail.xhr.status : "?";
    show("The console answered with an error (HTTP " + status + "); your last action did not happen.");
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail && event.detail.successful) hide();
  });
})();
