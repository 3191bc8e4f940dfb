#!/usr/bin/env node
// sync-tools.mjs: mirror a Tool Console's published tools into a folder (docs/sync.md).
//
// Needs Node.js >= 22 and nothing else (no npm packages). Usage:
//   CONSOLE_TOKEN=... node sync-tools.mjs --url https://console.example --dir ./tools [--watch 30]
//
// Each pass asks GET /api/v1/sync/manifest?since=<revision from the state file> (with
// If-None-Match), downloads the bundles of tools added or changed, checks every file's
// sha256 and the tool's canonical sha256 against the manifest, unpacks into a temporary
// folder beside the target and renames it into place, and removes the folders of tools
// that were removed or disabled. Only folders this client wrote (listed in its state file)
// are ever replaced or removed; any other folder is left alone and reported.
//
// Exit codes: 0 done; 1 bad usage; 2 network, HTTP or authentication error; 3 integrity
// error (a bundle that does not match the manifest's hashes, or an unreadable/unsafe zip):
// that tool's previous folder stays as it was; 4 local file system error.
import { createHash, randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { existsSync, realpathSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import zlib, { inflateRawSync } from "node:zlib";

const EXIT = { ok: 0, usage: 1, network: 2, integrity: 3, local: 4 };
const STATE_NAME = ".sync-tools-state.json";
const MAX_BUNDLE_BYTES = 64 * 1024 * 1024;
const NAME_RE = /^[a-z][a-z0-9_]{0,63}$/;
const USAGE = `usage: CONSOLE_TOKEN=<agent token with sync:read> node sync-tools.mjs --url URL --dir DIR
                [--state FILE] [--watch SECONDS]
  --url      the console's base URL (or env CONSOLE_URL)
  --dir      the folder to mirror tools into (created if missing)
  --state    the state file (default DIR/${STATE_NAME})
  --watch    poll every SECONDS (ETag / If-None-Match) until stopped; errors are reported
             and retried at the next poll
exit codes: 0 ok, 1 usage, 2 network/HTTP/auth, 3 integrity, 4 local file system`;

class Failure extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function log(message) {
  process.stderr.write(`sync-tools: ${message}\n`);
}

export function parseArgs(argv, env) {
  const options = { url: env.CONSOLE_URL || "", dir: "", state: "", watch: 0 };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Failure(EXIT.usage, `${arg} needs a value`);
      return argv[++i];
    };
    if (arg === "--url") options.url = value();
    else if (arg === "--dir") options.dir = value();
    else if (arg === "--state") options.state = value();
    else if (arg === "--watch") {
      options.watch = Number(value());
      if (!Number.isFinite(options.watch) || options.watch < 1) {
        throw new Failure(EXIT.usage, "--watch needs a number of seconds >= 1");
      }
    } else if (arg === "--help" || arg === "-h") throw new Failure(EXIT.ok, USAGE);
    else throw new Failure(EXIT.usage, `unknown argument ${arg}`);
  }
  if (!options.url) throw new Failure(EXIT.usage, "--url (or CONSOLE_URL) is required");
  if (!/^https?:\/\//.test(options.url)) throw new Failure(EXIT.usage, "--url must be http(s)://...");
  if (!options.dir) throw new Failure(EXIT.usage, "--dir is required");
  options.token = env.CONSOLE_TOKEN || "";
  if (!options.token) throw new Failure(EXIT.usage, "set CONSOLE_TOKEN to an agent token with sync:read");
  options.dir = resolve(options.dir);
  options.state = resolve(options.state || join(options.dir, STATE_NAME));
  return options;
}

// --- hashes (docs/agent-api.md: the canonical sha256) ----------------------------------

export function canonicalSha256(files) {
  const digest = createHash("sha256");
  const entries = [...files.entries()].map(([path, data]) => [Buffer.from(path, "utf8"), data]);
  entries.sort((a, b) => Buffer.compare(a[0], b[0]));
  const length = (n) => {
    const buffer = Buffer.alloc(8);
    buffer.writeBigUInt64BE(BigInt(n));
    return buffer;
  };
  for (const [raw, data] of entries) {
    digest.update(length(raw.length)).update(raw).update(length(data.length)).update(data);
  }
  return digest.digest("hex");
}

const sha256 = (data) => createHash("sha256").update(data).digest("hex");

// --- zip (what the console writes: stored or deflated entries, no zip64) ---------------

function safePath(path) {
  if (!path || path.startsWith("/") || path.includes("\\") || /[\x00-\x1f\x7f]/.test(path)) return false;
  return path.split("/").every((part) => part !== "" && part !== "." && part !== "..");
}

export function readZip(data, folder) {
  try {
    return unzip(data, folder);
  } catch (error) {
    // A corrupted header can point anywhere: whatever breaks is the bundle's fault.
    if (error instanceof Failure) throw error;
    throw new Failure(EXIT.integrity, `${folder}: bad bundle: ${error.message}`);
  }
}

function unzip(data, folder) {
  const fail = (why) => {
    throw new Failure(EXIT.integrity, `${folder}: bad bundle: ${why}`);
  };
  let end = -1;
  for (let i = data.length - 22; i >= Math.max(0, data.length - 65557); i--) {
    if (data.readUInt32LE(i) === 0x06054b50) {
      end = i;
      break;
    }
  }
  if (end < 0) fail("not a zip file");
  const count = data.readUInt16LE(end + 10);
  let at = data.readUInt32LE(end + 16);
  const files = new Map();
  const modes = new Map();
  for (let n = 0; n < count; n++) {
    if (at + 46 > data.length || data.readUInt32LE(at) !== 0x02014b50) fail("broken central directory");
    const method = data.readUInt16LE(at + 10);
    const crc = data.readUInt32LE(at + 16);
    const packed = data.readUInt32LE(at + 20);
    const size = data.readUInt32LE(at + 24);
    const nameLength = data.readUInt16LE(at + 28);
    const skip = nameLength + data.readUInt16LE(at + 30) + data.readUInt16LE(at + 32);
    const attributes = data.readUInt32LE(at + 38);
    const local = data.readUInt32LE(at + 42);
    const name = data.subarray(at + 46, at + 46 + nameLength).toString("utf8");
    at += 46 + skip;
    if (name.endsWith("/")) continue;
    if (!name.startsWith(`${folder}/`) || !safePath(name)) fail(`unsafe or foreign path ${JSON.stringify(name)}`);
    const type = (attributes >>> 16) & 0o170000;
    if (type !== 0 && type !== 0o100000) fail(`${name} is not a regular file`);
    if (local + 30 > data.length || data.readUInt32LE(local) !== 0x04034b50) fail("broken local header");
    const start = local + 30 + data.readUInt16LE(local + 26) + data.readUInt16LE(local + 28);
    const raw = data.subarray(start, start + packed);
    let content;
    try {
      if (method === 0) content = Buffer.from(raw);
      else if (method === 8) content = inflateRawSync(raw, { maxOutputLength: Math.max(size, 1) });
      else fail(`${name}: compression method ${method} is not supported`);
    } catch (error) {
      if (error instanceof Failure) throw error;
      fail(`${name}: ${error.message}`);
    }
    if (content.length !== size) fail(`${name}: size mismatch`);
    if (zlib.crc32 && zlib.crc32(content) !== crc) fail(`${name}: CRC mismatch`);
    const path = name.slice(folder.length + 1);
    files.set(path, content);
    modes.set(path, (attributes >>> 16) & 0o111 ? 0o755 : 0o644);
  }
  return { files, modes };
}

export function verify(tool, files) {
  const fail = (why) => {
    throw new Failure(EXIT.integrity, `${tool.name} v${tool.version}: refused: ${why}`);
  };
  const listed = new Map(tool.files.map((f) => [f.path, f]));
  for (const path of files.keys()) if (!listed.has(path)) fail(`${path} is not in the manifest`);
  for (const [path, entry] of listed) {
    const data = files.get(path);
    if (!data) fail(`${path} is missing from the bundle`);
    if (data.length !== entry.size || sha256(data) !== entry.sha256) fail(`${path} does not match its sha256`);
  }
  if (canonicalSha256(files) !== tool.sha256) fail("the bundle does not match the tool's sha256");
}

// --- HTTP -------------------------------------------------------------------------------

async function get(options, path, headers = {}) {
  const url = new URL(path, options.url.endsWith("/") ? options.url : `${options.url}/`);
  let response;
  try {
    response = await fetch(url, { headers: { Authorization: `Bearer ${options.token}`, ...headers } });
  } catch (error) {
    throw new Failure(EXIT.network, `${url.pathname}: ${error.cause?.message || error.message}`);
  }
  if (response.status === 304) return { status: 304, headers: response.headers };
  if (!response.ok) {
    let detail = "";
    try {
      detail = (await response.json()).error || "";
    } catch {
      // not the API's JSON error
    }
    throw new Failure(EXIT.network, `${url.pathname}: HTTP ${response.status}${detail ? `: ${detail}` : ""}`);
  }
  return { status: response.status, headers: response.headers, response };
}

async function download(options, tool) {
  const { response } = await get(options, tool.bundle_url);
  const declared = Number(response.headers.get("content-length") || 0);
  if (declared > MAX_BUNDLE_BYTES) throw new Failure(EXIT.integrity, `${tool.name}: bundle too large`);
  const data = Buffer.from(await response.arrayBuffer());
  if (data.length > MAX_BUNDLE_BYTES) throw new Failure(EXIT.integrity, `${tool.name}: bundle too large`);
  return data;
}

// --- the folder -------------------------------------------------------------------------

async function loadState(options) {
  try {
    const state = JSON.parse(await readFile(options.state, "utf8"));
    if (state.url === options.url && state.tools && typeof state.tools === "object") return state;
    log(`${options.state} is for another console: starting afresh (owned folders kept)`);
    return { url: options.url, revision: null, etag: null, tools: state.tools || {} };
  } catch (error) {
    if (error.code !== "ENOENT") throw new Failure(EXIT.local, `${options.state}: ${error.message}`);
    return { url: options.url, revision: null, etag: null, tools: {} };
  }
}

async function saveState(options, state) {
  const tmp = `${options.state}.tmp-${randomBytes(4).toString("hex")}`;
  try {
    await mkdir(dirname(options.state), { recursive: true });
    await writeFile(tmp, JSON.stringify(state, null, 2) + "\n", { mode: 0o600 });
    await rename(tmp, options.state);
  } catch (error) {
    await rm(tmp, { force: true });
    throw new Failure(EXIT.local, `${options.state}: ${error.message}`);
  }
}

const aside = (dir, name, what) => join(dir, `.${name}.${what}-${randomBytes(4).toString("hex")}`);

async function install(dir, name, files, modes) {
  const tmp = aside(dir, name, "tmp");
  const target = join(dir, name);
  try {
    await mkdir(tmp, { mode: 0o755 });
    for (const [path, data] of files) {
      const file = join(tmp, ...path.split("/"));
      await mkdir(dirname(file), { recursive: true, mode: 0o755 });
      await writeFile(file, data, { flag: "wx", mode: modes.get(path) });
      await chmod(file, modes.get(path)); // whatever the umask
    }
    if (existsSync(target)) {
      // Rename the old folder away and the new one in: readers see a whole folder, never
      // a half-written one; the old one is deleted only after the swap.
      const old = aside(dir, name, "old");
      await rename(target, old);
      try {
        await rename(tmp, target);
      } catch (error) {
        await rename(old, target);
        throw error;
      }
      await rm(old, { recursive: true, force: true });
    } else {
      await rename(tmp, target);
    }
  } catch (error) {
    await rm(tmp, { recursive: true, force: true });
    throw new Failure(EXIT.local, `${target}: ${error.message}`);
  }
}

async function remove(dir, name) {
  const target = join(dir, name);
  if (!existsSync(target)) return;
  const old = aside(dir, name, "old");
  try {
    await rename(target, old);
    await rm(old, { recursive: true, force: true });
  } catch (error) {
    throw new Failure(EXIT.local, `${target}: ${error.message}`);
  }
}

// --- one pass ---------------------------------------------------------------------------

export async function syncOnce(options) {
  await mkdir(options.dir, { recursive: true }).catch((error) => {
    throw new Failure(EXIT.local, `${options.dir}: ${error.message}`);
  });
  const state = await loadState(options);
  const query = state.revision ? `?since=${encodeURIComponent(state.revision)}` : "";
  const conditional = state.etag && state.etagFor === query ? { "If-None-Match": state.etag } : {};
  const answer = await get(options, `api/v1/sync/manifest${query}`, conditional);
  if (answer.status === 304) return { changed: 0, removed: 0, unchanged: true };
  const manifest = await answer.response.json();

  const incremental = Boolean(state.revision) && manifest.full === false;
  const gone = incremental
    ? (manifest.removed || []).map((r) => r.name)
    : Object.keys(state.tools).filter((name) => !manifest.tools.some((t) => t.name === name));
  let failure = null;
  let changed = 0;
  for (const tool of manifest.tools) {
    if (!NAME_RE.test(tool.name)) {
      failure ||= new Failure(EXIT.integrity, `refused a tool named ${JSON.stringify(tool.name)}`);
      continue;
    }
    const owned = state.tools[tool.name];
    const target = join(options.dir, tool.name);
    if (owned?.sha256 === tool.sha256 && existsSync(target)) continue;
    if (!owned && existsSync(target)) {
      log(`${tool.name}: ${target} exists and was not written by sync-tools; left alone`);
      continue;
    }
    try {
      const { files, modes } = readZip(await download(options, tool), tool.name);
      verify(tool, files);
      await install(options.dir, tool.name, files, modes);
    } catch (error) {
      if (!(error instanceof Failure)) throw error;
      log(error.message);
      failure ||= error;
      continue;
    }
    state.tools[tool.name] = { version: tool.version, sha256: tool.sha256 };
    await saveState(options, state);
    log(`${tool.name}: v${tool.version} written`);
    changed++;
  }
  for (const name of gone) {
    if (!state.tools[name]) continue; // never ours: never removed
    await remove(options.dir, name);
    delete state.tools[name];
    await saveState(options, state);
    log(`${name}: removed`);
  }
  if (failure) throw failure; // the revision stays: the next pass retries what failed
  state.revision = manifest.revision;
  state.etag = null; // the next question (since=this revision) has its own ETag
  state.etagFor = null;
  const nextQuery = `?since=${encodeURIComponent(manifest.revision)}`;
  if (query === nextQuery && answer.headers.get("etag")) {
    state.etag = answer.headers.get("etag");
    state.etagFor = query;
  }
  await saveState(options, state);
  return { changed, removed: gone.length, unchanged: false };
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2), process.env);
  } catch (error) {
    process.stderr.write(`${error.message}\n${error.code === EXIT.usage ? `\n${USAGE}\n` : ""}`);
    return error.code;
  }
  // SIGTERM or Ctrl-C: a pass in progress finishes (no half-swapped tool is left behind),
  // a wait between passes ends at once.
  let stopping = false;
  let wake = () => {};
  const stop = () => {
    stopping = true;
    wake();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  while (true) {
    let code = EXIT.ok;
    try {
      const result = await syncOnce(options);
      if (!result.unchanged) log(`in sync (${result.changed} written, ${result.removed} removed)`);
    } catch (error) {
      if (!(error instanceof Failure)) throw error;
      log(error.message);
      code = error.code;
    }
    if (!options.watch) return code;
    if (stopping) return EXIT.ok;
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, options.watch * 1000);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    if (stopping) return EXIT.ok;
  }
}

// Run when started as a program; importing the module (its exports) runs nothing.
function startedDirectly() {
  try {
    return pathToFileURL(realpathSync(process.argv[1])).href === import.meta.url;
  } catch {
    return false;
  }
}

if (startedDirectly()) {
  process.exitCode = await main();
}
