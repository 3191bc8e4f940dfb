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
// Verification (the default; --no-verify opts out): keys.json is opened against the root
// public key pinned once (--root-key, or the root of a --keys file) and must be unexpired
// and not older than the one seen before; each version's signature must be by a key it
// lists, and the signed manifest must match the bundle (every file's sha256, size and
// mode, nothing missing or extra) and the feed's model view (name, description, schemas).
// The envelope goes into the tool's folder as .tool-signature.json, keys.json and the root
// beside the folders, so loaders and the generated index.js can check the folder again.
//
// Exit codes: 0 done; 1 bad usage; 2 network, HTTP or authentication error; 3 integrity
// error (a bundle that does not match the manifest's hashes, an unreadable/unsafe zip, a
// signature or keys.json refused): that tool's previous folder stays as it was; 4 local
// file system error.
import { createHash, randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import zlib, { inflateRawSync } from "node:zlib";

// verify:begin
// Verification of signed versions (docs/signing.md, docs/sync.md "Verification"), node:crypto
// and node:fs only. This block is the one source: the console embeds it as it is in the
// generated index.js of python, bash and http tools (tools_app/catalog/shim), so what a
// shim checks and what the sync client checks never drift apart.
import * as signingCrypto from "node:crypto";
import * as signingFs from "node:fs";
import * as signingPath from "node:path";

export const MANIFEST_TYPE = "application/vnd.tool-console.manifest+json";
export const KEYS_TYPE = "application/vnd.tool-console.keys+json";
export const SIGNATURE_FILE = ".tool-signature.json";
export const KEYS_FILE = ".tool-keys.json";
export const ROOT_FILE = ".tool-root.json";
const CONSOLE_MARKER = ".tool-console.json";
// DER SubjectPublicKeyInfo header of an Ed25519 key: the raw 32 bytes follow it.
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
const ROOT_KEY_HINT =
  "get the root public key from the console admin (python manage.py signing_keys list) or GET /api/v1/signing/root.json";
const MODEL_FIELDS = ["name", "description", "inputSchema", "outputSchema"];

// `why` says which check failed: "envelope", "type", "unknown", "forged", "canonical",
// "keys", "expired", "rolled back", "manifest", "files", "anchor".
export class SignatureRefused extends Error {
  constructor(message, why = "refused") {
    super(message);
    this.name = "SignatureRefused";
    this.why = why;
  }
}

const hexSha256 = (data) => signingCrypto.createHash("sha256").update(data).digest("hex");

// RFC 8785 (JCS) for what JSON.parse returns: sorted keys (UTF-16 code units, which is what
// Array.prototype.sort does with strings), no whitespace, strings and numbers as ECMAScript
// JSON.stringify writes them.
export function canon(value) {
  if (Array.isArray(value)) return `[${value.map(canon).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${canon(key)}:${canon(value[key])}`).join(",")}}`;
  }
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new SignatureRefused(`${value} has no canonical JSON form`, "canonical");
  }
  if (typeof value === "string" && /\p{Cs}/u.test(value)) {
    throw new SignatureRefused("a string with a lone surrogate has no canonical JSON form", "canonical");
  }
  if (value === null || ["string", "number", "boolean"].includes(typeof value)) return JSON.stringify(value);
  throw new SignatureRefused(`a ${typeof value} has no JSON form`, "canonical");
}

// DSSE pre-authentication encoding: what the signature is over.
export function pae(payloadType, payload) {
  const type = Buffer.from(payloadType, "utf8");
  return Buffer.concat([
    Buffer.from(`DSSEv1 ${type.length} `),
    type,
    Buffer.from(` ${payload.length} `),
    payload,
  ]);
}

function strictBase64(text) {
  if (typeof text !== "string") return null;
  const data = Buffer.from(text, "base64");
  return data.toString("base64") === text ? data : null;
}

function rawPublicKey(text, what) {
  const raw = strictBase64(text);
  if (!raw || raw.length !== 32) {
    throw new SignatureRefused(`${what} is not an Ed25519 public key (base64 of 32 bytes)`, "keys");
  }
  return raw;
}

// A key id: the first 16 hex digits of the sha256 of the raw public key.
export function keyId(publicKey) {
  return hexSha256(rawPublicKey(publicKey, "the key")).slice(0, 16);
}

export function publicKeyObject(publicKey, what = "the key") {
  const raw = rawPublicKey(publicKey, what);
  return signingCrypto.createPublicKey({
    key: Buffer.concat([ED25519_SPKI_PREFIX, raw]),
    format: "der",
    type: "spki",
  });
}

// Opens a DSSE envelope whose signature verifies with one of `keys` (Map of key id ->
// KeyObject): {payload, keyid}. Signatures by keys not in `keys` are ignored when a known
// one verifies.
export function openEnvelope(envelope, payloadType, keys) {
  const shaped =
    envelope !== null &&
    typeof envelope === "object" &&
    typeof envelope.payloadType === "string" &&
    typeof envelope.payload === "string" &&
    Array.isArray(envelope.signatures) &&
    envelope.signatures.length > 0;
  const payload = shaped ? strictBase64(envelope.payload) : null;
  if (!payload) throw new SignatureRefused("not a signature envelope", "envelope");
  if (envelope.payloadType !== payloadType) {
    throw new SignatureRefused(`payload type ${envelope.payloadType}, expected ${payloadType}`, "type");
  }
  const message = pae(payloadType, payload);
  let unknown = null;
  let forged = null;
  let signer = null;
  for (const signature of envelope.signatures) {
    const id = typeof signature?.keyid === "string" ? signature.keyid : "?";
    const key = keys.get(id);
    if (!key) {
      unknown ??= id;
      continue;
    }
    const sig = strictBase64(signature.sig);
    if (sig && sig.length === 64 && signingCrypto.verify(null, message, key, sig)) {
      signer = id;
      break;
    }
    forged ??= id;
  }
  if (signer === null) {
    if (forged !== null) {
      throw new SignatureRefused(`signature by ${forged} does not verify (forged or altered)`, "forged");
    }
    throw new SignatureRefused(`signed by unknown key ${unknown}`, "unknown");
  }
  let value;
  try {
    value = JSON.parse(payload.toString("utf8"));
    if (!Buffer.from(canon(value), "utf8").equals(payload)) value = undefined;
  } catch {
    value = undefined;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new SignatureRefused("payload is not canonical JSON", "canonical");
  }
  return { payload: value, keyid: signer };
}

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

// Opens keys.json (its envelope) against the pinned root public key (base64): the key set
// {serial, issued, expires, rootId, keys: Map id -> KeyObject, envelope}.
export function openKeys(envelope, rootKey, { now = new Date(), minSerial = 0 } = {}) {
  const rootId = keyId(rootKey);
  let payload;
  try {
    ({ payload } = openEnvelope(envelope, KEYS_TYPE, new Map([[rootId, publicKeyObject(rootKey)]])));
  } catch (error) {
    if (!(error instanceof SignatureRefused)) throw error;
    if (error.why === "unknown" || error.why === "forged") {
      throw new SignatureRefused(`keys.json is not signed by the pinned root key ${rootId}`, "keys");
    }
    throw new SignatureRefused(`keys.json: ${error.message}`, error.why);
  }
  const malformed = (why) => new SignatureRefused(`keys.json is malformed: ${why}`, "keys");
  if (payload._type !== "tool-console/keys" || payload.format !== 1) throw malformed("not a format 1 keys.json");
  if (!Number.isInteger(payload.serial) || payload.serial < 0) throw malformed("no serial");
  if (!RFC3339.test(payload.expires) || !RFC3339.test(payload.issued)) throw malformed("no issued/expires time");
  if (payload.root?.keyid !== rootId || payload.root?.publicKey !== rootKey) {
    throw malformed(`it names root ${payload.root?.keyid}, not the pinned ${rootId}`);
  }
  if (!Array.isArray(payload.keys)) throw malformed("no keys");
  checkCurrent(payload, { now, minSerial });
  const keys = new Map();
  for (const entry of payload.keys) {
    const what = `key ${entry?.keyid}`;
    if (keyId(entry?.publicKey) !== entry.keyid) throw malformed(`${what} does not match its public key`);
    if (entry.keyid !== rootId) keys.set(entry.keyid, publicKeyObject(entry.publicKey, what)); // the root signs keys.json only
  }
  return { serial: payload.serial, issued: payload.issued, expires: payload.expires, rootId, keys, envelope };
}

// Expiry and rollback: what an opened keys.json must pass again whenever it is used.
function checkCurrent(keys, { now = new Date(), minSerial = 0 } = {}) {
  if (Date.parse(keys.expires) <= now.getTime()) {
    throw new SignatureRefused(`keys.json expired at ${keys.expires}`, "expired");
  }
  if (keys.serial < minSerial) {
    throw new SignatureRefused(
      `keys.json serial ${keys.serial} is older than the serial ${minSerial} already seen (rolled back)`,
      "rolled back",
    );
  }
}

// Opens a version's envelope with a key set from openKeys: the signed manifest.
export function openManifest(keyset, envelope) {
  let payload;
  try {
    ({ payload } = openEnvelope(envelope, MANIFEST_TYPE, keyset.keys));
  } catch (error) {
    if (error instanceof SignatureRefused && error.why === "unknown") {
      const id = error.message.split(" ").pop();
      throw new SignatureRefused(`signed by key ${id}, which keys.json does not list (unknown or retired)`, "unknown");
    }
    throw error;
  }
  const files = payload.files;
  const wellFormed =
    payload._type === "tool-console/manifest" &&
    payload.format === 1 &&
    typeof payload.name === "string" &&
    Number.isInteger(payload.version) &&
    Number.isInteger(payload.serial) &&
    typeof payload.sha256 === "string" &&
    payload.model !== null &&
    typeof payload.model === "object" &&
    Array.isArray(files) &&
    files.every(
      (f) => typeof f?.path === "string" && Number.isInteger(f.size) && typeof f.sha256 === "string" && Number.isInteger(f.mode),
    );
  if (!wellFormed) throw new SignatureRefused("the signed manifest is malformed", "manifest");
  return payload;
}

// The `model` object of a signed manifest for a model view {name, description,
// inputSchema[, outputSchema]}: each field hashed, so a verifier says which one changed.
export function modelDigest(view) {
  const output = view.outputSchema === undefined || view.outputSchema === null ? null : hexSha256(canon(view.outputSchema));
  return {
    name: view.name,
    description: hexSha256(Buffer.from(String(view.description ?? ""), "utf8")),
    inputSchema: hexSha256(canon(view.inputSchema ?? null)),
    outputSchema: output,
    sha256: hexSha256(canon(view)),
  };
}

// What differs between a model view and the signed manifest's `model`: [] when nothing.
export function modelProblems(signed, view) {
  if (view === null || typeof view !== "object") return ["the model view is missing"];
  const digest = modelDigest(view);
  const problems = MODEL_FIELDS.filter((field) => digest[field] !== signed.model[field]).map(
    (field) => `${field} does not match the signed manifest`,
  );
  if (!problems.length && digest.sha256 !== signed.model.sha256) problems.push("the model view does not match the signed manifest");
  return problems;
}

// The pin value: changes with the files or the model view, not with a re-signature.
export function digest(signed) {
  return hexSha256(canon({ sha256: signed.sha256, model: signed.model.sha256 }));
}

// What differs between `files` (Map path -> {data, mode}) and the signed file list.
export function fileProblems(signed, files) {
  const problems = [];
  const listed = new Map(signed.files.map((entry) => [entry.path, entry]));
  for (const [path, entry] of listed) {
    const file = files.get(path);
    if (!file) problems.push(`missing file ${path}`);
    else if (file.data.length !== entry.size || hexSha256(file.data) !== entry.sha256) {
      problems.push(`${path} does not match its signed sha256`);
    } else if (file.mode !== entry.mode) {
      problems.push(`mode of ${path} is ${file.mode.toString(8)}, signed ${entry.mode.toString(8)}`);
    }
  }
  for (const path of files.keys()) if (!listed.has(path)) problems.push(`unexpected file ${path}`);
  return problems;
}

// A tool folder as {files: Map path -> {data, mode}, problems}: the console's marker and the
// signature file at its root are not the tool's; links and special files are problems.
export function readToolFolder(folder) {
  const files = new Map();
  const problems = [];
  const walk = (dir, prefix) => {
    for (const name of signingFs.readdirSync(dir).sort()) {
      const rel = prefix + name;
      if (!prefix && (name === CONSOLE_MARKER || name === SIGNATURE_FILE)) continue;
      const path = signingPath.join(dir, name);
      const info = signingFs.lstatSync(path);
      if (info.isDirectory()) walk(path, `${rel}/`);
      else if (info.isFile()) files.set(rel, { data: signingFs.readFileSync(path), mode: info.mode & 0o777 });
      else problems.push(`${rel} is not a regular file`);
    }
  };
  walk(folder, "");
  return { files, problems };
}

function readJsonFile(path) {
  return JSON.parse(signingFs.readFileSync(path, "utf8"));
}

// The trust anchor for a folder of tools `dir`: env TOOL_CONSOLE_ROOT_KEY (only this one
// protects against someone who can write the folder), else DIR/.tool-root.json.
export function onDiskRootKey(dir, env = process.env) {
  if (env.TOOL_CONSOLE_ROOT_KEY) return env.TOOL_CONSOLE_ROOT_KEY.trim();
  try {
    return readJsonFile(signingPath.join(dir, ROOT_FILE)).publicKey;
  } catch {
    throw new SignatureRefused(
      `no trust anchor: set TOOL_CONSOLE_ROOT_KEY or write ${signingPath.join(dir, ROOT_FILE)} (${ROOT_KEY_HINT})`,
      "anchor",
    );
  }
}

// keys.json files opened already, by root key and exact text: a shim verifies its folder
// on every call, and the root signature of the same bytes need not be checked again.
const openedKeys = new Map();

// The key set for the tools in `dir`: `keys` (an envelope, or the path of a keys.json)
// else DIR/.tool-keys.json, opened against `rootKey` (base64) else the on-disk anchor.
export function folderKeyset(dir, { rootKey, keys, now, minSerial } = {}) {
  rootKey ??= onDiskRootKey(dir);
  const source = keys ?? signingPath.join(dir, KEYS_FILE);
  if (typeof source !== "string") return openKeys(source, rootKey, { now, minSerial });
  let text;
  let envelope;
  try {
    text = signingFs.readFileSync(source, "utf8");
    envelope = JSON.parse(text);
  } catch (error) {
    throw new SignatureRefused(`keys.json cannot be read: ${error.message}`, "keys");
  }
  const cacheKey = `${rootKey}\n${text}`;
  const opened = openedKeys.get(cacheKey);
  if (opened) {
    checkCurrent(opened, { now, minSerial });
    return opened;
  }
  const keyset = openKeys(envelope, rootKey, { now, minSerial });
  if (openedKeys.size >= 16) openedKeys.clear();
  openedKeys.set(cacheKey, keyset);
  return keyset;
}

// Verifies the tool folder `folder` (DIR/<name>) against its .tool-signature.json: the
// signed manifest, or SignatureRefused naming the tool and every problem. Options: rootKey
// (base64), keys (envelope or path), keyset (from openKeys: skips opening keys.json), now.
export function verifyFolder(folder, options = {}) {
  folder = signingPath.resolve(folder);
  const name = signingPath.basename(folder);
  const refuse = (why, code) => new SignatureRefused(`${name}: refused: ${why}`, code);
  try {
    const keyset = options.keyset ?? folderKeyset(signingPath.dirname(folder), options);
    let envelope;
    try {
      envelope = readJsonFile(signingPath.join(folder, SIGNATURE_FILE));
    } catch (error) {
      const why = error.code === "ENOENT" ? `not signed (no ${SIGNATURE_FILE})` : `${SIGNATURE_FILE}: ${error.message}`;
      throw new SignatureRefused(why, "envelope");
    }
    const signed = openManifest(keyset, envelope);
    // DIR/<name> holds tool <name>; a dot folder is one set aside (.<name>.retired-…), which
    // a reader that listed it just before may still load.
    if (signed.name !== name && !name.startsWith(".")) {
      throw new SignatureRefused(`the signature is for ${signed.name}, not ${name}`, "manifest");
    }
    const { files, problems } = readToolFolder(folder);
    problems.push(...fileProblems(signed, files));
    if (problems.length) throw new SignatureRefused(problems.join("; "), "files");
    return signed;
  } catch (error) {
    if (error instanceof SignatureRefused) throw refuse(error.message, error.why);
    throw refuse(error.message, "files"); // an unreadable folder is not a verified one
  }
}
// verify:end

const EXIT = { ok: 0, usage: 1, network: 2, integrity: 3, local: 4 };
const STATE_NAME = ".sync-tools-state.json";
const MAX_BUNDLE_BYTES = 64 * 1024 * 1024;
const NAME_RE = /^[a-z][a-z0-9_]{0,63}$/;
const DEFAULT_KEYS_URL = "api/v1/signing/keys.json";
const USAGE = `usage: CONSOLE_TOKEN=<agent token with sync:read> node sync-tools.mjs --url URL --dir DIR
                [--root-key BASE64|FILE | --keys FILE] [--no-verify] [--state FILE] [--watch SECONDS]
  --url       the console's base URL (or env CONSOLE_URL)
  --dir       the folder to mirror tools into (created if missing)
  --root-key  the console's root public key (base64, or a file holding it or root.json):
              pinned into the state file on first use; later runs need not repeat it
  --keys      a keys.json envelope file to pin instead (its root and serial)
  --verify    verify signatures (the default)
  --no-verify mirror without verifying signatures (hashes are still checked)
  --state     the state file (default DIR/${STATE_NAME})
  --watch     poll every SECONDS (ETag / If-None-Match) until stopped; errors are reported
              and retried at the next poll
