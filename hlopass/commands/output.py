"""Writing a command's output to a path without ever destroying what is there.

Every command that writes a file (`hlopass-opt -o`, `hlopass run -o`, dumps) goes through
`write_output`. What it does depends on what the path names:

- nothing yet: a temporary file is written beside it and renamed to it, so a failed or
  interrupted run leaves no half-written file; the new file gets mode `0666 & ~umask`,
  as a shell redirection or `open()` would give it;
- a regular file: the same temporary file and rename, so the old content stays whole until
  the new one is complete; the file keeps its permission bits (and, where the process may,
  its owner and group);
- anything else that exists (a character device such as /dev/null, a FIFO, a socket's or
  terminal's /proc/self/fd link): opened and written in place. Renaming a file over
  /dev/null, as root, would replace the device for the whole machine;
- a symbolic link: followed, and what it points to is treated by the rules above (a link to
  a regular file is updated through its target, so the link stays a link);
- one of this process's own descriptors (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`):
  written through that descriptor where it stands, as a shell's `>&N` would. Replacing the
  file behind it would drop what `>> log` had appended before;
- a directory: an error.

The temporary file is removed on every failure, on Ctrl-C (SIGINT) and on SIGTERM/SIGHUP
(they are turned into an exception while the file is being written, then re-delivered with
their default action once it is gone, so the process still dies of the signal). Errors are
one line, `PATH: error: cannot write output: REASON`, raised as `OutputError`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from io import RawIOBase
from typing import BinaryIO

from hlopass.errors import HloError

Data = str | bytes | Iterable[str] | Iterable[bytes]
"""Text (written as UTF-8), bytes, or an iterable of either, written chunk by chunk."""

_CAUGHT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class OutputError(HloError):
    """The output could not be written; the message is one line naming the path."""


class _Signalled(BaseException):
    """A caught termination signal, raised to unwind a write and remove its temporary file."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def write_output(path: str | None, data: Data) -> None:
    """Write `data` to `path` (None or `-`: standard output) by the rules of this module."""
    if path is None or path == "-":
        _write_stdout(data)
        return
    try:
        with _signals_raise():
            _write_path(path, data)
    except _Signalled as e:
        _die_of(e.signum)
    except OSError as e:
        reason = e.strerror or str(e)
        raise OutputError(f"{path}: error: cannot write output: {reason}") from None


def _write_stdout(data: Data) -> None:
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if buffer is None:  # a text-only stream (an embedding program's): it takes str only
        for chunk in _chunks(data):
            out.write(chunk if isinstance(chunk, str) else chunk.decode("utf-8", "replace"))
        out.flush()
        return
    out.flush()
    encoding, errors = getattr(out, "encoding", "utf-8"), getattr(out, "errors", "strict")
    for chunk in _chunks(data):
        _write_all(
            buffer, chunk.encode(encoding, errors or "strict") if isinstance(chunk, str) else chunk
        )
    buffer.flush()


def _write_all(stream: BinaryIO | RawIOBase, data: bytes) -> None:
    """Write all of `data`. Under PYTHONUNBUFFERED (or `python -u`) `sys.stdout.buffer` is the
    raw file, whose `write` may take only part of a large chunk (a pipe whose reader left, a
    signal); text-mode `print` drops the rest without a word."""
    view = memoryview(data)
    while view:
        n = stream.write(view)
        if n is None:  # a non-blocking descriptor that is full
            import select

            select.select([], [stream], [])
            continue
        view = view[n:]


_OWN_FD = re.compile(r"/dev/fd/(\d+)|/proc/(?:self|thread-self|(\d+))/fd/(\d+)")


def _own_descriptor(path: str) -> int | None:
    """N when `path`, through any symbolic links, names this process's descriptor N."""
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's limit on a chain of links
        m = _OWN_FD.fullmatch(p)
        if m and (m[2] is None or int(m[2]) == os.getpid()):
            return int(m[1] or m[3])
        if not os.path.islink(p):
            return None
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    return None


def _write_descriptor(fd: int, data: Data) -> None:
    if fd == 1:
        _write_stdout(data)
        return
    if fd == 2:
        sys.stderr.flush()
    with open(os.dup(fd), "wb", buffering=0) as f:
        for chunk in _chunks(data):
            _write_all(f, _bytes(chunk))


def _write_path(path: str, data: Data) -> None:
    fd = _own_descriptor(path)
    if fd is not None:
        os.fstat(fd)  # EBADF: a descriptor this process does not have open
        _write_descriptor(fd, data)
        return
    try:
        st = os.stat(path)  # follows symbolic links
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, os.strerror(21))
    if st is not None and not stat.S_ISREG(st.st_mode):
        # a device, FIFO or socket: write into it, never replace it
        with open(path, "wb") as f:
            for chunk in _chunks(data):
                f.write(_bytes(chunk))
        return
    # A regular file or a new one: replace the file a symbolic link points to, not the link.
    target = os.path.realpath(path)
    _replace(target, data, st)


def _replace(target: str, data: Data, old: os.stat_result | None) -> None:
    """Temp file beside `target`, then rename over it; the temp never outlives a failure."""
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".hlopass-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            for chunk in _chunks(data):
                f.write(_bytes(chunk))
            f.flush()
            if old is None:
                os.fchmod(f.fileno(), 0o666 & ~_umask())
            else:
                _keep_owner(f.fileno(), old)
                os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
        os.replace(tmp, target)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _keep_owner(fd: int, old: os.stat_result) -> None:
    """Give the new file the old one's owner and group where allowed (root, or a group of
    ours); otherwise it is ours, as any editor's save-by-rename leaves it."""
    if (old.st_uid, old.st_gid) == (os.geteuid(), os.getegid()):
        return
    with contextlib.suppress(OSError):
        os.fchown(fd, old.st_uid, old.st_gid)


def _umask() -> int:
    """The process's umask. POSIX has no call that only reads it, so it is set and put
    back at once (the commands write their output from one thread)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _chunks(data: Data) -> Iterator[str | bytes]:
    if isinstance(data, str | bytes):
        yield data
    else:
        yield from data


def _bytes(chunk: str | bytes) -> bytes:
    return chunk.encode("utf-8") if isinstance(chunk, str) else chunk


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """While writing, SIGTERM/SIGHUP raise `_Signalled` (default handlers would kill the
    process before the temporary file could be removed). Only the main thread may set
    handlers; elsewhere the write runs unprotected against them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise _Signalled(signum)

    saved = {}
    for s in _CAUGHT_SIGNALS:
        if signal.getsignal(s) == signal.SIG_DFL:  # leave handlers the program set alone
            saved[s] = signal.signal(s, handler)
    try:
        yield
    finally:
        for s, old in saved.items():
            signal.signal(s, old)


def _die_of(signum: int) -> None:
    """Re-deliver a caught signal with its default action: the process ends as killed by it."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    raise SystemExit(128 + signum)  # not reached where the signal is fatal
