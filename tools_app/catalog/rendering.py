"""Turning tool content into HTML that is safe to put in a page.

Tool bodies and files are written by developers, imported from zips and seed folders, and
shown to every viewer, so they are treated as untrusted: Markdown is rendered with raw HTML
disabled and the result is cleaned again with nh3 (defence in depth: a bug in either layer
alone does not open an XSS hole). Source code goes through Pygments, which escapes it."""

from __future__ import annotations

import functools
import hashlib
import re

import nh3
from django.core.cache import cache
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name, get_lexer_for_filename
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

# Highlighting is roughly linear but slow in pure Python; above this a file is shown as
# escaped plain text so one huge file cannot make a page take seconds.
MAX_HIGHLIGHT_CHARS = 200_000
# Beyond these, a TOOL.md body is shown as plain text (see _too_costly).
MAX_MARKDOWN_CHARS = 100_000
MAX_LINK_OPENERS = 1_000
MAX_EMPHASIS_DELIMITERS = 10_000
MARKDOWN_CSS_CLASS = "markdown"
HIGHLIGHT_CSS_CLASS = "highlight"
PYGMENTS_STYLE = "default"

# Tags a TOOL.md body may produce. The safe Markdown preset cannot emit anything else
# except through a bug; nh3 makes sure of it.
_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "li", "ol", "p", "pre", "s", "span", "strong", "table", "tbody", "td", "th",
    "thead", "tr", "ul",
}  # fmt: skip
_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "td": {"style"},
    "th": {"style"},
}
# Tables align columns with `style="text-align:..."`; nothing else may be styled.
_FILTER_STYLE = {"text-align"}
_URL_SCHEMES = {"http", "https", "mailto"}
# Classes only our own highlighter produces: Pygments token classes on spans, and the
# fence's language on <code>.
_TOKEN_CLASSES = {cls for cls in STANDARD_TYPES.values() if cls}


def _fence_highlighter(code: str, lang: str, attrs: str) -> str:
    """markdown-it's highlight hook: Pygments spans for fenced code with a known language.

    Returning "" lets markdown-it escape the code itself."""
    if not lang or len(code) > MAX_HIGHLIGHT_CHARS:
        return ""
    try:
        lexer = get_lexer_by_name(lang.strip().lower()[:40], stripnl=False)
    except ClassNotFound:
        return ""
    return pygments_highlight(code, lexer, HtmlFormatter(nowrap=True))


@functools.cache
def _markdown() -> MarkdownIt:
    # "js-default": CommonMark + tables and strikethrough, raw HTML off, and link
    # validation that refuses javascript:, vbscript:, file: and most data: URLs.
    md = MarkdownIt("js-default", {"highlight": _fence_highlighter})
    md.add_render_rule("image", _image_as_link)
    return md


def _image_as_link(self, tokens, idx, options, env) -> str:
    """Render `![alt](src)` as a link: an <img> from any host would tell that host who
    views the page (and most consoles sit behind firewalls that block it anyway)."""
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env) or src
    return f'<a href="{escape(src)}">[image: {escape(alt)}]</a>'


def render_markdown(text: str) -> SafeString:
    """Safe HTML for a TOOL.md body. Versions never change, so the result is cached by
    content: the Markdown parser is pure Python and some inputs cost seconds."""
    if _too_costly(text):
        return mark_safe(  # noqa: S308 - escaped
            '<p class="notice">This text is too large or too complex to render as '
            "Markdown; it is shown as written.</p>"
            f'<pre class="plain" tabindex="0">{escape(text)}</pre>'
        )
    key = "markdown:v2:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    html = cache.get(key)
    if html is None:
        html = _render_markdown(text)
        cache.set(key, html, timeout=24 * 3600)
    return mark_safe(html)  # noqa: S308 - cleaned by nh3 in _render_markdown


def _too_costly(text: str) -> bool:
    """Inputs that make markdown-it-py slow: it scans ahead from every `[` for a link
    label and from every `*`/`_` for a closing delimiter. Real documentation has a few
    hundred at most; a body built to stall the page has tens of thousands."""
    return (
        len(text) > MAX_MARKDOWN_CHARS
        or text.count("[") > MAX_LINK_OPENERS
        or text.count("*") + text.count("_") > MAX_EMPHASIS_DELIMITERS
    )


def _render_markdown(text: str) -> str:
    html = _markdown().render(text)
    cleaned = nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        filter_style_properties=_FILTER_STYLE,
        allowed_classes={
            "span": _TOKEN_CLASSES,
            "code": {f"language-{lang}" for lang in _fence_languages(html)},
        },
        strip_comments=True,
    )
    # Code blocks scroll sideways (long lines, phones): tabindex lets a keyboard reach
    # them to scroll. Added after cleaning, so a body can never set tabindex itself.
    return cleaned.replace("<pre>", '<pre tabindex="0">')


def _fence_languages(html: str) -> set[str]:
    """The `language-x` classes markdown-it put on <code>, so nh3 keeps exactly those."""
    return set(re.findall(r'<code class="language-([A-Za-z0-9_+#.-]{1,40})"', html))


def lexer_for(filename: str, code: str) -> Lexer:
    try:
        return get_lexer_for_filename(filename, code, stripnl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False)


def highlight(code: str, filename: str, *, plain: bool = False) -> SafeString:
    """HTML for a source file: Pygments-highlighted, or escaped plain text when too big
    (or when the caller asks for `plain`)."""
    # The box scrolls sideways (long lines, narrow screens): tabindex lets a keyboard
    # reach it to scroll it.
    if plain or len(code) > MAX_HIGHLIGHT_CHARS:
        html = f'<pre class="{HIGHLIGHT_CSS_CLASS} plain" tabindex="0">{escape(code)}</pre>'
        return mark_safe(html)  # noqa: S308
    formatter = HtmlFormatter(cssclass=HIGHLIGHT_CSS_CLASS, linenos="table", wrapcode=True)
    html = pygments_highlight(code, lexer_for(filename, code), formatter)
    opening = f'<div class="{HIGHLIGHT_CSS_CLASS}">'
    return mark_safe(html.replace(opening, f'<div class="{HIGHLIGHT_CSS_CLASS}" tabindex="0">', 1))  # noqa: S308


@functools.cache
def pygments_css() -> str:
    """Styles for highlighted files and for fenced code in rendered Markdown."""
    formatter = HtmlFormatter(style=PYGMENTS_STYLE)
    selectors = [f".{HIGHLIGHT_CSS_CLASS}", f".{MARKDOWN_CSS_CLASS} pre"]
    # Token and background rules only, each scoped: get_style_defs() would also emit bare
    # `pre` and `td.linenos` rules that restyle every <pre> on the site.
    lines = [
        *formatter.get_background_style_defs(selectors),
        *formatter.get_token_style_defs(selectors),
        f".{HIGHLIGHT_CSS_CLASS} .linenos {{ color: #5b6576; user-select: none; }}",
    ]
    return "\n".join(lines) + "\n"


@functools.cache
def pygments_css_hash() -> str:
    """A short content hash, to version the stylesheet's URL and cache it for long."""
    return hashlib.sha256(pygments_css().encode()).hexdigest()[:12]
