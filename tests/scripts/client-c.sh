#!/usr/bin/env bash
# The client's C ABI (include/shoal.h, libshoal_client.so): a C program
# compiled with cc against the header and the library, run on a real mount
# (tests/c/client_test.c checks each call against what the kernel shows).
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LIB=$ROOT/target/release
[ -e "$LIB/libshoal_client.so" ] || cargo build --release -q -p shoal-client
cc -Wall -Wextra -Werror -O2 -I "$ROOT/include" -o "$WORK/client_test" \
  "$ROOT/tests/c/client_test.c" -L "$LIB" -lshoal_client -Wl,-rpath,"$LIB"
M=$(mount_fresh client-c)
"$WORK/client_test" "$M"
unmount_check client-c >/dev/null
echo "client-c: ok"
