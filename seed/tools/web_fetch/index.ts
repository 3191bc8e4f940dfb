// web_fetch: fetch one http(s) URL and return its readable text.
// Runs as a single file under Node.js 24 type stripping: Node built-ins and global fetch only,
// erasable TypeScript syntax only (no enums, namespaces or parameter properties).

type TextContent = { type: 'text'; text: string };
type ToolResult = { content: TextContent[]; isError: boolean };
type OnUpdate = ((update: { content: TextContent[] }) => void) | undefined;

const DEFAULT_MAX_CHARS = 20000;
const MAX_MAX_CHARS = 200000; // the console stores at most 1 MiB of result text
const DEFAULT_TIMEOUT_S = 30;
const MAX_TIMEOUT_S = 100; // stays below the tool's own 120 s wall time
const MAX_DOWNLOAD_BYTES = 5 * 1024 * 1024; // enough for any article; stops memory blow-ups
const PROGRESS_EVERY_BYTES = 256 * 1024;
const USER_AGENT = 'Mozilla/5.0 (compatible; ToolConsole-web_fetch/1.0)';

function result(text: string, isError = false): ToolResult {
  return { content: [{ type: 'text', text }], isError };
}

function progress(onUpdate: OnUpdate, text: string): void {
  // A failing progress callback must never fail the fetch itself.
  try {
    onUpdate?.({ content: [{ type: 'text', text }] });
  } catch {
    /* ignore */
  }
}

class InputError extends Error {}

function intParam(value: unknown, name: string, def: number, min: number, max: number): number {
  if (value === undefined || value === null || value === '') return def;
  const n = typeof value === 'string' ? Number(value.trim()) : value;
  if (typeof n !== 'number' || !Number.isInteger(n)) {
    throw new InputError(`${name} must be an integer, got ${JSON.stringify(value)}`);
  }
  if (n < min || n > max) throw new InputError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

// ---------------------------------------------------------------- decoding

function charsetFromContentType(contentType: string): string | null {
  const m = /charset\s*=\s*"?([^";\s]+)/i.exec(contentType);
  return m ? m[1] : null;
}

