// Copy buttons: <button data-copy="#element-id"> copies that element's text.
// One delegated listener, so buttons that arrive later in htmx swaps work too.
(function () {
  "use strict";

  // navigator.clipboard exists only in secure contexts (https, localhost). Consoles are
  // often reached over plain http inside a firewall, so fall back to a hidden textarea.
  function copyWithTextarea(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try {
      ok = document.execCommand("copy");
    } catch (e) {
      ok = false;
    }
    area.remove();
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () {
        return copyWithTextarea(text);
      });
    }
    return copyWithTextarea(text);
  }

  function selectContents(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var target = document.querySelector(button.getAttribute("data-copy"));
    if (!target) return;
    var status = button.parentElement.querySelector(".copy-status");
    function say(message) {
      if (status) status.textContent = message;
    }
    copyText("value" in target ? target.value : target.textContent).then(
      function () {
        say("Copied.");
      },
      function () {
        // Leave the text selected so Ctrl+C / Cmd+C still works.
        selectContents(target);
        say("Copying was blocked: the text is selected, press Ctrl+C.");
      }
    ).then(function () {
      setTimeout(function () { say(""); }, 3000);
    });
  });
})();
