"""Read one input file's bytes or text: a regular file (a directory, FIFO, socket or device is refused before it
is opened, so nothing blocks), no larger than its limit (counted while reading too: a file that grows, or one
that reports no size, cannot get past it), and for text, UTF-8 (a byte-order mark is dropped)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Literal

from ttftsim.errors import InputError
from ttftsim.inputs.limits import Limits, current_limits

FileKind = Literal["config", "trace"]  # a trace (or an empirical length file) may be far larger
EXCERPT_CHARS = 40


def counted(number: int, noun: str) -> str:
    """`1 replica`, `2 replicas`, `1,000 requests`: a count and its noun, plural unless one."""
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A short, one-line rendering of an input value for an error message (never the whole input)."""
    if isinstance(value, str):
        text = repr(value[:limit]) + ("..." if len(value) > limit else "")
    elif isinstance(value, bool) or value is None or isinstance(value, float):
        text = repr(value)
    elif isinstance(value, int):
        text = (
            repr(value)
            if value.bit_length() <= 128
            else f"an integer of about {int(value.bit_length() * 0.30103)} digits"
        )
    elif isinstance(value, dict | list | tuple):
        text = f"a {type(value).__name__} of {len(value)} items"
    else:
        text = type(value).__name__
    return text.replace("\n", " ")


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _byte_limit(kind: FileKind, limits: Limits) -> tuple[int, str]:
    return (limits.trace_bytes, "trace_bytes") if kind == "trace" else (limits.file_bytes, "file_bytes")


def check_regular(path: Path, what: str = "file") -> os.stat_result:
    """The file's stat, after refusing what is missing, unreadable or not a regular file (links followed;
    a link loop is an error)."""
    source = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(source, "", f"{what} not found") from None
    except OSError as exc:
        reason = "symbolic link loop" if exc.errno == errno.ELOOP else (exc.strerror or exc.__class__.__name__)
        raise InputError(source, "", f"cannot read {what}: {reason}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(source, "", f"{what} is {_kind_of(info.st_mode)}, not a regular file")
    return info


def read_bytes(path: Path, kind: FileKind = "config", what: str = "file", limits: Limits | None = None) -> bytes:
    """The file's bytes, within its size limit."""
    limits = limits or current_limits()
    source = str(path)
    info = check_regular(path, what)
    limit, name = _byte_limit(kind, limits)
    too_big = f"{what} is larger than the limit of {limit:,} bytes ({limits.how_to_raise(name)})"
    if info.st_size > limit:
        raise InputError(source, "", too_big)
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(source, "", f"cannot read {what}: {exc.strerror or exc.__class__.__name__}") from None
    if len(data) > limit:
        raise InputError(source, "", too_big)
    return data


def decode(data: bytes, source: str) -> str:
    """UTF-8 text; the error says where the first bad byte is (and not the text around it)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise InputError(source, "", f"not UTF-8 text (byte 0x{bad} at offset {exc.start})") from None
    return text.removeprefix("\ufeff")


def read_text(path: Path, kind: FileKind = "config", what: str = "file", limits: Limits | None = None) -> str:
    """The file's text: regular, within its size limit, UTF-8."""
    return decode(read_bytes(path, kind, what, limits), str(path))


def is_file(path: Path) -> bool:
    """Whether a name the user gave is an existing file, False for a name the system cannot take as a path
    (too long, a NUL byte): a model or profile name is then looked up by name, never a traceback."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    """As is_file, for a folder."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def exists(path: Path) -> bool:
    """As is_file, for anything at the path."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False
