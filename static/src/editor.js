// Tool Console's code editor: CodeMirror 6 on top of plain <textarea>s.
//
// Progressive enhancement: the page works with the textareas alone (the form posts them,
// the server validates). When this script loads, each `textarea[data-code-editor]` is
// hidden and replaced by a CodeMirror view that writes every change back into the
// textarea and fires an `input` event, so the form, htmx's live validation and a plain
// submit all keep reading the textarea. Problems the server reports (a JSON list in
// `script#problems-data`) become inline diagnostics at their lines.

import {
  EditorView,
  drawSelection,
  highlightActiveLine,
  highlightActiveLineGutter,
  keymap,
  lineNumbers,
} from "@codemirror/view";
import { Annotation, Compartment, EditorState, Transaction } from "@codemirror/state";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import {
  StreamLanguage,
  bracketMatching,
  indentOnInput,
  syntaxHighlighting,
} from "@codemirror/language";
import { lintGutter, setDiagnostics } from "@codemirror/lint";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import { markdown } from "@codemirror/lang-markdown";
import { yaml, yamlFrontmatter } from "@codemirror/lang-yaml";
import { javascript } from "@codemirror/lang-javascript";
import { python } from "@codemirror/lang-python";
import { shell } from "@codemirror/legacy-modes/mode/shell";
import { highlightStyle } from "./highlight.js";

const views = new Map(); // textarea -> EditorView
// Marks a change the page makes itself (the saved version number): not an edit.
const fromServer = Annotation.define();

function languageFor(path) {
  const name = (path || "").toLowerCase();
  if (name === "tool.md" || name.endsWith("/tool.md")) {
    return yamlFrontmatter({ content: markdown() });
  }
  if (name.endsWith(".md")) return markdown();
  if (name.endsWith(".ts") || name.endsWith(".mts") || name.endsWith(".tsx")) {
    return javascript({ typescript: true });
  }
  if (name.endsWith(".js") || name.endsWith(".mjs") || name.endsWith(".cjs")) return javascript();
  if (name.endsWith(".json")) return javascript();
  if (name.endsWith(".py")) return python();
  if (name.endsWith(".sh") || name.endsWith(".bash")) return StreamLanguage.define(shell);
  if (name.endsWith(".yaml") || name.endsWith(".yml")) return yaml();
  return [];
}

// The file path an editor shows: fixed (data-path) or read from its path <input>.
function pathOf(textarea) {
  const input = textarea.dataset.pathInput && document.getElementById(textarea.dataset.pathInput);
  return input ? input.value : textarea.dataset.path || "";
}

function enhance(textarea) {
  if (views.has(textarea)) return;
  const language = new Compartment();
  const host = document.createElement("div");
  host.className = "code-editor";
  textarea.after(host);

  const view = new EditorView({
    parent: host,
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        lineNumbers(),
        highlightActiveLineGutter(),
        history(),
        drawSelection(),
        indentOnInput(),
        bracketMatching(),
        highlightActiveLine(),
        highlightSelectionMatches(),
        syntaxHighlighting(highlightStyle, { fallback: true }),
        lintGutter(),
        keymap.of([...defaultKeymap, ...historyKeymap, ...searchKeymap, indentWithTab]),
        language.of(languageFor(pathOf(textarea))),
        // tabindex: the editable area is focusable anyway; saying so lets checkers (axe)
        // see that its scrolling box can be reached from the keyboard.
        EditorView.contentAttributes.of({
          "aria-label": textarea.getAttribute("aria-label") || pathOf(textarea),
          tabindex: "0",
        }),
        EditorView.updateListener.of((update) => {
          if (!update.docChanged) return;
          textarea.value = update.state.doc.toString();
          if (update.transactions.some((tr) => tr.annotation(fromServer))) return;
          // Bubbles to the form: htmx's live validation listens for it.
          textarea.dispatchEvent(new Event("input", { bubbles: true }));
        }),
      ],
    }),
  });
  // The textarea stays in the form (it is what gets submitted), out of sight.
  textarea.hidden = true;
  textarea.dataset.enhanced = "true";
  views.set(textarea, view);

  const input = textarea.dataset.pathInput && document.getElementById(textarea.dataset.pathInput);
  if (input) {
    input.addEventListener("change", () => {
      view.dispatch({ effects: language.reconfigure(languageFor(input.value)) });
    });
  }
}

