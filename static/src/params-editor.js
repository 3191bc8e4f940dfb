// The run form's raw JSON mode: a CodeMirror 6 JSON editor on top of its <textarea>,
// checked as you type against the tool's input schema (static/src/params-check.js).
//
// Progressive enhancement, as in editor.js: without this script the textarea posts as it
// is; with it the textarea is hidden and every change is written back into it, so the
// form posts the same field either way. The server checks again (tools_app/views/runs.py)
// and is the guard; this only shows the problems earlier, where they are.
//
// Tab is left to the browser (no indentWithTab): it moves focus out of the editor, so a
// keyboard user is never trapped in it.

import {
  EditorView,
  drawSelection,
  highlightActiveLine,
  highlightActiveLineGutter,
  keymap,
  lineNumbers,
} from "@codemirror/view";
import { EditorState } from "@codemirror/state";
import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import {
  bracketMatching,
  ensureSyntaxTree,
  foldGutter,
  indentOnInput,
  syntaxHighlighting,
} from "@codemirror/language";
import { linter, lintGutter } from "@codemirror/lint";
import { searchKeymap } from "@codemirror/search";
import { json } from "@codemirror/lang-json";
import { highlightStyle } from "./highlight.js";
import { paramsProblems } from "./params-check.js";

const VALUE_NODES = new Set(["Object", "Array", "String", "Number", "True", "False", "Null"]);

function valueIn(node) {
  for (let child = node && node.firstChild; child; child = child.nextSibling) {
    if (VALUE_NODES.has(child.name)) return child;
  }
  return null;
}

// A container is marked at its opening bracket, not all of its lines.
function rangeOf(node) {
  if (node.name === "Object" || node.name === "Array") return { from: node.from, to: node.from + 1 };
  return { from: node.from, to: node.to };
}

// Where a problem's path is in the document, from the syntax tree of the (valid) JSON.
// The last property of a name wins, as in JSON.parse.
function locate(state, tree, path, at) {
  let node = tree && valueIn(tree.topNode);
  if (!node) return { from: 0, to: Math.min(1, state.doc.length) };
  for (let index = 0; index < path.length; index++) {
    const key = path[index];
    let found = null;
    let name = null;
    if (node.name === "Object") {
      for (let child = node.firstChild; child; child = child.nextSibling) {
        if (child.name !== "Property") continue;
        const nameNode = child.getChild("PropertyName");
        if (!nameNode) continue;
        let text;
        try {
          text = JSON.parse(state.doc.sliceString(nameNode.from, nameNode.to));
        } catch {
          continue;
        }
        if (text === String(key)) {
          found = valueIn(child);
          name = nameNode;
        }
      }
    } else if (node.name === "Array") {
      let count = 0;
      for (let child = node.firstChild; child; child = child.nextSibling) {
        if (!VALUE_NODES.has(child.name)) continue;
        if (count++ === key) {
          found = child;
          break;
        }
      }
    }
    if (index === path.length - 1 && at === "key" && name) return rangeOf(name);
    if (!found) break;
    node = found;
  }
  return rangeOf(node);
}

// Chromium says "... in JSON at position N (line L column C)" for most mistakes (Firefox
// "at line L column C") and quotes the text for others; the syntax tree's first error
// covers those.
function parseProblem(state, tree, error) {
  let message = String(error.message);
  let pos = null;
  const at = /at position (\d+)/.exec(message);
  const lineColumn = /at line (\d+) column (\d+)/.exec(message); // Firefox
  if (at) pos = Number(at[1]);
  else if (lineColumn && Number(lineColumn[1]) <= state.doc.lines) {
    pos = state.doc.line(Number(lineColumn[1])).from + Number(lineColumn[2]) - 1;
  }
  if (pos === null && tree) {
    tree.iterate({
      enter(node) {
        if (pos !== null) return false;
        if (node.type.isError) pos = node.from;
      },
    });
  }
  if (pos === null) pos = state.doc.length;
  pos = Math.min(pos, state.doc.length);
  message = message
    .replace(/ at (position|line) \d+.*$/s, "")
    .replace(/, (\.\.\.)?".*" is not valid JSON$/s, "")
    .replace(/^JSON\.parse: /, "");
  return { pos, message };
}

function where(state, pos) {
  const line = state.doc.lineAt(pos);
  return { line: line.number, column: pos - line.from + 1 };
}

