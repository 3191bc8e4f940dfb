// Runs a TypeScript/JavaScript tool's execute() inside the sandbox and reports to the runner.
//
// Started as `node harness.mjs ENTRY CONFIG_JSON` with the params as JSON on stdin, or as
// `node harness.mjs --standby` in a sandbox started before its run (standby.py): it says
// {"type": "ready"}, then reads {entry, config, env, params, stripped} on stdin. `stripped`
// maps a typescript tool's .ts files to their types stripped by the worker (tsstrip.py):
// they are loaded in their place, at the same URLs, so Node's type stripper (~35 ms of
// CPU to load) is only loaded for a file the worker could not strip.
// Protocol messages are JSON lines on fd 3, so nothing the tool prints (console.log goes to
// stdout, which the runner keeps as log) can forge them: {"type": "update", content,
// truncated, progress?, total?},
// {"type": "update_limit"} once the update limit is passed, and one {"type": "result", ...}
// right before the harness exits.
//
// Built-in modules come from process.getBuiltinModule(), not `import`: an ES import of
// node:fs builds its whole namespace, which loads fs/promises and more (~3 ms of CPU per
// sandbox start, measured with bench/runner_cpu.py).
const { fstatSync, readFileSync, writeSync } = process.getBuiltinModule("node:fs");
const { registerHooks } = process.getBuiltinModule("node:module");
const { basename } = process.getBuiltinModule("node:path");
const { pathToFileURL } = process.getBuiltinModule("node:url");

const PROTOCOL_FD = 3;
const SHAPE = '{content: [{type: "text", text: "..."}], isError: false}';
const STANDBY = process.argv[2] === "--standby";
let [entry, configJson] = process.argv.slice(2);
// In standby, cautious limits until the run's own arrive with its entry.
let config = STANDBY
  ? { maxResultBytes: 1 << 16, maxUpdateBytes: 1 << 16, maxUpdates: 0 }
  : JSON.parse(configJson);
let finished = false;
let updates = 0;

function writeAll(fd, text) {
  const data = Buffer.from(text, "utf8");
  let offset = 0;
  while (offset < data.length) {
    try {
      offset += writeSync(fd, data, offset, data.length - offset);
    } catch (error) {
      if (error.code !== "EAGAIN") throw error;
    }
  }
}

// Without the protocol pipe nothing can be reported and the harness would wait forever:
// fail fast and say why.
function protocolLost(error) {
  process.stderr.write(
    `harness: cannot write to the protocol pipe (fd ${PROTOCOL_FD}): ${error.code ?? error}; ` +
      `run it as the runner does, with fd ${PROTOCOL_FD} open for writing\n`,
  );
  process.exit(70);
}

try {
  fstatSync(PROTOCOL_FD);
} catch (error) {
  protocolLost(error);
}

function send(message) {
  try {
    writeAll(PROTOCOL_FD, JSON.stringify(message) + "\n");
  } catch (error) {
    protocolLost(error);
  }
}

function describe(value) {
  let text;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > 200 ? text.slice(0, 200) + "..." : text;
}

function errorText(error) {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return `non-Error value thrown: ${describe(error)}`;
}

// Why `value` is not a {content: [...], isError?: boolean} object, or null.
function problem(value, what) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return `${what} must be an object like ${SHAPE}, got ${describe(value)}`;
  }
  if (!Array.isArray(value.content)) {
    return `${what}.content must be an array, got ${describe(value.content)}`;
  }
  for (const [index, item] of value.content.entries()) {
    if (!item || item.type !== "text" || typeof item.text !== "string") {
      return `${what}.content[${index}] must be {type: "text", text: string}, got ${describe(item)}`;
    }
  }
  if (value.isError !== undefined && typeof value.isError !== "boolean") {
    return `${what}.isError must be a boolean, got ${describe(value.isError)}`;
  }
  return null;
}

// Texts cut to maxBytes of UTF-8 in all, never inside a character.
function clip(content, maxBytes) {
  const clipped = [];
  let used = 0;
  let size = 0;
  for (const item of content) {
    const data = Buffer.from(item.text, "utf8");
    size += data.length;
    const room = maxBytes - used;
    if (room <= 0) continue;
    let end = Math.min(data.length, room);
    while (end > 0 && end < data.length && (data[end] & 0xc0) === 0x80) end--;
    used += end;
    clipped.push({ type: "text", text: data.toString("utf8", 0, end) });
  }
  return { content: clipped, truncated: size > maxBytes, size };
}

// process.stdout and process.stderr are made on first use (a pipe's stream costs ~2.5 ms
// of CPU): note which ones the tool or the harness used, so that finish() flushes only those.
const opened = [];
for (const name of ["stdout", "stderr"]) {
  const { get } = Object.getOwnPropertyDescriptor(process, name);
  Object.defineProperty(process, name, {
    configurable: true,
    enumerable: true,
    get() {
      const stream = get.call(process);
      if (!opened.includes(stream)) opened.push(stream);
      return stream;
    },
  });
}

function drained(stream) {
  return new Promise((resolve) => {
    if (!stream.writableLength) resolve();
    else stream.once("drain", resolve);
  });
}

