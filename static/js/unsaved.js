// Edits in the editor must not be lost silently. While #tool-form holds changes that are
// not saved: leaving the page (reload, close, any link) asks first, and "Publish saved vN"
// is held back, since it publishes the saved version, not what is in the editor.
(() => {
  const form = document.getElementById("tool-form");
  if (!form) return;
  let dirty = false;
  const publish = document.querySelector("[data-publish-saved]");
  const note = document.getElementById("unsaved-note");

  function markDirty() {
    if (dirty) return;
    dirty = true;
    if (note) note.hidden = false;
    if (publish) publish.setAttribute("aria-disabled", "true");
  }

  form.addEventListener("input", markDirty);
  form.addEventListener("change", markDirty);
  // Submitting the form is how changes get saved: no warning for that.
  form.addEventListener("submit", () => { dirty = false; });

  window.addEventListener("beforeunload", (event) => {
    if (!dirty) return;
    event.preventDefault();
    event.returnValue = "";
  });

  // In-app links: say what is lost, in words, before leaving.
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a[href]");
    if (!dirty || !link || link.hasAttribute("download") || link.getAttribute("href").startsWith("#")) return;
    if (link === publish) {
      event.preventDefault();
      if (note) note.focus();
      window.alert(note ? note.textContent : "Save a version first.");
      return;
    }
    if (!window.confirm("You have unsaved changes in the editor. Leave this page and lose them?")) {
      event.preventDefault();
    } else {
      dirty = false; // already asked: no second beforeunload prompt
    }
  });
})();
