"""Java modified UTF-8 (DataOutput.writeUTF / readUTF), strict and round-trip exact.

Java writes NUL as C0 80 and characters outside the BMP as two 3-byte surrogates. We decode only
the canonical form Java's writer produces (no raw NUL, no overlong or 4-byte forms), so that
re-encoding a decoded string always gives back the original bytes; anything else is invalid.
"""
from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
MAX_UTF_BYTES = 65535


class MUTF8Error(ValueError):
    pass


def decode(raw: bytes) -> str:
    """Decode a modified-UTF-8 byte string (without its u16 length prefix)."""
    if raw.isascii():
        if b"\x00" in raw:
            raise MUTF8Error("raw NUL byte (Java encodes NUL as C0 80)")
        return raw.decode("ascii")
    if b"\x00" in raw:
        raise MUTF8Error("raw NUL byte (Java encodes NUL as C0 80)")
    try:
        text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise MUTF8Error(f"malformed modified UTF-8 at byte {exc.start}") from None
    if _ASTRAL.search(text):
        raise MUTF8Error("4-byte UTF-8 sequence (Java writes surrogate pairs)")
    if _SURROGATE.search(text):
        # Java strings are UTF-16: a valid surrogate pair is one character; lone ones stay as-is.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def encode(text: str) -> bytes:
    """Encode like Java's writeUTF, without the length prefix."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    if _ASTRAL.search(text):
        text = _ASTRAL.sub(_split_astral, text)
    return text.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")


def _split_astral(m: re.Match[str]) -> str:
    cp = ord(m.group()) - 0x10000
    return chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))
