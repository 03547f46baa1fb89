/* Larder from C: the same cache file the Swift demo uses.
 *
 *   cc -std=c11 -I../../include example.c -L../../.build/release -Wl,-rpath,$PWD/../../.build/release -lLarderC -o example
 *   ./example /tmp/larder-demo.larder
 */
#include "larder.h"

#include <stdio.h>
#include <string.h>

/* Prints a value lent by larder_with_value: the bytes are the cache file's own, valid only here. */
static void print_value(void *ctx, const void *value, size_t value_len) {
    printf("C example: %s, lent without a copy: %.*s\n", (const char *)ctx, (int)value_len, (const char *)value);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "/tmp/larder-demo.larder";
    larder_options options;
    larder_options_init(&options);
    options.capacity_bytes = 1u << 20;

    larder *db;
    int rc = larder_open(path, &options, &db);
    if (rc != LARDER_OK) {
        fprintf(stderr, "larder_open: %s (%s)\n", larder_strerror(rc), larder_last_error_message());
        return 1;
    }

    /* Written by the Swift demo, read here. */
    char runs[32];
    size_t length;
    rc = larder_get(db, "runs", 4, runs, sizeof runs - 1, &length);
    if (rc == LARDER_OK) {
        runs[length] = 0;
        printf("C example: the Swift demo has run %s time(s) on %s\n", runs, path);
    } else {
        printf("C example: no Swift runs recorded yet (%s)\n", larder_strerror(rc));
    }

    /* Written here, read by the Swift demo next time. */
    const char *greeting = "hello from C";
    rc = larder_put(db, "from-c", 6, greeting, strlen(greeting), 0);
    if (rc != LARDER_OK) {
        fprintf(stderr, "larder_put: %s (%s)\n", larder_strerror(rc), larder_last_error_message());
        larder_close(db);
        return 1;
    }

    /* No copy: the value is read in place, in the mapped file. */
    larder_with_value(db, "from-c", 6, print_value, "from-c");

    /* Several keys in one call, written and read: their lookups overlap, which pays on a large
     * cache. Each request gets its own status. */
    larder_put_request writes[2] = {
        {"from-c/sizes", 12, "[12, 64]", 8, 0, 0},
        {"from-c/short-lived", 18, "gone in a minute", 16, 60 * 1000, 0},
    };
    if (larder_put_many(db, writes, 2) != LARDER_OK || writes[0].status != LARDER_OK || writes[1].status != LARDER_OK) {
        fprintf(stderr, "larder_put_many: %s\n", larder_last_error_message());
    }
    char values[4][32];
    larder_get_request requests[4] = {
        {"runs", 4, values[0], sizeof values[0], 0, 0},
        {"from-c", 6, values[1], sizeof values[1], 0, 0},
        {"from-c/sizes", 12, values[2], sizeof values[2], 0, 0},
        {"never-written", 13, values[3], sizeof values[3], 0, 0},
    };
    if (larder_get_many(db, requests, 4) == LARDER_OK) {
        for (int i = 0; i < 4; i++) {
            printf("C example: %s: %s", (const char *)requests[i].key, larder_strerror(requests[i].status));
            if (requests[i].status == LARDER_OK) printf(", %zu bytes", requests[i].value_len);
            printf("\n");
        }
    }

    /* Limits of the program's own, now and then (at launch here): expired entries out, and at
     * most 512 KiB of values, the least recently used evicted first. */
    uint64_t expired = 0, evicted = 0;
    if (larder_remove_expired(db, &expired) == LARDER_OK && larder_trim_bytes(db, 512u << 10, &evicted) == LARDER_OK) {
        printf("C example: %llu expired entries removed, %llu evicted\n",
               (unsigned long long)expired, (unsigned long long)evicted);
    }

    struct larder_stats stats = {.struct_size = sizeof stats};
    larder_stats(db, &stats);
    printf("C example: %llu entries, %llu of %llu bytes in the file, %llu evictions\n",
           (unsigned long long)stats.entries, (unsigned long long)stats.file_bytes,
           (unsigned long long)stats.capacity_bytes, (unsigned long long)stats.evictions);
    larder_close(db);
    return 0;
}