exit codes: 0 ok, 1 usage, 2 network/HTTP/auth, 3 integrity or signature refused, 4 local file system`;

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
  const options = { url: env.CONSOLE_URL || "", dir: "", state: "", watch: 0, verify: true, rootKey: "", keys: "" };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Failure(EXIT.usage, `${arg} needs a value`);
      return argv[++i];
    };
    if (arg === "--url") options.url = value();
    else if (arg === "--dir") options.dir = value();
    else if (arg === "--state") options.state = value();
    else if (arg === "--root-key") options.rootKey = readRootKey(value());
    else if (arg === "--keys") options.keys = resolve(value());
    else if (arg === "--verify") options.verify = true;
    else if (arg === "--no-verify") options.verify = false;
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

// --root-key: the base64 key itself, or a file holding it (as text, or root.json's
// {"keyid", "publicKey"}).
function readRootKey(text) {
  let key = text.trim();
  if (existsSync(text)) {
    const data = readFileSync(text, "utf8").trim();
    try {
      key = JSON.parse(data).publicKey ?? data;
    } catch {
      key = data;
    }
  }
  try {
    keyId(key);
  } catch {
    throw new Failure(EXIT.usage, `--root-key: not an Ed25519 public key (base64 of 32 bytes) or a file holding one`);
  }
  return key;
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
  const base = new URL(options.url.endsWith("/") ? options.url : `${options.url}/`);
  const url = new URL(path, base);
  // The token goes to the console only (keys_url could name another host).
  const auth = url.origin === base.origin ? { Authorization: `Bearer ${options.token}` } : {};
  let response;
  try {
    response = await fetch(url, { headers: { ...auth, ...headers } });
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

async function getJson(options, path) {
  const { response } = await get(options, path);
  try {
    return await response.json();
  } catch {
    throw new Failure(EXIT.network, `${path}: not JSON`);
  }
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

// Written beside, then renamed: a reader sees the old file or the new one.
async function writeAtomic(path, text, mode = 0o644) {
  const tmp = `${path}.tmp-${randomBytes(4).toString("hex")}`;
  try {
    await writeFile(tmp, text, { mode });
    await chmod(tmp, mode);
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw new Failure(EXIT.local, `${path}: ${error.message}`);
  }
}

const aside = (dir, name, what) => join(dir, `.${name}.${what}-${randomBytes(4).toString("hex")}`);

async function install(dir, name, files, modes, signature) {
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
    if (signature) {
      // Inside the folder before it is renamed in: never a tool without its signature.
      const file = join(tmp, SIGNATURE_FILE);
      await writeFile(file, `${JSON.stringify(signature)}\n`, { flag: "wx", mode: 0o644 });
      await chmod(file, 0o644);
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

// --- verification (the checks are the block between verify:begin and verify:end) -------

function peekPayload(envelope) {
  try {
    return JSON.parse(Buffer.from(envelope.payload, "base64").toString("utf8"));
  } catch {
    return null;
  }
}

// The root key to open the console's keys.json with, and the lowest serial to accept:
// --root-key or the root of a --keys file on first use, the one pinned in the state file
// after that.
function trustAnchor(options, state) {
  let rootKey = options.rootKey || null;
  let minSerial = Number.isInteger(state.keysSerial) ? state.keysSerial : 0;
  if (options.keys) {
    let envelope;
    try {
      envelope = JSON.parse(readFileSync(options.keys, "utf8"));
    } catch (error) {
      throw new Failure(EXIT.usage, `--keys ${options.keys}: ${error.message}`);
    }
    const root = peekPayload(envelope)?.root?.publicKey;
    let pinned;
    try {
      // An anchor: its own expiry does not matter; the console's keys.json must be current.
      pinned = openKeys(envelope, root, { now: new Date(0) });
    } catch (error) {
      throw new Failure(EXIT.usage, `--keys ${options.keys}: ${error.message}`);
    }
    if (rootKey && rootKey !== root) throw new Failure(EXIT.usage, "--root-key and --keys name different root keys");
    rootKey = root;
    minSerial = Math.max(minSerial, pinned.serial);
  }
  const pinnedRoot = state.rootKey?.publicKey;
  if (pinnedRoot) {
    if (rootKey && rootKey !== pinnedRoot) {
      throw new Failure(
        EXIT.usage,
        `the root key given is not the one pinned in ${options.state} (${state.rootKey.keyid}): remove "rootKey" from the state file to pin another`,
      );
    }
    rootKey = pinnedRoot;
  }
  if (!rootKey) {
    throw new Failure(
      EXIT.usage,
      `verifying signatures needs the console's root public key: --root-key BASE64|FILE or --keys FILE (${ROOT_KEY_HINT}); --no-verify mirrors without verifying`,
    );
  }
  return { rootKey, minSerial };
}

