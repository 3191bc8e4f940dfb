// web_search: search the web through a SearXNG instance's JSON API.
// Runs as a single file under Node.js 24 type stripping: Node built-ins and global fetch only,
// erasable TypeScript syntax only (no enums, namespaces or parameter properties).

type TextContent = { type: 'text'; text: string };
type ToolResult = { content: TextContent[]; isError: boolean };
type OnUpdate = ((update: { content: TextContent[] }) => void) | undefined;

type SearxResult = {
  title?: string;
  url?: string;
  content?: string;
  engine?: string;
  engines?: string[];
  publishedDate?: string | null;
};
type SearxAnswer = string | { answer?: string; url?: string };
type SearxResponse = {
  query?: string;
  number_of_results?: number;
  results?: SearxResult[];
  answers?: SearxAnswer[];
  suggestions?: string[];
  corrections?: string[];
  unresponsive_engines?: [string, string][];
};

const DEFAULT_MAX_RESULTS = 10;
const MAX_MAX_RESULTS = 50;
const REQUEST_TIMEOUT_MS = 30000;
const SNIPPET_CHARS = 400;
const TIME_RANGES = new Set(['day', 'week', 'month', 'year']);
const SAFESEARCH: Record<string, string> = { off: '0', moderate: '1', strict: '2' };

class InputError extends Error {}

function result(text: string, isError = false): ToolResult {
  return { content: [{ type: 'text', text }], isError };
}

function progress(onUpdate: OnUpdate, text: string): void {
  // A failing progress callback must never fail the search itself.
  try {
    onUpdate?.({ content: [{ type: 'text', text }] });
  } catch {
    /* ignore */
  }
}

function str(value: unknown): string {
  return typeof value === 'string' ? value.trim() : '';
}

