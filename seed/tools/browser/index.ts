// browser: drive a Chrome/Chromium over the Chrome DevTools Protocol (CDP) with playwright-core.
// Runs under Node.js 24 type stripping (erasable TypeScript only). playwright-core is the
// console's own pinned npm package, bound read-only into the sandbox (docs/runs.md); it
// downloads and starts no browser: the tool attaches to the one the "browser" integration names.
//
// Each call connects, acts on one tab and disconnects (the browser keeps running). What has
// to survive between calls lives in the page itself (see STATE): the refs of the latest
// snapshot, so a ref from an older snapshot or another document is reported as stale
// instead of silently hitting some other element.

type TextContent = { type: 'text'; text: string };
type ToolResult = { content: TextContent[]; isError: boolean };
type Update = { content: TextContent[]; progress?: number; total?: number };
type OnUpdate = ((update: Update) => void) | undefined;
// playwright-core's objects, used structurally (no type imports in a stripped file).
type Any = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const ACTIONS = [
  'navigate', 'snapshot', 'click', 'type', 'press', 'select', 'hover', 'wait_for',
  'extract_text', 'screenshot', 'tabs', 'evaluate',
];
const TAB_ACTIONS = ['list', 'open', 'close', 'switch'];
const CONNECT_TIMEOUT_MS = 15000;
const DEFAULT_TIMEOUT_S = 20;
const MAX_TIMEOUT_S = 110; // below the tool's 120 s, so the tool reports the timeout itself
const DEFAULT_MAX_CHARS = 20000;
const MAX_MAX_CHARS = 200000;
const MAX_REFS = 3000; // refs tagged per snapshot; beyond that the snapshot says so
const REF_RE = /^(?:f\d+)?e\d+$/;
// The page-side state, under a symbol so it never clashes with the page's own globals.
const STATE = 'tool-console.browser';

class InputError extends Error {}
class StaleRef extends Error {}
class Cancelled extends Error {}

function result(text: string, isError = false): ToolResult {
  return { content: [{ type: 'text', text }], isError };
}

function progress(onUpdate: OnUpdate, text: string, step?: number, total?: number): void {
  try {
    const update: Update = { content: [{ type: 'text', text }] };
    if (step !== undefined && total !== undefined) Object.assign(update, { progress: step, total });
    onUpdate?.(update);
  } catch {
    /* a failing progress callback never fails the action */
  }
}

function str(value: unknown): string {
  return typeof value === 'string' ? value.trim() : '';
}

function intParam(value: unknown, name: string, def: number, min: number, max: number): number {
  if (value === undefined || value === null || value === '') return def;
  const n = typeof value === 'string' ? Number(value.trim()) : value;
  if (typeof n !== 'number' || !Number.isInteger(n)) throw new InputError(`${name} must be an integer, got ${JSON.stringify(value)}`);
  if (n < min || n > max) throw new InputError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function truthy(value: unknown): boolean {
  return value === true || ['1', 'true', 'yes', 'on'].includes(str(value).toLowerCase());
}

// "Authorization: Bearer x" is one header; a bare value is sent as Authorization.
function authHeaders(raw: string): Record<string, string> {
  if (raw === '') return {};
  const colon = raw.indexOf(':');
  if (colon > 0 && /^[A-Za-z0-9-]+$/.test(raw.slice(0, colon).trim())) {
    return { [raw.slice(0, colon).trim()]: raw.slice(colon + 1).trim() };
  }
  return { Authorization: raw };
}

function endpointOf(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InputError('BROWSER_CDP_URL is not a valid URL; fix the endpoint of the "browser" integration, e.g. http://127.0.0.1:9222 or ws://host:9222/devtools/browser/<id>');
  }
  if (!['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol)) {
    throw new InputError('BROWSER_CDP_URL must be an http://, https://, ws:// or wss:// URL; fix the "browser" integration');
  }
  return raw;
}

// Rejects as soon as the run is cancelled, whatever the browser is doing.
function abortable<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(new Cancelled());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Cancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => { signal.removeEventListener('abort', onAbort); resolve(v); },
      (e) => { signal.removeEventListener('abort', onAbort); reject(signal.aborted ? new Cancelled() : e); },
    );
  });
}

