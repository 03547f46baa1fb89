/* Larder through its C ABI (include/larder.h, libLarderC), one handle shared by threads. */
#include "CPeers.h"
#include "peer_util.h"
#include "../../../include/larder.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static void *lc_open(const bench_config *config) {
    char path[PATH_MAX];
    bench_path(path, sizeof path, config->dir, "cache.larder");
    larder_options opts;
    larder_options_init(&opts);
    opts.capacity_bytes = config->capacity_bytes;
    if (config->read_only) opts.flags |= LARDER_FLAG_READ_ONLY;
    larder *db = NULL;
    int rc = larder_open(path, &opts, &db);
    if (rc != LARDER_OK) {
        bench_set_error("larder_open: %s (%s)", larder_strerror(rc), larder_last_error_message());
        return NULL;
    }
    /* LARDER_BENCH_WATCHED=1: the handle counts as a watcher (its change cursor), so that every
     * write fills its change slot and wakes waiters, as with a watcher of any process. */
    const char *watched = getenv("LARDER_BENCH_WATCHED");
    if (watched && strcmp(watched, "1") == 0 && !config->read_only) {
        uint64_t cursor;
        larder_change_cursor(db, &cursor);
    }
    return db;
}

static int lc_put(void *handle, const void *key, size_t key_len, const void *value, size_t value_len) {
    int rc = larder_put(handle, key, key_len, value, value_len, 0);
    if (rc != LARDER_OK) bench_set_error("larder_put: %s (%s)", larder_strerror(rc), larder_last_error_message());
    return rc == LARDER_OK ? 0 : -1;
}

static int lc_get(void *handle, const void *key, size_t key_len, void *buf, size_t buf_len, size_t *value_len) {
    int rc = larder_get(handle, key, key_len, buf, buf_len, value_len);
    if (rc == LARDER_OK) return BENCH_FOUND;
    if (rc == LARDER_NOT_FOUND) return BENCH_NOT_FOUND;
    bench_set_error("larder_get: %s (%s)", larder_strerror(rc), larder_last_error_message());
    return BENCH_ERROR;
}

static int lc_del(void *handle, const void *key, size_t key_len) {
    int rc = larder_delete(handle, key, key_len);
    if (rc == LARDER_OK) return BENCH_FOUND;
    if (rc == LARDER_NOT_FOUND) return BENCH_NOT_FOUND;
    bench_set_error("larder_delete: %s (%s)", larder_strerror(rc), larder_last_error_message());
    return BENCH_ERROR;
}

static void lc_close(void *handle) { larder_close(handle); }

const bench_peer bench_peer_larder_c = {
    .name = "larder-c", .shared_handle = 1, .multi_process = 1, .multi_process_writer = 1,
    .open = lc_open, .put = lc_put, .get = lc_get, .del = lc_del, .close = lc_close,
};

/* One call of a batched Larder function on the BENCH_BATCH operations at `ops`, its outcomes
 * added to *r. */
typedef void (*lc_batch_fn)(void *handle, const bench_data *data, const uint32_t *ops, void *bufs, bench_result *r);

/* The loop of the batched measurements: `batch` over ops, BENCH_BATCH at a time, until max_ns
 * (0 = no limit), checked every 256 operations, as bench_run_ops checks it. */
static void lc_run_batches(void *handle, const bench_data *data, const uint32_t *ops, size_t ops_count,
                           uint64_t max_ns, void *bufs, lc_batch_fn batch, bench_result *out) {
    bench_result r = {0};
    uint64_t start = bench_now_ns();
    uint64_t deadline = max_ns ? start + max_ns : UINT64_MAX;
    size_t i = 0;
    while (i + BENCH_BATCH <= ops_count) {
        size_t end = i + 256 <= ops_count ? i + 256 : ops_count;
        for (; i + BENCH_BATCH <= end; i += BENCH_BATCH) batch(handle, data, ops + i, bufs, &r);
        if (max_ns && bench_now_ns() >= deadline) break;
    }
    r.nanoseconds = bench_now_ns() - start;
    r.ops = i;
    *out = r;
}

