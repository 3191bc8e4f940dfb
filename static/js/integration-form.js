// The integration form: a problem said about a field goes once the field is changed (it
// may be fixed; the next save or test says again if not), a connection test's answer is
// cleared when the form changes, since it no longer describes what is typed, and a new
// answer is scrolled into view, as it may land below the fold.
(function () {
  "use strict";

  var form = document.getElementById("integration-form");
  if (!form) return;
  var result = document.getElementById("test-result");

  form.addEventListener("input", function (event) {
    var field = event.target;
    if (field.id) {
      var error = document.getElementById(field.id + "_error");
      if (error) error.hidden = true;
    }
    if (result && result.firstElementChild) result.replaceChildren();
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    if (result && event.detail.target === result && result.firstElementChild) {
      result.scrollIntoView({ block: "nearest" });
    }
  });
})();
