"""shoal: reach a shoal mount's daemon without FUSE (docs/client.md).

    import shoal
    c = shoal.Client("/mnt/shoal")
    c.mkdir("d")
    with c.open("d/f", "w") as f:     # a real file object on a real descriptor
        f.write("hello")
    assert c.stat("d/f").st_size == 5
    assert c.listdir("d") == ["f"]

Paths are relative to the mount's root ("/" is the root too). Errors are
OSError with the errno, as the os module raises them (FileNotFoundError,
PermissionError...); a path that leads out of the mount (an absolute
symlink elsewhere) is OSError(EXDEV) with the path outside as filename.
The daemon checks every call with the process's credentials; a process
whose credentials change must make a new Client.
"""

import errno
import io
import os

from ._shoal import Client as _Client

__all__ = ["Client"]

_MODES = {
    "r": os.O_RDONLY,
    "r+": os.O_RDWR,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "w+": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "a+": os.O_RDWR | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
    "x+": os.O_RDWR | os.O_CREAT | os.O_EXCL,
}


def _flags(mode):
    base = mode.replace("b", "").replace("t", "")
    if base not in _MODES:
        raise ValueError("invalid mode: %r" % mode)
    return _MODES[base]


class Client(_Client):
    """The os-like calls of a mount (stat, mkdir, unlink, rename, listdir,
    chmod, truncate, readlink, symlink, link, xattrs) and `open`."""

    def open(self, path, mode="r", buffering=-1, encoding=None, errors=None, newline=None):
        """As the builtin open: a file object (text or binary, buffered as
        asked) on the file's own descriptor; closing it (or leaving the
        `with`) tells the daemon the size and time."""
        fd = self._open(os.fspath(path), _flags(mode), 0o666)
        try:
            # On the descriptor: 'w' and 'x' were done by the open itself.
            fdmode = mode.replace("x", "w")
            f = io.open(fd, fdmode, buffering, encoding, errors, newline, closefd=False)
        except BaseException:
            self._close(fd)
            raise
        return File(self, fd, f)

    def read_bytes(self, path):
        """A file's bytes, as pathlib's read_bytes: one call to the daemon
        for a file up to about 1 MiB (no descriptor), an open and read
        past that."""
        try:
            return self._read_file(os.fspath(path))
        except OSError as e:
            if e.errno != errno.EFBIG:
                raise
        with self.open(path, "rb") as f:
            return f.read()

    def read_text(self, path, encoding=None, errors=None):
        """As pathlib's read_text."""
        b = self.read_bytes(path)
        return io.TextIOWrapper(io.BytesIO(b), encoding=encoding, errors=errors).read()


class File:
    """A file object (io's) whose close also closes the daemon's handle."""

    def __init__(self, client, fd, f):
        self._client, self._fd, self._f = client, fd, f

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __iter__(self):
        return iter(self._f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fileno(self):
        return self._fd

    def fsync(self, datasync=False):
        """Flush, then make the file durable (the daemon commits its size
        and time with the data synced)."""
        self._f.flush()
        self._client._fsync(self._fd, datasync)

    @property
    def closed(self):
        return self._fd is None

    def close(self):
        if self._fd is None:
            return
        try:
            self._f.close()
        finally:
            fd, self._fd = self._fd, None
            self._client._close(fd)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