function cap(text: string, maxChars: number, page: number, what: string): { text: string; truncated: boolean; pages: number } {
  if (text.length <= maxChars) return { text, truncated: false, pages: 1 };
  // Pages end at line breaks where there is one in the second half of the page.
  const chunks: string[] = [];
  let rest = text;
  while (rest.length > 0) {
    let cut = Math.min(maxChars, rest.length);
    if (cut < rest.length) {
      const nl = rest.lastIndexOf('\n', cut);
      if (nl > maxChars / 2) cut = nl + 1;
    }
    chunks.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  if (page > chunks.length) throw new InputError(`page ${page} is past the end: the ${what} has ${chunks.length} pages`);
  return { text: chunks[page - 1], truncated: true, pages: chunks.length };
}

// --- page-side functions (serialized into the page: they may use only their arguments) ---

function pageTag(el: Element, sym: string): string {
  // Runs in the page: gives the element a ref of this document (kept if it already has one).
  const key = Symbol.for(sym);
  const w = window as Any;
  const state = (w[key] ??= { next: 1, gen: 0, latest: new Set(), refs: new Map(), byEl: new WeakMap() });
  let ref = state.byEl.get(el);
  if (!ref) {
    ref = `e${state.next++}`;
    state.byEl.set(el, ref);
  }
  state.refs.set(ref, el);
  state.pending ??= new Set();
  state.pending.add(ref);
  return ref;
}

function pageCommit(sym: string): number {
  // Runs in the page: the refs tagged since the last commit become the latest snapshot's.
  const state = (window as Any)[Symbol.for(sym)];
  if (!state) return 0;
  state.latest = state.pending ?? new Set();
  state.pending = new Set();
  for (const ref of [...state.refs.keys()]) if (!state.latest.has(ref)) state.refs.delete(ref);
  state.gen += 1;
  return state.gen;
}

function pageResolve(args: { sym: string; ref: string }): Element | string {
  const state = (window as Any)[Symbol.for(args.sym)];
  if (!state) return 'no snapshot of this page';
  if (!state.latest.has(args.ref)) return 'not in the latest snapshot';
  const el = state.refs.get(args.ref);
  if (!el || !el.isConnected) return 'the element is gone';
  return el;
}

function pageStamp(args: { sym: string; at: number }): void {
  const key = Symbol.for(args.sym);
  const w = window as Any;
  (w[key] ??= { next: 1, gen: 0, latest: new Set(), refs: new Map(), byEl: new WeakMap() }).selectedAt = args.at;
}

function pageSelectedAt(sym: string): number {
  return (window as Any)[Symbol.for(sym)]?.selectedAt ?? 0;
}

// --- the browser side -------------------------------------------------------------------

type Ctx = {
  params: Record<string, unknown>;
  signal?: AbortSignal;
  onUpdate: OnUpdate;
  browser: Any;
  context: Any;
  timeoutMs: number;
  allowEvaluate: boolean;
};

// Tabs in a stable order: each connection lists them in its own order (Chrome's most
// recently used first), so they are sorted by their DevTools target ids, which a tab
// keeps for its life.
async function pagesOf(ctx: Ctx): Promise<Any[]> {
  const pages = ctx.browser.contexts().flatMap((c: Any) => c.pages());
  const ids = await Promise.all(pages.map(async (page: Any) => {
    try {
      const session = await page.context().newCDPSession(page);
      const { targetInfo } = await session.send('Target.getTargetInfo');
      await session.detach().catch(() => undefined);
      return String(targetInfo?.targetId ?? '');
    } catch {
      return '';
    }
  }));
  return pages
    .map((page: Any, i: number) => ({ page, id: ids[i] }))
    .sort((a: Any, b: Any) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((entry: Any) => entry.page);
}

async function stamp(page: Any): Promise<void> {
  try {
    await page.evaluate(pageStamp, { sym: STATE, at: Date.now() });
  } catch {
    /* a page that is navigating keeps no stamp; tabs list still shows it */
  }
}

// The current tab: the one given by `tab`, else the one stamped last (switch, open or
// any action stamps its tab), else the first.
async function currentPage(ctx: Ctx): Promise<{ page: Any; index: number }> {
  const pages = await abortable(pagesOf(ctx), ctx.signal);
  if (ctx.params.tab !== undefined && ctx.params.tab !== null && ctx.params.tab !== '') {
    const index = intParam(ctx.params.tab, 'tab', 0, 0, 1000);
    if (index >= pages.length) throw new InputError(`there is no tab ${index}: the browser has ${pages.length} (tabs with tab_action "list" shows them)`);
    return { page: pages[index], index };
  }
  if (pages.length === 0) {
    const page = await ctx.context.newPage();
    return { page, index: 0 };
  }
  const stamps = await Promise.all(
    pages.map((p: Any) => abortable(p.evaluate(pageSelectedAt, STATE), ctx.signal).catch((e: unknown) => {
      if (e instanceof Cancelled) throw e;
      return 0;
    })),
  );
  let index = 0;
  stamps.forEach((at: number, i: number) => { if (at > stamps[index]) index = i; });
  return { page: pages[index], index };
}

async function describePage(page: Any): Promise<string> {
  let title = '';
  try {
    title = await page.title();
  } catch {
    /* mid-navigation */
  }
  return `${title ? `"${title}" ` : ''}${page.url()}`;
}

async function resolveRef(page: Any, ref: string): Promise<Any> {
  if (!REF_RE.test(ref)) throw new InputError(`ref must look like e12 (from a snapshot), got ${JSON.stringify(ref)}`);
  // The element may be in any frame of the tab; the first frame that knows the ref answers.
  // A ref with a frame prefix (f1e3) is in a child frame, which keeps refs of its own.
  const framed = /^f\d+/.exec(ref);
  const own = framed ? ref.slice(framed[0].length) : ref;
  const frames = framed ? page.frames().slice(1) : [page.mainFrame()];
  let why = 'no snapshot of this page';
  for (const frame of frames) {
    let handle: Any;
    try {
      handle = await frame.evaluateHandle(pageResolve, { sym: STATE, ref: own });
    } catch {
      continue;
    }
    const element = handle.asElement();
    if (element) return element;
    const reason = await handle.jsonValue();
    if (reason !== 'no snapshot of this page') why = reason;
    await handle.dispose();
  }
  throw new StaleRef(`stale ref: take a new snapshot (${ref}: ${why})`);
}

async function takeSnapshot(ctx: Ctx, page: Any): Promise<{ text: string; refs: number; capped: boolean }> {
  const selector = str(ctx.params.selector);
  const target = selector ? page.locator(selector).first() : page;
  if (selector && (await abortable(page.locator(selector).count(), ctx.signal)) === 0) {
    throw new InputError(`no element matches the selector ${JSON.stringify(selector)}`);
  }
  const raw: string = await abortable(target.ariaSnapshot({ mode: 'ai', timeout: ctx.timeoutMs, signal: ctx.signal }), ctx.signal);
  // Playwright's refs live in its own connection; each is re-tagged with a ref kept in the
  // page (pageTag), so later calls (new connections) find the same element.
  const theirs = [...new Set([...raw.matchAll(/\[ref=((?:f\d+)?e\d+)\]/g)].map((m) => m[1]))];
  const capped = theirs.length > MAX_REFS;
  const mine = new Map<string, string>();
  const batch = 50;
  for (let i = 0; i < Math.min(theirs.length, MAX_REFS); i += batch) {
    await abortable(Promise.all(theirs.slice(i, i + batch).map(async (ref) => {
      try {
        const tagged: string = await page.locator(`aria-ref=${ref}`).evaluate(pageTag, STATE, { timeout: 2000 });
        mine.set(ref, tagged);
      } catch {
        /* the element went away while tagging: it keeps no ref */
      }
    })), ctx.signal);
  }
  for (const frame of page.frames()) {
    try {
      await frame.evaluate(pageCommit, STATE);
    } catch {
      /* a detached frame */
    }
  }
  // Frames have their own ref counters: a ref from a frame gets the frame's prefix.
  const text = raw.replace(/\[ref=((?:f\d+)?e\d+)\]/g, (_m: string, ref: string) => {
    const own = mine.get(ref);
    if (!own) return '';
    const frame = /^f\d+/.exec(ref)?.[0] ?? '';
    return `[ref=${frame}${own}]`;
  });
  return { text, refs: mine.size, capped };
}

async function saveText(name: string, text: string): Promise<string> {
  const { mkdir, writeFile } = await import('node:fs/promises');
  const { join, dirname, normalize, isAbsolute } = await import('node:path');
  const out = process.env.TOOL_OUTPUT_DIR ?? '';
  if (out === '') return '';
  const rel = normalize(name);
  if (isAbsolute(rel) || rel.startsWith('..')) throw new InputError('output_path must be a relative path inside the run\'s output folder, e.g. "snapshot.txt"');
  const path = join(out, rel);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, text);
  return rel;
}

async function pagedText(ctx: Ctx, text: string, what: string, defaultFile: string): Promise<string> {
  const maxChars = intParam(ctx.params.max_chars, 'max_chars', DEFAULT_MAX_CHARS, 200, MAX_MAX_CHARS);
  const pageNo = intParam(ctx.params.page, 'page', 1, 1, 10000);
  const explicit = str(ctx.params.output_path);
  const shown = cap(text, maxChars, pageNo, what);
  let saved = '';
  if (explicit || shown.truncated) saved = await saveText(explicit || defaultFile, text);
  let body = shown.text;
  if (shown.truncated) {
    body += `\n[truncated: page ${pageNo} of ${shown.pages} of the ${what} (${text.length} characters)` +
      (pageNo < shown.pages ? `; call again with page=${pageNo + 1} for more` : '') +
      (saved ? `; the whole ${what} is the run artifact ${saved}` : '') + ']';
  } else if (saved) {
    body += `\n[the ${what} is also the run artifact ${saved}]`;
  }
  return body;
}

function timeoutMsOf(params: Record<string, unknown>): number {
  return intParam(params.timeout, 'timeout', DEFAULT_TIMEOUT_S, 1, MAX_TIMEOUT_S) * 1000;
}

async function act(ctx: Ctx, action: string): Promise<string> {
  const p = ctx.params;
  const signal = ctx.signal;
  const t = ctx.timeoutMs;
  if (action === 'tabs') return tabs(ctx);
  const { page, index } = await currentPage(ctx);
  const where = async () => `tab ${index}: ${await describePage(page)}`;

  switch (action) {
    case 'navigate': {
      const url = str(p.url);
      if (url === '') throw new InputError('url is required for navigate, e.g. "https://example.org/"');
      progress(ctx.onUpdate, `navigating to ${url}`);
      let response: Any;
      try {
        response = await abortable(page.goto(url, { waitUntil: 'load', timeout: t, signal }), signal);
      } catch (err) {
        if (err instanceof Cancelled) {
          // Leave the tab usable: stop the pending load before letting go of the browser.
          await page.evaluate(() => window.stop()).catch(() => undefined);
          throw err;
        }
        throw err;
      }
      await stamp(page);
      const status = response ? ` (HTTP ${response.status()})` : '';
      return `Navigated ${await where()}${status}. Take a snapshot to see the page and get refs.`;
    }
    case 'snapshot': {
      progress(ctx.onUpdate, 'taking an accessibility snapshot');
      const snap = await takeSnapshot(ctx, page);
      await stamp(page);
      const head = `Snapshot of ${await where()}${str(p.selector) ? ` (scoped to ${str(p.selector)})` : ''}, ${snap.refs} refs` +
        (snap.capped ? ` [refs truncated: only the first ${MAX_REFS} elements got a ref; scope with selector]` : '') + ':\n';
      return head + (await pagedText(ctx, snap.text, 'snapshot', 'snapshot.txt'));
    }
    case 'click':
    case 'hover': {
      const ref = str(p.ref);
      const el = await resolveRef(page, ref);
      progress(ctx.onUpdate, `${action === 'click' ? 'clicking' : 'hovering over'} ${ref}`);
      if (action === 'click') await abortable(el.click({ timeout: t, signal }), signal);
      else await abortable(el.hover({ timeout: t, signal }), signal);
      await page.waitForLoadState('domcontentloaded', { timeout: t }).catch(() => undefined);
      await stamp(page);
      return `${action === 'click' ? 'Clicked' : 'Hovered over'} ${ref}; now ${await where()}. Take a new snapshot to see what changed.`;
    }
    case 'type': {
      const ref = str(p.ref);
      if (typeof p.text !== 'string') throw new InputError('text is required for type');
      const el = await resolveRef(page, ref);
      progress(ctx.onUpdate, `typing into ${ref}`);
      await abortable(el.fill(p.text, { timeout: t, signal }), signal);
      if (truthy(p.submit)) await abortable(el.press('Enter', { timeout: t, signal }), signal);
      await page.waitForLoadState('domcontentloaded', { timeout: t }).catch(() => undefined);
      await stamp(page);
      return `Typed ${p.text.length} characters into ${ref}${truthy(p.submit) ? ' and pressed Enter' : ''}; now ${await where()}.`;
    }
    case 'press': {
      const key = str(p.key);
      if (key === '') throw new InputError('key is required for press, e.g. "Enter", "Escape", "Control+A"');
      progress(ctx.onUpdate, `pressing ${key}`);
      if (str(p.ref)) await abortable((await resolveRef(page, str(p.ref))).press(key, { timeout: t, signal }), signal);
      else await abortable(page.keyboard.press(key), signal);
      await page.waitForLoadState('domcontentloaded', { timeout: t }).catch(() => undefined);
      await stamp(page);
      return `Pressed ${key}${str(p.ref) ? ` in ${str(p.ref)}` : ''}; now ${await where()}.`;
    }
    case 'select': {
      const ref = str(p.ref);
      const values = Array.isArray(p.values) ? p.values.map(String) : str(p.text) ? [str(p.text)] : [];
      if (values.length === 0) throw new InputError('values is required for select: the option values or labels to choose');
      const el = await resolveRef(page, ref);
      progress(ctx.onUpdate, `selecting ${values.join(', ')} in ${ref}`);
      let chosen: string[];
      try {
        chosen = await abortable(el.selectOption(values, { timeout: Math.min(t, 5000), signal }), signal);
      } catch (err) {
        if (err instanceof Cancelled) throw err;
        chosen = await abortable(el.selectOption(values.map((label) => ({ label })), { timeout: t, signal }), signal);
      }
      await stamp(page);
      return `Selected ${chosen.map((v) => JSON.stringify(v)).join(', ')} in ${ref}; now ${await where()}.`;
    }
    case 'wait_for': {
      const text = str(p.text);
      const ref = str(p.ref);
      if (!text && !ref) throw new InputError('wait_for needs text (to appear on the page) or ref (to become visible)');
      progress(ctx.onUpdate, `waiting up to ${t / 1000} s for ${text ? JSON.stringify(text) : ref}`);
      try {
        if (ref) await abortable((await resolveRef(page, ref)).waitForElementState('visible', { timeout: t }), signal);
        else await abortable(page.getByText(text).first().waitFor({ state: 'visible', timeout: t, signal }), signal);
      } catch (err) {
        if (err instanceof Cancelled || err instanceof StaleRef) throw err;
        throw new InputError(`${text ? JSON.stringify(text) : ref} did not appear within ${t / 1000} s on ${await where()}`);
      }
      await stamp(page);
      return `${text ? JSON.stringify(text) : ref} is visible on ${await where()}.`;
    }
    case 'extract_text': {
      const selector = str(p.selector);
      progress(ctx.onUpdate, `reading the text${selector ? ` of ${selector}` : ''}`);
      const target = page.locator(selector || 'body');
      if ((await abortable(target.count(), signal)) === 0) throw new InputError(`no element matches the selector ${JSON.stringify(selector)}`);
      const texts: string[] = await abortable(target.evaluateAll((els: Any[]) => els.map((e: Any) => e.innerText ?? e.textContent ?? '')), signal);
      const text = texts.join('\n\n').replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
      await stamp(page);
      return `Text of ${await where()}${selector ? ` (${selector})` : ''}:\n` + (await pagedText(ctx, text, 'text', 'text.txt'));
    }
    case 'screenshot': {
      const out = process.env.TOOL_OUTPUT_DIR ?? '';
      if (out === '') throw new InputError('this run has no output folder (TOOL_OUTPUT_DIR) for the screenshot');
      const name = str(p.output_path) || `screenshot-tab${index}.png`;
      if (!name.toLowerCase().endsWith('.png')) throw new InputError('output_path of a screenshot must end in .png');
      progress(ctx.onUpdate, 'taking a screenshot');
      let clip = '';
      let buffer: Uint8Array;
      if (str(p.ref)) {
        const el = await resolveRef(page, str(p.ref));
        buffer = await abortable(el.screenshot({ type: 'png', timeout: t }), signal);
        clip = ` of ${str(p.ref)}`;
      } else {
        buffer = await abortable(page.screenshot({ type: 'png', fullPage: truthy(p.full_page), timeout: t }), signal);
        if (truthy(p.full_page)) clip = ' (full page)';
      }
      const rel = await saveText(name, '');
      const { writeFile } = await import('node:fs/promises');
      const { join } = await import('node:path');
      await writeFile(join(out, rel), buffer);
      // PNG IHDR: width and height are big-endian at bytes 16 and 20.
      const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
      const size = buffer.byteLength >= 24 ? `${view.getUint32(16)}x${view.getUint32(20)} px, ` : '';
      const viewport = page.viewportSize();
      await stamp(page);
      return `Saved the screenshot${clip} of ${await where()} as the run artifact ${rel} (${size}${Math.round(buffer.byteLength / 1024)} KiB` +
        `${viewport ? `; viewport ${viewport.width}x${viewport.height}` : ''}).`;
    }
    case 'evaluate': {
      if (!ctx.allowEvaluate) {
        throw new InputError('evaluate is off: the "browser" integration does not allow it (an admin sets its "Allow evaluate" field to yes)');
      }
      const expression = typeof p.expression === 'string' ? p.expression : '';
      if (expression.trim() === '') throw new InputError('expression is required for evaluate, e.g. "document.title"');
      progress(ctx.onUpdate, 'evaluating an expression in the page');
      const value = await abortable(page.evaluate(expression), signal);
      const text = value === undefined ? 'undefined' : JSON.stringify(value, null, 2) ?? String(value);
      await stamp(page);
      return `Result on ${await where()}:\n` + (await pagedText(ctx, text, 'result', 'evaluate.json'));
    }
  }
  throw new InputError(`unknown action ${JSON.stringify(action)}`);
}

async function tabs(ctx: Ctx): Promise<string> {
  const sub = str(ctx.params.tab_action) || 'list';
  if (!TAB_ACTIONS.includes(sub)) throw new InputError(`tab_action must be one of ${TAB_ACTIONS.join(', ')}, got ${JSON.stringify(sub)}`);
  if (sub === 'open') {
    const page = await abortable(ctx.context.newPage(), ctx.signal);
    const url = str(ctx.params.url);
    if (url) await abortable(page.goto(url, { waitUntil: 'load', timeout: ctx.timeoutMs, signal: ctx.signal }), ctx.signal);
    await stamp(page);
  } else if (sub === 'switch' || sub === 'close') {
    if (ctx.params.tab === undefined || ctx.params.tab === null || ctx.params.tab === '') {
      throw new InputError(`tab (the index from tab_action "list") is required to ${sub} a tab`);
    }
    const { page } = await currentPage(ctx);
    if (sub === 'switch') {
      await abortable(page.bringToFront(), ctx.signal);
      await stamp(page);
    } else {
      await abortable(page.close(), ctx.signal);
    }
  }
  // The list, with the current tab marked, answers every tab_action.
  const rest = { ...ctx, params: { ...ctx.params, tab: undefined } };
  const pages = await pagesOf(ctx);
  const current = pages.length ? (await currentPage(rest)).index : -1;
  const lines = await Promise.all(pages.map(async (pg: Any, i: number) => `${i === current ? '*' : ' '} tab ${i}: ${await describePage(pg)}`));
  const verb = { list: 'Tabs', open: 'Opened a tab. Tabs', close: 'Closed the tab. Tabs', switch: 'Switched. Tabs' }[sub];
  return `${verb} (* is the current one):\n${lines.join('\n') || '(none)'}`;
}

function describeError(err: unknown): string {
  const e = err as { message?: string; name?: string };
  const message = (e?.message ?? String(err)).split('\n')[0];
  if (e?.name === 'TimeoutError') return `timed out: ${message}`;
  return message;
}

export async function execute(
  toolCallId: string,
  params: Record<string, unknown>,
  signal?: AbortSignal,
  onUpdate?: (update: Update) => void,
): Promise<ToolResult> {
  const endpointRaw = str(process.env.BROWSER_CDP_URL);
  if (endpointRaw === '') {
    return result('Error: browser is not configured: BROWSER_CDP_URL is not set. Ask an admin to configure the "browser" integration (the CDP endpoint of a Chrome started with --remote-debugging-port, a browser relay or a hosted browser) and to add it to this tool.', true);
  }
  params = params ?? {};
  const action = str(params.action);
  let endpoint: string;
  let timeoutMs: number;
  try {
    if (!ACTIONS.includes(action)) throw new InputError(`action must be one of ${ACTIONS.join(', ')}, got ${JSON.stringify(params.action ?? '')}`);
    endpoint = endpointOf(endpointRaw);
    timeoutMs = timeoutMsOf(params);
  } catch (err) {
    if (err instanceof InputError) return result(`Error: ${err.message}`, true);
    throw err;
  }
  if (signal?.aborted) return result('cancelled', true);

  let chromium: Any;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch (err) {
    return result(`Error: playwright-core could not be loaded (${describeError(err)}); the console's node_modules must hold it (npm ci)`, true);
  }
  progress(onUpdate, `connecting to the browser at ${new URL(endpoint).host}`);
  let browser: Any;
  try {
    browser = await abortable(
      chromium.connectOverCDP(endpoint, { headers: authHeaders(str(process.env.BROWSER_AUTH_HEADER)), timeout: CONNECT_TIMEOUT_MS }),
      signal,
    );
  } catch (err) {
    if (err instanceof Cancelled) return result('cancelled', true);
    return result(`Error: could not connect to the browser at ${new URL(endpoint).host} within ${CONNECT_TIMEOUT_MS / 1000} s: ${describeError(err)}. Check that the browser runs with remote debugging and the endpoint of the "browser" integration.`, true);
  }
  try {
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const ctx: Ctx = { params, signal, onUpdate, browser, context, timeoutMs, allowEvaluate: truthy(process.env.BROWSER_ALLOW_EVALUATE) };
    const text = await act(ctx, action);
    return result(text);
  } catch (err) {
    if (err instanceof Cancelled || signal?.aborted) return result('cancelled', true);
    if (err instanceof InputError || err instanceof StaleRef) return result(`Error: ${err.message}`, true);
    return result(`Error: ${action} failed: ${describeError(err)}`, true);
  } finally {
    // Disconnects only: a browser we attached to keeps running, with its tabs.
    await browser.close().catch(() => undefined);
  }
}
