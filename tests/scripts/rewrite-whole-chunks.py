# A file written whole chunk by chunk, then 8 bytes into every page of it
# before the close (holetest's pattern): python3 rewrite-whole-chunks.py
# FILE DAEMON_PID. The bytes read back are right, and the daemon's peak
# memory stays under 1 GB (each small write into a chunk already uploaded
# once copied the chunk and uploaded it again, holding every copy: a
# daemon grew to 23 GB under xfstests' generic/346 on etcd).
import os, sys
path, pid = sys.argv[1], sys.argv[2]
MB = 1 << 20
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(8):
    os.pwrite(fd, bytes([i]) * MB, i * MB)
for off in range(0, 8 * MB, 4096):
    os.pwrite(fd, (off // 4096).to_bytes(8, "little"), off)
os.close(fd)
with open(path, "rb") as f:
    data = f.read()
for off in range(0, 8 * MB, 4096):
    want = (off // 4096).to_bytes(8, "little") + bytes([off // MB]) * 8
    if data[off:off + 16] != want:
        sys.exit(f"rewrite-whole-chunks: bytes at {off}: {data[off:off + 16].hex()}, not {want.hex()}")
hwm = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM:"))
print(f"rewrite-whole-chunks: 2048 writes of 8 bytes into 8 MiB of whole chunks: daemon peak {hwm // 1024} MB")
if hwm > 1 << 20:
    sys.exit(f"rewrite-whole-chunks: daemon peak memory {hwm // 1024} MB")