async function writeIfChanged(path, text) {
  try {
    if (readFileSync(path, "utf8") === text) return;
  } catch {
    // missing: written below
  }
  await writeAtomic(path, text);
}

// The console's keys.json, opened against the anchor; pinned, and written beside the tool
// folders (with the root) for loaders and the generated index.js.
async function consoleKeys(options, state, anchor, manifest) {
  const envelope = await getJson(options, manifest.keys_url || DEFAULT_KEYS_URL);
  let keyset;
  try {
    keyset = openKeys(envelope, anchor.rootKey, { minSerial: anchor.minSerial });
  } catch (error) {
    if (!(error instanceof SignatureRefused)) throw error;
    throw new Failure(EXIT.integrity, `every tool refused: ${error.message}`);
  }
  state.rootKey = { keyid: keyset.rootId, publicKey: anchor.rootKey };
  state.keysSerial = keyset.serial;
  await writeIfChanged(join(options.dir, ROOT_FILE), `${JSON.stringify(state.rootKey)}\n`);
  await writeIfChanged(join(options.dir, KEYS_FILE), `${JSON.stringify(envelope)}\n`);
  await saveState(options, state);
  return keyset;
}

function refusal(tool, why) {
  return new Failure(EXIT.integrity, `${tool.name} v${tool.version}: refused: ${why}`);
}

