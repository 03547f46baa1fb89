/* One participant of the multi-process stress test (stress.sh), the C counterpart of
 * Tests/Stress/main.swift; see there for the value format.
 *   stress writer|reader|verify FILE [SECONDS SEED] */
#define _POSIX_C_SOURCE 200809L
#include "larder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t make_value(unsigned key, unsigned version, unsigned char *out) {
    memcpy(out, &key, 4); /* little-endian hosts */
    memcpy(out + 4, &version, 4);
    uint64_t state = ((uint64_t)(key * 7919u + version)) * 0x9E3779B97F4A7C15ull | 1;
    size_t filler = (size_t)(((uint64_t)key * 31 + (uint64_t)version * 17) % 3000);
    for (size_t i = 0; i < filler; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out[8 + i] = (unsigned char)state;
    }
    return 8 + filler;
}

static int is_valid(const unsigned char *bytes, size_t length, unsigned key) {
    static unsigned char expected[3008];
    if (length < 8) return 0;
    unsigned stored_key, version;
    memcpy(&stored_key, bytes, 4);
    memcpy(&version, bytes + 4, 4);
    if (stored_key != key) return 0;
    size_t expected_length = make_value(key, version, expected);
    return expected_length == length && memcmp(expected, bytes, length) == 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t seed;
static unsigned next(void) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(seed >> 33);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: stress writer|reader|verify FILE [SECONDS SEED]\n");
        return 2;
    }
    double seconds = argc > 3 ? atof(argv[3]) : 2;
    seed = argc > 4 ? (uint64_t)atoll(argv[4]) : 1;
    larder_options options;
    larder_options_init(&options);
    options.capacity_bytes = 4u << 20;
    larder *db;
    int rc = larder_open(argv[2], &options, &db);
    if (rc != LARDER_OK) {
        fprintf(stderr, "stress: open: %s (%s)\n", larder_strerror(rc), larder_last_error_message());
        return 1;
    }
    static unsigned char buffer[3008];
    long operations = 0, wrong = 0, errors = 0;
    double deadline = now() + seconds;
    char key[16];
    if (strcmp(argv[1], "writer") == 0) {
        unsigned version = (unsigned)(seed % 1000) * 1000000u + 500000u;
        while (now() < deadline) {
            unsigned k = next() % 1000;
            int n = snprintf(key, sizeof key, "k%u", k);
            version++;
            if (next() % 10 == 0) {
                rc = larder_delete(db, key, (size_t)n);
                if (rc != LARDER_OK && rc != LARDER_NOT_FOUND) errors++;
            } else {
                size_t length = make_value(k, version, buffer);
                if (larder_put(db, key, (size_t)n, buffer, length, 0) != LARDER_OK) errors++;
            }
            operations++;
        }
    } else {
        int verify = strcmp(argv[1], "verify") == 0;
        for (unsigned i = 0; verify ? i < 1000 : now() < deadline; i++) {
            unsigned k = verify ? i : next() % 1000;
            int n = snprintf(key, sizeof key, "k%u", k);
            size_t length;
            rc = larder_get(db, key, (size_t)n, buffer, sizeof buffer, &length);
            if (rc == LARDER_OK && !is_valid(buffer, length, k)) wrong++;
            if (rc < 0) errors++;
            operations++;
        }
    }
    larder_close(db);
    printf("stress %s (C): %ld operations, %ld wrong values, %ld errors\n", argv[1], operations, wrong, errors);
    return wrong == 0 && errors == 0 ? 0 : 1;
}
