"""Files every command writes (refused early if they cannot be written, then written all at once) and reads (regular
files only, under a size bound: a FIFO or a link to /dev/zero is refused at once, never read)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_INPUT_BYTES = 16 << 20  # a layout.json, kernel file, grid or tuning table: the largest ptxgen writes is ~0.4 MB


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def read_regular(path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (a link to one is followed), at most ``limit`` of them. ValueError naming
    the path for anything else: a FIFO, a device, a folder, a file past the bound (checked on its size and on what is
    read: nothing past ``limit`` is read). Opened without blocking (a FIFO with no writer); OSError as ``open`` raises
    it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path}: not a regular file ({_kind(st.st_mode)}): not read")
        if st.st_size > limit:
            raise ValueError(f"{path}: {st.st_size} bytes, more than the {limit} ptxgen reads: not read")
        chunks, n = [], 0
        while True:
            data = os.read(fd, min(1 << 20, limit + 1 - n))
            if not data:
                return b"".join(chunks)
            chunks.append(data)
            n += len(data)
            if n > limit:
                raise ValueError(f"{path}: more than the {limit} bytes ptxgen reads: not read")
    finally:
        os.close(fd)


def read_text(path, limit: int = MAX_INPUT_BYTES) -> str:
    """:func:`read_regular` decoded as UTF-8 (ValueError naming the path if it is not)."""
    data = read_regular(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def check_output_path(path: str) -> None:
    """Refuse (ValueError) an output file that could not be written, before any work is done."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise ValueError(f"{path}: is a directory, expected a file name")
    if p.exists() and not p.is_file():
        raise ValueError(f"{path}: exists and is not a regular file")
    if not parent.is_dir():
        raise ValueError(f"{path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{path}: no permission to write it")


def as_error_of(e: OSError, path) -> OSError:
    """``e`` told of ``path`` (what the user named), not of a temporary file of ptxgen's behind it."""
    return OSError(e.errno, e.strerror or str(e), str(path))


def write_text_atomic(path: str, text: str) -> None:
    """A temporary file beside ``path``, then a rename: never a half-written file. An OSError names ``path``."""
    tmp = Path(f"{path}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise as_error_of(e, path) from None
    finally:
        tmp.unlink(missing_ok=True)
