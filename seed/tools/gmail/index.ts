// gmail: read a Gmail mailbox through the Gmail REST API (v1), read-only.
// Runs as a single file under Node.js 24 type stripping: Node built-ins and global fetch only,
// erasable TypeScript syntax only (no enums, namespaces or parameter properties).
//
// Every field read from Google's answers is one of its REST reference: Message, MessagePart,
// MessagePartHeader, MessagePartBody, Thread, Label, ListMessagesResponse, ListLabelsResponse
// and the error body of the "Resolve errors" guide. Nothing else is assumed.

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

type TextContent = { type: 'text'; text: string };
type ToolResult = { content: TextContent[]; isError: boolean };
type OnUpdate = ((update: { content: TextContent[] }) => void) | undefined;

// --- Google's resources (the fields of the REST reference this tool reads) ---------------

type Header = { name?: string; value?: string };
type PartBody = { attachmentId?: string; size?: number; data?: string };
type MessagePart = {
  partId?: string;
  mimeType?: string;
  filename?: string;
  headers?: Header[];
  body?: PartBody;
  parts?: MessagePart[];
};
type Message = {
  id?: string;
  threadId?: string;
  labelIds?: string[];
  snippet?: string;
  historyId?: string;
  internalDate?: string;
  payload?: MessagePart;
  sizeEstimate?: number;
};
type Thread = { id?: string; snippet?: string; historyId?: string; messages?: Message[] };
type ListMessagesResponse = {
  messages?: Message[];
  nextPageToken?: string;
  resultSizeEstimate?: number;
};
type Label = {
  id?: string;
  name?: string;
  messageListVisibility?: string;
  labelListVisibility?: string;
  type?: string;
  messagesTotal?: number;
  messagesUnread?: number;
  threadsTotal?: number;
  threadsUnread?: number;
  color?: { textColor?: string; backgroundColor?: string };
};
type ErrorBody = {
  error?: {
    code?: number;
    message?: string;
    status?: string;
    errors?: { reason?: string; message?: string; domain?: string }[];
    details?: { '@type'?: string; reason?: string }[];
  };
};

// --- what the tool returns ---------------------------------------------------------------

type BodyView = {
  mimeType: string; // the part the text comes from: text/plain, or text/html turned into text
  charset: string;
  text: string;
  length: number; // characters of the whole decoded text
  truncated: boolean;
};
type AttachmentView = {
  partId: string;
  filename: string;
  mimeType: string;
  size: number;
  attachmentId: string;
};
type MessageView = {
  id: string;
  threadId: string;
  labelIds: string[];
  snippet: string;
  historyId: string;
  internalDate: string;
  sizeEstimate: number | null;
  headers: { name: string; value: string }[];
  body: BodyView | null;
  attachments: AttachmentView[];
};

const API = 'https://gmail.googleapis.com/gmail/v1/users/me';
const OPERATIONS = new Set(['search', 'get_message', 'get_thread', 'list_labels']);
const SHOWN_HEADERS = ['From', 'To', 'Cc', 'Reply-To', 'Date', 'Subject'];
const DEFAULT_MAX_RESULTS = 10;
const MAX_MAX_RESULTS = 50;
const DEFAULT_BODY_CHARS = 4000;
const MAX_BODY_CHARS = 50000;
const DEFAULT_TOTAL_CHARS = 20000;
const MAX_TOTAL_CHARS = 100000;
const HEADER_CHARS = 500;
const REQUEST_TIMEOUT_MS = 30000;
const CONCURRENCY = 4; // Gmail limits concurrent requests per user

class InputError extends Error {}

