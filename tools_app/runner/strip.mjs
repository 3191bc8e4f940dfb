// Strips the types of a TypeScript tool's files for the worker (runner/tsstrip.py), so
// that the sandbox imports plain JavaScript and never loads Node's type stripper.
//
// Started by the worker as `node --permission strip.mjs` (no file system, no child
// processes): it reads {"files": [{"source": "...", "module": true | null}]} on stdin
// and writes [{"code": "..."} | {"code": null, "why": "..."}] on stdout, in order.
// Nothing of a tool runs here: stripTypeScriptTypes only rewrites the text (mode "strip"
// blanks the types, so lines and columns stay where they were) and vm.compileFunction
// only parses. A file left without code (a syntax error, TypeScript that needs a
// transform, CommonJS, a format not known for sure) is loaded by Node's own type
// stripping in the sandbox, which reports its errors as it always did.
import { readFileSync } from "node:fs";
import { stripTypeScriptTypes } from "node:module";
import { compileFunction } from "node:vm";

// What V8 says when ES module syntax is parsed as CommonJS: Node then takes a .ts file
// without a package.json "type" for an ES module (its containsModuleSyntax()).
const ESM_SYNTAX = new Set([
  "Cannot use import statement outside a module",
  "Unexpected token 'export'",
  "Cannot use 'import.meta' outside a module",
]);
const CJS_PARAMS = ["exports", "require", "module", "__filename", "__dirname"];

// true: ES module syntax; false: valid CommonJS; null: anything else (Node decides).
function moduleSyntax(code) {
  try {
    compileFunction(code, CJS_PARAMS);
    return false;
  } catch (error) {
    return error instanceof SyntaxError && ESM_SYNTAX.has(error.message) ? true : null;
  }
}

function strip({ source, module }) {
  let code;
  try {
    code = stripTypeScriptTypes(source, { mode: "strip" });
  } catch (error) {
    return { code: null, why: `${error.code ?? error.name}` };
  }
  const isModule = module === true ? true : moduleSyntax(code);
  if (isModule !== true) return { code: null, why: "not known to be an ES module" };
  return { code };
}

const { files } = JSON.parse(readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(files.map(strip)));
