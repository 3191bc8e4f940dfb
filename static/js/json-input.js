// JSON inputs (textarea[data-json-editor]): checked as you type, with the parse error and
// where it is; "Format" pretty-prints a valid value. The server checks again on submit
// (tools_app/forms/runs.py), so this is a convenience, never the guard.
(function () {
  "use strict";

  function position(text, message) {
    // Browsers say "at position N" (V8) or "at line L column C" (Firefox): show a line.
    const at = /position (\d+)/.exec(message);
    if (!at) return "";
    const before = text.slice(0, Number(at[1]));
    const line = before.split("\n").length;
    const column = before.length - before.lastIndexOf("\n");
    return " (line " + line + ", column " + column + ")";
  }

  function attach(area) {
    const status = document.createElement("span");
    status.className = "json-status muted";
    status.setAttribute("role", "status");
    const format = document.createElement("button");
    format.type = "button";
    format.className = "button secondary";
    format.textContent = "Format JSON";
    const bar = document.createElement("span");
    bar.className = "json-tools";
    bar.append(format, " ", status);
    area.after(bar);
    const label = area.dataset.jsonEditor || area.name;

    function check() {
      const text = area.value.trim();
      if (!text) {
        status.textContent = "";
        area.removeAttribute("aria-invalid");
        return null;
      }
      try {
        const value = JSON.parse(text);
        status.textContent = "valid JSON";
        status.classList.remove("error");
        area.removeAttribute("aria-invalid");
        return value;
      } catch (error) {
        status.textContent = label + ": not valid JSON: " + error.message + position(text, error.message);
        status.classList.add("error");
        area.setAttribute("aria-invalid", "true");
        return undefined;
      }
    }

    area.addEventListener("input", check);
    format.addEventListener("click", function () {
      const value = check();
      if (value !== undefined && value !== null) {
        area.value = JSON.stringify(value, null, 2);
      }
    });
    check();
  }

  document.querySelectorAll("textarea[data-json-editor]").forEach(attach);
})();