// What the feed says of a tool against its signature, before anything is downloaded.
function checkSignature(tool, keyset, owned) {
  if (!tool.signature) throw refusal(tool, "not signed (the feed carries no signature for it)");
  let signed;
  try {
    signed = openManifest(keyset, tool.signature);
  } catch (error) {
    if (!(error instanceof SignatureRefused)) throw error;
    throw refusal(tool, error.message);
  }
  if (signed.name !== tool.name || signed.version !== tool.version) {
    throw refusal(tool, `the signature is for ${signed.name} v${signed.version}`);
  }
  if (Number.isInteger(owned?.serial) && signed.serial < owned.serial) {
    throw refusal(tool, `signed serial ${signed.serial} is older than the serial ${owned.serial} already mirrored (rolled back)`);
  }
  const model = modelProblems(signed, tool.model);
  if (model.length) throw refusal(tool, model.join("; "));
  return signed;
}

// A mirrored folder's signature against a new keys.json (a retired key stops verifying).
function recheck(dir, name, owned, keyset) {
  const tool = { name, version: owned.version };
  try {
    openManifest(keyset, JSON.parse(readFileSync(join(dir, name, SIGNATURE_FILE), "utf8")));
  } catch (error) {
    if (error instanceof SignatureRefused) throw refusal(tool, `${error.message} (the mirrored folder is left as it is)`);
    throw refusal(tool, `${SIGNATURE_FILE}: ${error.message}`);
  }
}