class GmailError extends Error {
  status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

function result(text: string, isError = false): ToolResult {
  return { content: [{ type: 'text', text }], isError };
}

function progress(onUpdate: OnUpdate, text: string): void {
  // A failing progress callback must never fail the call itself.
  try {
    onUpdate?.({ content: [{ type: 'text', text }] });
  } catch {
    /* ignore */
  }
}

function str(value: unknown): string {
  return typeof value === 'string' ? value.trim() : '';
}

function clampedInt(
  value: unknown,
  name: string,
  def: number,
  min: number,
  max: number,
  notes: string[],
): number {
  if (value === undefined || value === null || value === '') return def;
  const n = typeof value === 'string' ? Number(value.trim()) : value;
  if (typeof n !== 'number' || !Number.isInteger(n)) {
    throw new InputError(`${name} must be an integer, got ${JSON.stringify(value)}`);
  }
  if (n < min) throw new InputError(`${name} must be at least ${min}, got ${n}`);
  if (n > max) {
    notes.push(`${name} is capped at ${max} (${n} was asked).`);
    return max;
  }
  return n;
}

function bool(value: unknown, name: string): boolean {
  if (value === undefined || value === null || value === '') return false;
  if (typeof value === 'boolean') return value;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new InputError(`${name} must be true or false, got ${JSON.stringify(value)}`);
}

function stringList(value: unknown, name: string): string[] {
  if (value === undefined || value === null || value === '') return [];
  const items = typeof value === 'string' ? value.split(',') : value;
  if (!Array.isArray(items) || items.some((v) => typeof v !== 'string')) {
    throw new InputError(`${name} must be a list of strings, e.g. ["INBOX", "UNREAD"]`);
  }
  return items.map((v: string) => v.trim()).filter((v: string) => v !== '');
}

function oneLine(text: string, limit: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > limit ? flat.slice(0, limit - 1).trimEnd() + '…' : flat;
}

// --- decoding ------------------------------------------------------------------------------

// MessagePartBody.data is base64url; Google pads it, other producers may not. Node's base64
// decoder takes the standard alphabet with or without padding.
function decodeBase64Url(data: string): Uint8Array {
  const standard = data.replace(/\s+/g, '').replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, '');
  return new Uint8Array(Buffer.from(standard, 'base64'));
}

function headerValue(headers: Header[] | undefined, name: string): string {
  const lower = name.toLowerCase();
  for (const h of headers ?? []) {
    if (typeof h?.name === 'string' && h.name.toLowerCase() === lower) return String(h.value ?? '');
  }
  return '';
}

function charsetOf(part: MessagePart): string {
  const match = /charset\s*=\s*"?([^";\s]+)"?/i.exec(headerValue(part.headers, 'Content-Type'));
  return match ? match[1].toLowerCase() : 'utf-8';
}

// The charset named by the part's Content-Type (TextDecoder knows the WHATWG encodings:
// ISO-8859-x, windows-125x, KOI8, Shift_JIS, GB18030, ...); an unknown one is read as UTF-8.
function decodeText(bytes: Uint8Array, charset: string): { text: string; charset: string } {
  try {
    return { text: new TextDecoder(charset).decode(bytes), charset };
  } catch {
    return { text: new TextDecoder('utf-8').decode(bytes), charset: `utf-8 (unknown charset ${charset})` };
  }
}

const ENTITIES: Record<string, string> = {
  amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', copy: '©', reg: '®',
  trade: '™', hellip: '…', mdash: '—', ndash: '–', lsquo: '‘', rsquo: '’', ldquo: '“',
  rdquo: '”', laquo: '«', raquo: '»', euro: '€', pound: '£', bull: '•', middot: '·',
  auml: 'ä', ouml: 'ö', uuml: 'ü', Auml: 'Ä', Ouml: 'Ö', Uuml: 'Ü', szlig: 'ß',
  eacute: 'é', egrave: 'è', agrave: 'à', ccedil: 'ç',
};

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, name: string) => {
    if (name[0] === '#') {
      const code = name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[name] ?? whole;
  });
}

const BLOCK_TAGS =
  /<\/?(p|div|h[1-6]|ul|ol|dl|dt|dd|table|thead|tbody|tr|blockquote|section|article|header|footer|main|nav|aside|pre|hr|center|form|address)\b[^>]*>/gi;

