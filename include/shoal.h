/* shoal's client: reach a shoal mount's daemon without FUSE (docs/client.md).
 *
 * Link with -lshoal_client (target/release/libshoal_client.so). Each call
 * answers as the system call it mirrors: 0 (or a length, or a descriptor)
 * on success, -1 with errno set on failure. Paths are relative to the
 * mount's root ("/" is the root too); a path that leads out of the mount
 * (an absolute symlink elsewhere) fails with EXDEV. The daemon checks
 * every call with the caller's credentials, taken by the kernel from the
 * connection (made per thread on its first call; a process whose
 * credentials change must make a new client).
 *
 *   shoal_client *c = shoal_connect("/mnt/shoal");
 *   shoal_mkdir(c, "d", 0755);
 *   int fd = shoal_open(c, "d/f", O_CREAT | O_WRONLY, 0644);
 *   write(fd, "hello", 5);           // a real descriptor: the kernel's write
 *   shoal_close(fd);                 // the daemon takes the size and time
 *   struct stat st; shoal_stat(c, "d/f", &st, 1);
 *   shoal_free(c);
 */
#ifndef SHOAL_H
#define SHOAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shoal_client shoal_client;

/* A client of the mount at `mnt` (or of $SHOAL_CLIENT_SOCK); NULL and errno. */
shoal_client *shoal_connect(const char *mnt);
void shoal_free(shoal_client *c);

/* stat(2) with follow != 0, lstat(2) with 0. */
int shoal_stat(const shoal_client *c, const char *path, struct stat *st, int follow);
int shoal_mkdir(const shoal_client *c, const char *path, mode_t mode);
/* A new, empty regular file, not opened: creat(2) and close(2) in one call. */
int shoal_create(const shoal_client *c, const char *path, mode_t mode);
int shoal_unlink(const shoal_client *c, const char *path);
int shoal_rmdir(const shoal_client *c, const char *path);
/* renameat2(2)'s flags: RENAME_NOREPLACE, RENAME_EXCHANGE. */
int shoal_rename(const shoal_client *c, const char *from, const char *to, unsigned flags);
int shoal_symlink(const shoal_client *c, const char *target, const char *path);
int shoal_link(const shoal_client *c, const char *from, const char *to);
ssize_t shoal_readlink(const shoal_client *c, const char *path, char *buf, size_t size);
/* A regular file's bytes whole, in one call (no descriptor): returns the
 * file's length and copies its first `size` bytes into `buf`; EFBIG past
 * about 1 MiB (open it instead). */
ssize_t shoal_read_file(const shoal_client *c, const char *path, void *buf, size_t size);
int shoal_chmod(const shoal_client *c, const char *path, mode_t mode);
int shoal_truncate(const shoal_client *c, const char *path, uint64_t size);

/* open(2) of a regular file: a real descriptor on the file's bytes (read,
 * write, lseek, mmap, poll, dup work as on any file). Close it with
 * shoal_close, which reports its size and time to the daemon. */
int shoal_open(const shoal_client *c, const char *path, int flags, mode_t mode);
int shoal_close(int fd);
/* fsync(2) (datasync 0) or fdatasync(2) of a descriptor from shoal_open. */
int shoal_fsync(int fd, int datasync);

/* cb(arg, name, ino, d_type) for each entry but "." and ".."; a non-zero
 * answer stops the walk and is returned. */
int shoal_readdir(const shoal_client *c, const char *path,
                  int (*cb)(void *arg, const char *name, uint64_t ino, unsigned char type),
                  void *arg);

/* getxattr(2): the value's length (size 0: the length only). */
ssize_t shoal_getxattr(const shoal_client *c, const char *path, const char *name,
                       void *buf, size_t size);
/* setxattr(2): flags 0, XATTR_CREATE or XATTR_REPLACE. */
int shoal_setxattr(const shoal_client *c, const char *path, const char *name,
                   const void *value, size_t size, int flags);

#ifdef __cplusplus
}
#endif

#endif
