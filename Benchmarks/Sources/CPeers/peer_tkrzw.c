/* tkrzw's HashDBM (the fastest file hash DBM here) through its C API, tkrzw_langc.h: memory-mapped
 * file, in-place updates, buckets sized for the keys, no sync. Reads copy the value into the
 * caller's buffer from inside a record processor, so no read allocates. */
#include "CPeers.h"
#include "peer_util.h"

#include <tkrzw_langc.h>
#include <string.h>

static void *tk_open(const bench_config *config) {
    char path[4096], params[256];
    bench_path(path, sizeof path, config->dir, "data.tkh");
    snprintf(params, sizeof params,
             "dbm=HashDBM,file=MemoryMapParallelFile,update_mode=UPDATE_IN_PLACE,num_buckets=%llu",
             (unsigned long long)(config->expected_keys * 2 + 1024));
    TkrzwDBM *dbm = tkrzw_dbm_open(path, !config->read_only, params);
    if (!dbm) bench_set_error("tkrzw_dbm_open: %s", tkrzw_get_last_status_message());
    return dbm;
}

static int tk_put(void *handle, const void *key, size_t key_len, const void *value, size_t value_len) {
    if (tkrzw_dbm_set(handle, key, (int32_t)key_len, value, (int32_t)value_len, true)) return 0;
    bench_set_error("tkrzw_dbm_set: %s", tkrzw_get_last_status_message());
    return -1;
}

typedef struct copy_target {
    void *buf;
    size_t buf_len;
    size_t *value_len;
    int found;
} copy_target;

static const char *copy_value(void *arg, const char *key, int32_t key_size, const char *value,
                              int32_t value_size, int32_t *new_value_size) {
    (void)key; (void)key_size; (void)new_value_size;
    copy_target *t = arg;
    if (value) {
        t->found = 1;
        *t->value_len = (size_t)value_size;
        if ((size_t)value_size <= t->buf_len) memcpy(t->buf, value, (size_t)value_size);
    }
    return TKRZW_REC_PROC_NOOP;
}

static int tk_get(void *handle, const void *key, size_t key_len, void *buf, size_t buf_len, size_t *value_len) {
    copy_target t = { buf, buf_len, value_len, 0 };
    if (!tkrzw_dbm_process(handle, key, (int32_t)key_len, copy_value, &t, false)) {
        bench_set_error("tkrzw_dbm_process: %s", tkrzw_get_last_status_message());
        return BENCH_ERROR;
    }
    return t.found ? BENCH_FOUND : BENCH_NOT_FOUND;
}

static int tk_del(void *handle, const void *key, size_t key_len) {
    if (tkrzw_dbm_remove(handle, key, (int32_t)key_len)) return BENCH_FOUND;
    if (tkrzw_get_last_status_code() == TKRZW_STATUS_NOT_FOUND_ERROR) return BENCH_NOT_FOUND;
    bench_set_error("tkrzw_dbm_remove: %s", tkrzw_get_last_status_message());
    return BENCH_ERROR;
}

static void tk_close(void *handle) {
    if (handle) tkrzw_dbm_close(handle);
}

const bench_peer bench_peer_tkrzw = {
    .name = "tkrzw", .shared_handle = 1, .multi_process = 1, .multi_process_writer = 0,
    .open = tk_open, .put = tk_put, .get = tk_get, .del = tk_del, .close = tk_close,
};