// HTML-only mail as readable text: no scripts, styles or comments; paragraphs, line breaks
// and list items on their own lines; a link keeps its address after its text.
function htmlToText(html: string): string {
  let s = html.replace(/<!--[\s\S]*?-->/g, ' ');
  s = s.replace(/<(script|style|head|title|noscript|template)\b[^>]*>[\s\S]*?<\/\1\s*>/gi, ' ');
  s = s.replace(/\s+/g, ' '); // source whitespace is a space in HTML
  s = s.replace(
    /<a\b[^>]*?\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))[^>]*>([\s\S]*?)<\/a\s*>/gi,
    (_whole, dq: string | undefined, sq: string | undefined, bare: string | undefined, inner: string) => {
      const href = decodeEntities((dq ?? sq ?? bare ?? '').trim());
      const label = decodeEntities(inner.replace(/<[^>]*>/g, '')).trim();
      if (!href || href.startsWith('#') || /^javascript:/i.test(href) || href === label) return inner;
      const shown = href.replace(/^mailto:/i, '');
      return shown === label ? inner : `${inner} (${shown})`;
    },
  );
  s = s.replace(/<br\s*\/?>/gi, '\n');
  s = s.replace(/<li\b[^>]*>/gi, '\n- ');
  s = s.replace(/<\/(td|th)\s*>/gi, ' ');
  s = s.replace(BLOCK_TAGS, '\n');
  s = s.replace(/<img\b[^>]*?\balt\s*=\s*"([^"]+)"[^>]*>/gi, ' [$1] ');
  s = s.replace(/<[^>]*>/g, '');
  s = decodeEntities(s);
  const lines = s.split('\n').map((line) => line.replace(/[ \t\u00a0]+/g, ' ').trim());
  return lines.join('\n').replace(/\n{3,}/g, '\n\n').trim();
}

// --- reading a message ---------------------------------------------------------------------

function isAttachment(part: MessagePart): boolean {
  if (str(part.filename) !== '') return true;
  if (/^\s*attachment/i.test(headerValue(part.headers, 'Content-Disposition'))) return true;
  return !!part.body?.attachmentId && !/^text\/(plain|html)$/i.test(str(part.mimeType));
}

// Visits the MIME tree; an attachment's own parts (a forwarded message/rfc822) are not the
// message's text and are not listed apart from it.
function walk(part: MessagePart | undefined, visit: (p: MessagePart) => void, root = true): void {
  if (!part || typeof part !== 'object') return;
  visit(part);
  if (!root && isAttachment(part)) return;
  if (Array.isArray(part.parts)) for (const child of part.parts) walk(child, visit, false);
}

function attachmentsOf(payload: MessagePart | undefined): AttachmentView[] {
  const found: AttachmentView[] = [];
  walk(payload, (part) => {
    if (!isAttachment(part)) return;
    found.push({
      partId: str(part.partId),
      filename: str(part.filename),
      mimeType: str(part.mimeType),
      size: typeof part.body?.size === 'number' ? part.body.size : 0,
      attachmentId: str(part.body?.attachmentId),
    });
  });
  return found;
}

// text/plain is preferred: every inline text/plain part, joined (a multipart/mixed may have
// several); only a message without one is read from its text/html parts.
function bodyOf(payload: MessagePart | undefined): BodyView | null {
  const plain: MessagePart[] = [];
  const html: MessagePart[] = [];
  walk(payload, (part) => {
    if (isAttachment(part) || typeof part.body?.data !== 'string') return;
    const type = str(part.mimeType).toLowerCase();
    if (type === 'text/plain') plain.push(part);
    else if (type === 'text/html') html.push(part);
  });
  const chosen = plain.length > 0 ? plain : html;
  if (chosen.length === 0) return null;
  const charsets: string[] = [];
  const texts = chosen.map((part) => {
    const decoded = decodeText(decodeBase64Url(part.body?.data ?? ''), charsetOf(part));
    if (!charsets.includes(decoded.charset)) charsets.push(decoded.charset);
    const text = plain.length > 0 ? decoded.text.replace(/\r\n?/g, '\n') : htmlToText(decoded.text);
    return text.trim();
  });
  const text = texts.filter((t) => t !== '').join('\n\n');
  return {
    mimeType: plain.length > 0 ? 'text/plain' : 'text/html',
    charset: charsets.join(', '),
    text,
    length: text.length,
    truncated: false,
  };
}

function viewOf(message: Message, withBody: boolean): MessageView {
  const payload = message.payload;
  const headers: { name: string; value: string }[] = [];
  for (const h of payload?.headers ?? []) {
    if (typeof h?.name === 'string') headers.push({ name: h.name, value: String(h.value ?? '') });
  }
  return {
    id: str(message.id),
    threadId: str(message.threadId),
    labelIds: Array.isArray(message.labelIds) ? message.labelIds.map(String) : [],
    snippet: decodeEntities(str(message.snippet)),
    historyId: str(message.historyId),
    internalDate: str(message.internalDate),
    sizeEstimate: typeof message.sizeEstimate === 'number' ? message.sizeEstimate : null,
    headers,
    body: withBody ? bodyOf(payload) : null,
    attachments: attachmentsOf(payload),
  };
}

