"""Canonical JSON (RFC 8785, JCS) and the RFC 3339 times signed documents carry.

What is signed is these bytes, so Python and Node (clients/sync-tools.mjs) must produce
the same ones: keys sorted by UTF-16 code units, no whitespace, strings as ECMAScript's
JSON.stringify writes them, numbers as ECMAScript's Number.prototype.toString."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from json.encoder import encode_basestring  # type: ignore[attr-defined]

# Beyond this an integer is no longer exact as an IEEE 754 double: written as the double
# JSON.parse would read, like every other number (RFC 8785 section 3.2.2.3).
_SAFE_INTEGER = 2**53


def dumps(value: object) -> bytes:
    """The canonical UTF-8 bytes of `value` (dict, list, str, int, float, bool, None).
    Raises ValueError for NaN, infinities, lone surrogates, non-str keys, other types."""
    parts: list[str] = []
    _write(value, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError:  # checked once here rather than string by string
        raise ValueError("a string holds a lone surrogate, which has no UTF-8 form") from None


def _write(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        out.append(str(value) if abs(value) <= _SAFE_INTEGER else number(float(value)))
    elif isinstance(value, float):
        out.append(number(value))
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"object keys must be strings, not {type(key).__name__}")
        keys = sorted(value, key=_utf16_key)
        out.append("{")
        for index, key in enumerate(keys):
            if index:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise ValueError(f"{type(value).__name__} has no JSON form")


def _utf16_key(key: str) -> bytes:
    try:
        return key.encode("utf-16-be")
    except UnicodeEncodeError:
        raise ValueError("a key holds a lone surrogate, which has no UTF-8 form") from None


# json.dumps(text, ensure_ascii=False) without its overhead (the C encoder it calls): it
# escapes what JSON.stringify escapes (", \\, control characters as \b \f \n \r \t or
# \u00xx) and nothing else. A lone surrogate passes here; dumps() refuses it.
_string = encode_basestring


def number(value: float) -> str:
    """ECMAScript Number.prototype.toString for a finite double."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{value} is not a JSON number")
    if value == 0:
        return "0"  # -0 too
    sign = "-" if value < 0 else ""
    digits, point = _shortest(abs(value))
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        exponent = point - 1
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{mantissa}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"
    return sign + text


def _shortest(value: float) -> tuple[str, int]:
    """(digits, point): the shortest digits that read back as `value` (repr's), without
    leading or trailing zeros, and where the decimal point goes: value = 0.digits * 10**point."""
    mantissa, _, exponent = repr(value).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    return stripped.rstrip("0"), point


def timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with whole seconds: 2026-12-03T10:00:00Z."""
    if moment.tzinfo is None:
        raise ValueError("a signed time must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: object) -> datetime:
    """The inverse of timestamp(); ValueError for anything else."""
    if not isinstance(text, str):
        raise ValueError("a signed time must be a string")
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
