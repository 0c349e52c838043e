/* The kernel's floor for bench/bench_who.py: the system calls devctl's <proc> scan cannot do without, from C.
 *
 *     who_floor PROC
 *
 * For each numeric entry of PROC: open PID/fd, list it, readlink each entry
 * relative to the open directory, close it. Nothing is kept or matched, so
 * its time is the kernel's share of a scan with no interpreter around it.
 * Prints "processes N fds M" for the bench to divide by.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: who_floor PROC\n");
        return 2;
    }
    DIR *top = opendir(argv[1]);
    if (top == NULL) {
        perror(argv[1]);
        return 3;
    }
    long processes = 0, fds = 0;
    char path[64], target[4096];
    struct dirent *p;
    while ((p = readdir(top)) != NULL) {
        if (p->d_name[0] < '0' || p->d_name[0] > '9' || snprintf(path, sizeof path, "%s/fd", p->d_name) >= (int)sizeof path)
            continue;
        int dir = openat(dirfd(top), path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
            continue;
        DIR *listing = fdopendir(dir);
        if (listing == NULL) {
            close(dir);
            continue;
        }
        processes++;
        struct dirent *f;
        while ((f = readdir(listing)) != NULL) {
            if (f->d_name[0] == '.')
                continue;
            if (readlinkat(dir, f->d_name, target, sizeof target) >= 0)
                fds++;
        }
        closedir(listing);
    }
    closedir(top);
    printf("processes %ld fds %ld\n", processes, fds);
    return 0;
}
