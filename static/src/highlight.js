// The syntax colours both editors use (static/src/editor.js, static/src/params-editor.js).
import { HighlightStyle, defaultHighlightStyle } from "@codemirror/language";

// CodeMirror's default colours, with the three below 4.5:1 on white (and on the active
// line's tint) darkened, so every token meets WCAG AA contrast (checked by axe).
const DARKER = { "#085": "#076", "#e40": "#b30", "#f00": "#c20" };
export const highlightStyle = HighlightStyle.define(
  defaultHighlightStyle.specs.map((spec) => ({ ...spec, color: DARKER[spec.color] || spec.color })),
);