// Flush, report, then exit now, whatever timers or sockets the tool left open. Pipes are
// asynchronous in Node, so what the tool printed is flushed first (for at most a second):
// the runner ends the sandbox the moment the result arrives, not when this process exits.
async function finish(content, isError, structured) {
  if (finished) return;
  finished = true;
  const clipped = clip(content, config.maxResultBytes);
  const flushed = Promise.all(opened.map(drained));
  await Promise.race([flushed, new Promise((resolve) => setTimeout(resolve, 1000))]);
  const message = { type: "result", isError, ...clipped };
  if (structured !== undefined) message.structuredContent = structured;
  send(message);
  process.exit(0);
}

const MAX_DEPTH = 64; // tools_app/lib/nesting.py's cap, which the runner applies again

// Whether `value` nests deeper than the cap (a cycle does): it stops looking there.
function tooDeep(value, level = 1) {
  if (value === null || typeof value !== "object") return false;
  if (level > MAX_DEPTH) return true;
  return Object.values(value).some((child) => tooDeep(child, level + 1));
}

// A result's structuredContent as plain JSON, or why it cannot be: the runner checks it
// against the tool's outputs (tools_app/manifest/outputs.py).
function structuredOf(value) {
  const structured = value.structuredContent;
  if (structured === undefined) return { structured };
  if (structured === null || typeof structured !== "object" || Array.isArray(structured)) {
    return { why: `structuredContent must be an object, got ${describe(structured)}` };
  }
  if (tooDeep(structured)) {
    return { why: `structuredContent is nested deeper than ${MAX_DEPTH} levels` };
  }
  let json;
  try {
    json = JSON.stringify(structured);
  } catch (error) {
    return { why: `structuredContent is not JSON: ${errorText(error)}` };
  }
  const size = Buffer.byteLength(json, "utf8");
  if (size > config.maxResultBytes) {
    return {
      why: `structuredContent is ${size} bytes, over the result limit of ${config.maxResultBytes}`,
    };
  }
  return { structured: JSON.parse(json) };
}

function fail(message) {
  return finish([{ type: "text", text: message }], true);
}

// A progress or total as it goes on the pipe: a finite number as it is, anything else as
// the name of its kind, which the console names in a notice (tools_app/runs/progress.py).
// Never an error: a bad count must not fail the run.
function count(value) {
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value);
  return value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
}

function onUpdate(update) {
  // Progress alone ({progress, total, message?}, like MCP's notifications/progress) needs
  // no content: its message, if any, is the update's text (as on a bash tool's fd 3).
  const alone = update && typeof update === "object" && update.content === undefined;
  if (alone && "progress" in update) {
    const { message, ...counts } = update;
    const text = typeof message === "string" && message ? [{ type: "text", text: message }] : [];
    update = { ...counts, content: text };
  }
  const why = problem(update, "onUpdate() argument");
  if (why) throw new TypeError(why);
  if (finished) return;
  updates += 1;
  if (updates > config.maxUpdates) {
    if (updates === config.maxUpdates + 1) send({ type: "update_limit" });
    return;
  }
  const clipped = clip(update.content, config.maxUpdateBytes);
  const message = { type: "update", content: clipped.content, truncated: clipped.truncated };
  if (update.progress !== undefined) message.progress = count(update.progress);
  if (update.total !== undefined) message.total = count(update.total);
  send(message);
}

const controller = new AbortController();
process.on("SIGTERM", () => controller.abort());
process.on("uncaughtException", (error) => {
  console.error(error);
  fail(`Uncaught exception: ${errorText(error)}`);
});
process.on("unhandledRejection", (reason) => {
  console.error(reason);
  fail(`Unhandled promise rejection: ${errorText(reason)}`);
});
// Keep the event loop alive: a promise that never settles waits for the wall timeout
// instead of Node exiting with "unsettled top-level await".
setInterval(() => {}, 1 << 30);

function loadStripped(stripped) {
  const files = new Map(
    Object.entries(stripped).map(([source, js]) => [pathToFileURL(source).href, js]),
  );
  if (!files.size) return;
  registerHooks({
    load(url, context, nextLoad) {
      const js = files.get(url);
      // Only ES modules are stripped (tsstrip.py); Node's default load would detect
      // the format by stripping the source itself.
      if (js === undefined) return nextLoad(url, context);
      return { format: "module", source: readFileSync(js, "utf8"), shortCircuit: true };
    },
  });
}

async function main() {
  let params;
  if (STANDBY) {
    send({ type: "ready" });
    const message = JSON.parse(readFileSync(0, "utf8"));
    ({ entry, config, params } = message);
    Object.assign(process.env, message.env);
    loadStripped(message.stripped ?? {});
  } else {
    const raw = readFileSync(0, "utf8");
    params = raw.trim() ? JSON.parse(raw) : {};
  }
  const name = basename(entry);
  let module;
  try {
    module = await import(pathToFileURL(entry).href);
  } catch (error) {
    console.error(error);
    return fail(`Could not load ${name}: ${errorText(error)}`);
  }
  const execute = module?.execute ?? module?.default?.execute;
  if (typeof execute !== "function") {
    return fail(`${name} does not export execute(toolCallId, params, signal, onUpdate)`);
  }
  let value;
  try {
    value = await execute(process.env.TOOL_CALL_ID ?? "", params, controller.signal, onUpdate);
  } catch (error) {
    console.error(error);
    return fail(errorText(error));
  }
  const why = problem(value, "execute() result");
  if (why) return fail(`The tool returned a malformed result: ${why}`);
  const { structured, why: refused } = structuredOf(value);
  if (refused) return fail(`The tool returned a malformed result: ${refused}`);
  return finish(value.content, value.isError === true, structured);
}

await main();
