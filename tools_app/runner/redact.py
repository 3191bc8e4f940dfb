"""Replace every injected secret value by its label in what is stored or shown about a run."""

from __future__ import annotations

import json
import re
from urllib.parse import quote, quote_plus

# A cut text (a ring buffer's start, a truncated end) may hold part of a secret; only this
# much of a value is compared there, which bounds the work for pathological values.
_MAX_PARTIAL = 4096


def _variants(value: str) -> set[str]:
    """The forms a value commonly takes in output: as is, JSON-escaped, URL-encoded."""
    return {value, json.dumps(value)[1:-1], quote(value, safe=""), quote_plus(value, safe="")}


class Redactor:
    """Redactor({"{{searxng.SEARXNG_TOKEN}}": "s3cret"}).redact("t=s3cret") == "t={{searxng...}}".

    Every non-blank value is redacted, however short: a short secret makes output ugly, a
    leaked one is worse.
    """

    def __init__(self, secrets: dict[str, str]) -> None:
        label_of: dict[str, str] = {}
        values: set[str] = set()
        for label, value in secrets.items():
            if not value or not value.strip():
                continue
            values.add(value)
            for variant in _variants(value):
                label_of.setdefault(variant, label)
        self._label_of = label_of
        self._values = sorted(values, key=len, reverse=True)
        # Longest first, so a secret that contains another one is replaced as a whole.
        ordered = sorted(label_of, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def redact(self, text: str, *, cut_start: bool = False, cut_end: bool = False) -> str:
        """Redact `text`; `cut_start`/`cut_end` say the text was cut there, so a partial
        secret at that edge is removed too."""
        if self._pattern is None:
            return text
        text = self._pattern.sub(lambda match: self._label_of[match.group(0)], text)
        if cut_end:
            text = text[: len(text) - self._partial_len(text, at_end=True)]
        if cut_start:
            text = text[self._partial_len(text, at_end=False) :]
        return text

    def _partial_len(self, text: str, *, at_end: bool) -> int:
        """Length of the longest proper prefix (at the end) or suffix (at the start) of a
        secret value that `text` ends or starts with."""
        longest = 0
        for value in self._values:
            for size in range(min(len(value) - 1, len(text), _MAX_PARTIAL), longest, -1):
                if at_end and text.endswith(value[:size]):
                    longest = size
                    break
                if not at_end and text.startswith(value[-size:]):
                    longest = size
                    break
        return longest
