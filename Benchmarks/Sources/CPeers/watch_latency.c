/* Cross-process notification latency of watching: one writer process puts its clock
 * (CLOCK_MONOTONIC) as a value, then sleeps 1 ms, `writes` times; each of `watchers` forked
 * processes sleeps in larder_wait_change, and on each wake-up reads the value and records how long
 * after the put it woke. Also the CPU an idle watcher of a read-write handle uses. */
#include "CPeers.h"
#include "../../../include/larder.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One watcher process: waits, reads, times each wake-up; writes {count, p50, p99, max} to `out`. */
static void watch_and_report(const char *path, int writes, int ready, int out) {
    larder *own;
    if (larder_open(path, NULL, &own) != LARDER_OK) _exit(2);
    uint64_t cursor;
    larder_change_cursor(own, &cursor);
    uint64_t *latencies = calloc((size_t)writes, 8);
    int n = 0;
    if (write(ready, "r", 1) != 1) _exit(2);
    while (n < writes) {
        if (larder_wait_change(own, cursor, 2000) != LARDER_OK) break;
        uint64_t woke = bench_now_ns();
        larder_change changes[256];
        size_t count;
        larder_read_changes(own, &cursor, changes, 256, &count);
        uint64_t sent;
        size_t length;
        if (larder_get(own, "t", 1, &sent, 8, &length) == LARDER_OK && length == 8 && count > 0)
            latencies[n++] = woke > sent ? woke - sent : 0;
    }
    qsort(latencies, (size_t)n, 8, compare_u64);
    uint64_t report[4] = {(uint64_t)n, n ? latencies[n / 2] : 0, n ? latencies[n * 99 / 100] : 0, n ? latencies[n - 1] : 0};
    if (write(out, report, sizeof report) != sizeof report) _exit(2);
    _exit(0);
}

int bench_watch_latency(const char *path, int watchers, int writes, bench_watch_result *result) {
    memset(result, 0, sizeof *result);
    if (watchers < 1 || watchers > 64 || writes < 1) return -1;
    unlink(path);
    larder *db;
    if (larder_open(path, NULL, &db) != LARDER_OK) return -1;
    int pipes[64][2];
    for (int w = 0; w < watchers; w++) {
        if (pipe(pipes[w]) != 0) return -1;
        pid_t child = fork();
        if (child < 0) return -1;
        if (child == 0) watch_and_report(path, writes, pipes[w][1], pipes[w][1]);
        char ready;
        if (read(pipes[w][0], &ready, 1) != 1) return -1;
    }
    for (int i = 0; i < writes; i++) {
        uint64_t now = bench_now_ns();
        larder_put(db, "t", 1, &now, 8, 0);
        struct timespec gap = {0, 1000000};
        nanosleep(&gap, NULL);
    }
    for (int w = 0; w < watchers; w++) {
        uint64_t report[4] = {0};
        if (read(pipes[w][0], report, sizeof report) != sizeof report) return -1;
        close(pipes[w][0]);
        close(pipes[w][1]);
        /* The worst watcher's figures. */
        if (w == 0 || report[0] < result->woken) result->woken = report[0];
        if (report[1] / 1e3 > result->p50_us) result->p50_us = report[1] / 1e3;
        if (report[2] / 1e3 > result->p99_us) result->p99_us = report[2] / 1e3;
        if (report[3] / 1e3 > result->max_us) result->max_us = report[3] / 1e3;
    }
    while (wait(NULL) > 0) {}
    /* An idle watcher of a read-write handle: this process, waiting while nothing changes. */
    uint64_t cursor;
    larder_change_cursor(db, &cursor);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    larder_wait_change(db, cursor, 2000);
    getrusage(RUSAGE_SELF, &after);
    double used = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec) + (double)(after.ru_stime.tv_sec - before.ru_stime.tv_sec)
                + ((double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec) + (double)(after.ru_stime.tv_usec - before.ru_stime.tv_usec)) / 1e6;
    result->idle_cpu_percent = used / 2 * 100;
    larder_close(db);
    unlink(path);
    return 0;
}
