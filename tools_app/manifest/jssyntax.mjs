// Parses a tool's TypeScript and JavaScript files for tools_app/manifest/jssyntax.py: the editor's
// live validation and `validate_tools` both get their syntax errors from here.
//
// Started as `node --permission jssyntax.mjs` (no file system, no child processes): it
// reads {"files": [{"source": "...", "typescript": bool, "module": true | false | null}]}
// on stdin and writes, in order, one of these per file on stdout:
//   {}                                  the file parses
//   {"error": "...", "code": ..., "stack": "..."}  a syntax error (code: Node's, as
//                                       ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX); `stack` is Node's
//                                       decorated stack: "<name>:<line>", the source line
//                                       and a caret row under the error
//   {"unchecked": "..."}                the parser gave up (too deep a nesting): the last
//                                       result, the files after it are not checked
//   {"module_error": "...", "code": "..."}  JavaScript (the stripped code) that is no valid
//                                       ES module: V8 gives no position here, so manifest/jssyntax.py
//                                       asks `node --check --input-type=module` for it
// Nothing of a tool runs: stripTypeScriptTypes only rewrites the text (mode "strip": the
// types are blanked, lines and columns stay), vm.compileFunction and vm.SourceTextModule
// only compile (a module is never linked nor evaluated).
import { readFileSync } from "node:fs";
import { stripTypeScriptTypes } from "node:module";
import { SourceTextModule, compileFunction } from "node:vm";

// What V8 says when ES module syntax (or what is an error in CommonJS only: top-level
// await, a `require` declared again) is parsed as CommonJS: Node then loads a file without
// a package.json "type" as an ES module (its containsModuleSyntax()).
const ESM_SYNTAX = new Set([
  "Cannot use import statement outside a module",
  "Unexpected token 'export'",
  "Cannot use 'import.meta' outside a module",
  "Identifier 'module' has already been declared",
  "Identifier 'exports' has already been declared",
  "Identifier 'require' has already been declared",
  "Identifier '__filename' has already been declared",
  "Identifier '__dirname' has already been declared",
  "await is only valid in async functions and the top level bodies of modules",
]);
const CJS_PARAMS = ["exports", "require", "module", "__filename", "__dirname"];
const NAME = "source"; // the name in decorated stacks: never a path of this machine

function syntaxError(error) {
  if (!(error instanceof SyntaxError)) throw error;
  // The decorated head only: the frames below it are this script's and Node's.
  const stack = String(error.stack).split("\n    at ")[0].slice(0, 4000);
  return { error: error.message, code: error.code ?? null, stack };
}

function asModule(code) {
  try {
    new SourceTextModule(code, { identifier: NAME });
    return {};
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    return { module_error: error.message, code };
  }
}

// Node's rules: a .mjs/.mts file (or "type": "module") is an ES module, a .cjs/.cts file
// (or "type": "commonjs") CommonJS, anything else CommonJS unless it has ES module syntax.
function check({ source, typescript, module }) {
  let code = source;
  if (typescript) {
    try {
      code = stripTypeScriptTypes(source, { mode: "strip", sourceUrl: NAME });
    } catch (error) {
      return syntaxError(error);
    }
  }
  if (module === true) return asModule(code);
  try {
    compileFunction(code, CJS_PARAMS, { filename: NAME });
    return {};
  } catch (error) {
    if (module === null && error instanceof SyntaxError && ESM_SYNTAX.has(error.message)) {
      return asModule(code);
    }
    return syntaxError(error);
  }
}

function safely(file) {
  try {
    return check(file);
  } catch (error) {
    // Not a syntax error (too deep a nesting, out of memory): the file is left unchecked.
    return { unchecked: `${error?.name ?? "error"}` };
  }
}

// A parser that gave up may be broken for good (swc's WebAssembly memory is, after a
// nesting too deep for it): the results stop there and manifest/jssyntax.py sends the files after
// it to a new process.
const { files } = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const file of files) {
  results.push(safely(file));
  if ("unchecked" in results.at(-1)) break;
}
process.stdout.write(JSON.stringify(results));
