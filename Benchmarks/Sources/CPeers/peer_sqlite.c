/* SQLite as app caches use it: a key-value table, WAL, synchronous=OFF, prepared statements, one
 * autocommit statement per operation. A connection serves one thread: threads open their own. */
#include "CPeers.h"
#include "peer_util.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

typedef struct sqlite_peer {
    sqlite3 *db;
    sqlite3_stmt *put, *get, *del;
} sqlite_peer;

static void sq_close(void *handle) {
    sqlite_peer *p = handle;
    if (!p) return;
    sqlite3_finalize(p->put);
    sqlite3_finalize(p->get);
    sqlite3_finalize(p->del);
    sqlite3_close(p->db);
    free(p);
}

static void *sq_open(const bench_config *config) {
    sqlite_peer *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    char path[4096];
    bench_path(path, sizeof path, config->dir, "cache.sqlite");
    int flags = SQLITE_OPEN_NOMUTEX | (config->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path, &p->db, flags, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_busy_timeout(p->db, 10000);
    if (rc == SQLITE_OK && !config->read_only)
        rc = sqlite3_exec(p->db,
                          "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;"
                          "CREATE TABLE IF NOT EXISTS kv(k BLOB PRIMARY KEY, v BLOB NOT NULL);",
                          NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v3(p->db, "SELECT v FROM kv WHERE k = ?1", -1, SQLITE_PREPARE_PERSISTENT, &p->get, NULL);
    if (rc == SQLITE_OK && !config->read_only)
        rc = sqlite3_prepare_v3(p->db, "INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)", -1, SQLITE_PREPARE_PERSISTENT, &p->put, NULL);
    if (rc == SQLITE_OK && !config->read_only)
        rc = sqlite3_prepare_v3(p->db, "DELETE FROM kv WHERE k = ?1", -1, SQLITE_PREPARE_PERSISTENT, &p->del, NULL);
    if (rc != SQLITE_OK) {
        bench_set_error("sqlite open: %s", p->db ? sqlite3_errmsg(p->db) : sqlite3_errstr(rc));
        sq_close(p);
        return NULL;
    }
    return p;
}

static int sq_put(void *handle, const void *key, size_t key_len, const void *value, size_t value_len) {
    sqlite_peer *p = handle;
    sqlite3_bind_blob(p->put, 1, key, (int)key_len, SQLITE_STATIC);
    sqlite3_bind_blob(p->put, 2, value, (int)value_len, SQLITE_STATIC);
    int rc = sqlite3_step(p->put);
    sqlite3_reset(p->put);
    if (rc == SQLITE_DONE) return 0;
    bench_set_error("sqlite put: %s", sqlite3_errmsg(p->db));
    return -1;
}

static int sq_get(void *handle, const void *key, size_t key_len, void *buf, size_t buf_len, size_t *value_len) {
    sqlite_peer *p = handle;
    sqlite3_bind_blob(p->get, 1, key, (int)key_len, SQLITE_STATIC);
    int rc = sqlite3_step(p->get), result;
    if (rc == SQLITE_ROW) {
        const void *v = sqlite3_column_blob(p->get, 0);
        size_t n = (size_t)sqlite3_column_bytes(p->get, 0);
        *value_len = n;
        if (n <= buf_len && n) memcpy(buf, v, n);
        result = BENCH_FOUND;
    } else if (rc == SQLITE_DONE) {
        result = BENCH_NOT_FOUND;
    } else {
        bench_set_error("sqlite get: %s", sqlite3_errmsg(p->db));
        result = BENCH_ERROR;
    }
    sqlite3_reset(p->get);
    return result;
}

static int sq_del(void *handle, const void *key, size_t key_len) {
    sqlite_peer *p = handle;
    sqlite3_bind_blob(p->del, 1, key, (int)key_len, SQLITE_STATIC);
    int rc = sqlite3_step(p->del);
    sqlite3_reset(p->del);
    if (rc != SQLITE_DONE) {
        bench_set_error("sqlite del: %s", sqlite3_errmsg(p->db));
        return BENCH_ERROR;
    }
    return sqlite3_changes(p->db) > 0 ? BENCH_FOUND : BENCH_NOT_FOUND;
}

const bench_peer bench_peer_sqlite = {
    .name = "sqlite", .shared_handle = 0, .multi_process = 1, .multi_process_writer = 1,
    .open = sq_open, .put = sq_put, .get = sq_get, .del = sq_del, .close = sq_close,
};
