/* Tests of the C API (include/larder.h): every function, its error paths, and threads.
 * Built with -std=c11 -Wall -Wextra -Werror -pedantic by gcc and clang, run plain, under
 * valgrind and under AddressSanitizer. Prints "N passed, N failed" and exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include "larder.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (cond) {                                                                      \
            passed++;                                                                    \
        } else {                                                                         \
            failed++;                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,      \
                    __LINE__, #cond, larder_last_error_message());                       \
        }                                                                                \
    } while (0)

static char directory[256];

static void path_for(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s", directory, name);
}

static larder *open_fresh(const char *name, const larder_options *opts) {
    char path[512];
    path_for(path, sizeof path, name);
    unlink(path);
    larder *db = NULL;
    int rc = larder_open(path, opts, &db);
    CHECK(rc == LARDER_OK && db != NULL);
    return db;
}

static void test_put_get_delete(void) {
    larder *db = open_fresh("basic.larder", NULL);
    CHECK(larder_put(db, "k", 1, "value", 5, 0) == LARDER_OK);

    char buf[16];
    size_t len = 0;
    CHECK(larder_get(db, "k", 1, buf, sizeof buf, &len) == LARDER_OK);
    CHECK(len == 5 && memcmp(buf, "value", 5) == 0);

    /* Asking for the size, then a buffer too small. */
    len = 0;
    CHECK(larder_get(db, "k", 1, NULL, 0, &len) == LARDER_BUFFER_TOO_SMALL && len == 5);
    CHECK(larder_get(db, "k", 1, buf, 4, &len) == LARDER_BUFFER_TOO_SMALL && len == 5);

    void *copy = NULL;
    CHECK(larder_get_alloc(db, "k", 1, &copy, &len) == LARDER_OK && len == 5 && memcmp(copy, "value", 5) == 0);
    larder_free(copy);
    larder_free(NULL);

    CHECK(larder_contains(db, "k", 1) == LARDER_OK);
    CHECK(larder_contains(db, "nope", 4) == LARDER_NOT_FOUND);
    CHECK(larder_get(db, "nope", 4, buf, sizeof buf, &len) == LARDER_NOT_FOUND);
    CHECK(larder_get_alloc(db, "nope", 4, &copy, &len) == LARDER_NOT_FOUND && copy == NULL);
    CHECK(larder_delete(db, "k", 1) == LARDER_OK);
    CHECK(larder_delete(db, "k", 1) == LARDER_NOT_FOUND);
    CHECK(larder_contains(db, "k", 1) == LARDER_NOT_FOUND);

    /* Empty values and binary keys. */
    const unsigned char binary_key[3] = {0, 0xFF, 0};
    CHECK(larder_put(db, binary_key, 3, NULL, 0, 0) == LARDER_OK);
    len = 99;
    CHECK(larder_get(db, binary_key, 3, NULL, 0, &len) == LARDER_OK && len == 0);
    CHECK(larder_get_alloc(db, binary_key, 3, &copy, &len) == LARDER_OK && len == 0 && copy != NULL);
    larder_free(copy);
    larder_close(db);
}

/* What a larder_with_value callback saw, and what came of the calls it made on the handle. */
struct lent {
    larder *db; /* when set, the callback also writes, reads and closes through it */
    int calls;
    size_t length;
    int value_is_null;
    unsigned char first[8];
    int all_a;
    int put_inside, get_inside;
};

static void look_at_value(void *ctx, const void *value, size_t value_len) {
    struct lent *seen = ctx;
    const unsigned char *bytes = value;
    seen->calls++;
    seen->length = value_len;
    seen->value_is_null = value == NULL;
    if (value) memcpy(seen->first, value, value_len < sizeof seen->first ? value_len : sizeof seen->first);
    seen->all_a = 1;
    for (size_t i = 0; i < value_len; i++) seen->all_a &= bytes[i] == 'a';
    if (seen->db) {
        seen->put_inside = larder_put(seen->db, "other", 5, "x", 1, 0);
        char buf[8];
        size_t len = 0;
        seen->get_inside = larder_get(seen->db, "read-inside", 11, buf, sizeof buf, &len);
        larder_close(seen->db); /* does nothing: the handle stays open */
    }
}

/* larder_with_value lends the value without a copy: what was stored, decompressed if need be;
 * fn is called only for a value there is; inside fn, reads work and writes and close do not. */