// The caps: each body at most bodyCap characters, all bodies of one call together at most
// totalCap; what is cut says so. Returns whether anything was cut.
function applyCaps(views: MessageView[], bodyCap: number, totalCap: number): boolean {
  let budget = totalCap;
  let cut = false;
  for (const view of views) {
    const body = view.body;
    if (!body) continue;
    const allowed = Math.max(0, Math.min(bodyCap, budget));
    if (body.text.length > allowed) {
      body.text = body.text.slice(0, allowed).trimEnd();
      body.truncated = true;
      cut = true;
    }
    budget -= body.text.length;
  }
  return cut;
}

function shownHeaders(view: MessageView): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  for (const name of SHOWN_HEADERS) {
    const value = headerValue(view.headers, name);
    if (value) out.push({ name, value: oneLine(value, HEADER_CHARS) });
  }
  return out;
}

function internalDateIso(view: MessageView): string {
  const ms = Number(view.internalDate);
  return view.internalDate && Number.isFinite(ms) ? new Date(ms).toISOString() : '';
}

function formatAttachment(a: AttachmentView): string {
  const name = a.filename || `(part ${a.partId || '?'}, no file name)`;
  return `${name} (${a.mimeType || 'unknown type'}, ${a.size} bytes${a.attachmentId ? `, attachmentId ${a.attachmentId}` : ''})`;
}

function formatMessage(view: MessageView, withBody: boolean): string {
  const lines = [`Message ${view.id} (thread ${view.threadId})`];
  for (const h of shownHeaders(view)) lines.push(`${h.name}: ${h.value}`);
  const received = internalDateIso(view);
  if (received) lines.push(`Received: ${received}`);
  if (view.labelIds.length > 0) lines.push(`Labels: ${view.labelIds.join(', ')}`);
  for (const a of view.attachments) lines.push(`Attachment: ${formatAttachment(a)}`);
  if (!withBody) {
    if (view.snippet) lines.push(`Snippet: ${oneLine(view.snippet, 300)}`);
    return lines.join('\n');
  }
  const body = view.body;
  lines.push('');
  if (!body) {
    lines.push('(no text body)');
  } else {
    if (body.mimeType === 'text/html') lines.push('(HTML-only message, shown as text)');
    if (body.text) lines.push(body.text);
    if (body.truncated) {
      lines.push(
        `[truncated: ${body.text.length} of ${body.length} characters of this body shown; raise max_body_chars or max_total_chars, or set output_path for the full text]`,
      );
    }
  }
  return lines.join('\n');
}

function messageJson(view: MessageView): Record<string, unknown> {
  return {
    id: view.id,
    threadId: view.threadId,
    labelIds: view.labelIds,
    snippet: view.snippet,
    historyId: view.historyId,
    internalDate: view.internalDate,
    sizeEstimate: view.sizeEstimate,
    headers: view.headers,
    body: view.body,
    attachments: view.attachments,
  };
}

function compactJson(view: MessageView): Record<string, unknown> {
  // The inline answer: the headers people read, not every Received: line.
  return { ...messageJson(view), headers: shownHeaders(view) };
}

function labelLine(label: Label): string {
  const facts: string[] = [`id ${str(label.id)}`];
  if (label.type) facts.push(`type ${label.type}`);
  const counts: [string, unknown][] = [
    ['messagesTotal', label.messagesTotal],
    ['messagesUnread', label.messagesUnread],
    ['threadsTotal', label.threadsTotal],
    ['threadsUnread', label.threadsUnread],
  ];
  for (const [name, value] of counts) if (typeof value === 'number') facts.push(`${name} ${value}`);
  if (label.labelListVisibility) facts.push(`labelListVisibility ${label.labelListVisibility}`);
  if (label.messageListVisibility) facts.push(`messageListVisibility ${label.messageListVisibility}`);
  return `- ${str(label.name) || str(label.id)} (${facts.join(', ')})`;
}

// --- the API -------------------------------------------------------------------------------

function retryAfter(res: Response): string {
  const value = str(res.headers.get('retry-after'));
  if (!value) return '';
  if (/^\d+$/.test(value)) return `${value} s`;
  const when = Date.parse(value);
  return Number.isNaN(when) ? value : new Date(when).toISOString();
}

function reasonsOf(body: ErrorBody): string[] {
  const reasons: string[] = [];
  for (const e of body.error?.errors ?? []) if (e?.reason) reasons.push(e.reason);
  for (const d of body.error?.details ?? []) if (d?.reason) reasons.push(d.reason);
  if (body.error?.status) reasons.push(body.error.status);
  return reasons;
}