function intParam(value: unknown, name: string, def: number, min: number, max: number): number {
  if (value === undefined || value === null || value === '') return def;
  const n = typeof value === 'string' ? Number(value.trim()) : value;
  if (typeof n !== 'number' || !Number.isInteger(n)) {
    throw new InputError(`${name} must be an integer, got ${JSON.stringify(value)}`);
  }
  if (n < min || n > max) throw new InputError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

// Accepts "https://searx.example", ".../searxng/" or a URL that already ends in /search.
function searchEndpoint(base: string): URL {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new InputError(
      `SEARXNG_URL is not a valid URL (${JSON.stringify(base)}); fix the URL of the "searxng" integration, e.g. https://searx.example.org`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InputError('SEARXNG_URL must be an http:// or https:// URL; fix the "searxng" integration');
  }
  let path = url.pathname.replace(/\/+$/, '');
  if (!path.endsWith('/search')) path += '/search';
  url.pathname = path;
  url.search = '';
  url.hash = '';
  return url;
}

function oneLine(text: string, limit: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > limit ? flat.slice(0, limit - 1).trimEnd() + '…' : flat;
}

function formatResults(data: SearxResponse, query: string, maxResults: number, page: number): string {
  const results = (Array.isArray(data.results) ? data.results : []).filter((r) => r && str(r.url) !== '');
  const lines: string[] = [];
  const answers = (Array.isArray(data.answers) ? data.answers : [])
    .map((a) => (typeof a === 'string' ? a : str(a?.answer) + (a?.url ? ` (${a.url})` : '')))
    .filter((a) => a.trim() !== '');
  if (answers.length > 0) {
    lines.push('Answers:');
    for (const a of answers.slice(0, 3)) lines.push(`- ${oneLine(a, SNIPPET_CHARS)}`);
    lines.push('');
  }

  const shown = results.slice(0, maxResults);
  if (shown.length === 0) {
    lines.push(`No results for "${query}"${page > 1 ? ` on page ${page}` : ''}.`);
  } else {
    const total = typeof data.number_of_results === 'number' && data.number_of_results > 0
      ? `, about ${data.number_of_results} in total`
      : '';
    lines.push(`Search results for "${query}" (${shown.length} shown${total}${page > 1 ? `, page ${page}` : ''}):`);
    lines.push('');
    shown.forEach((r, i) => {
      lines.push(`${i + 1}. ${oneLine(str(r.title) || str(r.url), 200)}`);
      lines.push(`   ${str(r.url)}`);
      const snippet = oneLine(str(r.content), SNIPPET_CHARS);
      const date = str(r.publishedDate ?? '').slice(0, 10);
      if (snippet) lines.push(`   ${date ? `${date}: ` : ''}${snippet}`);
      else if (date) lines.push(`   ${date}`);
      lines.push('');
    });
  }

  const suggestions = [...(data.corrections ?? []), ...(data.suggestions ?? [])].filter(
    (s) => typeof s === 'string' && s.trim() !== '',
  );
  if (suggestions.length > 0) lines.push(`Related searches: ${suggestions.slice(0, 5).join('; ')}`);
  const dead = (data.unresponsive_engines ?? []).map((e) => (Array.isArray(e) ? `${e[0]} (${e[1]})` : String(e)));
  if (dead.length > 0) lines.push(`Engines that did not answer: ${dead.slice(0, 5).join(', ')}`);
  if (shown.length === 0 && dead.length > 0) {
    lines.push('Try again later or with other categories; the search engines behind SearXNG did not answer.');
  }
  return lines.join('\n').trim();
}

function httpErrorHint(status: number, hasToken: boolean): string {
  if (status === 401 || status === 407) {
    return hasToken
      ? 'The token was refused: check the SEARXNG_TOKEN field of the "searxng" integration (or the searxng_token input).'
      : 'The instance wants a token: set the SEARXNG_TOKEN field of the "searxng" integration, or pass searxng_token.';
  }
  if (status === 403) {
    return 'Forbidden: the instance may not allow the JSON format (add "json" to search.formats in SearXNG\'s settings.yml), or the token lacks access.';
  }
  if (status === 429) return 'Rate limited by the SearXNG instance (its limiter/bot detection); wait a moment and try again.';
  if (status === 404) return 'No /search endpoint there: check the URL of the "searxng" integration.';
  if (status >= 500) return 'The SearXNG instance failed; try again later.';
  return '';
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

export async function execute(
  toolCallId: string,
  params: Record<string, unknown>,
  signal?: AbortSignal,
  onUpdate?: (update: { content: TextContent[] }) => void,
): Promise<ToolResult> {
  const baseUrl = str(process.env.SEARXNG_URL);
  if (baseUrl === '') {
    return result(
      'Error: web_search is not configured: SEARXNG_URL is not set. Ask an admin to configure the "searxng" integration (the URL of a SearXNG instance with the JSON format enabled) and to add it to this tool.',
      true,
    );
  }
  // Credentials rule: an explicit input overrides the integration's environment variable.
  const token = str(params?.searxng_token) || str(process.env.SEARXNG_TOKEN);

  let endpoint: URL;
  let query: string;
  let maxResults: number;
  let page: number;
  try {
    endpoint = searchEndpoint(baseUrl);
    query = str(params?.query);
    if (query === '') throw new InputError('query is required, e.g. "rust async runtime comparison"');
    maxResults = intParam(params.max_results, 'max_results', DEFAULT_MAX_RESULTS, 1, MAX_MAX_RESULTS);
    page = intParam(params.page, 'page', 1, 1, 20);
    endpoint.searchParams.set('q', query);
    endpoint.searchParams.set('format', 'json');
    if (page > 1) endpoint.searchParams.set('pageno', String(page));
    const categories = str(params.categories);
    if (categories) {
      const list = categories.split(',').map((c) => c.trim()).filter((c) => c !== '');
      endpoint.searchParams.set('categories', list.join(','));
    }
    const language = str(params.language);
    if (language) endpoint.searchParams.set('language', language);
    const timeRange = str(params.time_range);
    if (timeRange) {
      if (!TIME_RANGES.has(timeRange)) throw new InputError(`time_range must be one of day, week, month, year, got "${timeRange}"`);
      endpoint.searchParams.set('time_range', timeRange);
    }
    const safesearch = str(params.safesearch);
    if (safesearch) {
      if (!(safesearch in SAFESEARCH)) throw new InputError(`safesearch must be one of off, moderate, strict, got "${safesearch}"`);
      endpoint.searchParams.set('safesearch', SAFESEARCH[safesearch]);
    }
  } catch (err) {
    if (err instanceof InputError) return result(`Error: ${err.message}`, true);
    throw err;
  }
  if (signal?.aborted) return result('cancelled', true);

  const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  const headers: Record<string, string> = {
    accept: 'application/json',
    'user-agent': 'ToolConsole-web_search/1.0',
  };
  if (token) headers.authorization = `Bearer ${token}`;

  progress(onUpdate, `searching for "${query}"`);
  let data: SearxResponse;
  try {
    const res = await fetch(endpoint, { signal: combined, headers });
    progress(onUpdate, `SearXNG answered HTTP ${res.status}`);
    const body = await res.text();
    if (!res.ok) {
      const hint = httpErrorHint(res.status, token !== '');
      const snippet = oneLine(body.replace(/<[^>]*>/g, ' '), 300);
      return result(
        `Error: SearXNG answered HTTP ${res.status}${res.statusText ? ' ' + res.statusText : ''}.` +
          (hint ? ` ${hint}` : '') +
          (snippet ? `\nResponse: ${snippet}` : ''),
        true,
      );
    }
    try {
      data = JSON.parse(body) as SearxResponse;
    } catch {
      return result(
        'Error: SearXNG did not return JSON. Enable the JSON format on the instance (add "json" to search.formats in settings.yml) and check the URL of the "searxng" integration.',
        true,
      );
    }
  } catch (err) {
    if (signal?.aborted) return result('cancelled', true);
    if (timeout.aborted) return result(`Error: SearXNG did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`, true);
    return result(
      `Error: could not reach SearXNG at ${endpoint.origin}: ${describeFetchError(err)}. Check the URL of the "searxng" integration.`,
      true,
    );
  }
  if (signal?.aborted) return result('cancelled', true);
  if (data === null || typeof data !== 'object') {
    return result('Error: SearXNG returned an unexpected JSON document (no "results")', true);
  }
  progress(onUpdate, `formatting ${Math.min(maxResults, data.results?.length ?? 0)} results`);
  return result(formatResults(data, query, maxResults, page));
}
