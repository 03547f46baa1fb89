/* One half of the Swift <-> C interoperability test: `interop write FILE` stores c-0..c-99,
 * `interop verify FILE` checks swift-0..swift-99 as written by Tests/Interop (Swift). */
#include "larder.h"

#include <stdio.h>
#include <string.h>

static size_t value_for(const char *side, int i, char *out, size_t size) {
    return (size_t)snprintf(out, size, "%s value %d: %0*d", side, i, i % 50 + 1, i);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: interop write|verify FILE\n");
        return 2;
    }
    larder *db;
    int rc = larder_open(argv[2], NULL, &db);
    if (rc != LARDER_OK) {
        fprintf(stderr, "open: %s: %s\n", larder_strerror(rc), larder_last_error_message());
        return 1;
    }
    int failures = 0;
    for (int i = 0; i < 100; i++) {
        char key[32], expected[128], got[128];
        size_t expected_len, got_len;
        if (strcmp(argv[1], "write") == 0) {
            int n = snprintf(key, sizeof key, "c-%d", i);
            expected_len = value_for("c", i, expected, sizeof expected);
            if (larder_put(db, key, (size_t)n, expected, expected_len, 0) != LARDER_OK) failures++;
        } else {
            int n = snprintf(key, sizeof key, "swift-%d", i);
            expected_len = value_for("swift", i, expected, sizeof expected);
            rc = larder_get(db, key, (size_t)n, got, sizeof got, &got_len);
            if (rc != LARDER_OK || got_len != expected_len || memcmp(got, expected, got_len) != 0) {
                fprintf(stderr, "%s: %s\n", key, larder_strerror(rc));
                failures++;
            }
        }
    }
    larder_close(db);
    printf("interop %s: %d passed, %d failed\n", argv[1], 100 - failures, failures);
    return failures == 0 ? 0 : 1;
}
