/* LMDB as a cache would use it: MDB_NOSYNC | MDB_WRITEMAP, one transaction per operation. Reads
 * reuse a per-thread read-only transaction (mdb_txn_reset / mdb_txn_renew), the cheap way LMDB
 * recommends for many short reads. */
#include "CPeers.h"
#include "peer_util.h"

#include <lmdb.h>
#include <stdlib.h>
#include <string.h>

typedef struct lmdb_peer {
    MDB_env *env;
    MDB_dbi dbi;
    int read_only;
} lmdb_peer;

/* One reader transaction per thread (and per environment: the benchmark uses one at a time). */
static _Thread_local MDB_txn *reader;
static _Thread_local MDB_env *reader_env;

static void *lm_open(const bench_config *config) {
    lmdb_peer *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    int rc = mdb_env_create(&p->env);
    if (rc == 0) {
        /* Room for the data, B-tree pages half full, and free pages of copy-on-write. */
        size_t map = (size_t)(config->expected_bytes * 3 + config->expected_keys * 128) + ((size_t)256 << 20);
        rc = mdb_env_set_mapsize(p->env, map);
    }
    if (rc == 0) rc = mdb_env_set_maxreaders(p->env, 126);
    unsigned flags = MDB_NOSUBDIR | MDB_NOTLS | (config->read_only ? MDB_RDONLY : MDB_NOSYNC | MDB_WRITEMAP);
    char path[4096];
    bench_path(path, sizeof path, config->dir, "data.mdb");
    if (rc == 0) rc = mdb_env_open(p->env, path, flags, 0600);
    MDB_txn *txn = NULL;
    if (rc == 0) rc = mdb_txn_begin(p->env, NULL, config->read_only ? MDB_RDONLY : 0, &txn);
    if (rc == 0) rc = mdb_dbi_open(txn, NULL, 0, &p->dbi);
    if (rc == 0) rc = mdb_txn_commit(txn);
    else if (txn) mdb_txn_abort(txn);
    if (rc != 0) {
        bench_set_error("lmdb open: %s", mdb_strerror(rc));
        if (p->env) mdb_env_close(p->env);
        free(p);
        return NULL;
    }
    p->read_only = config->read_only;
    return p;
}

static int lm_put(void *handle, const void *key, size_t key_len, const void *value, size_t value_len) {
    lmdb_peer *p = handle;
    MDB_txn *txn;
    int rc = mdb_txn_begin(p->env, NULL, 0, &txn);
    if (rc == 0) {
        MDB_val k = { key_len, (void *)key }, v = { value_len, (void *)value };
        rc = mdb_put(txn, p->dbi, &k, &v, 0);
        if (rc == 0) rc = mdb_txn_commit(txn);
        else mdb_txn_abort(txn);
    }
    if (rc != 0) bench_set_error("lmdb put: %s", mdb_strerror(rc));
    return rc == 0 ? 0 : -1;
}

static int lm_get(void *handle, const void *key, size_t key_len, void *buf, size_t buf_len, size_t *value_len) {
    lmdb_peer *p = handle;
    int rc;
    if (reader && reader_env == p->env) {
        rc = mdb_txn_renew(reader);
    } else {
        if (reader) mdb_txn_abort(reader);
        reader = NULL;
        rc = mdb_txn_begin(p->env, NULL, MDB_RDONLY, &reader);
        reader_env = p->env;
    }
    if (rc != 0) { bench_set_error("lmdb read txn: %s", mdb_strerror(rc)); return BENCH_ERROR; }
    MDB_val k = { key_len, (void *)key }, v;
    rc = mdb_get(reader, p->dbi, &k, &v);
    if (rc == 0) {
        *value_len = v.mv_size;
        if (v.mv_size <= buf_len) memcpy(buf, v.mv_data, v.mv_size);
    }
    mdb_txn_reset(reader);
    if (rc == 0) return BENCH_FOUND;
    if (rc == MDB_NOTFOUND) return BENCH_NOT_FOUND;
    bench_set_error("lmdb get: %s", mdb_strerror(rc));
    return BENCH_ERROR;
}

static int lm_del(void *handle, const void *key, size_t key_len) {
    lmdb_peer *p = handle;
    MDB_txn *txn;
    int rc = mdb_txn_begin(p->env, NULL, 0, &txn);
    if (rc == 0) {
        MDB_val k = { key_len, (void *)key };
        rc = mdb_del(txn, p->dbi, &k, NULL);
        if (rc == 0) rc = mdb_txn_commit(txn);
        else mdb_txn_abort(txn);
    }
    if (rc == 0) return BENCH_FOUND;
    if (rc == MDB_NOTFOUND) return BENCH_NOT_FOUND;
    bench_set_error("lmdb del: %s", mdb_strerror(rc));
    return BENCH_ERROR;
}

static void lm_thread_done(void *handle) {
    lmdb_peer *p = handle;
    if (reader && reader_env == p->env) mdb_txn_abort(reader);
    reader = NULL;
    reader_env = NULL;
}

static void lm_close(void *handle) {
    lmdb_peer *p = handle;
    if (!p) return;
    lm_thread_done(p);  /* this thread's reader; worker threads release theirs when they end */
    mdb_env_close(p->env);
    free(p);
}

const bench_peer bench_peer_lmdb = {
    .name = "lmdb", .shared_handle = 1, .multi_process = 1, .multi_process_writer = 1,
    .open = lm_open, .put = lm_put, .get = lm_get, .del = lm_del, .close = lm_close,
    .thread_done = lm_thread_done,
};