function describeHttpError(
  status: number,
  body: ErrorBody,
  res: Response,
  what: string,
  tokenFromInput: boolean,
): string {
  const message = oneLine(str(body.error?.message), 300);
  const reasons = reasonsOf(body);
  const has = (...names: string[]) => reasons.some((r) => names.includes(r));
  const said = message ? `: ${message}` : ''; // inside the parentheses after the status
  const wait = retryAfter(res);
  const retry = wait ? ` Retry after ${wait}.` : ' Wait a minute and try again.';
  if (status === 401) {
    if (tokenFromInput) return `Gmail refused the access_token input (HTTP 401${said}): it is expired or invalid.`;
    return (
      `Gmail refused the access token (HTTP 401${said}). The console refreshes the "google" integration's ` +
      'token before a run, so run the tool again; if it fails again, an admin must reconnect the "google" integration.'
    );
  }
  if (status === 403) {
    if (has('insufficientPermissions', 'ACCESS_TOKEN_SCOPE_INSUFFICIENT')) {
      return (
        `Gmail refused the request (HTTP 403, insufficient scope${said}): the token was not granted the ` +
        'gmail.readonly scope. An admin must reconnect the "google" integration and allow reading Gmail.'
      );
    }
    if (has('dailyLimitExceeded')) {
      return `Gmail refused the request (HTTP 403, daily quota exceeded${said}): the Google Cloud project's daily Gmail API quota is used up; try again tomorrow or raise the quota.`;
    }
    if (has('userRateLimitExceeded', 'rateLimitExceeded', 'RATE_LIMIT_EXCEEDED')) {
      return `Gmail refused the request (HTTP 403, rate limit exceeded${said}).${retry}`;
    }
    if (has('domainPolicy')) {
      return `Gmail refused the request (HTTP 403, domain policy${said}): the Google Workspace admin does not allow this app to access Gmail.`;
    }
    if (has('accessNotConfigured', 'SERVICE_DISABLED')) {
      return `Gmail refused the request (HTTP 403, API not enabled${said}): enable the Gmail API in the Google Cloud project of the "google" integration's OAuth client.`;
    }
    return `Gmail refused the request (HTTP 403${reasons.length ? `, reason ${reasons[0]}` : ''}${said}).`;
  }
  if (status === 404) return `Gmail found no ${what} (HTTP 404${said}): check the id; it may have been deleted, or belong to another account.`;
  if (status === 429) return `Gmail refused the request (HTTP 429 Too Many Requests${said}): too many requests for this account.${retry}`;
  if (status === 400) return `Gmail refused the request as invalid (HTTP 400${said}); check the inputs (for example the query syntax or the label ids).`;
  if (status >= 500) return `Gmail failed (HTTP ${status}${said}); try again later.`;
  return `Gmail refused the request (HTTP ${status}${said}).`;
}

function describeFetchError(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const code = e?.cause?.code;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'the host name could not be resolved';
  if (code === 'ECONNREFUSED') return 'the connection was refused';
  if (code === 'ECONNRESET') return 'the connection was reset';
  if (code && /CERT|SSL|TLS/i.test(code)) return `TLS error (${code})`;
  return e?.cause?.message ?? e?.message ?? String(err);
}

type Client = {
  get: <T>(path: string, query: [string, string][], what: string) => Promise<T>;
};

function client(token: string, tokenFromInput: boolean, signal: AbortSignal | undefined): Client {
  return {
    async get<T>(path: string, query: [string, string][], what: string): Promise<T> {
      const url = new URL(API + path);
      for (const [key, value] of query) url.searchParams.append(key, value);
      const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
      const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
      let res: Response;
      let text: string;
      try {
        res = await fetch(url, {
          signal: combined,
          headers: { authorization: `Bearer ${token}`, accept: 'application/json', 'user-agent': 'ToolConsole-gmail/1.0' },
        });
        text = await res.text();
      } catch (err) {
        if (signal?.aborted) throw err;
        if (timeout.aborted) throw new GmailError(0, `Gmail did not answer within ${REQUEST_TIMEOUT_MS / 1000} s; try again.`);
        throw new GmailError(0, `could not reach Gmail at ${url.origin}: ${describeFetchError(err)}.`);
      }
      let data: unknown = null;
      try {
        data = JSON.parse(text);
      } catch {
        data = null;
      }
      if (!res.ok) {
        const body = data && typeof data === 'object' ? (data as ErrorBody) : {};
        throw new GmailError(res.status, describeHttpError(res.status, body, res, what, tokenFromInput));
      }
      if (data === null || typeof data !== 'object') {
        throw new GmailError(res.status, `Gmail answered HTTP ${res.status} without a JSON document.`);
      }
      return data as T;
    },
  };
}

