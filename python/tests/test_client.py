"""The Python package on a real mount: each call against what the kernel
shows through the mount, file objects as open() gives them, errors as the
os module raises them. usage: python test_client.py MNT
(tests/scripts/client-python.sh installs the package and runs it)."""

import errno
import os
import sys

import shoal

mnt = sys.argv[1]
c = shoal.Client(mnt)
at = lambda p: os.path.join(mnt, p)

c.mkdir("py")
assert os.path.isdir(at("py")), "mkdir through the package not seen"
with c.open("py/t.txt", "w") as f:
    f.write("line 1\nline 2\n")
assert open(at("py/t.txt")).read() == "line 1\nline 2\n"
with c.open("py/t.txt") as f:
    assert list(f) == ["line 1\n", "line 2\n"]
with c.open("py/b.bin", "xb") as f:
    f.write(b"\x00" * 70000)
    f.fsync()
assert os.stat(at("py/b.bin")).st_size == 70000
with c.open("py/b.bin", "rb") as f:
    f.seek(69998)
    assert f.read() == b"\x00\x00"
with c.open("py/t.txt", "a") as f:
    f.write("line 3\n")
assert open(at("py/t.txt")).read().endswith("line 3\n")
try:
    c.open("py/t.txt", "x")
    raise AssertionError("open 'x' of an existing file succeeded")
except FileExistsError:
    pass

s = c.stat("py/t.txt")
k = os.stat(at("py/t.txt"))
assert (s.st_ino, s.st_size, s.st_mode, s.st_nlink) == (k.st_ino, k.st_size, k.st_mode, k.st_nlink), (s, k)
assert abs(s.st_mtime - k.st_mtime) < 1e-6 and s.st_mtime_ns == k.st_mtime_ns
assert sorted(c.listdir("py")) == ["b.bin", "t.txt"]

c.chmod("py/t.txt", 0o600)
assert os.stat(at("py/t.txt")).st_mode & 0o7777 == 0o600
c.truncate("py/t.txt", 4)
assert open(at("py/t.txt")).read() == "line"
c.setxattr("py/t.txt", "user.k", b"v")
assert c.getxattr("py/t.txt", "user.k") == b"v" == os.getxattr(at("py/t.txt"), "user.k")
assert "user.k" in c.listxattr("py/t.txt")
c.removexattr("py/t.txt", "user.k")
c.symlink("t.txt", "py/l")
assert c.readlink("py/l") == "t.txt" == os.readlink(at("py/l"))
assert c.stat("py/l", follow_symlinks=False).st_mode & 0o170000 == 0o120000
c.link("py/t.txt", "py/h")
assert os.stat(at("py/t.txt")).st_nlink == 2
c.rename("py/h", "py/h2")
assert not os.path.exists(at("py/h")) and os.path.exists(at("py/h2"))
try:
    c.rename("py/h2", "py/t.txt", 1)  # RENAME_NOREPLACE
    raise AssertionError("RENAME_NOREPLACE replaced")
except FileExistsError:
    pass

for bad, exc in [("py/none", FileNotFoundError), ("py/t.txt/x", NotADirectoryError)]:
    try:
        c.stat(bad)
        raise AssertionError("stat %s succeeded" % bad)
    except exc:
        pass
try:
    c.rmdir("py")
    raise AssertionError("rmdir of a non-empty directory succeeded")
except OSError as e:
    assert e.errno == errno.ENOTEMPTY
c.symlink("/etc", "py/out")
try:
    c.stat("py/out/hostname")
    raise AssertionError("a path out of the mount succeeded")
except OSError as e:
    assert e.errno == errno.EXDEV and e.filename == "/etc/hostname", e

# The reverse: made through the mount, seen by the package at once.
with open(at("py/k"), "w") as f:
    f.write("kernel")
with c.open("py/k") as f:
    assert f.read() == "kernel"

# A file read whole in one call (no descriptor): small, past the
# protocol's answer (read through an open instead), a directory; and what
# a holder of the file for writing wrote before its close.
assert c.read_bytes("py/k") == b"kernel"
assert c.read_text("py/t.txt") == open(at("py/t.txt")).read()
big = os.urandom(3 << 20)
with open(at("py/big"), "wb") as f:
    f.write(big)
assert c.read_bytes("py/big") == big
try:
    c.read_bytes("py")
    raise AssertionError("read_bytes of a directory succeeded")
except IsADirectoryError:
    pass
with c.open("py/k", "ab") as f:
    f.write(b" and more")
    f.flush()
    assert c.read_bytes("py/k") == b"kernel and more"
    assert open(at("py/k"), "rb").read() == b"kernel and more"

for n in ["t.txt", "b.bin", "l", "h2", "out", "k", "big"]:
    c.unlink("py/" + n)
c.rmdir("py")
assert not os.path.exists(at("py"))
print("python: all checks passed")
