// <input type="checkbox" data-select-all="NAME">: ticks or clears every checkbox named
// NAME in its form that is marked data-importable (the ones that can be done at all), and
// shows whether all, some or none of them are ticked. Hidden until this script shows it:
// without JavaScript each box is ticked by hand.
(function () {
  "use strict";

  document.querySelectorAll("input[data-select-all]").forEach(function (all) {
    var form = all.form;
    if (!form) return;
    var name = all.dataset.selectAll;
    function boxes() {
      return Array.prototype.filter.call(form.elements, function (el) {
        return el.name === name && el.type === "checkbox" && el.hasAttribute("data-importable");
      });
    }
    function show() {
      var ticked = boxes().filter(function (box) { return box.checked; }).length;
      all.checked = ticked > 0 && ticked === boxes().length;
      all.indeterminate = ticked > 0 && ticked < boxes().length;
    }
    all.hidden = false;
    all.addEventListener("change", function () {
      boxes().forEach(function (box) { box.checked = all.checked; });
      show();
    });
    form.addEventListener("change", function (event) {
      if (event.target !== all) show();
    });
    show();
  });
})();
