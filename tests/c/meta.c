/* Two of the seeds' metadata workloads as an unmodified program, in one
 * directory, by N processes (fork), so the same binary runs on a mount and
 * under the preload shim (scripts/bench-client.sh):
 *   creates DIR N PROCS      fs_mark's create phase: each process makes N
 *                            empty files (open O_CREAT|O_EXCL, close)
 *   rndrename DIR N PROCS    seed 000's rndrename: each process makes 1,000
 *                            files, then renames a random one of its own to
 *                            a new name N times
 * Prints operations per second of the timed phase (after every process's
 * setup: they start together). Leaves the files behind. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FILES 1000

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void make(const char *path) {
  int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0 || close(fd) != 0) { perror(path); _exit(1); }
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s creates|rndrename DIR N PROCS\n", argv[0]);
    return 2;
  }
  const char *what = argv[1], *dir = argv[2];
  long n = atol(argv[3]);
  int procs = atoi(argv[4]);
  int rename_mode = strcmp(what, "rndrename") == 0;
  if (!rename_mode && strcmp(what, "creates") != 0) {
    fprintf(stderr, "%s: unknown workload %s\n", argv[0], what);
    return 2;
  }
  int ready[2], go[2];
  if (pipe(ready) != 0 || pipe(go) != 0) { perror("pipe"); return 1; }
  for (int p = 0; p < procs; p++) {
    if (fork() == 0) {
      char path[4096], to[4096];
      static long gen[FILES];
      if (rename_mode)
        for (int i = 0; i < FILES; i++) {
          snprintf(path, sizeof path, "%s/r%d-%d-0", dir, p, i);
          make(path);
        }
      char c = 0;
      if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(1);
      unsigned seed = 12345 + p;
      for (long k = 0; k < n; k++) {
        if (rename_mode) {
          int i = rand_r(&seed) % FILES;
          snprintf(path, sizeof path, "%s/r%d-%d-%ld", dir, p, i, gen[i]);
          snprintf(to, sizeof to, "%s/r%d-%d-%ld", dir, p, i, gen[i] + 1);
          if (rename(path, to) != 0) { perror(path); _exit(1); }
          gen[i]++;
        } else {
          snprintf(path, sizeof path, "%s/c%d-%ld", dir, p, k);
          make(path);
        }
      }
      _exit(0);
    }
  }
  char c;
  for (int p = 0; p < procs; p++)
    if (read(ready[0], &c, 1) != 1) return 1;
  double t0 = now();
  for (int p = 0; p < procs; p++)
    if (write(go[1], &c, 1) != 1) return 1;
  int bad = 0, st;
  while (wait(&st) > 0) bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  printf("%.0f\n", procs * n / (now() - t0));
  return bad;
}
