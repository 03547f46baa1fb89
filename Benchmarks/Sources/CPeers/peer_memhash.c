/* The ceiling: an in-process, in-memory C hash table (open addressing, linear probing, FNV-1a),
 * holding a malloc'd copy of each key and value, behind a reader-writer lock so that it is as
 * thread-safe as the stores it is compared with. */
#include "CPeers.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    uint64_t hash;      /* 0 = empty */
    uint8_t *item;      /* key then value */
    uint32_t key_len;
    uint32_t value_len;
} entry;

typedef struct memhash {
    pthread_rwlock_t lock;
    entry *slots;
    size_t mask;
    size_t count;
} memhash;

#define TOMBSTONE_ITEM ((uint8_t *)1)

static uint64_t hash_bytes(const void *key, size_t len) {
    const uint8_t *p = key;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    return h ? h : 1;
}

static void *mh_open(const bench_config *config) {
    memhash *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    size_t slots = 1024;
    while (slots < config->expected_keys * 2) slots <<= 1;
    m->slots = calloc(slots, sizeof(entry));
    if (!m->slots) { free(m); return NULL; }
    m->mask = slots - 1;
    pthread_rwlock_init(&m->lock, NULL);
    return m;
}

/* The slot holding key, or NULL. */
static entry *find(memhash *m, uint64_t h, const void *key, size_t key_len) {
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        entry *e = &m->slots[i];
        if (e->hash == 0) return NULL;
        if (e->hash == h && e->item != TOMBSTONE_ITEM && e->key_len == key_len &&
            memcmp(e->item, key, key_len) == 0) return e;
    }
}

static int mh_put(void *handle, const void *key, size_t key_len, const void *value, size_t value_len) {
    memhash *m = handle;
    uint64_t h = hash_bytes(key, key_len);
    uint8_t *item = malloc(key_len + value_len);
    if (!item) return -1;
    memcpy(item, key, key_len);
    memcpy(item + key_len, value, value_len);
    pthread_rwlock_wrlock(&m->lock);
    entry *e = find(m, h, key, key_len);
    if (e) {
        free(e->item);
    } else {
        if ((m->count + 1) * 2 > m->mask + 1) { pthread_rwlock_unlock(&m->lock); free(item); return -1; }
        size_t i = h & m->mask;
        while (m->slots[i].hash != 0 && m->slots[i].item != TOMBSTONE_ITEM) i = (i + 1) & m->mask;
        e = &m->slots[i];
        m->count++;
    }
    e->hash = h;
    e->item = item;
    e->key_len = (uint32_t)key_len;
    e->value_len = (uint32_t)value_len;
    pthread_rwlock_unlock(&m->lock);
    return 0;
}

static int mh_get(void *handle, const void *key, size_t key_len, void *buf, size_t buf_len, size_t *value_len) {
    memhash *m = handle;
    uint64_t h = hash_bytes(key, key_len);
    pthread_rwlock_rdlock(&m->lock);
    entry *e = find(m, h, key, key_len);
    int rc = BENCH_NOT_FOUND;
    if (e) {
        *value_len = e->value_len;
        if (e->value_len <= buf_len) memcpy(buf, e->item + key_len, e->value_len);
        rc = BENCH_FOUND;
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

static int mh_del(void *handle, const void *key, size_t key_len) {
    memhash *m = handle;
    uint64_t h = hash_bytes(key, key_len);
    pthread_rwlock_wrlock(&m->lock);
    entry *e = find(m, h, key, key_len);
    if (e) {
        free(e->item);
        e->item = TOMBSTONE_ITEM;  /* keeps probe chains intact */
        m->count--;
    }
    pthread_rwlock_unlock(&m->lock);
    return e ? BENCH_FOUND : BENCH_NOT_FOUND;
}

static void mh_close(void *handle) {
    memhash *m = handle;
    if (!m) return;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].hash && m->slots[i].item != TOMBSTONE_ITEM) free(m->slots[i].item);
    free(m->slots);
    pthread_rwlock_destroy(&m->lock);
    free(m);
}

const bench_peer bench_peer_memhash = {
    .name = "memhash", .shared_handle = 1, .multi_process = 0, .multi_process_writer = 0,
    .open = mh_open, .put = mh_put, .get = mh_get, .del = mh_del, .close = mh_close,
};