function lineRange(doc, number) {
  const line = doc.line(Math.min(Math.max(1, number), doc.lines));
  return { from: line.from, to: line.to };
}

// Show the server's problems inline. Each problem: {file, line, severity, message}.
function applyProblems() {
  const script = document.getElementById("problems-data");
  if (!script) return;
  let problems;
  try {
    problems = JSON.parse(script.textContent);
  } catch {
    return;
  }
  for (const [textarea, view] of views) {
    if (!textarea.isConnected) {
      views.delete(textarea);
      continue;
    }
    const path = pathOf(textarea);
    const diagnostics = problems
      .filter((p) => p.file === path)
      .map((p) => ({
        ...lineRange(view.state.doc, p.line),
        severity: p.severity === "warning" ? "warning" : "error",
        message: p.message,
      }));
    view.dispatch(setDiagnostics(view.state, diagnostics));
  }
}

// A click on a problem in the list moves the cursor to its line.
function jumpToProblem(event) {
  const link = event.target.closest("a[data-problem-file]");
  if (!link) return;
  for (const [textarea, view] of views) {
    if (pathOf(textarea) !== link.dataset.problemFile) continue;
    event.preventDefault();
    const { from } = lineRange(view.state.doc, Number(link.dataset.problemLine) || 1);
    view.dispatch({ selection: { anchor: from }, scrollIntoView: true });
    view.focus();
    return;
  }
}

// Ctrl+S (Cmd+S on a Mac) presses the page's Save button wherever focus is, in an editor
// or not, instead of the browser's "save page as". The submit goes through the form, so
// its checks and the server's answer are the same as for a click.
function saveShortcut(event) {
  if (!(event.ctrlKey || event.metaKey) || event.altKey || event.key.toLowerCase() !== "s") return;
  const button = document.querySelector("button[data-save-shortcut]");
  if (!button || !button.form) return;
  event.preventDefault();
  for (const [textarea, view] of views) textarea.value = view.state.doc.toString();
  button.form.requestSubmit(button);
}

// The run panel's Save and run saved the editor's text without reloading the page, and
// the server wrote the new version's number into TOOL.md's frontmatter: show it here too,
// as a reload after Save version would. Not an edit: no unsaved-changes warning, no undo.
function followSavedVersion(event) {
  const number = event.detail && event.detail.version;
  if (!number) return;
  for (const [textarea, view] of views) {
    if (pathOf(textarea).toLowerCase() !== "tool.md") continue;
    const doc = view.state.doc;
    if (doc.lines < 2 || doc.line(1).text.trim() !== "---") continue;
    for (let n = 2; n <= doc.lines; n++) {
      const line = doc.line(n);
      if (line.text.trim() === "---") break;
      const match = /^(version:[ \t]*)(\d+)[ \t]*$/.exec(line.text);
      if (!match) continue;
      const from = line.from + match[1].length;
      view.dispatch({
        changes: { from, to: from + match[2].length, insert: String(number) },
        annotations: [fromServer.of(true), Transaction.addToHistory.of(false)],
      });
      break;
    }
  }
}

function enhanceAll(root) {
  for (const textarea of (root || document).querySelectorAll("textarea[data-code-editor]")) {
    enhance(textarea);
  }
  applyProblems();
}

function start() {
  enhanceAll(document);
  document.addEventListener("click", jumpToProblem);
  document.addEventListener("keydown", saveShortcut);
  document.addEventListener("tool-saved", followSavedVersion);
  // Live validation swaps in a new problem list (an outerHTML swap, so listen on the
  // document: the old element is gone by the time events fire on it).
  document.addEventListener("htmx:load", applyProblems);
  document.addEventListener("htmx:afterSettle", applyProblems);
  document.documentElement.dataset.codeEditor = "ready";
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