async function inBatches<T, R>(items: T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) {
    out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  }
  return out;
}

function metadataQuery(): [string, string][] {
  return [['format', 'metadata'], ...SHOWN_HEADERS.map((h): [string, string] => ['metadataHeaders', h])];
}

// --- output_path ---------------------------------------------------------------------------

function writeFull(path: string, data: unknown): string {
  const target = path.endsWith('/') ? `${path}gmail.json` : path;
  mkdirSync(dirname(target), { recursive: true });
  const text = JSON.stringify(data, null, 2) + '\n';
  writeFileSync(target, text);
  const outDir = str(process.env.TOOL_OUTPUT_DIR).replace(/\/+$/, '');
  const artifact = outDir && target.startsWith(outDir + '/') ? target.slice(outDir.length + 1) : '';
  const size = Buffer.byteLength(text);
  return `Full data (${size} bytes of JSON) written to ${target}${artifact ? `; it is attached to this run as the artifact ${artifact}` : ''}.`;
}

// --- the operations ------------------------------------------------------------------------

type Options = {
  format: string;
  maxResults: number;
  bodyCap: number;
  totalCap: number;
  outputPath: string;
  notes: string[];
};

function finish(parts: string[], options: Options, cut: boolean): string {
  const lines = [...parts];
  if (cut) {
    lines.push(
      `[truncated: bodies are capped at ${options.bodyCap} characters each and ${options.totalCap} in all; set output_path for the full text]`,
    );
  }
  if (options.notes.length > 0) lines.push(...options.notes.map((n) => `Note: ${n}`));
  return lines.join('\n').trim();
}

async function search(api: Client, params: Record<string, unknown>, options: Options, onUpdate: OnUpdate): Promise<string> {
  const q = str(params.query);
  const labelIds = stringList(params.label_ids, 'label_ids');
  const pageToken = str(params.page_token);
  const withBodies = bool(params.include_bodies, 'include_bodies');
  const query: [string, string][] = [['maxResults', String(options.maxResults)]];
  if (q) query.push(['q', q]);
  for (const id of labelIds) query.push(['labelIds', id]);
  if (pageToken) query.push(['pageToken', pageToken]);
  if (bool(params.include_spam_trash, 'include_spam_trash')) query.push(['includeSpamTrash', 'true']);

  progress(onUpdate, `searching messages${q ? ` for "${q}"` : ''}`);
  const list = await api.get<ListMessagesResponse>('/messages', query, 'messages');
  const refs = (Array.isArray(list.messages) ? list.messages : []).filter((m) => str(m?.id) !== '');
  const ids = refs.slice(0, options.maxResults).map((m) => str(m.id));
  const full = withBodies || options.outputPath !== '';
  progress(onUpdate, `reading ${ids.length} messages`);
  const missing: string[] = [];
  const messages = await inBatches(ids, CONCURRENCY, async (id) => {
    try {
      return await api.get<Message>(`/messages/${encodeURIComponent(id)}`, full ? [['format', 'full']] : metadataQuery(), `message ${id}`);
    } catch (err) {
      // Deleted between the list and the read: say so, keep the others.
      if (err instanceof GmailError && err.status === 404) {
        missing.push(id);
        return null;
      }
      throw err;
    }
  });
  const views = messages.filter((m): m is Message => m !== null).map((m) => viewOf(m, full));
  const nextPageToken = str(list.nextPageToken);
  const estimate = typeof list.resultSizeEstimate === 'number' ? list.resultSizeEstimate : null;
  if (missing.length > 0) options.notes.push(`${missing.length} listed message(s) could not be read any more (deleted?): ${missing.join(', ')}`);

  const filters = [q ? `query "${q}"` : '', labelIds.length ? `labels ${labelIds.join(', ')}` : ''].filter((f) => f);
  const head =
    `${views.length} message(s)${filters.length ? ` matching ${filters.join(' and ')}` : ''}` +
    (estimate !== null ? ` (resultSizeEstimate ${estimate})` : '') +
    (pageToken ? ', a further page' : '') +
    '.';
  const more = nextPageToken ? `More results: call again with page_token "${nextPageToken}".` : 'No further page.';

  let saved = '';
  if (options.outputPath) {
    saved = writeFull(options.outputPath, {
      operation: 'search', query: q, labelIds, pageToken: pageToken || null, nextPageToken: nextPageToken || null,
      resultSizeEstimate: estimate, messages: views.map(messageJson),
    });
  }
  const showBodies = withBodies && !options.outputPath;
  const cut = showBodies ? applyCaps(views, options.bodyCap, options.totalCap) : false;
  if (options.format === 'json') {
    const shown = views.map((v) => compactJson(showBodies ? v : { ...v, body: null }));
    const page = { nextPageToken: nextPageToken || null, resultSizeEstimate: estimate };
    return jsonAnswer({ ...page, messages: shown, truncated: cut }, options, saved);
  }
  const blocks = views.map((v, i) => `${i + 1}. ${formatMessage(v, showBodies).replace(/\n/g, '\n   ')}`);
  const parts = [head, more, ...(saved ? [saved] : []), '', blocks.join(showBodies ? '\n\n---\n\n' : '\n\n')];
  if (views.length === 0) parts.push('No messages.');
  return finish(parts, options, cut);
}

