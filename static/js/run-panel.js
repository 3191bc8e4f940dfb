// The editor's run panel (templates/editor/edit.html#run_panel). Save and run answers a
// refusal (bad inputs 400, a newer save 409, errors in the editor 422) with the panel
// saying why: htmx leaves error responses unswapped, so swap those in, and do not count
// them as a failed request (static/js/request-errors.js would say the action failed
// because the console erred, which it did not).
(function () {
  "use strict";

  var SHOWN = { 400: true, 409: true, 422: true };

  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    var elt = detail.requestConfig && detail.requestConfig.elt;
    if (!elt || !elt.closest || !elt.closest("[data-swap-errors]")) return;
    if (!SHOWN[detail.xhr.status]) return;
    detail.shouldSwap = true;
    detail.isError = false;
  });

  // Enter in one of the panel's inputs runs, as on the run page. Those inputs belong to
  // the editor's form, whose first submit button (Add a file) would take the Enter.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Enter" || event.isComposing) return;
    var input = event.target;
    if (!input.matches || !input.matches("#run-panel input:not([type=checkbox]):not([type=file])")) return;
    var button = document.getElementById("save-and-run");
    if (!button || button.disabled) return;
    event.preventDefault();
    button.click();
  });
})();
