/* A fault-injecting layer for tests/scripts/faults.sh (issue 43): loaded
 * with LD_PRELOAD into a shoal daemon, it fails write and sync calls on
 * files whose path contains the text of the file $SHOAL_EIO_FLAG names,
 * with EIO, for as long as that file exists. Nothing else changes: without
 * the flag file every call goes straight to libc. dm-error would be the
 * block layer's way, but this machine's kernel has no device-mapper.
 *
 * Built by the test: cc -shared -fPIC -O2 -o eio.so eio.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* Does a call on fd meet the fault? Reads the flag file on each call (a
 * test, not a hot path) with raw open/read, which this file does not hook. */
static int faulty(int fd) {
    const char *flag = getenv("SHOAL_EIO_FLAG");
    if (!flag) return 0;
    int saved = errno;
    int f = open(flag, O_RDONLY | O_CLOEXEC);
    if (f < 0) { errno = saved; return 0; }
    char want[512];
    ssize_t n = read(f, want, sizeof want - 1);
    close(f);
    if (n <= 0) { errno = saved; return 0; }
    want[n] = 0;
    want[strcspn(want, "\n")] = 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, path, sizeof path - 1);
    errno = saved;
    if (k <= 0) return 0;
    path[k] = 0;
    return strstr(path, want) != NULL;
}

#define NEXT(name) static __typeof__(name) *real; if (!real) real = dlsym(RTLD_NEXT, #name)
#define FAIL_IF(fd) if (faulty(fd)) { errno = EIO; return -1; }

ssize_t write(int fd, const void *b, size_t n) { NEXT(write); FAIL_IF(fd); return real(fd, b, n); }
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) { NEXT(pwrite); FAIL_IF(fd); return real(fd, b, n, o); }
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) { NEXT(pwrite64); FAIL_IF(fd); return real(fd, b, n, o); }
ssize_t writev(int fd, const struct iovec *v, int c) { NEXT(writev); FAIL_IF(fd); return real(fd, v, c); }
ssize_t pwritev(int fd, const struct iovec *v, int c, off_t o) { NEXT(pwritev); FAIL_IF(fd); return real(fd, v, c, o); }
ssize_t pwritev2(int fd, const struct iovec *v, int c, off_t o, int fl) { NEXT(pwritev2); FAIL_IF(fd); return real(fd, v, c, o, fl); }
int fsync(int fd) { NEXT(fsync); FAIL_IF(fd); return real(fd); }
int fdatasync(int fd) { NEXT(fdatasync); FAIL_IF(fd); return real(fd); }
