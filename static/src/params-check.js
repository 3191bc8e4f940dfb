// A tool's params checked in the browser against its input schema, as the raw JSON editor
// (static/src/params-editor.js) types them.
//
// Not a general JSON Schema validator: it knows exactly the keywords that
// tools_app/manifest/schema.input_schema emits (KEYWORDS; tests/manifest/test_raw_json_check.py fails when
// manifest/schema.py starts emitting another), interprets the schema as data (the page's CSP
// forbids eval, so no compiled validators), and words its messages like
// schema.validate_params, whose check is the one that counts.

// Keywords that constrain a value, and the ones that only describe it.
export const KEYWORDS = [
  "type",
  "enum",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "minLength",
  "maxLength",
  "contentEncoding",
];
export const ANNOTATIONS = ["$schema", "description", "default", "writeOnly"];

export const NOT_AN_OBJECT = 'The params must be a JSON object: {"name": value}.';

// Python's _json_kind: what a value is, in a message.
export function kindOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "boolean") return "a boolean";
  if (typeof value === "number") return "a number";
  if (typeof value === "string") return "a string";
  return "an object";
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function hasType(value, type) {
  switch (type) {
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number";
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "boolean":
      return typeof value === "boolean";
    case "array":
      return Array.isArray(value);
    case "object":
      return isObject(value);
    default:
      return true; // a type the schema never emits: the server decides
  }
}

function isFileObject(schema) {
  return schema.type === "object" && schema.properties && "data" in schema.properties;
}

// What an input must be, worded as schema._message words it.
function wanted(schema) {
  if (schema.type === "boolean") return "true or false";
  if (schema.type === "integer") return "an integer";
  if (isFileObject(schema)) return 'a file object {"name", "mime_type", "data" (base64)}';
  if (schema.type === "array") {
    const items = schema.items || {};
    if (isFileObject(items)) return "an array of file objects";
    return `an array of ${items.type} values`;
  }
  if (schema.type === "object") return "an object";
  return `a ${schema.type}`;
}

// Python's repr of a string, as jsonschema's enum message shows it.
function pyRepr(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escaped = text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t");
  return quote + (quote === "'" ? escaped.replace(/'/g, "\\'") : escaped) + quote;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

// toolmd.text_problems: a NUL or a lone surrogate anywhere is refused.
function badText(text) {
  if (text.includes("\u0000")) return "may not contain NUL characters";
  if (LONE_SURROGATE.test(text)) return "is not valid Unicode (it holds an unpaired surrogate)";
  return null;
}

function codePoints(text) {
  return [...text].length; // JSON Schema counts characters, not UTF-16 units
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

// Each problem: {path: [key or index, ...], at: "key" | "value", message}. `at` says
// whether the name of the last key or the value there is at fault.
function check(value, schema, path, problems, sensitive) {
  const where = path.join(".");
  const add = (message, at = "value", to = path) => problems.push({ path: to, at, message });
  if (schema.type !== undefined && !hasType(value, schema.type)) {
    add(`${where}: must be ${wanted(schema)}, got ${kindOf(value)}`);
    return;
  }
  if (typeof value === "number" && !Number.isFinite(value)) {
    add(`${where}: must be a finite number`); // 1e999: JSON.parse gives Infinity
    return;
  }
  if (schema.enum && !schema.enum.some((allowed) => allowed === value)) {
    const shown = sensitive || typeof value !== "string" ? "the value" : pyRepr(value);
    add(`${where}: ${shown} is not one of ${schema.enum.join(", ")}`);
  }
  if (typeof value === "string") {
    const problem = badText(value);
    if (problem) add(`${where}: ${problem}`);
    const length = codePoints(value);
    if (schema.minLength !== undefined && length < schema.minLength) {
      add(`${where}: must be at least ${plural(schema.minLength, "character")} long`);
    }
    if (schema.maxLength !== undefined && length > schema.maxLength) {
      add(`${where}: must be at most ${plural(schema.maxLength, "character")} long`);
    }
    if (schema.contentEncoding === "base64" && (value.length % 4 || !BASE64.test(value))) {
      // input_files names the file, not its data field.
      add(`${path.slice(0, -1).join(".")}: data is not valid base64`);
    }
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => {
      const at = [...path, index];
      if (schema.items) check(item, schema.items, at, problems, sensitive);
      else anyValue(item, at, problems);
    });
  }
  if (isObject(value)) {
    const properties = schema.properties || {};
    for (const [key, item] of Object.entries(value)) {
      const at = [...path, key];
      const problem = badText(key);
      if (problem) add(`${where}: a name ${problem}`, "key", at);
      if (key in properties) {
        check(item, properties[key], at, problems, sensitive);
      } else if (schema.additionalProperties === false) {
        const allowed = Object.keys(properties).join(", ");
        add(`${[...path, key].join(".")}: unknown field (allowed: ${allowed})`, "key", at);
      } else {
        anyValue(item, at, problems);
      }
    }
    for (const name of schema.required || []) {
      if (!(name in value)) add(`${[...path, name].join(".")}: is required`);
    }
  }
}

// A value the schema leaves open (a `json` input): only the text rules apply.
function anyValue(value, path, problems) {
  check(value, {}, path, problems, false);
}

// Every problem of `params` (already parsed) against a tool's input schema, the top level
// worded as schema.validate_params words it: a null counts as not given, required names
// only what has no default or preset (tools_app/forms/runs.raw_schema).
export function paramsProblems(params, schema) {
  if (!isObject(params)) return [{ path: [], at: "value", message: NOT_AN_OBJECT }];
  const problems = [];
  const properties = schema.properties || {};
  const allowed = Object.keys(properties).join(", ") || "none";
  for (const [name, value] of Object.entries(params)) {
    const problem = badText(name);
    if (problem) {
      problems.push({ path: [name], at: "key", message: `params: a name ${problem}` });
      continue;
    }
    if (!(name in properties)) {
      const message = `${name}: unknown parameter (allowed: ${allowed})`;
      problems.push({ path: [name], at: "key", message });
    } else if (value !== null) {
      check(value, properties[name], [name], problems, properties[name].writeOnly === true);
    }
  }
  for (const name of schema.required || []) {
    if (params[name] === undefined || params[name] === null) {
      problems.push({ path: [], at: "value", message: `${name}: is required` });
    }
  }
  return problems;
}
