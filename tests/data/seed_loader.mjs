// A tool loader written from the seed's rules only (seed 003, TOOLS.md): it knows nothing of
// Tool Console. A tool is a folder under one of PI_TOOLS_DIRS (colon-separated) holding
// TOOL.md and an entry point, index.ts or index.js; folders missing either are skipped.
// The entry exports execute(toolCallId, params, signal, onUpdate).
//
// Usage: node seed_loader.mjs list
//        node seed_loader.mjs call NAME PARAMS_JSON [--abort-on UPDATE_TEXT]
// Prints one JSON line per event: {"tools": [...]}, {"update": text}, {"result": ...}, or
// {"thrown": message} when execute throws (an agent shows that to the model as the error).
//
// The verifying variant (docs/sync.md, "Loaders that verify"): with env VERIFY_WITH set to
// the path of clients/sync-tools.mjs, `call` first checks the tool's folder with its
// verifyFolder() and imports the entry only when it passes; otherwise it prints
// {"refused": message} and imports nothing.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

function discover() {
  const tools = new Map();
  for (const dir of (process.env.PI_TOOLS_DIRS || "").split(":").filter(Boolean)) {
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir).sort()) {
      const folder = join(dir, name);
      if (!statSync(folder).isDirectory()) continue;
      const toolMd = join(folder, "TOOL.md");
      const entry = ["index.ts", "index.js"].map((f) => join(folder, f)).find(existsSync);
      if (!existsSync(toolMd) || !entry) continue;
      const front = readFileSync(toolMd, "utf8").split(/^---$/m)[1] || "";
      const toolName = (front.match(/^name:\s*(\S+)\s*$/m) || [])[1];
      if (toolName) tools.set(toolName, entry);
    }
  }
  return tools;
}

const print = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const [command, name, paramsJson, flag, abortOn] = process.argv.slice(2);
const tools = discover();
if (command === "list") {
  print({ tools: [...tools.keys()] });
} else if (command === "call") {
  if (process.env.VERIFY_WITH) {
    const { verifyFolder } = await import(pathToFileURL(resolve(process.env.VERIFY_WITH)).href);
    try {
      verifyFolder(dirname(tools.get(name)));
    } catch (error) {
      print({ refused: String(error?.message ?? error) });
      process.exit(0);
    }
  }
  const module = await import(pathToFileURL(tools.get(name)).href);
  const controller = new AbortController();
  const onUpdate = (partial) => {
    const text = partial.content.map((c) => c.text).join("");
    print({ update: text });
    // As a person pressing stop would: a moment later, while the tool is waiting.
    if (flag === "--abort-on" && text.includes(abortOn)) setTimeout(() => controller.abort(), 0);
  };
  try {
    const result = await module.execute("call-1", JSON.parse(paramsJson), controller.signal, onUpdate);
    print({ result });
  } catch (error) {
    print({ thrown: String(error?.message ?? error) });
  }
} else {
  process.stderr.write("usage: seed_loader.mjs list | call NAME PARAMS_JSON\n");
  process.exit(1);
}
