/* crunl as an unmodified program: create (open O_CREAT|O_EXCL, close) and
 * unlink pairs in one directory, by N processes (fork), each PAIRS pairs;
 * prints pairs per second. usage: crunl DIR PAIRS [PROCS]
 * (tests/scripts/client-shim.sh runs it under `shoal run` and not). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s DIR PAIRS [PROCS]\n", argv[0]);
    return 2;
  }
  long pairs = atol(argv[2]);
  int procs = argc > 3 ? atoi(argv[3]) : 1;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int p = 0; p < procs; p++) {
    if (fork() == 0) {
      char path[4096];
      for (long i = 0; i < pairs; i++) {
        snprintf(path, sizeof path, "%s/p%d-%ld", argv[1], p, i);
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd < 0) { perror(path); _exit(1); }
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { perror("fstat"); _exit(1); }
        if (close(fd) != 0) { perror("close"); _exit(1); }
        if (unlink(path) != 0) { perror(path); _exit(1); }
      }
      _exit(0);
    }
  }
  int bad = 0, st;
  while (wait(&st) > 0) bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("%.0f\n", procs * pairs / s);
  return bad;
}
