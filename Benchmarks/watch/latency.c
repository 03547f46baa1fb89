/* Cross-process notification latency: one writer process puts its clock (CLOCK_MONOTONIC) as a
 * value, then sleeps 1 ms, WRITES times; each of WATCHERS processes sleeps in larder_wait_change,
 * and on each wake-up reads the value and records how long after the put it woke. Prints p50,
 * p99 and max of the worst watcher, then the CPU an idle watcher of a read-write handle used in
 * 5 seconds. Built and run by Benchmarks/watch-latency.
 *   latency FILE WATCHERS WRITES */
#include <larder.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>
static uint64_t now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec; }
static int cmp(const void *a, const void *b) { uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    const char *path = argv[1]; int watchers = atoi(argv[2]); int writes = atoi(argv[3]);
    unlink(path);
    larder *db; if (larder_open(path, NULL, &db)) return 2;
    int fds[64][2];
    if (watchers < 1 || watchers > 64) return 64;
    for (int w = 0; w < watchers; w++) {
        pipe(fds[w]);
        if (fork() == 0) {
            larder *own; larder_open(path, NULL, &own);
            uint64_t cursor; larder_change_cursor(own, &cursor);
            uint64_t *lat = calloc(writes, 8); int n = 0;
            write(fds[w][1], "r", 1);
            while (n < writes) {
                if (larder_wait_change(own, cursor, 2000) != LARDER_OK) break;
                uint64_t t = now_ns();
                larder_change ch[256]; size_t count;
                larder_read_changes(own, &cursor, ch, 256, &count);
                uint64_t sent; size_t len;
                if (larder_get(own, "t", 1, &sent, 8, &len) == LARDER_OK && len == 8 && count > 0) lat[n++] = t > sent ? t - sent : 0;
            }
            qsort(lat, n, 8, cmp);
            uint64_t out[4] = {(uint64_t)n, n ? lat[n / 2] : 0, n ? lat[n * 99 / 100] : 0, n ? lat[n - 1] : 0};
            write(fds[w][1], out, sizeof out);
            _exit(0);
        }
        char c; read(fds[w][0], &c, 1);
    }
    for (int i = 0; i < writes; i++) {
        uint64_t t = now_ns();
        larder_put(db, "t", 1, &t, 8, 0);
        struct timespec gap = {0, 1000000}; nanosleep(&gap, NULL);
    }
    uint64_t worst50 = 0, worst99 = 0, worstmax = 0;
    for (int w = 0; w < watchers; w++) {
        uint64_t out[4]; read(fds[w][0], out, sizeof out);
        if (out[1] > worst50) worst50 = out[1]; if (out[2] > worst99) worst99 = out[2]; if (out[3] > worstmax) worstmax = out[3];
    }
    while (wait(NULL) > 0) {}
    printf("%d watchers, %d writes: p50 %.1f us, p99 %.1f us, max %.1f us (worst watcher)\n", watchers, writes, worst50 / 1e3, worst99 / 1e3, worstmax / 1e3);
    if (watchers == 1) {
        uint64_t cursor;
        larder_change_cursor(db, &cursor);
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        larder_wait_change(db, cursor, 5000);
        getrusage(RUSAGE_SELF, &after);
        double used = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) + (after.ru_stime.tv_sec - before.ru_stime.tv_sec)
                    + ((after.ru_utime.tv_usec - before.ru_utime.tv_usec) + (after.ru_stime.tv_usec - before.ru_stime.tv_usec)) / 1e6;
        printf("an idle watcher: %.3f ms of CPU in 5 s (%.4f%% of a core)\n", used * 1e3, used / 5 * 100);
    }
    larder_close(db);
    return 0;
}
