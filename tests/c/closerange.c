/* close_range under the preload shim (tests/scripts/client-shim.sh):
 * closerange MNT OWN. A file made through the shim, then close_range(3,
 * ~0U, 0) as a daemon or a shell's child does, then the program's own file
 * OWN (the lowest free number) and a second file through the shim, then a
 * write to OWN. The shim's socket to the daemon must survive the
 * close_range: its number, reused by OWN, hung the next call or closed
 * OWN behind the program's back. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char p[4096];
    if (argc != 3)
        return 2;
    snprintf(p, sizeof p, "%s/cr1", argv[1]);
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1) {
        perror("cr1");
        return 3;
    }
    if (close_range(3, ~0U, 0) != 0) {
        perror("close_range");
        return 4;
    }
    int own = open(argv[2], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (own < 0) {
        perror("own");
        return 5;
    }
    snprintf(p, sizeof p, "%s/cr2", argv[1]);
    int fd2 = open(p, O_CREAT | O_WRONLY, 0644);
    if (fd2 < 0 || write(fd2, "after", 5) != 5 || close(fd2) != 0) {
        perror("cr2");
        return 6;
    }
    if (write(own, "own", 3) != 3 || close(own) != 0) {
        perror("write to the program's own file");
        return 7;
    }
    return 0;
}
