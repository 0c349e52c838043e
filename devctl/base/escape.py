"""One escaping function between strings from outside devctl and a terminal.

devctl runs as root on production nodes and prints what third-party plugins,
the kubelet, files and the user wrote: device IDs, health strings, pod names,
env values, gRPC error details, the arguments on the command line. Written raw,
a newline forges a table row, ``\\r`` or ``ESC[2J`` rewrites the screen, an OSC
sequence retitles the terminal or (OSC 52) sets the clipboard, and a bidi
override makes text read differently from what it is. ``escape`` shows every
such character as a visible escape, so what is printed is what was there.

The lowest layer: it imports nothing of devctl, so render/, tui/ and cli/ can
all use it.
"""

from __future__ import annotations

import re

# What a terminal acts on or reorders instead of showing: C0 controls (newline,
# carriage return and tab among them), DEL, C1 controls (U+0080-U+009F, where a
# terminal may read U+009B as CSI), the bidi marks, embeddings, overrides and
# isolates, the Unicode line and paragraph separators, and lone surrogates (a
# file name decoded with surrogateescape). The backslash is escaped too, so that
# an escape in the output cannot be confused with the same characters in the data.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\\\\\x00-\x1f\x7f-\x9f{_BIDI}\u2028\u2029\ud800-\udfff]")
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}

# The characters that JSON (and a YAML double-quoted scalar) may hold raw in a
# string but a terminal would act on: those of _UNSAFE above U+007E. JSON
# already escapes C0 controls, backslash and quote itself.
_UNICODE_UNSAFE = re.compile(f"[\x7f-\x9f{_BIDI}\u2028\u2029]")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with every control, bidi and backslash character shown as an escape (``\\x1b``, ``\\n``, ``\\u202e``).

    Plain text (anything printable, without a backslash) comes back as it is,
    after one C-speed check: a 10,000-device table pays almost nothing.
    """
    if text.isprintable() and "\\" not in text:
        return text
    return _UNSAFE.sub(_visible, text)


def _unicode_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_quoted(text: str) -> str:
    """JSON text (or YAML whose strings holding such characters are double-quoted) with DEL, C1 and bidi as ``\\uXXXX``.

    Such characters can stand only inside quoted strings there, where
    ``\\u0085`` means the same character: the document still parses back to the
    same strings, and a terminal showing it is not driven by it.
    """
    if text.isascii() and "\x7f" not in text:
        return text
    return _UNICODE_UNSAFE.sub(_unicode_escape, text)


_ESCAPED = re.compile(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|(.))", re.DOTALL)
_UNNAMED = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def _original(match: re.Match[str]) -> str:
    code = match.group(1) or match.group(2)
    if code is not None:
        return chr(int(code, 16))
    return _UNNAMED.get(match.group(3), match.group())


def unescape(text: str) -> str:
    """What ``escape`` was given, from what it returned: for a line another devctl process escaped.

    The TUI reads the status lines of its ``devctl watch`` child, escaped there
    for a terminal; it takes them back to the original text and escapes them
    once, where it draws them, as it does every other string.
    """
    if "\\" not in text:
        return text
    return _ESCAPED.sub(_original, text)