/* A whole batch refused by the call itself. */
static void lc_batch_failed(const char *call, bench_result *r) {
    bench_set_error("%s: %s", call, larder_last_error_message());
    r->errors += BENCH_BATCH;
}

/* One request's status: `right` says whether an OK answer is the one expected. */
static void lc_count(int status, int right, bench_result *r) {
    if (status == LARDER_OK && right) r->found++;
    else if (status == LARDER_NOT_FOUND) r->not_found++;
    else r->errors++;
}

static void lc_get_batch(void *handle, const bench_data *data, const uint32_t *ops, void *bufs, bench_result *r) {
    larder_get_request requests[BENCH_BATCH];
    for (size_t j = 0; j < BENCH_BATCH; j++) {
        uint32_t index = ops[j] & BENCH_OP_INDEX_MASK;
        requests[j].key = bench_key(data, index);
        requests[j].key_len = data->key_lens[index];
        requests[j].buf = (uint8_t *)bufs + j * data->value_len;
        requests[j].buf_len = data->value_len;
    }
    if (larder_get_many(handle, requests, BENCH_BATCH) != LARDER_OK) return lc_batch_failed("larder_get_many", r);
    for (size_t j = 0; j < BENCH_BATCH; j++) lc_count(requests[j].status, requests[j].value_len == data->value_len, r);
}

static void lc_put_batch(void *handle, const bench_data *data, const uint32_t *ops, void *bufs, bench_result *r) {
    (void)bufs;
    larder_put_request requests[BENCH_BATCH];
    for (size_t j = 0; j < BENCH_BATCH; j++) {
        uint32_t index = ops[j] & BENCH_OP_INDEX_MASK;
        requests[j].key = bench_key(data, index);
        requests[j].key_len = data->key_lens[index];
        requests[j].value = data->values + (index % data->value_variants) * data->value_step;
        requests[j].value_len = data->value_len;
        requests[j].ttl_ms = 0;
    }
    if (larder_put_many(handle, requests, BENCH_BATCH) != LARDER_OK) return lc_batch_failed("larder_put_many", r);
    for (size_t j = 0; j < BENCH_BATCH; j++) lc_count(requests[j].status, 1, r);
}

static void lc_delete_batch(void *handle, const bench_data *data, const uint32_t *ops, void *bufs, bench_result *r) {
    (void)bufs;
    larder_delete_request requests[BENCH_BATCH];
    for (size_t j = 0; j < BENCH_BATCH; j++) {
        uint32_t index = ops[j] & BENCH_OP_INDEX_MASK;
        requests[j].key = bench_key(data, index);
        requests[j].key_len = data->key_lens[index];
    }
    if (larder_delete_many(handle, requests, BENCH_BATCH) != LARDER_OK) return lc_batch_failed("larder_delete_many", r);
    for (size_t j = 0; j < BENCH_BATCH; j++) lc_count(requests[j].status, 1, r);
}

void bench_larder_c_batched_gets(void *handle, const bench_data *data, const uint32_t *ops, size_t ops_count,
                                 uint64_t max_ns, void *bufs, bench_result *out) {
    lc_run_batches(handle, data, ops, ops_count, max_ns, bufs, lc_get_batch, out);
}

void bench_larder_c_batched_puts(void *handle, const bench_data *data, const uint32_t *ops, size_t ops_count,
                                 uint64_t max_ns, bench_result *out) {
    lc_run_batches(handle, data, ops, ops_count, max_ns, NULL, lc_put_batch, out);
}

void bench_larder_c_batched_deletes(void *handle, const bench_data *data, const uint32_t *ops, size_t ops_count,
                                    bench_result *out) {
    lc_run_batches(handle, data, ops, ops_count, 0, NULL, lc_delete_batch, out);
}
