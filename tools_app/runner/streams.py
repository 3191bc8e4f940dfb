"""Bounded collectors for a child's byte streams: a tool printing 100 MB costs no memory."""

from __future__ import annotations

from collections.abc import Iterator


class _Kept:
    """At most `capacity` bytes of what was written (which ones: Head, Tail), and the total."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.total = 0
        self._buffer = bytearray()

    @property
    def cut(self) -> bool:
        return self.total > len(self._buffer)

    def text(self) -> str:
        return decode(bytes(self._buffer))


class Tail(_Kept):
    """Keeps the last `capacity` bytes written."""

    def write(self, data: bytes) -> None:
        self.total += len(data)
        self._buffer += data[-self.capacity :] if self.capacity else b""
        if len(self._buffer) > self.capacity:
            del self._buffer[: len(self._buffer) - self.capacity]


class Head(_Kept):
    """Keeps the first `capacity` bytes written and counts the rest."""

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self.capacity - len(self._buffer)
        if room > 0:
            self._buffer += data[:room]


class Lines:
    """Splits a stream into lines of at most `max_line` bytes.

    A longer line yields its first `max_line` bytes with `overflowed=True` and the rest of it
    is skipped, so one endless line never buffers more than `max_line`.
    """

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> Iterator[tuple[bytes, bool]]:
        while data:
            newline = data.find(b"\n")
            piece, data = (data, b"") if newline < 0 else (data[:newline], data[newline + 1 :])
            if self._skipping:
                self._skipping = newline < 0
                continue
            self._buffer += piece[: self.max_line + 1 - len(self._buffer)]
            if len(self._buffer) > self.max_line:
                line = bytes(self._buffer[: self.max_line])
                self._buffer.clear()
                self._skipping = newline < 0
                yield line, True
            elif newline >= 0:
                line = bytes(self._buffer)
                self._buffer.clear()
                yield line, False

    def flush(self) -> Iterator[tuple[bytes, bool]]:
        """The last line when the stream ended without a newline."""
        if self._buffer:
            line = bytes(self._buffer)
            self._buffer.clear()
            yield line, False


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def clip_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut `text` to at most `max_bytes` of UTF-8 without splitting a character."""
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= max_bytes:
        return text, False
    return encoded[:max_bytes].decode("utf-8", errors="ignore"), True


def clip_utf8_start(text: str, max_bytes: int) -> tuple[str, bool]:
    """Keep the last `max_bytes` of UTF-8 of `text` without splitting a character."""
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= max_bytes:
        return text, False
    return encoded[len(encoded) - max_bytes :].decode("utf-8", errors="ignore"), True
