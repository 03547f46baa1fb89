/*
 * CPeers: the stores Larder is measured against, each behind the same small vtable, and the one
 * C loop that measures them (Larder's C ABI included). Swift only orchestrates; Larder's Swift API
 * is measured by a Swift loop that mirrors bench_run_ops exactly.
 */
#ifndef CPEERS_H
#define CPEERS_H

#include <stddef.h>
#include <stdint.h>

/* How a store is opened: a directory of its own, and the sizes it should plan for. */
typedef struct bench_config {
    const char *dir;          /* an empty directory the store owns */
    uint64_t expected_keys;   /* how many keys the run stores at most */
    uint64_t expected_bytes;  /* keys + values, in bytes */
    uint64_t capacity_bytes;  /* Larder: the file's capacity */
    int read_only;            /* open an existing store without writing (reader processes) */
} bench_config;

/* Status of get and del: found, not found, or a failure (a bug or an I/O error). */
#define BENCH_FOUND 0
#define BENCH_NOT_FOUND 1
#define BENCH_ERROR (-1)

/* One store. Each call is one operation, the way a cache calls it: no batching, no fsync. */
typedef struct bench_peer {
    const char *name;
    /* Whether one handle may be used by several threads at once; otherwise each thread opens
     * its own. */
    int shared_handle;
    /* Whether several processes may open the store read-only at once. */
    int multi_process;
    /* Whether processes may read while another process writes. */
    int multi_process_writer;
    void *(*open)(const bench_config *config);
    int (*put)(void *handle, const void *key, size_t key_len, const void *value, size_t value_len);
    /* Copies the value into buf (buf_len is at least the value's length); *value_len gets it. */
    int (*get)(void *handle, const void *key, size_t key_len, void *buf, size_t buf_len, size_t *value_len);
    int (*del)(void *handle, const void *key, size_t key_len);
    void (*close)(void *handle);
    /* Optional: called by a worker thread when it stops using the handle. */
    void (*thread_done)(void *handle);
} bench_peer;

/* The peer called `name` (memhash, larder-c, tkrzw, lmdb, sqlite, files), or NULL. */
const bench_peer *bench_peer_named(const char *name);

/* The versions of the libraries measured, for the report: "sqlite 3.x, lmdb 0.9.x, ...". */
const char *bench_library_versions(void);

/* The last error of a peer on this thread, for messages. */
const char *bench_last_error(void);

/* ---- Workload data, made up front by Swift ---------------------------------------------------- */

/* Key i is keys[i * BENCH_KEY_STRIDE ..] of key_lens[i] bytes (16 to 24). */
#define BENCH_KEY_STRIDE 24

/* An operation: the top two bits are the kind, the rest the key's index. */
#define BENCH_OP_GET 0u
#define BENCH_OP_PUT 1u
#define BENCH_OP_DEL 2u
#define BENCH_OP_SHIFT 30
#define BENCH_OP_INDEX_MASK ((1u << BENCH_OP_SHIFT) - 1)

typedef struct bench_data {
    const uint8_t *keys;
    const uint8_t *key_lens;
    /* The value of key i is value_len bytes at values + (i % value_variants) * value_step:
     * values is value_len + (value_variants - 1) * value_step bytes of random data. */
    const uint8_t *values;
    size_t value_len;
    size_t value_variants;
    size_t value_step;
} bench_data;

/* What one loop did. */
typedef struct bench_result {
    uint64_t ops;        /* operations done (the loop may stop early on its time limit) */
    uint64_t found;      /* gets and deletes that found their key */
    uint64_t not_found;
    uint64_t errors;     /* failed calls, and gets that returned a wrong length */
    uint64_t nanoseconds;/* the whole loop */
    uint64_t samples;    /* latencies written to the sample array */
} bench_result;

/* Every sample_every-th operation is timed on its own into samples (nanoseconds; room for
 * ops_count / sample_every + 1 of them). The loop stops after max_ns (0 = no limit), checked every
 * 256 operations. buf holds at least value_len bytes. */
void bench_run_ops(const bench_peer *peer, void *handle, const bench_data *data,
                   const uint32_t *ops, size_t ops_count, uint64_t max_ns,
                   size_t sample_every, uint64_t *samples, void *buf, bench_result *out);

/* Larder's batched read (larder_get_many): the gets of `ops` (all BENCH_OP_GET), BENCH_BATCH keys
 * per call, into bufs (BENCH_BATCH buffers of data->value_len bytes, one after another). Like
 * bench_run_ops, but with no latency samples (a call answers several keys). */
#define BENCH_BATCH 16
void bench_larder_c_batched_gets(void *handle, const bench_data *data, const uint32_t *ops, size_t ops_count,
                                 uint64_t max_ns, void *bufs, bench_result *out);

/* Larder's batched write (larder_put_many): the keys of `ops` written over with their values,
 * BENCH_BATCH keys per call, as bench_larder_c_batched_gets reads them. */
void bench_larder_c_batched_puts(void *handle, const bench_data *data, const uint32_t *ops, size_t ops_count,
                                 uint64_t max_ns, bench_result *out);

/* Larder's batched removal (larder_delete_many): the keys of `ops`, BENCH_BATCH keys per call,
 * all of them (no time limit, as the delete workload). */
void bench_larder_c_batched_deletes(void *handle, const bench_data *data, const uint32_t *ops, size_t ops_count,
                                    bench_result *out);

/* What bench_watch_latency measured: of the worst watcher, the wake-ups timed and the latency
 * from a put's start to a watcher's wake-up in another process; the CPU an idle watcher used. */
typedef struct bench_watch_result {
    uint64_t woken;
    double p50_us, p99_us, max_us;
    double idle_cpu_percent;
} bench_watch_result;

/* One writer (this process) puts `writes` values 1 ms apart into a new file at `path`; `watchers`
 * forked processes wait in larder_wait_change. Then this process waits 2 s idle as a watcher.
 * 0, or -1 when a process or the file could not be set up. */
int bench_watch_latency(const char *path, int watchers, int writes, bench_watch_result *result);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* Bytes the process has allocated with malloc and not freed (glibc's mallinfo2; 0 where the C
 * library does not say). */
uint64_t bench_heap_bytes(void);

#endif