function problemsIn(state, schema) {
  const text = state.doc.toString();
  // A large paste is parsed in full once; past the time limit positions fall back to the
  // top (the messages still hold).
  const tree = ensureSyntaxTree(state, state.doc.length, 500);
  let params;
  try {
    params = text.trim() ? JSON.parse(text) : {}; // empty means {}, as on the server
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    const { pos, message } = parseProblem(state, tree, error);
    const { line, column } = where(state, pos);
    const to = Math.min(pos + 1, state.doc.length);
    return [
      {
        from: pos,
        to,
        line,
        message: `Not valid JSON: ${message} (line ${line}, column ${column}).`,
      },
    ];
  }
  const problems = paramsProblems(params, schema).map((problem) => {
    const { from, to } = locate(state, tree, problem.path, problem.at);
    return { from, to, line: where(state, from).line, message: problem.message };
  });
  return problems.sort((a, b) => a.from - b.from); // read top to bottom
}

function statusText(problems) {
  if (!problems.length) return "Valid JSON: it matches the tool's inputs.";
  const count = problems.length === 1 ? "1 problem" : `${problems.length} problems`;
  return `${count}: ${problems.map((p) => `line ${p.line}: ${p.message}`).join("; ")}`;
}

function labelOf(textarea) {
  const label = textarea.id && document.querySelector(`label[for="${textarea.id}"]`);
  if (!label) return null;
  if (!label.id) label.id = `${textarea.id}_label`;
  return label;
}

function enhance(textarea) {
  const source = document.getElementById(textarea.dataset.paramsEditor);
  if (!source) return;
  let schema;
  try {
    schema = JSON.parse(source.textContent);
  } catch {
    return; // no schema, no editor: the textarea still works
  }

  const host = document.createElement("div");
  host.className = "code-editor params-editor";
  const status = document.createElement("p");
  status.className = "json-status";
  status.id = `${textarea.id}_status`;
  status.setAttribute("role", "status");
  textarea.after(host, status);

  const label = labelOf(textarea);
  // The help text, the server's problems (if any) and the live status describe it.
  const describedBy = [textarea.getAttribute("aria-describedby"), status.id]
    .filter(Boolean)
    .join(" ");
  const attributes = { tabindex: "0", "aria-describedby": describedBy };
  if (label) attributes["aria-labelledby"] = label.id;
  else attributes["aria-label"] = textarea.name;

  let shown = null;
  const check = linter(
    (view) => {
      const problems = problemsIn(view.state, schema);
      const text = statusText(problems);
      // Only a change is announced: a screen reader hears each new verdict once.
      if (text !== shown) {
        status.textContent = shown = text;
        status.classList.toggle("error", problems.length > 0);
      }
      if (problems.length) view.contentDOM.setAttribute("aria-invalid", "true");
      else view.contentDOM.removeAttribute("aria-invalid");
      return problems.map(({ from, to, message }) => ({ from, to, severity: "error", message }));
    },
    { delay: 300 },
  );

  const view = new EditorView({
    parent: host,
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        lineNumbers(),
        foldGutter(),
        highlightActiveLineGutter(),
        history(),
        drawSelection(),
        indentOnInput(),
        bracketMatching(),
        highlightActiveLine(),
        syntaxHighlighting(highlightStyle, { fallback: true }),
        json(),
        lintGutter(),
        check,
        keymap.of([...defaultKeymap, ...historyKeymap, ...searchKeymap]),
        EditorView.lineWrapping, // no sideways scrolling on a phone
        EditorView.contentAttributes.of(attributes),
        EditorView.updateListener.of((update) => {
          if (!update.docChanged) return;
          textarea.value = update.state.doc.toString();
          textarea.dispatchEvent(new Event("input", { bubbles: true }));
        }),
      ],
    }),
  });
  textarea.hidden = true; // still in the form: it is what gets posted
  textarea.dataset.enhanced = "true";
  if (label) label.addEventListener("click", () => view.focus());
  // Opened from closed, the panel had no size to measure.
  const panel = textarea.closest("details");
  if (panel) panel.addEventListener("toggle", () => view.requestMeasure());
  // The field the server put focus on (its problems are here) keeps it.
  if (textarea.autofocus) view.focus();
}

function start() {
  for (const textarea of document.querySelectorAll("textarea[data-params-editor]")) {
    enhance(textarea);
  }
  document.documentElement.dataset.paramsEditor = "ready";
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
