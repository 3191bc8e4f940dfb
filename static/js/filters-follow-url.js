// A list's filter form shows what its address says. htmx restores a page from its
// history cache on Back/Forward, and the cached HTML keeps the options a field was
// rendered with, not the ones chosen since: the list was filtered while the dropdowns
// said "Any status", and the next Filter click silently changed the results. After a
// restore (and when the browser's back-forward cache shows the page again) every field of
// a GET form with class "filters" is set from the address.
(function () {
  "use strict";

  function follow() {
    var params = new URLSearchParams(window.location.search);
    document.querySelectorAll("form.filters[method=get]").forEach(function (form) {
      Array.prototype.forEach.call(form.elements, function (field) {
        if (!field.name || field.type === "submit" || field.type === "button") return;
        var values = params.getAll(field.name);
        if (field.type === "checkbox" || field.type === "radio") {
          field.checked = values.indexOf(field.value) !== -1;
        } else if (field.tagName === "SELECT") {
          var wanted = values.length ? values[0] : "";
          var known = Array.prototype.some.call(field.options, function (option) {
            return option.value === wanted;
          });
          field.value = known ? wanted : "";
        } else {
          field.value = values.length ? values[0] : "";
        }
      });
    });
  }

  document.addEventListener("htmx:historyRestore", follow);
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) follow();
  });
})();
