"""Replace every injected secret value by its label in what is stored or shown about a run.

A tool that prints a secret base64- or hex-encoded, reversed or URL-encoded would get it
past a plain search, so each value is also looked for in those forms (docs/security.md,
"Redaction"): base64 (standard and URL-safe, at the three byte alignments a value can have inside a
longer base64 text), hex (lower and upper case), reversed, JSON-escaped and URL-encoded;
a value that is itself base64 of text is also caught decoded (and, for an HTTP Basic
`user:password`, its password).
Every form is replaced by the same label `{{slug.FIELD}}`."""

from __future__ import annotations

import base64
import json
import re
from typing import Any
from urllib.parse import quote, quote_plus

# A cut text (a ring buffer's start, a truncated end) may hold part of a secret; only this
# much of a value is compared there, which bounds the work for pathological values.
_MAX_PARTIAL = 4096
# Derived forms shorter than this are not searched: the base64 core of a 3-byte value is
# two characters, and replacing every "ab" in a result would make it unreadable while
# protecting nothing. The value itself is always redacted, however short.
MIN_ENCODED = 8
# Binary artifacts: only forms at least this long are replaced (a short one would match
# by chance in an image and corrupt it). Text artifacts get every form.
MIN_BINARY = 8
_PERCENT = re.compile(r"%[0-9A-F]{2}")


def _base64_cores(data: bytes) -> set[str]:
    """The part of base64 text that `data` always produces, wherever it sits in a longer
    byte string: at offset 0, 1 or 2 (mod 3) the first 0, 2 or 3 characters also depend
    on the bytes before it, and the last, partial character on the bytes after it."""
    cores = set()
    for offset in range(3):
        standard = base64.b64encode(b"\0" * offset + data).decode().rstrip("=")
        start = (0, 2, 3)[offset]
        end = (8 * (offset + len(data))) // 6
        core = standard[start:end]
        cores.add(core)
        cores.add(core.replace("+", "-").replace("/", "_"))
    return cores


_BASE64_VALUE = re.compile(r"(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def _decoded_forms(value: str) -> set[str]:
    """A secret that is itself base64 of text (an HTTP Basic credential is stored as
    base64 of `user:password`) can leak decoded: its text, and the password after the
    first colon."""
    if len(value) < MIN_ENCODED or not _BASE64_VALUE.fullmatch(value):
        return set()
    try:
        text = base64.b64decode(value, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return set()
    if not text.isprintable():
        return set()
    forms = {text, text.partition(":")[2]}
    return forms | {json.dumps(form)[1:-1] for form in forms}


def variants(value: str) -> set[str]:
    """The forms a value commonly takes in output: as is, JSON-escaped, URL-encoded, and
    (if long enough to be told apart from ordinary text) reversed, hex and base64."""
    found = {value, json.dumps(value)[1:-1]}
    for encoded in (quote(value, safe=""), quote(value), quote_plus(value, safe="")):
        found.add(encoded)
        found.add(_PERCENT.sub(lambda m: m.group(0).lower(), encoded))
    derived = {value[::-1], json.dumps(value[::-1])[1:-1]}
    raw = value.encode("utf-8")
    derived |= {raw.hex(), raw.hex().upper()}
    derived |= _base64_cores(raw)
    derived |= _decoded_forms(value)
    found |= {form for form in derived if len(form) >= MIN_ENCODED}
    return {form for form in found if form}


class Redactor:
    """Redactor({"{{searxng.SEARXNG_TOKEN}}": "s3cret"}).redact("t=s3cret") == "t={{searxng...}}".

    Every non-blank value is redacted, however short: a short secret makes output ugly, a
    leaked one is worse.
    """

    def __init__(self, secrets: dict[str, str]) -> None:
        label_of: dict[str, str] = {}
        for label, value in secrets.items():
            if not value or not value.strip():
                continue
            for variant in variants(value):
                label_of.setdefault(variant, label)
        self._label_of = label_of
        # Longest first, so a secret that contains another one is replaced as a whole;
        # also what a cut edge is compared with.
        ordered = sorted(label_of, key=len, reverse=True)
        self._forms = ordered
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._bytes_label = {
            form.encode("utf-8"): label.encode("utf-8") for form, label in label_of.items()
        }
        binary = [f.encode("utf-8") for f in ordered if len(f.encode("utf-8")) >= MIN_BINARY]
        self._binary_pattern = re.compile(b"|".join(map(re.escape, binary))) if binary else None
        self._text_pattern = (
            re.compile(b"|".join(re.escape(f.encode("utf-8")) for f in ordered))
            if ordered
            else None
        )

    @property
    def active(self) -> bool:
        return self._pattern is not None

    def redact(self, text: str, *, cut_start: bool = False, cut_end: bool = False) -> str:
        """Redact `text`; `cut_start`/`cut_end` say the text was cut there, so a partial
        secret (in any of its forms) at that edge is removed too."""
        if self._pattern is None:
            return text
        text = self._pattern.sub(lambda match: self._label_of[match.group(0)], text)
        if cut_end:
            text = text[: len(text) - self._partial_len(text, at_end=True)]
        if cut_start:
            text = text[self._partial_len(text, at_end=False) :]
        return text

    def redact_json(self, value: Any) -> Any:
        """A JSON value with every string in it, keys too, redacted (a structured result:
        nested no deeper than tools_app/lib/nesting.py's cap, checked before)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {self.redact(str(k)): self.redact_json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_json(v) for v in value]
        return value

    def redact_bytes(self, data: bytes) -> tuple[bytes, bool, bool]:
        """Redact a file's content: (new content, is UTF-8 text, changed). Text gets every
        form replaced, like redact(); binary content the forms of at least MIN_BINARY
        bytes."""
        try:
            data.decode("utf-8")
            is_text = True
        except UnicodeDecodeError:
            is_text = False
        pattern = self._text_pattern if is_text else self._binary_pattern
        # bytes.find is far faster than the alternation: most files hold no secret.
        if pattern is None or not any(form in data for form in self._bytes_label):
            return data, is_text, False
        redacted = pattern.sub(lambda match: self._bytes_label[match.group(0)], data)
        return redacted, is_text, redacted != data

    def _partial_len(self, text: str, *, at_end: bool) -> int:
        """Length of the longest proper prefix (at the end) or suffix (at the start) of a
        secret's form that `text` ends or starts with."""
        longest = 0
        for value in self._forms:
            for size in range(min(len(value) - 1, len(text), _MAX_PARTIAL), longest, -1):
                if at_end and text.endswith(value[:size]):
                    longest = size
                    break
                if not at_end and text.startswith(value[-size:]):
                    longest = size
                    break
        return longest