function jsonAnswer(data: Record<string, unknown>, options: Options, saved: string): string {
  const answer: Record<string, unknown> = { ...data };
  if (saved) answer.output = saved;
  if (options.notes.length > 0) answer.notes = options.notes;
  return JSON.stringify(answer, null, 2);
}

async function getMessage(api: Client, params: Record<string, unknown>, options: Options, onUpdate: OnUpdate): Promise<string> {
  const id = str(params.message_id);
  if (!id) throw new InputError('message_id is required for operation get_message (an id from a search)');
  progress(onUpdate, `reading message ${id}`);
  const message = await api.get<Message>(`/messages/${encodeURIComponent(id)}`, [['format', 'full']], `message with id ${id}`);
  const view = viewOf(message, true);
  let saved = '';
  if (options.outputPath) saved = writeFull(options.outputPath, { operation: 'get_message', message: messageJson(view) });
  // With output_path the answer is a summary: the bodies are in the file (seed 003).
  const showBody = !options.outputPath;
  const cut = showBody ? applyCaps([view], options.bodyCap, options.totalCap) : false;
  if (options.format === 'json') {
    return jsonAnswer({ message: compactJson(showBody ? view : { ...view, body: null }), truncated: cut }, options, saved);
  }
  return finish([...(saved ? [saved, ''] : []), formatMessage(view, showBody)], options, cut);
}

async function getThread(api: Client, params: Record<string, unknown>, options: Options, onUpdate: OnUpdate): Promise<string> {
  const id = str(params.thread_id);
  if (!id) throw new InputError('thread_id is required for operation get_thread (a threadId from a search or a message)');
  progress(onUpdate, `reading thread ${id}`);
  const thread = await api.get<Thread>(`/threads/${encodeURIComponent(id)}`, [['format', 'full']], `thread with id ${id}`);
  const all = (Array.isArray(thread.messages) ? thread.messages : []).map((m) => viewOf(m, true));
  const views = all.slice(0, options.maxResults);
  if (all.length > views.length) {
    options.notes.push(`the thread has ${all.length} messages; the first ${views.length} are shown (max_results).`);
  }
  const info = { id: str(thread.id), snippet: decodeEntities(str(thread.snippet)), historyId: str(thread.historyId) };
  let saved = '';
  if (options.outputPath) {
    saved = writeFull(options.outputPath, { operation: 'get_thread', thread: { ...info, messages: all.map(messageJson) } });
  }
  const showBodies = !options.outputPath;
  const cut = showBodies ? applyCaps(views, options.bodyCap, options.totalCap) : false;
  if (options.format === 'json') {
    const shown = views.map((v) => compactJson(showBodies ? v : { ...v, body: null }));
    return jsonAnswer({ thread: { ...info, messages: shown }, truncated: cut || all.length > views.length }, options, saved);
  }
  const head = `Thread ${str(thread.id)}: ${all.length} message(s)${all.length > views.length ? `, ${views.length} shown` : ''}.`;
  const blocks = views.map((v, i) => `--- message ${i + 1} of ${all.length} ---\n${formatMessage(v, showBodies)}`);
  return finish([head, ...(saved ? [saved] : []), '', blocks.join('\n\n')], options, cut);
}