static void test_with_value(void) {
    larder_options opts;
    larder_options_init(&opts);
    opts.compression = LARDER_COMPRESSION_LZ4;
    larder *db = open_fresh("lend.larder", &opts);
    CHECK(larder_put(db, "k", 1, "value", 5, 0) == LARDER_OK);
    struct lent seen;
    memset(&seen, 0, sizeof seen);
    CHECK(larder_with_value(db, "k", 1, look_at_value, &seen) == LARDER_OK);
    CHECK(seen.calls == 1 && seen.length == 5 && memcmp(seen.first, "value", 5) == 0);

    char packed[4000];
    memset(packed, 'a', sizeof packed);
    CHECK(larder_put(db, "packed", 6, packed, sizeof packed, 0) == LARDER_OK);
    struct larder_stats stats;
    stats.struct_size = sizeof stats;
    CHECK(larder_stats(db, &stats) == LARDER_OK && stats.stored_bytes < stats.live_bytes);
    memset(&seen, 0, sizeof seen);
    CHECK(larder_with_value(db, "packed", 6, look_at_value, &seen) == LARDER_OK);
    CHECK(seen.calls == 1 && seen.length == sizeof packed && seen.all_a);

    memset(&seen, 0, sizeof seen);
    CHECK(larder_with_value(db, "nope", 4, look_at_value, &seen) == LARDER_NOT_FOUND && seen.calls == 0);
    CHECK(larder_put(db, "empty", 5, NULL, 0, 0) == LARDER_OK);
    CHECK(larder_with_value(db, "empty", 5, look_at_value, &seen) == LARDER_OK);
    CHECK(seen.calls == 1 && seen.length == 0 && seen.value_is_null);
    CHECK(larder_put(db, "short", 5, "v", 1, 30) == LARDER_OK);
    struct timespec pause = {0, 60 * 1000 * 1000};
    nanosleep(&pause, NULL);
    memset(&seen, 0, sizeof seen);
    CHECK(larder_with_value(db, "short", 5, look_at_value, &seen) == LARDER_NOT_FOUND && seen.calls == 0);

    CHECK(larder_put(db, "read-inside", 11, "r", 1, 0) == LARDER_OK);
    memset(&seen, 0, sizeof seen);
    seen.db = db;
    CHECK(larder_with_value(db, "k", 1, look_at_value, &seen) == LARDER_OK && seen.calls == 1);
    CHECK(seen.put_inside == LARDER_INVALID_ARGUMENT && seen.get_inside == LARDER_OK);
    CHECK(larder_contains(db, "other", 5) == LARDER_NOT_FOUND);
    CHECK(larder_contains(db, "k", 1) == LARDER_OK);

    CHECK(larder_with_value(db, "k", 1, NULL, NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_with_value(NULL, "k", 1, look_at_value, &seen) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_with_value(db, NULL, 1, look_at_value, &seen) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_with_value(db, "k", 0, look_at_value, &seen) == LARDER_INVALID_ARGUMENT);
    larder_close(db);
}

/* larder_get_many answers each key as larder_get would, in one call, whatever the others are. */
static void test_get_many(void) {
    larder *db = open_fresh("many.larder", NULL);
    char key[40][16];
    char value_store[40][64];
    larder_get_request requests[40];
    for (int i = 0; i < 40; i++) {
        size_t key_len = (size_t)snprintf(key[i], sizeof key[i], "key-%d", i);
        larder_get_request request = {key[i], key_len, value_store[i], sizeof value_store[i], 999, 999};
        requests[i] = request;
        /* Even keys are stored, with i bytes of value i. */
        if (i % 2 == 0) {
            char value[64];
            memset(value, i, sizeof value);
            CHECK(larder_put(db, key[i], key_len, value, (size_t)i, 0) == LARDER_OK);
        }
    }
    requests[30].buf_len = 5;                      /* too small for 30 bytes */
    requests[32].buf = NULL, requests[32].buf_len = 0; /* asks for the length */
    requests[34].buf = NULL;                       /* NULL with a length: refused */
    requests[35].key = NULL;                       /* a NULL key */
    requests[37].key_len = 0;                      /* an empty key */
    CHECK(larder_get_many(db, requests, 40) == LARDER_OK);
    int right = 1;
    for (int i = 0; i < 40; i++) {
        int expected = i == 34 || i == 35 || i == 37 ? LARDER_INVALID_ARGUMENT
                     : i % 2 != 0                    ? LARDER_NOT_FOUND
                     : i == 30 || i == 32            ? LARDER_BUFFER_TOO_SMALL
                                                     : LARDER_OK;
        if (requests[i].status != expected) right = 0;
        if (expected == LARDER_OK || expected == LARDER_BUFFER_TOO_SMALL) {
            if (requests[i].value_len != (size_t)i) right = 0;
        } else if (requests[i].value_len != 999) {
            right = 0;
        }
        if (expected == LARDER_OK) {
            for (int j = 0; j < i; j++) {
                if (value_store[i][j] != (char)i) right = 0;
            }
        }
    }
    CHECK(right);
    CHECK(larder_get_many(db, NULL, 0) == LARDER_OK);
    CHECK(larder_get_many(db, NULL, 2) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_get_many(NULL, requests, 2) == LARDER_INVALID_ARGUMENT);
    larder_close(db);
}

/* larder_put_many stores each entry as larder_put would, in one call, whatever the others are. */
static void test_put_many(void) {
    larder *db = open_fresh("put-many.larder", NULL);
    char key[40][16];
    char value[40][64];
    larder_put_request requests[40];
    for (int i = 0; i < 40; i++) {
        size_t key_len = (size_t)snprintf(key[i], sizeof key[i], "key-%d", i);
        memset(value[i], i, sizeof value[i]);
        /* Entry i has i bytes of value i; keys 20 and up are stored already, with other bytes. */
        larder_put_request request = {key[i], key_len, value[i], (size_t)i, 0, 999};
        requests[i] = request;
        if (i >= 20) CHECK(larder_put(db, key[i], key_len, "old", 3, 0) == LARDER_OK);
    }
    requests[33].key = NULL;                         /* a NULL key */
    requests[34].key_len = 0;                        /* an empty key */
    requests[35].value = NULL;                       /* NULL with a length: refused */
    static char long_key[5000];
    memset(long_key, 'k', sizeof long_key);
    requests[36].key = long_key, requests[36].key_len = sizeof long_key; /* a key over 4096 bytes */
    requests[37].ttl_ms = 1, requests[37].value_len = 0; /* expires at once, and is empty */
    CHECK(larder_put_many(db, requests, 40) == LARDER_OK);
    /* The message is the last failure's: request 36's key of 5000 bytes. */
    CHECK(strstr(larder_last_error_message(), "5000") != NULL);
    struct timespec pause = {0, 5 * 1000 * 1000};
    nanosleep(&pause, NULL);
    int right = 1;
    for (int i = 0; i < 40; i++) {
        int expected = i == 33 || i == 34 || i == 35 ? LARDER_INVALID_ARGUMENT : i == 36 ? LARDER_TOO_LARGE : LARDER_OK;
        if (requests[i].status != expected) right = 0;
        char got[64];
        size_t got_len = 0;
        int status = larder_get(db, key[i], strlen(key[i]), got, sizeof got, &got_len);
        if (i == 37) {
            if (status != LARDER_NOT_FOUND) right = 0;
        } else if (expected == LARDER_OK) {
            if (status != LARDER_OK || got_len != (size_t)i || memcmp(got, value[i], got_len) != 0) right = 0;
        } else if (i >= 20) {
            /* A refused entry leaves the old value as it was. */
            if (status != LARDER_OK || got_len != 3 || memcmp(got, "old", 3) != 0) right = 0;
        }
    }
    CHECK(right);
    struct larder_stats stats = {.struct_size = sizeof stats};
    CHECK(larder_stats(db, &stats) == LARDER_OK);
    CHECK(stats.inserts == 20 + 20 && stats.updates == 16);
    CHECK(larder_put_many(db, NULL, 0) == LARDER_OK);
    CHECK(larder_put_many(db, NULL, 2) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_put_many(NULL, requests, 2) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_put_many(db, requests, (size_t)-1) == LARDER_INVALID_ARGUMENT);
    larder_close(db);
}

/* larder_delete_many removes each key as larder_delete would, in one call, whatever the others are. */
static void test_delete_many(void) {
    larder *db = open_fresh("delete-many.larder", NULL);
    char key[20][16];
    larder_delete_request requests[20];
    for (int i = 0; i < 20; i++) {
        size_t key_len = (size_t)snprintf(key[i], sizeof key[i], "key-%d", i);
        larder_delete_request request = {key[i], key_len, 999};
        requests[i] = request;
        /* Even keys are stored. */
        if (i % 2 == 0) CHECK(larder_put(db, key[i], key_len, "v", 1, 0) == LARDER_OK);
    }
    CHECK(larder_put(db, "kept", 4, "v", 1, 0) == LARDER_OK);
    static char long_key[5000];
    memset(long_key, 'k', sizeof long_key);
    requests[16].key = long_key, requests[16].key_len = sizeof long_key; /* too long: key-16 stays */
    requests[17].key = NULL;                                             /* a NULL key */
    requests[18].key_len = 0;                                            /* an empty key: key-18 stays */
    CHECK(larder_delete_many(db, requests, 20) == LARDER_OK);
    /* The message is the last failure's: request 18's empty key. */
    CHECK(strstr(larder_last_error_message(), "empty") != NULL);
    int right = 1;
    for (int i = 0; i < 20; i++) {
        int expected = i == 16                ? LARDER_TOO_LARGE
                     : i == 17 || i == 18     ? LARDER_INVALID_ARGUMENT
                     : i % 2 == 0             ? LARDER_OK
                                              : LARDER_NOT_FOUND;
        if (requests[i].status != expected) right = 0;
        int stored = larder_contains(db, key[i], strlen(key[i])) == LARDER_OK;
        if (stored != (i == 16 || i == 18)) right = 0;
    }
    CHECK(right);
    CHECK(larder_contains(db, "kept", 4) == LARDER_OK);
    CHECK(larder_delete_many(db, NULL, 0) == LARDER_OK);
    CHECK(larder_delete_many(db, NULL, 2) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_delete_many(NULL, requests, 2) == LARDER_INVALID_ARGUMENT);
    larder_close(db);
}

static void test_invalid_arguments(void) {
    larder *db = open_fresh("invalid.larder", NULL);
    char buf[8];
    size_t len;
    void *copy;
    char big_key[4097];
    memset(big_key, 'x', sizeof big_key);

    CHECK(larder_put(NULL, "k", 1, "v", 1, 0) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_put(db, NULL, 1, "v", 1, 0) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_put(db, "k", 0, "v", 1, 0) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_put(db, "k", 1, NULL, 1, 0) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_put(db, big_key, sizeof big_key, "v", 1, 0) == LARDER_TOO_LARGE);
    CHECK(strlen(larder_last_error_message()) > 0);
    CHECK(larder_get(NULL, "k", 1, buf, sizeof buf, &len) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_get(db, "k", 1, buf, sizeof buf, NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_get(db, "k", 1, NULL, 8, &len) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_get(db, NULL, 0, buf, sizeof buf, &len) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_get_alloc(db, "k", 1, NULL, &len) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_get_alloc(db, "k", 1, &copy, NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_delete(NULL, "k", 1) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_delete(db, "", 0) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_contains(NULL, "k", 1) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_contains(db, big_key, sizeof big_key) == LARDER_TOO_LARGE);
    CHECK(larder_clear(NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_sync(NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_stats(NULL, NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_stats(db, NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_foreach(db, NULL, NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_foreach(NULL, NULL, NULL) == LARDER_INVALID_ARGUMENT);
    larder_close(NULL);

    /* Lengths of 2^63 or more (a size_t computed wrong): too large, never a key or value that
     * the call takes as negative; a buffer that large holds any value. */
    CHECK(larder_put(db, "k", (size_t)-1, "v", 1, 0) == LARDER_TOO_LARGE);
    CHECK(larder_put(db, "k", 1, "v", (size_t)-1, 0) == LARDER_TOO_LARGE);
    CHECK(strstr(larder_last_error_message(), "18446744073709551615") != NULL);
    CHECK(larder_contains(db, "k", (size_t)-1) == LARDER_TOO_LARGE);
    CHECK(larder_put(db, "k", 1, "v", 1, 0) == LARDER_OK);
    CHECK(larder_get(db, "k", 1, buf, (size_t)-1, &len) == LARDER_OK && len == 1 && buf[0] == 'v');

    /* A successful call clears the thread's last error. */
    CHECK(larder_put(db, "k", 1, "v", 1, 0) == LARDER_OK);
    CHECK(strcmp(larder_last_error_message(), "") == 0);
    larder_close(db);
}

static void test_open_errors_and_options(void) {
    larder *db = (larder *)1;
    CHECK(larder_open(NULL, NULL, &db) == LARDER_INVALID_ARGUMENT && db == NULL);
    /* Every message has one form: "Larder ", the status's words, the file if any, the detail. */
    CHECK(strncmp(larder_last_error_message(), "Larder invalid argument: ", 25) == 0);
    CHECK(larder_open("x", NULL, NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_open("/nonexistent-dir/x.larder", NULL, &db) == LARDER_IO && db == NULL);
    CHECK(strncmp(larder_last_error_message(), "Larder I/O error (/nonexistent-dir/x.larder): ", 46) == 0);
    /* A directory is the same mistake whether opened for writing or only for reading. */
    CHECK(larder_open(directory, NULL, &db) == LARDER_INVALID_ARGUMENT && db == NULL);

    larder_options opts;
    larder_options_init(&opts);
    CHECK(opts.struct_size == sizeof opts && opts.capacity_bytes == 0 && opts.flags == 0);
    opts.page_size = 1000;
    char path[512];
    path_for(path, sizeof path, "options.larder");
    unlink(path);
    CHECK(larder_open(path, &opts, &db) == LARDER_INVALID_ARGUMENT);
    larder_options_init(&opts);
    opts.compression = 7;
    CHECK(larder_open(path, &opts, &db) == LARDER_INVALID_ARGUMENT);
    larder_options_init(&opts);
    opts.flags = 0x80;
    CHECK(larder_open(path, &opts, &db) == LARDER_INVALID_ARGUMENT);
    larder_options_init(&opts);
    opts.struct_size = 0;
    CHECK(larder_open(path, &opts, &db) == LARDER_INVALID_ARGUMENT);
    /* Standing limits: a "negative" age or count (2^63 and up) is refused; UINT64_MAX removes. */
    larder_options_init(&opts);
    CHECK(opts.count_limit == 0 && opts.max_age_ms == 0 && opts.sweep_interval_ms == 0);
    opts.max_age_ms = (uint64_t)-5;
    CHECK(larder_open(path, &opts, &db) == LARDER_INVALID_ARGUMENT && db == NULL);
    larder_options_init(&opts);
    opts.sweep_interval_ms = LARDER_LIMIT_NONE;
    CHECK(larder_open(path, &opts, &db) == LARDER_INVALID_ARGUMENT && db == NULL);
    larder_options_init(&opts);
    opts.count_limit = 2;
    opts.sweep_interval_ms = 1000;
    CHECK(larder_open(path, &opts, &db) == LARDER_OK && db != NULL);
    CHECK(larder_put(db, "a", 1, "1", 1, 0) == LARDER_OK);
    CHECK(larder_put(db, "b", 1, "2", 1, 0) == LARDER_OK);
    CHECK(larder_put(db, "c", 1, "3", 1, 0) == LARDER_OK);
    struct larder_stats limited = { .struct_size = sizeof limited };
    CHECK(larder_stats(db, &limited) == LARDER_OK && limited.entries == 2);
    CHECK(larder_contains(db, "a", 1) == LARDER_NOT_FOUND && larder_contains(db, "c", 1) == LARDER_OK);
    CHECK(larder_close(db) == LARDER_OK);
    larder_options_init(&opts);
    opts.count_limit = LARDER_LIMIT_NONE;
    CHECK(larder_open(path, &opts, &db) == LARDER_OK && db != NULL);
    CHECK(larder_put(db, "d", 1, "4", 1, 0) == LARDER_OK);
    CHECK(larder_stats(db, &limited) == LARDER_OK && limited.entries == 3);
    /* A sliding expiry: a window of 0 is refused, any other is stored and read. */
    CHECK(larder_put_sliding(db, "s", 1, "5", 1, 0) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_put_sliding(db, "s", 1, "5", 1, 60000) == LARDER_OK);
    char slid[4];
    size_t slid_len = 0;
    CHECK(larder_get(db, "s", 1, slid, sizeof slid, &slid_len) == LARDER_OK && slid_len == 1 && slid[0] == '5');
    CHECK(larder_close(db) == LARDER_OK);
    unlink(path);

    /* A program built with an older header (a smaller larder_options): init writes no further
     * than its size, and open reads no further. */
    unsigned char older[sizeof(larder_options) + 16];
    memset(older, 0xAB, sizeof older);
    larder_options_init_sized((larder_options *)(void *)older, 16);
    CHECK(older[16] == 0xAB && older[0] == 16 && older[1] == 0 && older[4] == 0);
    CHECK(larder_open(path, (larder_options *)(void *)older, &db) == LARDER_OK && db != NULL);
    CHECK(larder_close(db) == LARDER_OK);
    unlink(path);
    /* One built with a newer header: fields this library does not know are refused once set. */
    memset(older, 0xAB, sizeof older);
    larder_options_init_sized((larder_options *)(void *)older, sizeof older);
    CHECK(older[sizeof older - 1] == 0 && ((larder_options *)(void *)older)->struct_size == sizeof older);
    CHECK(larder_open(path, (larder_options *)(void *)older, &db) == LARDER_OK && db != NULL);
    CHECK(larder_close(db) == LARDER_OK);
    older[sizeof older - 1] = 1;
    CHECK(larder_open(path, (larder_options *)(void *)older, &db) == LARDER_INVALID_ARGUMENT && db == NULL);
    unlink(path);

    /* The function itself (a program built before the macro): the first 40-byte layout. */
    memset(older, 0xAB, sizeof older);
    (larder_options_init)((larder_options *)(void *)older);
    CHECK(older[0] == 40 && older[39] == 0 && older[40] == 0xAB);
    CHECK(larder_open(path, (larder_options *)(void *)older, &db) == LARDER_OK && db != NULL);
    CHECK(larder_close(db) == LARDER_OK);
    unlink(path);
    /* A struct_size no larder_options has (left uninitialised) is refused, not read past. */
    larder_options_init(&opts);
    opts.struct_size = 0x7FFFFFF0u;
    CHECK(larder_open(path, &opts, &db) == LARDER_INVALID_ARGUMENT && db == NULL);

    /* A path that is not UTF-8 is refused, not opened under a repaired name (U+FFFD's bytes). */
    char latin1[512], repaired[512];
    snprintf(latin1, sizeof latin1, "%s/caf\xe9.larder", directory);
    snprintf(repaired, sizeof repaired, "%s/caf\xef\xbf\xbd.larder", directory);
    CHECK(larder_open(latin1, NULL, &db) == LARDER_INVALID_ARGUMENT && db == NULL);
    CHECK(access(latin1, F_OK) != 0 && access(repaired, F_OK) != 0);

    /* A foreign file. */
    FILE *f = fopen(path, "w");
    fputs("definitely not a cache file, just some text that is long enough\n", f);
    fclose(f);
    CHECK(larder_open(path, NULL, &db) == LARDER_INCOMPATIBLE && db == NULL);
    unlink(path);

    /* Options are honoured: capacity, page size, mode, compression, default TTL. */
    larder_options_init(&opts);
    opts.capacity_bytes = 1u << 20;
    opts.page_size = 16384;
    opts.file_mode = 0640;
    opts.compression = LARDER_COMPRESSION_LZ4;
    opts.default_ttl_ms = 60000;
    CHECK(larder_open(path, &opts, &db) == LARDER_OK);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640);
    char text[4096];
    for (size_t i = 0; i < sizeof text; i++) text[i] = "abcabcabd"[i % 9];
    CHECK(larder_put(db, "text", 4, text, sizeof text, 0) == LARDER_OK);
    struct larder_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK(larder_stats(db, &s) == LARDER_OK);
    CHECK(s.capacity_bytes == 1u << 20 && s.live_bytes == sizeof text && s.stored_bytes < sizeof text / 4);
    char back[4096];
    size_t len;
    CHECK(larder_get(db, "text", 4, back, sizeof back, &len) == LARDER_OK && len == sizeof text && memcmp(back, text, len) == 0);
    larder_close(db);

    /* The Apple options: accepted (and without effect) here; an unknown class is refused. */
    larder_options_init(&opts);
    CHECK(opts.file_protection == LARDER_PROTECTION_DEFAULT);
    opts.flags = LARDER_FLAG_EXCLUDE_FROM_BACKUP;
    opts.file_protection = LARDER_PROTECTION_UNTIL_FIRST_USER_AUTHENTICATION;
    CHECK(larder_open(path, &opts, &db) == LARDER_OK);
    CHECK(larder_contains(db, "text", 4) == LARDER_OK);
    larder_close(db);
    opts.file_protection = LARDER_PROTECTION_NONE + 1;
    CHECK(larder_open(path, &opts, &db) == LARDER_INVALID_ARGUMENT && db == NULL);
    CHECK(strstr(larder_last_error_message(), "file protection 5") != NULL);
    larder_options_init(&opts);
    opts.flags = 4u;
    CHECK(larder_open(path, &opts, &db) == LARDER_INVALID_ARGUMENT && db == NULL);

    /* Read-only: reads work, writes are refused. */
    larder_options_init(&opts);
    opts.flags = LARDER_FLAG_READ_ONLY;
    CHECK(larder_open(path, &opts, &db) == LARDER_OK);
    CHECK(larder_contains(db, "text", 4) == LARDER_OK);
    CHECK(larder_put(db, "x", 1, "y", 1, 0) == LARDER_READ_ONLY);
    CHECK(larder_clear(db) == LARDER_READ_ONLY);
    larder_close(db);
}

/* Present before its time is asked of an hour's TTL, gone after it of a short one and a sleep
 * well past it: no timing a slow machine (or valgrind) can upset. */
static void test_ttl(void) {
    larder *db = open_fresh("ttl.larder", NULL);
    CHECK(larder_put(db, "short", 5, "v", 1, 30) == LARDER_OK);
    CHECK(larder_put(db, "hour", 4, "v", 1, 3600 * 1000) == LARDER_OK);
    CHECK(larder_put(db, "never", 5, "v", 1, LARDER_TTL_NEVER) == LARDER_OK);
    CHECK(larder_contains(db, "hour", 4) == LARDER_OK);
    struct timespec pause = {0, 60 * 1000 * 1000};
    nanosleep(&pause, NULL);
    CHECK(larder_contains(db, "short", 5) == LARDER_NOT_FOUND);
    CHECK(larder_contains(db, "hour", 4) == LARDER_OK);
    CHECK(larder_contains(db, "never", 5) == LARDER_OK);
    larder_close(db);
}

/* larder_options.default_ttl_ms is the TTL of a put with ttl_ms 0, and of no other. */
static void test_default_ttl(void) {
    larder_options opts;
    larder_options_init(&opts);
    opts.default_ttl_ms = 5;
    larder *db = open_fresh("default-ttl.larder", &opts);
    CHECK(larder_put(db, "a", 1, "1", 1, 0) == LARDER_OK);
    CHECK(larder_put(db, "b", 1, "2", 1, LARDER_TTL_NEVER) == LARDER_OK);
    CHECK(larder_put(db, "c", 1, "3", 1, 3600 * 1000) == LARDER_OK);
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    char buf[4];
    size_t len = 0;
    CHECK(larder_get(db, "a", 1, buf, sizeof buf, &len) == LARDER_NOT_FOUND);
    CHECK(larder_get(db, "b", 1, buf, sizeof buf, &len) == LARDER_OK && len == 1 && buf[0] == '2');
    CHECK(larder_get(db, "c", 1, buf, sizeof buf, &len) == LARDER_OK && len == 1 && buf[0] == '3');
    larder_close(db);
}

/* The offset of the first copy of needle in the file at path, or -1. */
static long find_in_file(const char *path, const void *needle, size_t needle_len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    long found = -1;
    size_t size = 0, used = 0;
    unsigned char *bytes = NULL;
    for (;;) {
        if (used == size) {
            size = size ? size * 2 : 1u << 20;
            unsigned char *grown = realloc(bytes, size);
            if (!grown) break;
            bytes = grown;
        }
        size_t n = fread(bytes + used, 1, size - used, f);
        if (n == 0) break;
        used += n;
    }
    fclose(f);
    for (size_t i = 0; bytes && i + needle_len <= used; i++) {
        if (memcmp(bytes + i, needle, needle_len) == 0) {
            found = (long)i;
            break;
        }
    }
    free(bytes);
    return found;
}

/* A stored value whose bytes changed on the disk is LARDER_CORRUPT from every read: nothing of
 * it is copied, lent or allocated. */
static void test_damaged_value(void) {
    char path[512];
    path_for(path, sizeof path, "damaged.larder");
    larder *db = open_fresh("damaged.larder", NULL);
    char value[64];
    for (size_t i = 0; i < sizeof value; i++) value[i] = (char)('A' + i % 26);
    memcpy(value, "a value to damage:", 18);
    CHECK(larder_put(db, "victim", 6, value, sizeof value, 0) == LARDER_OK);
    CHECK(larder_put(db, "bystander", 9, "fine", 4, 0) == LARDER_OK);
    CHECK(larder_close(db) == LARDER_OK);

    long offset = find_in_file(path, value, sizeof value);
    CHECK(offset > 0);
    if (offset <= 0) return;
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fseek(f, offset + 40, SEEK_SET) == 0 && fputc(value[40] ^ 0x01, f) != EOF);
    fclose(f);

    CHECK(larder_open(path, NULL, &db) == LARDER_OK);
    char buf[128];
    memset(buf, 0xAA, sizeof buf);
    size_t len = 12345;
    CHECK(larder_get(db, "victim", 6, buf, sizeof buf, &len) == LARDER_CORRUPT);
    void *copy = (void *)buf;
    CHECK(larder_get_alloc(db, "victim", 6, &copy, &len) == LARDER_CORRUPT && copy == NULL);
    struct lent seen;
    memset(&seen, 0, sizeof seen);
    CHECK(larder_with_value(db, "victim", 6, look_at_value, &seen) == LARDER_CORRUPT && seen.calls == 0);
    CHECK(larder_get(db, "bystander", 9, buf, sizeof buf, &len) == LARDER_OK && len == 4 && memcmp(buf, "fine", 4) == 0);
    larder_close(db);
}

/* A child process forked after larder_open: the handle it inherits returns LARDER_CLOSED from
 * every call, and larder_close on it leaves the file to the parent, which writes on and closes
 * the file cleanly; a handle the child opens itself reads and writes. */
static void test_fork(void) {
    char path[512];
    path_for(path, sizeof path, "fork.larder");
    larder *db = open_fresh("fork.larder", NULL);
    CHECK(larder_put(db, "parent", 6, "p", 1, 0) == LARDER_OK);
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) {
        int failures = 0;
        char buf[8];
        size_t len = 0;
        if (larder_get(db, "parent", 6, buf, sizeof buf, &len) != LARDER_CLOSED) failures |= 1;
        if (larder_put(db, "inherited", 9, "x", 1, 0) != LARDER_CLOSED) failures |= 2;
        if (larder_close(db) != LARDER_OK) failures |= 4;
        larder *own = NULL;
        if (larder_open(path, NULL, &own) != LARDER_OK) {
            failures |= 8;
        } else {
            if (larder_get(own, "parent", 6, buf, sizeof buf, &len) != LARDER_OK || len != 1 || buf[0] != 'p') failures |= 16;
            if (larder_put(own, "child", 5, "c", 1, 0) != LARDER_OK) failures |= 32;
            if (larder_close(own) != LARDER_OK) failures |= 64;
        }
        _exit(failures);
    }
    CHECK(child > 0);
    int status = -1;
    CHECK(child > 0 && waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fprintf(stderr, "fork child status %d\n", status);
    char buf[8];
    size_t len = 0;
    CHECK(larder_get(db, "child", 5, buf, sizeof buf, &len) == LARDER_OK && len == 1 && buf[0] == 'c');
    CHECK(larder_put(db, "after", 5, "a", 1, 0) == LARDER_OK);
    CHECK(larder_close(db) == LARDER_OK);
    CHECK(larder_open(path, NULL, &db) == LARDER_OK);
    struct larder_stats stats = {.struct_size = sizeof stats};
    CHECK(larder_stats(db, &stats) == LARDER_OK && stats.recoveries == 0);
    CHECK(larder_get(db, "after", 5, buf, sizeof buf, &len) == LARDER_OK && len == 1 && buf[0] == 'a');
    larder_close(db);
}

/* A buffer too small gets the value's length and not a byte of the value: plain or compressed. */
static void test_buffer_too_small(void) {
    larder_options opts;
    larder_options_init(&opts);
    opts.compression = LARDER_COMPRESSION_LZ4;
    larder *db = open_fresh("too-small.larder", &opts);
    char plain[100], packed[4000];
    for (size_t i = 0; i < sizeof plain; i++) plain[i] = (char)(i * 7);
    memset(packed, 'p', sizeof packed);
    CHECK(larder_put(db, "plain", 5, plain, sizeof plain, 0) == LARDER_OK);
    CHECK(larder_put(db, "packed", 6, packed, sizeof packed, 0) == LARDER_OK);
    const char *keys[2] = {"plain", "packed"};
    size_t lengths[2] = {sizeof plain, sizeof packed};
    for (int k = 0; k < 2; k++) {
        unsigned char buf[99];
        memset(buf, 0xAA, sizeof buf);
        size_t len = 0;
        CHECK(larder_get(db, keys[k], strlen(keys[k]), buf, sizeof buf, &len) == LARDER_BUFFER_TOO_SMALL);
        CHECK(len == lengths[k]);
        int untouched = 1;
        for (size_t i = 0; i < sizeof buf; i++) untouched &= buf[i] == 0xAA;
        CHECK(untouched);
    }
    larder_close(db);
}

static uint64_t entry_count(larder *db) {
    struct larder_stats s = {.struct_size = sizeof s};
    CHECK(larder_stats(db, &s) == LARDER_OK);
    return s.entries;
}

static void put_numbered(larder *db, const char *prefix, int count, uint64_t ttl_ms) {
    char value[100];
    memset(value, 'v', sizeof value);
    for (int i = 0; i < count; i++) {
        char key[32];
        int n = snprintf(key, sizeof key, "%s%d", prefix, i);
        CHECK(larder_put(db, key, (size_t)n, value, sizeof value, ttl_ms) == LARDER_OK);
    }
}

static void test_maintenance(void) {
    larder *db = open_fresh("maintenance.larder", NULL);
    char value[100];
    size_t len;
    uint64_t removed = 99;

    /* Expired entries go now; the others stay. */
    put_numbered(db, "soon", 3, 1);
    put_numbered(db, "keep", 5, 0);
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    CHECK(larder_remove_expired(db, &removed) == LARDER_OK && removed == 3);
    CHECK(entry_count(db) == 5);
    CHECK(larder_remove_expired(db, NULL) == LARDER_OK);

    /* A limit by age: none of the five is an hour old. */
    CHECK(larder_remove_older(db, 3600 * 1000, &removed) == LARDER_OK && removed == 0 && entry_count(db) == 5);

    /* Limits by count and bytes evict the entries not read first. */
    CHECK(larder_get(db, "keep0", 5, value, sizeof value, &len) == LARDER_OK);
    CHECK(larder_get(db, "keep1", 5, value, sizeof value, &len) == LARDER_OK);
    CHECK(larder_trim_count(db, 2, &removed) == LARDER_OK && removed == 3 && entry_count(db) == 2);
    CHECK(larder_contains(db, "keep0", 5) == LARDER_OK && larder_contains(db, "keep1", 5) == LARDER_OK);
    CHECK(larder_trim_count(db, UINT64_MAX, &removed) == LARDER_OK && removed == 0);
    CHECK(larder_trim_bytes(db, 150, &removed) == LARDER_OK && removed == 1 && entry_count(db) == 1);
    CHECK(larder_trim_bytes(db, UINT64_MAX, &removed) == LARDER_OK && removed == 0 && entry_count(db) == 1);

    /* Every entry is older than 0 ms once a millisecond has passed. */
    nanosleep(&pause, NULL);
    CHECK(larder_remove_older(db, 0, &removed) == LARDER_OK && removed == 1 && entry_count(db) == 0);

    /* By key prefix: only keys that begin with all its bytes. */
    put_numbered(db, "user/1/", 3, 0);
    put_numbered(db, "user/2/", 2, 0);
    put_numbered(db, "user/1", 1, 0); /* "user/10": not under "user/1/" */
    CHECK(larder_delete_prefix(db, "user/1/", 7, &removed) == LARDER_OK && removed == 3);
    CHECK(entry_count(db) == 3 && larder_contains(db, "user/10", 7) == LARDER_OK);
    CHECK(larder_delete_prefix(db, "nothing", 7, &removed) == LARDER_OK && removed == 0);
    /* A prefix longer than any key matches none, and its bytes are not read: a length computed
     * wrong read (and copied) that many bytes from the one given. */
    CHECK(larder_delete_prefix(db, "user/", (size_t)1 << 62, &removed) == LARDER_OK && removed == 0);
    CHECK(entry_count(db) == 3);

    /* Refusals leave the cache and *removed as they were. */
    removed = 99;
    CHECK(larder_remove_expired(NULL, &removed) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_remove_older(NULL, 0, &removed) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_trim_bytes(NULL, 0, &removed) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_trim_count(NULL, 0, &removed) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_delete_prefix(NULL, "u", 1, &removed) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_delete_prefix(db, NULL, 1, &removed) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_delete_prefix(db, "u", (size_t)-1, &removed) == LARDER_TOO_LARGE);
    CHECK(removed == 99 && entry_count(db) == 3);
    char path[512];
    path_for(path, sizeof path, "maintenance.larder");
    larder_options opts;
    larder_options_init(&opts);
    opts.flags = LARDER_FLAG_READ_ONLY;
    larder *reader = NULL;
    CHECK(larder_open(path, &opts, &reader) == LARDER_OK);
    CHECK(larder_trim_count(reader, 0, &removed) == LARDER_READ_ONLY);
    CHECK(larder_delete_prefix(reader, "user", 4, &removed) == LARDER_READ_ONLY);
    CHECK(removed == 99);
    larder_close(reader);
    CHECK(entry_count(db) == 3);

    /* The empty prefix is every key. */
    CHECK(larder_delete_prefix(db, NULL, 0, &removed) == LARDER_OK && removed == 3 && entry_count(db) == 0);
    larder_close(db);
}

static void test_too_large_and_full_cache(void) {
    larder_options opts;
    larder_options_init(&opts);
    opts.capacity_bytes = 1u << 20;
    larder *db = open_fresh("small.larder", &opts);
    size_t big = 2u << 20;
    char *value = malloc(big);
    memset(value, 7, big);
    CHECK(larder_put(db, "big", 3, value, big, 0) == LARDER_TOO_LARGE);
    /* A full cache keeps taking values. */
    for (int i = 0; i < 400; i++) {
        char key[32];
        int n = snprintf(key, sizeof key, "blob-%d", i);
        CHECK(larder_put(db, key, (size_t)n, value, 10000, 0) == LARDER_OK);
    }
    struct larder_stats s = {sizeof s, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(larder_stats(db, &s) == LARDER_OK && s.evictions > 0 && s.file_bytes <= (1u << 20));
    CHECK(larder_contains(db, "blob-399", 8) == LARDER_OK);
    free(value);
    larder_close(db);
}

static void test_stats_struct_size(void) {
    larder *db = open_fresh("stats.larder", NULL);
    CHECK(larder_put(db, "a", 1, "1", 1, 0) == LARDER_OK);
    /* An older, shorter struct: only its fields are written. */
    struct {
        uint32_t struct_size, reserved;
        uint64_t entries;
        uint64_t guard;
    } old;
    old.struct_size = 16;
    old.guard = 0xDEADBEEF;
    CHECK(larder_stats(db, (struct larder_stats *)(void *)&old) == LARDER_OK);
    CHECK(old.entries == 1 && old.guard == 0xDEADBEEF);
    larder_close(db);
}

static void test_entry_info(void) {
    larder *db = open_fresh("entry.larder", NULL);
    time_t before = time(NULL);
    CHECK(larder_put(db, "k", 1, "value", 5, 60000) == LARDER_OK);
    struct larder_entry_info info;
    memset(&info, 0xFF, sizeof info);
    info.struct_size = sizeof info;
    CHECK(larder_entry_info(db, "k", 1, &info) == LARDER_OK);
    CHECK(info.struct_size == sizeof info && info.size == 5 && info.stored_size == 5 && info.record_size >= 48 + 6);
    CHECK(info.compressed == 0 && info.read == 0 && info.sliding == 0 && info.reserved == 0);
    CHECK(info.stored_at / 1000 + 1 >= (uint64_t)before && info.expires_at >= info.stored_at + 59000);
    char buf[8];
    size_t len = 0;
    CHECK(larder_get(db, "k", 1, buf, sizeof buf, &len) == LARDER_OK);
    CHECK(larder_entry_info(db, "k", 1, &info) == LARDER_OK && info.read == 1);
    CHECK(larder_entry_info(db, "absent", 6, &info) == LARDER_NOT_FOUND);
    CHECK(larder_put_sliding(db, "s", 1, "v", 1, 60000) == LARDER_OK);
    CHECK(larder_entry_info(db, "s", 1, &info) == LARDER_OK && info.sliding == 1);
    CHECK(info.expires_at >= info.stored_at + 59000);
    CHECK(larder_entry_info(db, "k", 1, NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_entry_info(db, NULL, 0, &info) == LARDER_INVALID_ARGUMENT);
    info.struct_size = 4;
    CHECK(larder_entry_info(db, "k", 1, &info) == LARDER_INVALID_ARGUMENT);
    /* An older, shorter struct: only its fields are written. */
    struct {
        uint32_t struct_size;
        uint8_t compressed, read, sliding, reserved;
        uint64_t size;
        uint64_t guard;
    } old;
    old.struct_size = 16;
    old.guard = 0xDEADBEEF;
    CHECK(larder_entry_info(db, "k", 1, (struct larder_entry_info *)(void *)&old) == LARDER_OK);
    CHECK(old.size == 5 && old.struct_size == 16 && old.guard == 0xDEADBEEF);
    larder_close(db);
}

static void test_suspend_resume(void) {
    larder *db = open_fresh("suspend.larder", NULL);
    CHECK(larder_put(db, "k", 1, "value", 5, 0) == LARDER_OK);
    CHECK(larder_suspend(db) == LARDER_OK);
    CHECK(larder_suspend(db) == LARDER_OK);
    char buf[8];
    size_t len = 0;
    CHECK(larder_get(db, "k", 1, buf, sizeof buf, &len) == LARDER_SUSPENDED);
    CHECK(strstr(larder_last_error_message(), "suspended") != NULL);
    CHECK(larder_put(db, "k", 1, "v", 1, 0) == LARDER_SUSPENDED);
    CHECK(strcmp(larder_strerror(LARDER_SUSPENDED), "suspended") == 0);
    /* Nothing holds the file meanwhile: another handle may open it alone and change it. */
    char path[512];
    path_for(path, sizeof path, "suspend.larder");
    larder *other = NULL;
    CHECK(larder_open(path, NULL, &other) == LARDER_OK);
    CHECK(larder_put(other, "m", 1, "meanwhile", 9, 0) == LARDER_OK);
    CHECK(larder_close(other) == LARDER_OK);
    CHECK(larder_resume(db) == LARDER_OK);
    CHECK(larder_resume(db) == LARDER_OK);
    CHECK(larder_get(db, "m", 1, buf, sizeof buf, &len) == LARDER_BUFFER_TOO_SMALL && len == 9);
    CHECK(larder_get(db, "k", 1, buf, sizeof buf, &len) == LARDER_OK && len == 5);
    CHECK(larder_suspend(NULL) == LARDER_INVALID_ARGUMENT && larder_resume(NULL) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_suspend(db) == LARDER_OK);
    CHECK(larder_close(db) == LARDER_OK);
}

struct walk { int count; size_t bytes; };

static int count_entries(void *ctx, const void *key, size_t key_len, size_t value_len) {
    struct walk *w = ctx;
    (void)key;
    (void)key_len;
    w->count++;
    w->bytes += value_len;
    return 0;
}

static int stop_early(void *ctx, const void *key, size_t key_len, size_t value_len) {
    (void)key;
    (void)key_len;
    (void)value_len;
    return ++*(int *)ctx == 3 ? 42 : 0;
}

static larder *walk_db;

/* The walk holds no lock while its callback runs: the callback may delete what it is given. */
static int delete_inside(void *ctx, const void *key, size_t key_len, size_t value_len) {
    (void)value_len;
    if (larder_delete(walk_db, key, key_len) != LARDER_OK) return 1;
    ++*(int *)ctx;
    return 0;
}

/* larder_close from inside a callback of the same handle must not free it mid-iteration. */
static int close_inside(void *ctx, const void *key, size_t key_len, size_t value_len) {
    (void)key;
    (void)key_len;
    (void)value_len;
    /* Refused, with a message; the handle still works. */
    int refused = larder_close(walk_db) == LARDER_INVALID_ARGUMENT && strlen(larder_last_error_message()) > 0;
    *(int *)ctx = refused ? larder_contains(walk_db, "k1", 2) : -1;
    return 100;
}

static void test_foreach_clear_sync(void) {
    larder *db = open_fresh("walk.larder", NULL);
    for (int i = 0; i < 10; i++) {
        char key[16];
        int n = snprintf(key, sizeof key, "k%d", i);
        CHECK(larder_put(db, key, (size_t)n, "12345", (size_t)(i % 5), 0) == LARDER_OK);
    }
    struct walk w = {0, 0};
    CHECK(larder_foreach(db, count_entries, &w) == LARDER_OK);
    CHECK(w.count == 10 && w.bytes == 20);
    int seen = 0;
    CHECK(larder_foreach(db, stop_early, &seen) == 42 && seen == 3);
    int inner = 0;
    walk_db = db;
    CHECK(larder_foreach(db, close_inside, &inner) == 100 && inner == LARDER_OK);
    inner = 0;
    CHECK(larder_foreach(db, delete_inside, &inner) == LARDER_OK && inner == 10);
    w.count = 0;
    CHECK(larder_foreach(db, count_entries, &w) == LARDER_OK && w.count == 0);
    CHECK(larder_put(db, "k1", 2, "1", 1, 0) == LARDER_OK);
    CHECK(larder_sync(db) == LARDER_OK);
    CHECK(larder_clear(db) == LARDER_OK);
    w.count = 0;
    CHECK(larder_foreach(db, count_entries, &w) == LARDER_OK && w.count == 0);
    /* A close that closed leaves no earlier call's message behind: its message is its answer. */
    CHECK(larder_put(db, NULL, 1, "1", 1, 0) == LARDER_INVALID_ARGUMENT && strlen(larder_last_error_message()) > 0);
    CHECK(larder_close(db) == LARDER_OK);
    CHECK(strcmp(larder_last_error_message(), "") == 0);
    CHECK(larder_close(NULL) == LARDER_OK);
}

static void test_strings(void) {
    CHECK(strcmp(larder_strerror(LARDER_OK), "ok") == 0);
    CHECK(strcmp(larder_strerror(LARDER_NOT_FOUND), "not found") == 0);
    CHECK(strcmp(larder_strerror(LARDER_CORRUPT), "corrupt file") == 0);
    CHECK(strcmp(larder_strerror(12345), "unknown status") == 0);
    CHECK(strlen(larder_version()) > 0);
}

static void test_reopen(void) {
    char path[512];
    path_for(path, sizeof path, "reopen.larder");
    unlink(path);
    larder *db;
    CHECK(larder_open(path, NULL, &db) == LARDER_OK);
    CHECK(larder_put(db, "persist", 7, "yes", 3, 0) == LARDER_OK);
    larder_close(db);
    CHECK(larder_open(path, NULL, &db) == LARDER_OK);
    char buf[8];
    size_t len;
    CHECK(larder_get(db, "persist", 7, buf, sizeof buf, &len) == LARDER_OK && len == 3 && memcmp(buf, "yes", 3) == 0);
    /* A second handle on the same file shares it; each closes on its own. */
    larder *second = NULL;
    CHECK(larder_open(path, NULL, &second) == LARDER_OK && second != NULL);
    CHECK(larder_put(second, "both", 4, "1", 1, 0) == LARDER_OK);
    CHECK(larder_contains(db, "both", 4) == LARDER_OK);
    larder_close(second);
    CHECK(larder_contains(db, "both", 4) == LARDER_OK);
    larder_close(db);
}

/* ---- Threads sharing one handle ---- */

#define THREADS 4
#define STEPS 2000

struct worker { larder *db; int id; int wrong; int errors; };

static void value_for(int key, int version, char *out, size_t *len) {
    *len = (size_t)snprintf(out, 64, "key=%d version=%d", key, version);
}

static void *work(void *arg) {
    struct worker *w = arg;
    unsigned state = (unsigned)w->id * 2654435761u + 1;
    for (int step = 0; step < STEPS; step++) {
        state = state * 1103515245u + 12345u;
        int key = (int)((state >> 8) % 200);
        char k[16], v[64], got[64];
        int klen = snprintf(k, sizeof k, "k%d", key);
        size_t vlen, glen;
        if ((state >> 4) % 3 == 0) {
            value_for(key, w->id * STEPS + step, v, &vlen);
            if (larder_put(w->db, k, (size_t)klen, v, vlen, 0) != LARDER_OK) w->errors++;
        } else {
            int rc = larder_get(w->db, k, (size_t)klen, got, sizeof got - 1, &glen);
            if (rc == LARDER_OK) {
                got[glen] = 0;
                int stored_key = -1, version = -1;
                if (sscanf(got, "key=%d version=%d", &stored_key, &version) != 2 || stored_key != key) w->wrong++;
            } else if (rc != LARDER_NOT_FOUND) {
                w->errors++;
            }
        }
    }
    return NULL;
}

static void test_threads(void) {
    larder *db = open_fresh("threads.larder", NULL);
    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (struct worker){db, i, 0, 0};
        CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(workers[i].wrong == 0);
        CHECK(workers[i].errors == 0);
    }
    larder_close(db);
}

/* Watching: a child process writes; the parent sleeps in larder_wait_change, then reads what
 * changed by key hash. A wait with nothing to wait for times out; a reader far behind is told
 * that changes were lost. */
static void test_watching(void) {
    char path[512];
    path_for(path, sizeof path, "watch.larder");
    larder *db = open_fresh("watch.larder", NULL);
    uint64_t cursor = 0;
    CHECK(larder_change_cursor(db, &cursor) == LARDER_OK);
    CHECK(larder_wait_change(db, cursor, 1) == LARDER_NOT_FOUND);
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) {
        larder *own = NULL;
        int failures = larder_open(path, NULL, &own) != LARDER_OK;
        if (!failures) {
            failures |= larder_put(own, "w", 1, "1", 1, 0) != LARDER_OK;
            failures |= larder_delete(own, "w", 1) != LARDER_OK;
            failures |= larder_close(own) != LARDER_OK;
        }
        _exit(failures);
    }
    CHECK(child > 0);
    larder_change changes[4];
    size_t count = 0, seen = 0;
    uint32_t kinds[2] = {0, 0};
    /* The child's start and writes take seconds at most, longer under valgrind on a loaded
     * machine: a wait that ends without a change in two minutes is a wake-up that never came. */
    while (seen < 2 && larder_wait_change(db, cursor, 120000) == LARDER_OK) {
        CHECK(larder_read_changes(db, &cursor, changes, 4, &count) == LARDER_OK);
        for (size_t i = 0; i < count && seen < 2; i++) {
            CHECK(changes[i].key_hash == larder_key_hash("w", 1));
            kinds[seen++] = changes[i].kind;
        }
    }
    CHECK(kinds[0] == LARDER_CHANGE_STORED && kinds[1] == LARDER_CHANGE_REMOVED);
    int status = -1;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    uint64_t behind = cursor;
    for (int i = 0; i < 300; i++) CHECK(larder_put(db, "many", 4, "x", 1, 0) == LARDER_OK);
    CHECK(larder_read_changes(db, &behind, changes, 4, &count) == LARDER_OK);
    CHECK(count == 1 && changes[0].kind == LARDER_CHANGE_LOST);
    CHECK(larder_read_changes(db, &behind, changes, 4, &count) == LARDER_OK && count == 0);
    CHECK(larder_read_changes(db, NULL, changes, 4, &count) == LARDER_INVALID_ARGUMENT);
    CHECK(larder_change_cursor(NULL, &cursor) == LARDER_INVALID_ARGUMENT);
    larder_close(db);
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(directory, sizeof directory, "%s/larder-c-test-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(directory)) {
        perror("mkdtemp");
        return 2;
    }
    test_put_get_delete();
    test_with_value();
    test_get_many();
    test_put_many();
    test_delete_many();
    test_invalid_arguments();
    test_open_errors_and_options();
    test_ttl();
    test_default_ttl();
    test_damaged_value();
    test_fork();
    test_buffer_too_small();
    test_maintenance();
    test_too_large_and_full_cache();
    test_stats_struct_size();
    test_entry_info();
    test_suspend_resume();
    test_foreach_clear_sync();
    test_strings();
    test_reopen();
    test_threads();
    test_watching();

    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", directory);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", directory);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