function sniffHtmlCharset(bytes: Uint8Array): string | null {
  const head = new TextDecoder('latin1').decode(bytes.subarray(0, 4096));
  const m =
    /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(head) ??
    /<meta[^>]+content\s*=\s*["'][^"']*charset=([\w.:-]+)/i.exec(head);
  return m ? m[1] : null;
}

function decode(bytes: Uint8Array, charset: string | null): string {
  if (charset) {
    try {
      return new TextDecoder(charset.toLowerCase()).decode(bytes);
    } catch {
      // Unknown label: fall back to UTF-8 rather than failing the whole fetch.
    }
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    // Undeclared and not UTF-8: windows-1252 is what browsers assume for such pages.
    return new TextDecoder('windows-1252').decode(bytes);
  }
}

function looksBinary(bytes: Uint8Array): boolean {
  const n = Math.min(bytes.length, 4096);
  for (let i = 0; i < n; i++) if (bytes[i] === 0) return true;
  return false;
}

type Kind = 'html' | 'text' | 'binary';

function kindOf(contentType: string, bytes: Uint8Array): Kind {
  const mime = contentType.split(';')[0].trim().toLowerCase();
  if (mime === 'text/html' || mime === 'application/xhtml+xml') return 'html';
  if (
    mime.startsWith('text/') ||
    /^application\/([\w.+-]*\+)?(json|xml|javascript|ecmascript|x-ndjson|ndjson|yaml|x-yaml|toml|csv|x-sh|sql|graphql|ld\+json)$/.test(
      mime,
    ) ||
    mime.endsWith('+json') ||
    mime.endsWith('+xml')
  ) {
    return 'text';
  }
  if (looksBinary(bytes)) return 'binary';
  // Unknown or missing type: sniff the start of the body.
  const head = new TextDecoder('latin1').decode(bytes.subarray(0, 1024)).trimStart().toLowerCase();
  if (head.startsWith('<!doctype html') || head.startsWith('<html') || /<(head|body)[\s>]/.test(head)) {
    return 'html';
  }
  if (mime === '' || mime === 'application/octet-stream') return 'text';
  return mime.startsWith('image/') || mime.startsWith('audio/') || mime.startsWith('video/')
    ? 'binary'
    : 'text';
}

// ---------------------------------------------------------------- HTML to text

const NAMED_ENTITIES: Record<string, string> = {
  amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', ensp: ' ', emsp: ' ', thinsp: ' ',
  copy: '©', reg: '®', trade: '™', hellip: '…', mdash: '—', ndash: '–', minus: '−',
  lsquo: '‘', rsquo: '’', sbquo: '‚', ldquo: '“', rdquo: '”', bdquo: '„', laquo: '«', raquo: '»',
  lsaquo: '‹', rsaquo: '›', bull: '•', middot: '·', euro: '€', pound: '£', yen: '¥', cent: '¢',
  deg: '°', times: '×', divide: '÷', para: '¶', sect: '§', plusmn: '±', micro: 'µ', frac12: '½',
  frac14: '¼', frac34: '¾', sup2: '²', sup3: '³', larr: '←', rarr: '→', uarr: '↑', darr: '↓',
  harr: '↔', check: '✓', dagger: '†', Dagger: '‡', prime: '′', Prime: '″', shy: '', zwj: '',
  zwnj: '', lrm: '', rlm: '', iexcl: '¡', iquest: '¿', auml: 'ä', ouml: 'ö', uuml: 'ü',
  Auml: 'Ä', Ouml: 'Ö', Uuml: 'Ü', szlig: 'ß', eacute: 'é', egrave: 'è', ecirc: 'ê', aacute: 'á',
  agrave: 'à', acirc: 'â', iacute: 'í', oacute: 'ó', uacute: 'ú', ntilde: 'ñ', ccedil: 'ç',
  Eacute: 'É', aring: 'å', Aring: 'Å', oslash: 'ø', Oslash: 'Ø', aelig: 'æ', AElig: 'Æ',
};

function decodeEntities(text: string): string {
  return text.replace(/&(#[xX][0-9a-fA-F]+|#[0-9]+|[a-zA-Z][a-zA-Z0-9]*);?/g, (whole, ref: string) => {
    if (ref[0] === '#') {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      if (!Number.isFinite(code) || code <= 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
        return '\uFFFD';
      }
      return String.fromCodePoint(code);
    }
    const named = NAMED_ENTITIES[ref];
    return named === undefined ? whole : named;
  });
}

type Attrs = Record<string, string>;

function parseAttrs(source: string): Attrs {
  const attrs: Attrs = {};
  const re = /([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(source)) !== null) {
    const name = m[1].toLowerCase();
    if (!(name in attrs)) attrs[name] = decodeEntities(m[2] ?? m[3] ?? m[4] ?? '');
  }
  return attrs;
}

// Content of these is never text a reader wants.
const DROP_WITH_CONTENT = new Set([
  'script', 'style', 'noscript', 'template', 'svg', 'math', 'iframe', 'object', 'embed',
  'canvas', 'audio', 'video', 'map', 'head', 'nav', 'aside', 'footer', 'form', 'button',
  'select', 'dialog', 'menu',
]);
// Raw-text elements: their content is not markup, so skip straight to the closing tag.
const RAW_TEXT = new Set(['script', 'style', 'textarea', 'title', 'xmp', 'noscript', 'template']);
const VOID = new Set([
  'area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track',
  'wbr', 'param',
]);
const DROP_ROLES = new Set(['navigation', 'banner', 'contentinfo', 'search', 'menu', 'menubar', 'complementary']);
const PARAGRAPH_BLOCKS = new Set([
  'p', 'blockquote', 'figure', 'table', 'dl', 'address', 'details', 'fieldset', 'center',
]);
const LINE_BLOCKS = new Set([
  'div', 'section', 'article', 'main', 'header', 'summary', 'figcaption', 'dt', 'dd', 'caption',
  'legend', 'label', 'body', 'html', 'tbody', 'thead', 'tfoot', 'picture', 'hgroup', 'option',
]);

class TextBuilder {
  parts: string[] = [];
  // Trailing newlines already emitted, so block breaks never stack up.
  newlines = 2;
  pendingSpace = false;

  text(s: string, pre: boolean): void {
    if (pre) {
      if (s.length > 0) this.raw(s);
      return;
    }
    const collapsed = s.replace(/[\s\u00a0]+/g, ' ');
    if (collapsed === '') return;
    if (collapsed.startsWith(' ')) this.pendingSpace = true;
    const trimmed = collapsed.trim();
    if (trimmed === '') return;
    this.raw(trimmed);
    this.pendingSpace = collapsed.endsWith(' ');
  }

  raw(s: string): void {
    this.flushSpace();
    this.parts.push(s);
    const trailing = /\n*$/.exec(s)?.[0].length ?? 0;
    this.newlines = trailing === s.length ? this.newlines + trailing : trailing;
  }

  private flushSpace(): void {
    if (this.pendingSpace && this.newlines === 0) this.parts.push(' ');
    this.pendingSpace = false;
  }

  block(n: number): void {
    this.pendingSpace = false;
    while (this.newlines < n) {
      this.parts.push('\n');
      this.newlines++;
    }
  }

  // Text emitted since `mark` (used for link text).
  since(mark: number): string {
    return this.parts.slice(mark).join('');
  }

  toString(): string {
    return this.parts
      .join('')
      .split('\n')
      .map((line) => line.replace(/[ \t]+$/, ''))
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim();
  }
}

type ListState = { ordered: boolean; next: number };
type LinkState = { href: string; mark: number; alt: string };
type Converted = { title: string; text: string };

function resolveUrl(href: string, base: string): string | null {
  const h = href.trim();
  if (h === '' || h.startsWith('#') || /^(javascript|data|mailto|tel|about|blob):/i.test(h)) {
    return /^(mailto|tel):/i.test(h) ? h : null;
  }
  try {
    return new URL(h, base).toString();
  } catch {
    return null;
  }
}

function isHidden(attrs: Attrs): boolean {
  if ('hidden' in attrs) return true;
  if ((attrs['aria-hidden'] ?? '').toLowerCase() === 'true') return true;
  if (DROP_ROLES.has((attrs.role ?? '').toLowerCase())) return true;
  const style = (attrs.style ?? '').replace(/\s+/g, '').toLowerCase();
  return style.includes('display:none') || style.includes('visibility:hidden');
}

export function htmlToText(html: string, baseUrl: string): Converted {
  // When the page marks its main content, read only that: it leaves out menus and sidebars
  // that are not marked up as <nav>/<aside>. An empty main (filled in by scripts) falls
  // back to the whole page.
  const hasMain = /<main[\s>]|<[a-z][^>]*\srole\s*=\s*["']?main\b/i.test(html);
  const converted = convertHtml(html, baseUrl, hasMain);
  return hasMain && converted.text === '' ? convertHtml(html, baseUrl, false) : converted;
}

function convertHtml(html: string, baseUrl: string, onlyMain: boolean): Converted {
  const titleMatch = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html);
  const title = titleMatch ? decodeEntities(titleMatch[1]).replace(/\s+/g, ' ').trim() : '';
  let base = baseUrl;
  const baseTag = /<base\s[^>]*href\s*=\s*["']?([^"'\s>]+)/i.exec(html);
  if (baseTag) base = resolveUrl(decodeEntities(baseTag[1]), baseUrl) ?? baseUrl;

  const out = new TextBuilder();
  const lists: ListState[] = [];
  const links: LinkState[] = [];
  const openStack: string[] = []; // tag names of open, non-void elements
  // openStack depths at which a dropped / main element was opened: a depth (not a tag name)
  // identifies exactly that element even when elements of the same name nest inside it.
  const dropStack: number[] = [];
  const mainStack: number[] = [];
  let preDepth = 0;
  let cellIndex = 0;
  let preJustOpened = false;

  const emitting = (): boolean => dropStack.length === 0 && (!onlyMain || mainStack.length > 0);

  const tokenRe =
    /<!--[\s\S]*?(?:-->|$)|<![^>]*>|<\?[^>]*>|<(\/?)([a-zA-Z][a-zA-Z0-9:-]*)((?:[^>"']|"[^"]*"|'[^']*')*)>/g;
  let pos = 0;
  let m: RegExpExecArray | null;
  while ((m = tokenRe.exec(html)) !== null) {
    if (m.index > pos && emitting()) {
      let chunk = decodeEntities(html.slice(pos, m.index));
      if (preJustOpened) chunk = chunk.replace(/^\r?\n/, ''); // HTML ignores it after <pre>
      out.text(chunk, preDepth > 0);
    }
    preJustOpened = false;
    pos = tokenRe.lastIndex;
    const tagName = m[2];
    if (tagName === undefined) continue; // comment, doctype, processing instruction
    const tag = tagName.toLowerCase();
    const closing = m[1] === '/';
    const attrSource = m[3] ?? '';

    if (!closing) {
      const attrs = parseAttrs(attrSource);
      const selfClosing = VOID.has(tag) || /\/\s*$/.test(attrSource);
      const drop = DROP_WITH_CONTENT.has(tag) || (dropStack.length === 0 && isHidden(attrs));
      if (RAW_TEXT.has(tag) && !selfClosing) {
        // Skip to the matching close tag; textarea keeps its text.
        const closeRe = new RegExp(`</${tag}\\s*>`, 'ig');
        closeRe.lastIndex = pos;
        const close = closeRe.exec(html);
        const inner = html.slice(pos, close ? close.index : html.length);
        pos = tokenRe.lastIndex = close ? closeRe.lastIndex : html.length;
        if (tag === 'textarea' && emitting()) out.text(decodeEntities(inner), true);
        continue;
      }
      if (selfClosing) {
        if (!emitting() || drop) continue;
        if (tag === 'br') out.raw('\n');
        else if (tag === 'hr') {
          out.block(2);
          out.raw('---');
          out.block(2);
        } else if (tag === 'img' && links.length > 0 && attrs.alt) {
          links[links.length - 1].alt ||= attrs.alt.trim();
        }
        continue;
      }
      if (tag === 'body') closeOpen('head'); // pages often leave <head> unclosed
      openStack.push(tag);
      if (drop) {
        dropStack.push(openStack.length);
        continue;
      }
      if (tag === 'main' || (attrs.role ?? '').toLowerCase() === 'main') mainStack.push(openStack.length);
      if (!emitting()) continue;
      openTag(tag, attrs);
    } else {
      closeOpen(tag);
    }
  }
  if (pos < html.length && emitting()) out.text(decodeEntities(html.slice(pos)), preDepth > 0);

  // Close the innermost open `tag`, implicitly closing anything left open inside it
  // (forgiving the unbalanced markup real pages have).
  function closeOpen(tag: string): void {
    const idx = openStack.lastIndexOf(tag);
    if (idx === -1) return;
    while (openStack.length > idx) {
      const depth = openStack.length;
      const open = openStack.pop() as string;
      if (dropStack.length > 0 && dropStack[dropStack.length - 1] === depth) {
        dropStack.pop();
        continue;
      }
      if (emitting()) closeTag(open);
      if (mainStack.length > 0 && mainStack[mainStack.length - 1] === depth) mainStack.pop();
    }
  }

  function openTag(tag: string, attrs: Attrs): void {
    if (/^h[1-6]$/.test(tag)) {
      out.block(2);
      out.raw('#'.repeat(Number(tag[1])) + ' ');
    } else if (tag === 'ul' || tag === 'ol') {
      out.block(lists.length === 0 ? 2 : 1);
      const start = Number.parseInt(attrs.start ?? '1', 10);
      lists.push({ ordered: tag === 'ol', next: Number.isFinite(start) ? start : 1 });
    } else if (tag === 'li') {
      out.block(1);
      const list = lists[lists.length - 1];
      const indent = '  '.repeat(Math.max(0, lists.length - 1));
      out.raw(indent + (list?.ordered ? `${list.next++}. ` : '- '));
    } else if (tag === 'pre') {
      out.block(2);
      out.raw('```\n');
      preDepth++;
      preJustOpened = true;
    } else if (tag === 'code' && preDepth === 0) {
      out.text(' ', false);
      out.raw('`');
    } else if (tag === 'a') {
      links.push({ href: attrs.href ?? '', mark: out.parts.length, alt: '' });
    } else if (tag === 'tr') {
      out.block(1);
      cellIndex = 0;
    } else if (tag === 'td' || tag === 'th') {
      if (cellIndex++ > 0) out.raw(' | ');
    } else if (PARAGRAPH_BLOCKS.has(tag)) {
      out.block(2);
    } else if (LINE_BLOCKS.has(tag)) {
      out.block(1);
    }
  }

  function closeTag(tag: string): void {
    if (/^h[1-6]$/.test(tag)) {
      out.block(2);
    } else if (tag === 'ul' || tag === 'ol') {
      lists.pop();
      out.block(lists.length === 0 ? 2 : 1);
    } else if (tag === 'li') {
      out.block(1);
    } else if (tag === 'pre') {
      preDepth = Math.max(0, preDepth - 1);
      out.block(1);
      out.raw('```');
      out.block(2);
    } else if (tag === 'code' && preDepth === 0) {
      out.raw('`');
    } else if (tag === 'a') {
      const link = links.pop();
      if (!link) return;
      let text = out.since(link.mark).replace(/\s+/g, ' ').trim();
      if (text === '' && link.alt) {
        out.raw(link.alt);
        text = link.alt;
      }
      const url = resolveUrl(link.href, base);
      if (url && text !== '' && text !== url && text !== link.href.trim()) out.raw(` (${url})`);
      else if (url && text === '') out.raw(url);
    } else if (PARAGRAPH_BLOCKS.has(tag)) {
      out.block(2);
    } else if (LINE_BLOCKS.has(tag) || tag === 'tr') {
      out.block(1);
    }
  }

  return { title, text: out.toString() };
}

// ---------------------------------------------------------------- fetching

function describeFetchError(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e?.cause;
  if (cause?.code === 'ENOTFOUND' || cause?.code === 'EAI_AGAIN') return 'the host name could not be resolved';
  if (cause?.code === 'ECONNREFUSED') return 'the connection was refused';
  if (cause?.code === 'ECONNRESET') return 'the connection was reset';
  if (cause?.code === 'ENETUNREACH' || cause?.code === 'EHOSTUNREACH') {
    return 'the network is unreachable (is the tool allowed network access?)';
  }
  if (cause?.code && /CERT|SSL|TLS/i.test(cause.code)) return `TLS error (${cause.code})`;
  if (cause?.message) return cause.message;
  return e?.message ?? String(err);
}

function formatBytes(n: number): string {
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

async function readBody(
  res: Response,
  onUpdate: OnUpdate,
): Promise<{ bytes: Uint8Array; cutOff: boolean }> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  let nextReport = PROGRESS_EVERY_BYTES;
  let cutOff = false;
  if (res.body) {
    const reader = res.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      total += value.length;
      if (total >= nextReport) {
        progress(onUpdate, `received ${formatBytes(total)}`);
        nextReport = total + PROGRESS_EVERY_BYTES;
      }
      if (total >= MAX_DOWNLOAD_BYTES) {
        cutOff = true;
        await reader.cancel().catch(() => undefined);
        break;
      }
    }
  }
  const bytes = new Uint8Array(Math.min(total, MAX_DOWNLOAD_BYTES));
  let offset = 0;
  for (const chunk of chunks) {
    const part = chunk.subarray(0, bytes.length - offset);
    bytes.set(part, offset);
    offset += part.length;
    if (offset >= bytes.length) break;
  }
  progress(onUpdate, `received ${total} bytes${cutOff ? ' (download limit reached)' : ''}`);
  return { bytes, cutOff };
}

function toText(bytes: Uint8Array, contentType: string, url: string): Converted & { kind: Kind } {
  const kind = kindOf(contentType, bytes);
  if (kind === 'binary') return { kind, title: '', text: '' };
  let charset = charsetFromContentType(contentType);
  if (!charset && kind === 'html') charset = sniffHtmlCharset(bytes);
  let text = decode(bytes, charset);
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (kind === 'html') return { kind, ...htmlToText(text, url) };
  return { kind, title: '', text };
}

export async function execute(
  toolCallId: string,
  params: Record<string, unknown>,
  signal?: AbortSignal,
  onUpdate?: (update: { content: TextContent[] }) => void,
): Promise<ToolResult> {
  let url: URL;
  let maxChars: number;
  let offset: number;
  let timeoutS: number;
  try {
    const raw = typeof params?.url === 'string' ? params.url.trim() : '';
    if (raw === '') throw new InputError('url is required, e.g. "https://example.com/page"');
    try {
      url = new URL(raw);
    } catch {
      throw new InputError(`not a valid absolute URL: ${JSON.stringify(raw)} (include the scheme, e.g. https://)`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new InputError(`unsupported URL scheme "${url.protocol.replace(/:$/, '')}": web_fetch only fetches http and https URLs`);
    }
    maxChars = intParam(params.max_chars, 'max_chars', DEFAULT_MAX_CHARS, 1, MAX_MAX_CHARS);
    offset = intParam(params.offset, 'offset', 0, 0, Number.MAX_SAFE_INTEGER);
    timeoutS = intParam(params.timeout_seconds, 'timeout_seconds', DEFAULT_TIMEOUT_S, 1, MAX_TIMEOUT_S);
  } catch (err) {
    if (err instanceof InputError) return result(`Error: ${err.message}`, true);
    throw err;
  }
  if (signal?.aborted) return result('cancelled', true);

  const timeout = AbortSignal.timeout(timeoutS * 1000);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  const href = url.toString();
  progress(onUpdate, `fetching ${href}`);

  let res: Response;
  let body: { bytes: Uint8Array; cutOff: boolean };
  try {
    res = await fetch(href, {
      signal: combined,
      redirect: 'follow',
      headers: {
        'user-agent': USER_AGENT,
        accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5',
        'accept-language': 'en;q=1.0, *;q=0.5',
      },
    });
    progress(onUpdate, `HTTP ${res.status} ${res.statusText}`.trim());
    body = await readBody(res, onUpdate);
  } catch (err) {
    if (signal?.aborted) return result('cancelled', true);
    if (timeout.aborted) return result(`Error: timed out after ${timeoutS} s fetching ${href}`, true);
    return result(`Error: could not fetch ${href}: ${describeFetchError(err)}`, true);
  }
  if (signal?.aborted) return result('cancelled', true);

  const finalUrl = res.url || href;
  const contentType = res.headers.get('content-type') ?? '';
  progress(onUpdate, 'extracting text');
  const converted = toText(body.bytes, contentType, finalUrl);

  if (!res.ok) {
    const snippet = converted.text.replace(/\s+/g, ' ').trim().slice(0, 500);
    const reason = `${res.status}${res.statusText ? ' ' + res.statusText : ''}`;
    return result(
      `Error: HTTP ${reason} for ${finalUrl}` + (snippet ? `\n\nResponse body (start): ${snippet}` : ''),
      true,
    );
  }
  if (converted.kind === 'binary') {
    return result(
      `Error: ${finalUrl} returned binary content (${contentType || 'unknown type'}, ${formatBytes(body.bytes.length)}); web_fetch only returns text, HTML, JSON and similar text formats`,
      true,
    );
  }

  const full = converted.text;
  const header: string[] = [];
  if (converted.title) header.push(`Title: ${converted.title}`);
  header.push(`URL: ${finalUrl}`);
  if (finalUrl !== href) header.push(`(redirected from ${href})`);
  if (contentType) header.push(`Content-Type: ${contentType}`);

  let text = full.slice(offset, offset + maxChars);
  const notes: string[] = [];
  if (offset > 0 && offset >= full.length) {
    notes.push(`[offset ${offset} is past the end: the text has ${full.length} characters]`);
  } else if (offset > 0 || offset + maxChars < full.length) {
    const end = Math.min(full.length, offset + maxChars);
    let note = `[Truncated: showing characters ${offset}-${end} of ${full.length}.`;
    if (end < full.length) note += ` Call web_fetch again with offset=${end} (or a larger max_chars) to read more.`;
    notes.push(note + ']');
  }
  if (body.cutOff) notes.push(`[The download stopped at ${formatBytes(MAX_DOWNLOAD_BYTES)}; the rest of the page was not read.]`);
  if (full.trim() === '') text = '(the page has no readable text)';

  return result([header.join('\n'), text, ...notes].join('\n\n'));
}
