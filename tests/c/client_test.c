/* The C ABI (include/shoal.h) on a real mount: each call against what the
 * kernel shows through the mount. usage: client_test MNT
 * (tests/scripts/client-c.sh builds it with cc and runs it). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/xattr.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shoal.h"

static int failures;
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: %s failed (errno %d: %s)\n", __FILE__, __LINE__,   \
              #cond, errno, strerror(errno));                                    \
      failures++;                                                                \
    }                                                                            \
  } while (0)

static int count(void *arg, const char *name, uint64_t ino, unsigned char type) {
  (void)ino;
  if (strcmp(name, "f") == 0 && type == DT_REG) ++*(int *)arg;
  if (strcmp(name, "sub") == 0 && type == DT_DIR) ++*(int *)arg;
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MNT\n", argv[0]);
    return 2;
  }
  char at[4096];
  const char *mnt = argv[1];
  shoal_client *c = shoal_connect(mnt);
  CHECK(c != NULL);
  if (!c) return 1;

  CHECK(shoal_mkdir(c, "cdir", 0755) == 0);
  snprintf(at, sizeof at, "%s/cdir", mnt);
  struct stat st;
  CHECK(stat(at, &st) == 0 && S_ISDIR(st.st_mode));
  CHECK(shoal_mkdir(c, "cdir", 0755) == -1 && errno == EEXIST);

  /* A real descriptor: write(2), then mmap(2) of it. */
  int fd = shoal_open(c, "cdir/f", O_CREAT | O_RDWR | O_EXCL, 0644);
  CHECK(fd >= 0);
  CHECK(write(fd, "hello, C", 8) == 8);
  char *m = mmap(NULL, 8, PROT_READ, MAP_SHARED, fd, 0);
  CHECK(m != MAP_FAILED && memcmp(m, "hello, C", 8) == 0);
  if (m != MAP_FAILED) munmap(m, 8);
  CHECK(shoal_fsync(fd, 0) == 0);
  CHECK(shoal_close(fd) == 0);
  CHECK(shoal_close(fd) == -1 && errno == EBADF);
  snprintf(at, sizeof at, "%s/cdir/f", mnt);
  CHECK(stat(at, &st) == 0 && st.st_size == 8);
  char buf[64] = {0};
  int kfd = open(at, O_RDONLY);
  CHECK(kfd >= 0 && read(kfd, buf, sizeof buf) == 8 && memcmp(buf, "hello, C", 8) == 0);
  close(kfd);

  /* The bytes whole, in one call; a short buffer gets the first bytes
   * and the length. */
  memset(buf, 0, sizeof buf);
  CHECK(shoal_read_file(c, "cdir/f", buf, sizeof buf) == 8 && memcmp(buf, "hello, C", 8) == 0);
  memset(buf, 0, sizeof buf);
  CHECK(shoal_read_file(c, "cdir/f", buf, 5) == 8 && memcmp(buf, "hello", 5) == 0 && buf[5] == 0);
  CHECK(shoal_read_file(c, "cdir", buf, sizeof buf) == -1 && errno == EISDIR);

  struct stat cs;
  CHECK(shoal_stat(c, "cdir/f", &cs, 1) == 0);
  CHECK(cs.st_ino == st.st_ino && cs.st_size == 8 && S_ISREG(cs.st_mode));

  CHECK(shoal_symlink(c, "f", "cdir/l") == 0);
  memset(buf, 0, sizeof buf);
  CHECK(shoal_readlink(c, "cdir/l", buf, sizeof buf) == 1 && buf[0] == 'f');
  CHECK(shoal_stat(c, "cdir/l", &cs, 0) == 0 && S_ISLNK(cs.st_mode));
  CHECK(shoal_link(c, "cdir/f", "cdir/h") == 0);
  CHECK(stat(at, &st) == 0 && st.st_nlink == 2);
  CHECK(shoal_chmod(c, "cdir/f", 0600) == 0);
  CHECK(stat(at, &st) == 0 && (st.st_mode & 07777) == 0600);
  CHECK(shoal_setxattr(c, "cdir/f", "user.k", "v1", 2, 0) == 0);
  CHECK(shoal_getxattr(c, "cdir/f", "user.k", NULL, 0) == 2);
  CHECK(shoal_getxattr(c, "cdir/f", "user.k", buf, 1) == -1 && errno == ERANGE);
  CHECK(getxattr(at, "user.k", buf, sizeof buf) == 2 && memcmp(buf, "v1", 2) == 0);
  CHECK(shoal_truncate(c, "cdir/f", 3) == 0);
  CHECK(stat(at, &st) == 0 && st.st_size == 3);

  CHECK(shoal_mkdir(c, "cdir/sub", 0700) == 0);
  int n = 0;
  CHECK(shoal_readdir(c, "cdir", count, &n) == 0 && n == 2);
  CHECK(shoal_rename(c, "cdir/f", "cdir/g", 0) == 0);
  CHECK(stat(at, &st) == -1 && errno == ENOENT);
  CHECK(shoal_rename(c, "cdir/g", "cdir/h", RENAME_NOREPLACE) == -1 && errno == EEXIST);

  /* Out of the mount: EXDEV. */
  CHECK(shoal_symlink(c, "/etc", "cdir/out") == 0);
  CHECK(shoal_stat(c, "cdir/out/hostname", &cs, 1) == -1 && errno == EXDEV);

  CHECK(shoal_create(c, "cdir/e", 0644) == 0);
  CHECK(shoal_unlink(c, "cdir/e") == 0);
  CHECK(shoal_rmdir(c, "cdir") == -1 && errno == ENOTEMPTY);
  const char *names[] = {"cdir/g", "cdir/h", "cdir/l", "cdir/out"};
  for (unsigned i = 0; i < 4; i++) CHECK(shoal_unlink(c, names[i]) == 0);
  CHECK(shoal_rmdir(c, "cdir/sub") == 0);
  CHECK(shoal_rmdir(c, "cdir") == 0);
  snprintf(at, sizeof at, "%s/cdir", mnt);
  CHECK(stat(at, &st) == -1 && errno == ENOENT);
  shoal_free(c);
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("C ABI: all checks passed\n");
  return 0;
}