function checkSignedFiles(tool, signed, files, modes) {
  const found = new Map([...files].map(([path, data]) => [path, { data, mode: modes.get(path) }]));
  const problems = fileProblems(signed, found);
  if (problems.length) throw refusal(tool, problems.join("; "));
}

// --- one pass ---------------------------------------------------------------------------

export async function syncOnce(options) {
  await mkdir(options.dir, { recursive: true }).catch((error) => {
    throw new Failure(EXIT.local, `${options.dir}: ${error.message}`);
  });
  const state = await loadState(options);
  const anchor = options.verify ? trustAnchor(options, state) : null;
  // Folders changed on disk since they were written are fetched again (and reported), even
  // when the console has nothing new: a 304 must not keep a tampered tool in place.
  const tampered = anchor ? checkMirrored(options, state, anchor) : [];
  const query = state.revision ? `?since=${encodeURIComponent(state.revision)}` : "";
  const conditional =
    state.etag && state.etagFor === query && !tampered.length ? { "If-None-Match": state.etag } : {};
  const answer = await get(options, `api/v1/sync/manifest${query}`, conditional);
  if (answer.status === 304) return { changed: 0, removed: 0, unchanged: true };
  const manifest = await answer.response.json();
  const keyset = anchor ? await consoleKeys(options, state, anchor, manifest) : null;

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
    if (!owned && existsSync(target)) {
      log(`${tool.name}: ${target} exists and was not written by sync-tools; left alone`);
      continue;
    }
    let signed = null;
    try {
      // Every tool listed, changed or not: a description changed in the database changes
      // no file, and keys.json may have dropped the key that signed it.
      if (keyset) signed = checkSignature(tool, keyset, owned);
      // A re-signature (key rotation) keeps the files: its new serial makes it a change.
      const resigned = signed !== null && owned?.serial !== signed.serial;
      if (owned?.sha256 === tool.sha256 && !resigned && existsSync(target)) continue;
      const { files, modes } = readZip(await download(options, tool), tool.name);
      if (signed) checkSignedFiles(tool, signed, files, modes);
      verify(tool, files);
      await install(options.dir, tool.name, files, modes, tool.signature);
    } catch (error) {
      if (!(error instanceof Failure)) throw error;
      log(error.message);
      failure ||= error;
      continue;
    }
    state.tools[tool.name] = { version: tool.version, sha256: tool.sha256 };
    if (signed) state.tools[tool.name].serial = signed.serial;
    await saveState(options, state);
    log(`${tool.name}: v${tool.version} written`);
    changed++;
  }
  if (keyset) {
    // Tools an incremental manifest does not list: their signatures against this keys.json.
    const listed = new Set([...manifest.tools.map((t) => t.name), ...gone]);
    for (const [name, owned] of Object.entries(state.tools)) {
      if (listed.has(name) || !Number.isInteger(owned.serial)) continue;
      try {
        recheck(options.dir, name, owned, keyset);
      } catch (error) {
        if (!(error instanceof Failure)) throw error;
        log(error.message);
        failure ||= error;
      }
    }
  }
  for (const name of gone) {
    if (!state.tools[name]) continue; // never ours: never removed
    await remove(options.dir, name);
    delete state.tools[name];
    await saveState(options, state);
    log(`${name}: removed`);
  }
  if (!failure) {
    // A tampered folder the pass could not fetch again (not in an incremental answer).
    const left = tampered.filter((name) => state.tools[name] && state.tools[name].sha256 === null);
    if (left.length) failure = new Failure(EXIT.integrity, `${left.join(", ")}: still to fetch again`);
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
  if (tampered.length) {
    // Repaired, but someone changed files the client wrote: that is worth an exit status.
    throw new Failure(EXIT.integrity, `${tampered.join(", ")}: changed on disk; rewritten from the console`);
  }
  return { changed, removed: gone.length, unchanged: false };
}

// The owned folders that no longer verify on disk: reported, and marked to be fetched again
// (a full answer lists them; without a revision the next answer is full).
const ON_DISK_CHANGES = new Set(["files", "envelope", "manifest", "forged", "canonical", "type"]);

function checkMirrored(options, state, anchor) {
  const tampered = [];
  for (const [name, owned] of Object.entries(state.tools)) {
    const folder = join(options.dir, name);
    if (!Number.isInteger(owned.serial) || !existsSync(folder)) continue;
    try {
      verifyFolder(folder, { rootKey: anchor.rootKey, minSerial: anchor.minSerial });
    } catch (error) {
      if (!(error instanceof SignatureRefused)) throw error;
      // A key keys.json no longer lists, or keys.json itself, is the console's news, which
      // the pass reports; anything else is a folder (or its signature file) changed here.
      if (!ON_DISK_CHANGES.has(error.why)) continue;
      log(`${error.message} (the mirrored folder changed on disk: fetching it again)`);
      owned.sha256 = null;
      tampered.push(name);
    }
  }
  if (tampered.length) state.revision = null; // a full answer, which lists every tool
  return tampered;
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
    if (!options.watch || code === EXIT.usage) return code;
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
