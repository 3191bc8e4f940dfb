// Edits in the editor must not be lost silently. While #tool-form holds changes that are
// not saved: leaving the page (reload, close, any link) asks first, and "Publish saved vN"
// is held back, since it publishes the saved version, not what is in the editor.
(() => {
  const form = document.getElementById("tool-form");
  if (!form) return;
  let dirty = false;
  // Looked up when needed: Save and run swaps the tool actions for the new version's.
  const publishLink = () => document.querySelector("[data-publish-saved]");
  const unsavedNote = () => document.getElementById("unsaved-note");
  // Save and run (the run panel) saves without leaving the page: count edits, so that
  // typing while it was on its way still counts as unsaved once it is saved.
  let edits = 0;
  let editsSent = 0;

  function markDirty() {
    edits += 1;
    if (dirty) return;
    dirty = true;
    const note = unsavedNote();
    const publish = publishLink();
    if (note) note.hidden = false;
    if (publish) publish.setAttribute("aria-disabled", "true");
  }

  form.addEventListener("input", markDirty);
  form.addEventListener("change", markDirty);
  // Submitting the form is how changes get saved: no warning for that.
  form.addEventListener("submit", () => { dirty = false; });
  document.addEventListener("htmx:beforeRequest", (event) => {
    if (event.detail.elt && event.detail.elt.id === "save-and-run") editsSent = edits;
  });
  // Sent (HX-Trigger) by the server once Save and run has saved the editor's text.
  document.addEventListener("tool-saved", () => {
    if (edits !== editsSent) {
      // Typed since: the swapped-in actions must hold "Publish" back again.
      dirty = false;
      markDirty();
      return;
    }
    dirty = false;
  });

  window.addEventListener("beforeunload", (event) => {
    if (!dirty) return;
    event.preventDefault();
    event.returnValue = "";
  });

  // In-app links: say what is lost, in words, before leaving.
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a[href]");
    if (!dirty || !link || link.hasAttribute("download") || link.getAttribute("href").startsWith("#")) return;
    const note = unsavedNote();
    if (link === publishLink()) {
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