async function listLabels(api: Client, options: Options, onUpdate: OnUpdate): Promise<string> {
  progress(onUpdate, 'listing labels');
  const data = await api.get<{ labels?: Label[] }>('/labels', [], 'labels');
  const labels = (Array.isArray(data.labels) ? data.labels : []).filter((l) => l && str(l.id) !== '');
  const byName = (a: Label, b: Label) => str(a.name).localeCompare(str(b.name));
  const system = labels.filter((l) => l.type === 'system').sort(byName);
  const user = labels.filter((l) => l.type !== 'system').sort(byName);
  let saved = '';
  if (options.outputPath) saved = writeFull(options.outputPath, { operation: 'list_labels', labels });
  if (options.format === 'json') return jsonAnswer({ labels: [...system, ...user] }, options, saved);
  const lines = [`${labels.length} label(s). Use the ids in label_ids; in a query, use label:<name>.`];
  if (saved) lines.push(saved);
  if (system.length > 0) lines.push('', 'System labels:', ...system.map(labelLine));
  if (user.length > 0) lines.push('', 'User labels:', ...user.map(labelLine));
  let text = lines.join('\n');
  let cut = false;
  if (text.length > options.totalCap) {
    text = text.slice(0, options.totalCap).replace(/\n[^\n]*$/, '');
    cut = true;
  }
  const tail = cut ? [`[truncated: the list is longer than max_total_chars (${options.totalCap}); set output_path for all labels]`] : [];
  return finish([text, ...tail], options, false);
}

// --- entry ---------------------------------------------------------------------------------

export async function execute(
  toolCallId: string,
  params: Record<string, unknown>,
  signal?: AbortSignal,
  onUpdate?: (update: { content: TextContent[] }) => void,
): Promise<ToolResult> {
  params = params && typeof params === 'object' ? params : {};
  // Credentials rule: an explicit input overrides the integration's environment variable.
  const inputToken = str(params.access_token);
  const token = inputToken || str(process.env.GOOGLE_ACCESS_TOKEN);
  if (token === '') {
    return result(
      'Error: gmail is not connected: GOOGLE_ACCESS_TOKEN is not set. Ask an admin to connect the "google" integration (Gmail read-only access) and to add it to this tool.',
      true,
    );
  }
  const operation = str(params.operation) || 'search';
  let options: Options;
  try {
    if (!OPERATIONS.has(operation)) {
      throw new InputError(`operation must be one of search, get_message, get_thread, list_labels, got "${operation}"`);
    }
    const format = str(params.format) || 'text';
    if (format !== 'text' && format !== 'json') throw new InputError(`format must be text or json, got "${format}"`);
    const notes: string[] = [];
    options = {
      format,
      maxResults: clampedInt(params.max_results, 'max_results', DEFAULT_MAX_RESULTS, 1, MAX_MAX_RESULTS, notes),
      bodyCap: clampedInt(params.max_body_chars, 'max_body_chars', DEFAULT_BODY_CHARS, 100, MAX_BODY_CHARS, notes),
      totalCap: clampedInt(params.max_total_chars, 'max_total_chars', DEFAULT_TOTAL_CHARS, 1000, MAX_TOTAL_CHARS, notes),
      outputPath: str(params.output_path),
      notes,
    };
  } catch (err) {
    if (err instanceof InputError) return result(`Error: ${err.message}`, true);
    throw err;
  }
  if (signal?.aborted) return result('cancelled', true);
  const api = client(token, inputToken !== '', signal);
  try {
    let text: string;
    if (operation === 'get_message') text = await getMessage(api, params, options, onUpdate);
    else if (operation === 'get_thread') text = await getThread(api, params, options, onUpdate);
    else if (operation === 'list_labels') text = await listLabels(api, options, onUpdate);
    else text = await search(api, params, options, onUpdate);
    return result(text);
  } catch (err) {
    if (signal?.aborted) return result('cancelled', true);
    if (err instanceof InputError || err instanceof GmailError) return result(`Error: ${err.message}`, true);
    const e = err as { code?: string; message?: string };
    if (e?.code && /^E[A-Z]+$/.test(e.code)) return result(`Error: could not write output_path: ${e.message}`, true);
    throw err;
  }
}
