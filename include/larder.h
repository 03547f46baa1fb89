/*
 * larder.h: the C interface to Larder, a persistent single-file memory-mapped cache.
 *
 * Link with the shared library (liblarder.so / liblarder.dylib; in a build tree it is
 * libLarderC.so). Every function is safe to call from any thread; one handle may be shared by
 * threads. No function aborts on bad input: a NULL handle, a NULL pointer with a non-zero
 * length, a NULL out-pointer, an empty or oversized key are LARDER_INVALID_ARGUMENT (or
 * LARDER_TOO_LARGE). Memory the library allocates for the caller is released with larder_free.
 *
 * The Swift API (`import Larder`) and this one use the very same files.
 */
#ifndef LARDER_H
#define LARDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status codes -------------------------------------------------------------------------- */

#define LARDER_OK 0
/* The key is not in the cache (or has expired). */
#define LARDER_NOT_FOUND 1
/* larder_get: the buffer is smaller than the value; *value_len holds the size needed. */
#define LARDER_BUFFER_TOO_SMALL 2
/* A key, value, option or pointer is not acceptable. */
#define LARDER_INVALID_ARGUMENT (-1)
/* A key or value is larger than the cache can ever hold. */
#define LARDER_TOO_LARGE (-2)
/* The operating system refused a file operation; see larder_last_error_message(). */
#define LARDER_IO (-3)
/* The file (or the value asked for) is damaged. */
#define LARDER_CORRUPT (-4)
/* Not a Larder file, or one that needs a newer Larder. */
#define LARDER_INCOMPATIBLE (-5)
/* A write to a cache opened read-only, or to a file a newer Larder wrote (see larder_open). */
#define LARDER_READ_ONLY (-6)
/* Memory could not be allocated. */
#define LARDER_NO_MEMORY (-7)
/* The disk or file system refused more space. */
#define LARDER_FULL (-8)
/* The handle was opened by the parent of this process, before it forked. In the child the handle
 * is closed: its calls return this (the _many calls in each request; larder_stats reports no
 * sizes, as for an empty cache), and larder_close on it frees the child's copy and gives up the
 * child's copy of the file's descriptor, leaving the file and its locks to the parent. A child
 * opens the file again to use it. (A closed handle is freed by larder_close, so this API returns
 * this status for no other reason; it matches the Swift API's `.closed`.) */
#define LARDER_CLOSED (-9)
/* Another process or handle has the file open in a way that excludes this open; or writers of
 * other processes kept changing what a read or a walk looked at for longer than 5 s; or a write
 * found no room because larder_with_value callbacks (of any process, this one included) lend out
 * records all round the cache: it may succeed once they return. */
#define LARDER_BUSY (-10)
/* The handle is suspended (larder_suspend): it holds no lock on its file, and every call but
 * larder_resume, larder_suspend and larder_close returns this until larder_resume. */
#define LARDER_SUSPENDED (-11)

/* ---- Opening ------------------------------------------------------------------------------- */

/* An open cache. Opaque; one handle may be shared by threads. */
typedef struct larder larder;

/* larder_options.flags. (LARDER_READ_ONLY is the status code of a refused write, hence the
 * FLAG_ in this name.) */
#define LARDER_FLAG_READ_ONLY 1u
/* Keep the file out of device backups (URLResourceValues.isExcludedFromBackup), set at every
 * read-write open and larder_resume on Apple platforms; accepted and ignored elsewhere. */
#define LARDER_FLAG_EXCLUDE_FROM_BACKUP 2u

/* larder_options.file_protection: the data protection class of a file the open creates, on Apple
 * platforms (accepted and ignored elsewhere; an existing file keeps its own). A cache read in the
 * background (with the device locked) needs LARDER_PROTECTION_UNTIL_FIRST_USER_AUTHENTICATION or
 * LARDER_PROTECTION_NONE: under the other two its reads and writes fail while the device is
 * locked. */
#define LARDER_PROTECTION_DEFAULT 0u /* the system's default: nothing is set */
#define LARDER_PROTECTION_COMPLETE 1u
#define LARDER_PROTECTION_COMPLETE_UNLESS_OPEN 2u
#define LARDER_PROTECTION_UNTIL_FIRST_USER_AUTHENTICATION 3u
#define LARDER_PROTECTION_NONE 4u

/* larder_options.compression */
#define LARDER_COMPRESSION_NONE 0u
#define LARDER_COMPRESSION_LZ4 1u

/* A ttl_ms that means "never expires", overriding a cache's default expiry. */
#define LARDER_TTL_NEVER UINT64_MAX

/* A count_limit or max_age_ms that removes the file's limit. */
#define LARDER_LIMIT_NONE UINT64_MAX

typedef struct larder_options {
    uint32_t struct_size;           /* set by larder_options_init: sizeof(larder_options) as the
                                       program was compiled */
    uint32_t flags;                 /* LARDER_FLAG_READ_ONLY, LARDER_FLAG_EXCLUDE_FROM_BACKUP */
    uint64_t capacity_bytes;        /* 0 = the file's own, or 64 MiB when creating; see larder_open */
    uint32_t page_size;             /* 0 = 4096; a power of two 4096..65536, checked on every open,
                                       used only when creating (a file keeps its own) */
    uint32_t compression;           /* LARDER_COMPRESSION_NONE or LARDER_COMPRESSION_LZ4 */
    uint64_t default_ttl_ms;        /* 0 = entries do not expire unless a put says so */
    uint32_t file_mode;             /* permission bits of a new file; 0 = 0600 (owner only) */
    uint32_t compression_threshold; /* values shorter than this are stored raw; 0 = 128 */
    /* Standing limits, kept in the file and honoured by every process on every write (see
       larder_open for when an open changes them): 0 = the file's own (none for a new file),
       LARDER_LIMIT_NONE = remove it. */
    uint64_t count_limit;           /* the most entries the file holds (below 2^63) */
    uint64_t max_age_ms;            /* entries stored longer ago count as expired (below 2^63) */
    uint64_t sweep_interval_ms;     /* 0 = no sweep; else a background thread removes expired
                                       and over-age entries, a few at a time, this often */
    uint32_t file_protection;       /* LARDER_PROTECTION_...; 0 = the system's default */
} larder_options;

/* Fills *opts with the defaults (and struct_size). Always call it before setting fields:
 * larder_open refuses (LARDER_INVALID_ARGUMENT) a struct_size below 8, such as a zeroed struct's.
 *
 * A macro, so that the size is the one the program was compiled with: a library built with a
 * newer header, whose larder_options has grown, writes no further than that, and larder_open
 * reads no further than struct_size. Fields a newer header adds are 0 by default; larder_open
 * refuses (LARDER_INVALID_ARGUMENT) a struct_size larger than its own only when a byte past its
 * own is not 0: an option set that this library does not know (and a struct_size over 4096, which
 * no larder_options has). Bindings that cannot use the macro call larder_options_init_sized with
 * the size of their larder_options. */
void larder_options_init_sized(larder_options *opts, size_t size);
/* The function of the same name, for programs built before the macro and for bindings that call
 * by name: it fills the 40 bytes of the first larder_options, and no more. */
void (larder_options_init)(larder_options *opts);
#define larder_options_init(opts) larder_options_init_sized((opts), sizeof *(opts))

/* Opens the cache at `path` (UTF-8: other bytes are LARDER_INVALID_ARGUMENT), creating it unless
 * read-only; opts may be NULL for the defaults.
 * A file left unclean by a crash is repaired first. On success *out is the handle.
 * A capacity_bytes other than the file's is taken only by an open that no other handle of any
 * process shares the file with (every handle maps the capacity it found); otherwise the file
 * keeps its capacity, which larder_stats reports, and so does an open asking for less than the
 * least capacity the file's own page size allows (64 KiB, or 16 pages). A capacity_bytes below the
 * least that opts' page_size allows, or above 1 TiB, is LARDER_INVALID_ARGUMENT on every open,
 * whether the file exists or not. A smaller capacity than the file has grown to
 * rewrites the file with its newest entries that fit, in time proportional to its size; if the
 * disk has no room for that copy, the file keeps its capacity. A count_limit or max_age_ms other
 * than 0 is taken by an open that no other read-write handle of any process shares the file with
 * (read-only ones may: they take the new limits up); otherwise the file keeps its limits. A count
 * limit below the entries held evicts the least recently used at once. A max_age_ms or
 * count_limit of 2^63 or more (other than LARDER_LIMIT_NONE) is LARDER_INVALID_ARGUMENT. A file written by a newer Larder
 * that this one can read but not maintain opens read-only, whatever the flags: its reads work,
 * and its writes return LARDER_READ_ONLY. */
int larder_open(const char *path, const larder_options *opts, larder **out);

/* Flushes, marks the file cleanly closed and frees the handle; LARDER_OK, also for NULL (which
 * does nothing). The handle must not be used afterwards, nor concurrently with this call. When the
 * file could not be written back (LARDER_IO, LARDER_FULL: a full disk, say), the handle is freed
 * all the same and the status and larder_last_error_message() say what failed; the file is then
 * repaired by the next open, as after a crash. Called from inside a larder_foreach or
 * larder_with_value callback of this same handle, it does nothing and returns
 * LARDER_INVALID_ARGUMENT, and the handle stays open: close it after larder_foreach or
 * larder_with_value returns. */
int larder_close(larder *db);

/* Gives up the handle's locks on its file before the app is suspended: iOS terminates a suspended
 * app that holds a lock on a file in an app group container (0xdead10cc). When no other handle of
 * this process has the file open, every lock on it goes, and the file is flushed and marked
 * clean as by larder_close; the handle stays allocated. Until larder_resume every other call on
 * it returns LARDER_SUSPENDED at once (none waits); larder_close frees it as usual. Calling it
 * again does nothing. Call it and larder_resume when no other thread is inside a call on the
 * handle. LARDER_IO or LARDER_FULL when the file could not be written back: the handle is
 * suspended all the same, and the next open repairs the file. */
int larder_suspend(larder *db);

/* Takes the file back after larder_suspend: opens it again with the options of larder_open and
 * takes its locks. When another process replaced the file meanwhile (`larder compact`, a capacity
 * change), the handle uses the new file from now on. LARDER_OK, and nothing done, for a handle
 * that is not suspended; on failure the handle stays suspended, and the call may be repeated. */
int larder_resume(larder *db);

/* ---- Reading and writing ------------------------------------------------------------------- */

/* Stores `value` for `key` (1..4096 bytes), replacing any earlier value. ttl_ms: 0 = the cache's
 * default, LARDER_TTL_NEVER = never, else milliseconds from now. A full cache evicts the least
 * recently used entries to make room; LARDER_TOO_LARGE for a key or value it can never hold,
 * LARDER_BUSY while larder_with_value callbacks lend out records all round it. */
int larder_put(larder *db, const void *key, size_t key_len,
               const void *value, size_t value_len, uint64_t ttl_ms);

/* As larder_put, with an expiry that reads push back: the entry expires window_ms milliseconds
 * after it was last read (larder_get, larder_get_alloc, larder_with_value, of any process with a
 * read-write handle) or stored. Reads take no lock for it: each moves a counter in the record's
 * header, in steps of an eighth of the window, up to 127 steps (so about 16 windows past the put;
 * a put of the key starts afresh). LARDER_INVALID_ARGUMENT for a window_ms of 0 or of 2^63 and
 * more. */
int larder_put_sliding(larder *db, const void *key, size_t key_len,
                       const void *value, size_t value_len, uint64_t window_ms);

/* One entry of larder_put_many: what to store and, filled in, what came of it. */
typedef struct larder_put_request {
    const void *key;   /* in: the key, key_len bytes */
    size_t key_len;
    const void *value; /* in: the value, value_len bytes (NULL only with 0) */
    size_t value_len;
    uint64_t ttl_ms;   /* in: as larder_put's */
    int status;        /* out: what larder_put would return for this entry */
} larder_put_request;

/* Stores count entries, in order, as count calls of larder_put would, one request each: each
 * write on its own, visible to readers as soon as it is made. When most keys are stored already,
 * on a cache larger than the processor's caches this writes up to about twice as many small values
 * per second as count calls of larder_put: the writes of a batch start loading the index slots
 * and records they write over together, so their waits for memory overlap. Returns LARDER_OK when
 * every request was answered (each in its status; larder_last_error_message() then holds the
 * message of the last one that failed, if any), or LARDER_INVALID_ARGUMENT, storing none, when db
 * is NULL, requests is NULL with count > 0, or count is 2^63 or more. */
int larder_put_many(larder *db, larder_put_request *requests, size_t count);

/* Copies the value for `key` into buf. With LARDER_OK or LARDER_BUFFER_TOO_SMALL, *value_len
 * receives the value's length; with any other status it is left as it was. When buf_len is too
 * small, nothing is copied and LARDER_BUFFER_TOO_SMALL is returned: pass buf = NULL and
 * buf_len = 0 to ask for the size. */
int larder_get(larder *db, const void *key, size_t key_len,
               void *buf, size_t buf_len, size_t *value_len);

/* One key of larder_get_many: what to read and where to, and, filled in, what came of it. */
typedef struct larder_get_request {
    const void *key;  /* in: the key, key_len bytes */
    size_t key_len;
    void *buf;        /* in: room for the value, buf_len bytes (NULL and 0 ask for its length) */
    size_t buf_len;
    size_t value_len; /* out: the value's length, when status is LARDER_OK or LARDER_BUFFER_TOO_SMALL */
    int status;       /* out: what larder_get would return for this key */
} larder_get_request;

/* Reads count keys at once, as count calls of larder_get would, one request each. On a cache
 * larger than the processor's caches this reads about twice as many keys per second as
 * count calls of larder_get with small values (less with large ones, whose copy is the read):
 * the reads of a batch start loading their index slots and records together, so their waits
 * for memory overlap. Returns LARDER_OK when every request was answered (each in its status;
 * larder_last_error_message() then holds the message of the last one that failed with an
 * error, if any), or LARDER_INVALID_ARGUMENT, answering none, when db is NULL, requests is NULL
 * with count > 0, or count is 2^63 or more. */
int larder_get_many(larder *db, larder_get_request *requests, size_t count);

/* Called by larder_with_value with the value lent: value_len bytes at value (NULL when
 * value_len is 0), valid only until fn returns. */
typedef void (*larder_value_fn)(void *ctx, const void *value, size_t value_len);

/* Lends the value for `key` to fn without copying it: the bytes fn gets are the file's own, in
 * the mapping, pinned while fn runs, so that no writer of any process writes over them (writers
 * go on, elsewhere in the file). A value stored compressed is lent decompressed, from a buffer of
 * the library's; so is a checked copy where a pin cannot be taken (a read-only handle, whose
 * mapping cannot write the pin table in the file, or a table with every slot taken by other
 * readers). Returns LARDER_OK once fn has returned, or LARDER_NOT_FOUND, without calling fn, when
 * the key is missing or expired; LARDER_CORRUPT when the value fails its checksum, and
 * LARDER_NO_MEMORY when the library cannot get the memory for its buffer (fn is not called
 * either way). Inside fn, reads of this handle work, but its writes are refused with
 * LARDER_INVALID_ARGUMENT, and larder_close does nothing (see larder_close); the refused call's
 * status says so (larder_last_error_message() too, until the next call into the library). Copy
 * what must outlive fn. */
int larder_with_value(larder *db, const void *key, size_t key_len, larder_value_fn fn, void *ctx);

/* Returns the value for `key` in memory from malloc: release it with larder_free (also a value of
 * 0 bytes, which comes back as a non-NULL allocation). With LARDER_NOT_FOUND, *value is NULL and
 * *value_len 0; LARDER_NO_MEMORY when malloc cannot give the value's length. */
int larder_get_alloc(larder *db, const void *key, size_t key_len, void **value, size_t *value_len);

/* Releases memory returned by larder_get_alloc. NULL is a no-op. */
void larder_free(void *p);

/* Removes `key`: LARDER_OK, or LARDER_NOT_FOUND when it was not there or had expired (an expired
 * entry is removed all the same); or an error, as for any call (a bad key, a read-only handle,
 * a damaged file, LARDER_BUSY). */
int larder_delete(larder *db, const void *key, size_t key_len);

/* One key of larder_delete_many: what to remove and, filled in, what came of it. */
typedef struct larder_delete_request {
    const void *key; /* in: the key, key_len bytes */
    size_t key_len;
    int status;      /* out: what larder_delete would return for this key */
} larder_delete_request;

/* Removes count keys, in order, as count calls of larder_delete would, one request each. The
 * removals of a batch start loading the index slots and records they look at together, as
 * larder_get_many's reads do. Returns LARDER_OK when every request was answered (each in its
 * status; larder_last_error_message() then holds the message of the last one that failed with
 * an error, if any), or LARDER_INVALID_ARGUMENT, removing none, when db is NULL, requests is NULL with
 * count > 0, or count is 2^63 or more. */
int larder_delete_many(larder *db, larder_delete_request *requests, size_t count);

/* LARDER_OK when `key` has a live value, LARDER_NOT_FOUND when not; or an error, as for any call
 * (a bad key, a damaged file, LARDER_BUSY). */
int larder_contains(larder *db, const void *key, size_t key_len);

/* Removes every entry, in time independent of how many there are. */
int larder_clear(larder *db);

/* Makes every write so far durable (msync + fsync). */
int larder_sync(larder *db);

/* ---- Maintenance --------------------------------------------------------------------------- */

/* The cache keeps within its capacity by itself, evicting the least recently used entries as new
 * ones come in; these calls apply tighter limits of the caller's own. Each looks at every entry
 * once, under the writers' lock, in time proportional to the number of entries: call them now
 * and then (at launch, after a batch of downloads), not on every write. The file keeps its
 * size; the room freed is reused by later writes. On LARDER_OK, *removed receives how many
 * unexpired entries the call removed (larder_remove_expired: how many expired ones); expired
 * entries it removes as well are not counted. removed may be NULL. On an error *removed is left
 * as it was, and nothing is removed by a bad argument or a read-only handle. */

/* Removes every expired entry now, rather than when the ring comes around to it. */
int larder_remove_expired(larder *db, uint64_t *removed);

/* Removes every entry stored more than age_ms milliseconds ago, whatever its expiry: an entry's
 * age counts from when its value was last put; reading it does not make it younger. */
int larder_remove_older(larder *db, uint64_t age_ms, uint64_t *removed);

/* Evicts entries until the values left add up to at most max_bytes (live_bytes of larder_stats,
 * as callers see them, before compression), in the order of the cache's own eviction: expired
 * entries first, then entries not read since they were put, oldest first, then the ones read,
 * oldest first. */
int larder_trim_bytes(larder *db, uint64_t max_bytes, uint64_t *removed);

/* As larder_trim_bytes, until at most max_entries entries are left. */
int larder_trim_count(larder *db, uint64_t max_entries, uint64_t *removed);

/* Removes every entry whose key begins with the prefix_len bytes at prefix (prefix may be NULL
 * only with prefix_len 0, which removes every entry: larder_clear does that in constant time).
 * A prefix longer than 4096 bytes, the longest key, removes nothing, and is not read. */
int larder_delete_prefix(larder *db, const void *prefix, size_t prefix_len, uint64_t *removed);

/* ---- Inspection ---------------------------------------------------------------------------- */

/* A struct tag without a typedef: the function larder_stats has the name. */
struct larder_stats {
    uint32_t struct_size;    /* set by the caller to sizeof(struct larder_stats) */
    uint32_t reserved;
    uint64_t entries;        /* entries stored, expired ones included until they are reclaimed */
    uint64_t live_bytes;     /* bytes of live values as callers see them (raw) */
    uint64_t stored_bytes;   /* bytes of live values as stored (after compression) */
    uint64_t file_bytes;     /* size of the file */
    uint64_t capacity_bytes; /* the limit the file never exceeds */
    uint64_t hits;
    uint64_t misses;
    uint64_t inserts;        /* puts of keys that were not there */
    uint64_t evictions;      /* entries dropped to make room, and by larder_trim_bytes and
                                larder_trim_count */
    uint64_t expirations;    /* entries dropped because their time was up */
    uint64_t updates;        /* puts that replaced a value */
    uint64_t removals;       /* entries removed by larder_delete(_many), larder_delete_prefix,
                                larder_remove_older (an expired one counts as an expiration),
                                and larder_clear (every entry, expired ones too) */
    uint64_t relocations;    /* entries moved to the head of the ring because they were read */
    uint64_t recoveries;     /* times the file was rebuilt after an unclean close */
};

/* Fills the first out->struct_size bytes of *out (set struct_size first):
 *     struct larder_stats st = { .struct_size = sizeof st };   (C99; in C++ memset, then set it)
 *     larder_stats(db, &st);
 * and sets struct_size to the bytes it filled (less than asked when this library's larder_stats
 * is shorter than the program's). LARDER_INVALID_ARGUMENT for a struct_size below 8. */
int larder_stats(larder *db, struct larder_stats *out);

/* What the cache holds for one key: larder_entry_info fills it. The names are those of the
 * members of `larder dump --json` (docs/CLI.md). A struct tag without a typedef, as for
 * larder_stats. */
struct larder_entry_info {
    uint32_t struct_size; /* set by the caller to sizeof(struct larder_entry_info) */
    uint8_t compressed;   /* 1 when the value is stored LZ4-compressed */
    uint8_t read;         /* 1 when the value was read since it was stored, or since eviction last
                             passed it and gave it a second chance (its access bit) */
    uint8_t sliding;      /* 1 when reads push its expiry back (larder_put_sliding) */
    uint8_t reserved;
    uint64_t size;        /* the value's length as callers see it (decompressed) */
    uint64_t stored_size; /* the value's length as stored */
    uint64_t record_size; /* bytes the entry's record takes in the file */
    uint64_t stored_at;   /* when it was stored: milliseconds since the Unix epoch */
    uint64_t expires_at;  /* when it expires: milliseconds since the Unix epoch; 0 = never;
                             pushed back by reads when sliding */
};

/* Fills the first info->struct_size bytes of *info with what the cache holds for the key (set
 * struct_size first, as for larder_stats; it is set to the bytes filled). LARDER_NOT_FOUND when
 * the key is missing or expired. Like larder_get it takes no lock; unlike it, it reads no value
 * byte, counts no hit or miss and does not mark the entry read. */
int larder_entry_info(larder *db, const void *key, size_t key_len, struct larder_entry_info *info);

/* Calls fn for every live entry, in no particular order, with its key and value length (the key
 * is valid during the call only). fn returns 0 to go on; any other value stops the walk and is
 * returned as it is: choose stop values that are not status codes (100 and up, say) to tell a
 * stop of yours from the walk's own failures. The walk takes a few entries at a time and holds no lock while fn runs: fn may read,
 * put, delete and sync (deleting what it is given is the usual reason to walk), and other threads
 * and processes write meanwhile. An entry that stays in the cache from the walk's start to its
 * end is passed to fn exactly once; one written or deleted meanwhile may or may not be. Writers
 * of other processes that keep the index changing for longer than 5 s make the walk return
 * LARDER_BUSY. fn must not close this handle (larder_close then does nothing, see larder_close). */
typedef int (*larder_foreach_fn)(void *ctx, const void *key, size_t key_len, size_t value_len);
int larder_foreach(larder *db, larder_foreach_fn fn, void *ctx);

/* ---- Watching ------------------------------------------------------------------------------ */

/* Every process that changes the file, through this API, Swift or the larder tool, records each
 * change in the file: the key's hash and what happened. A program keeps a cursor (where it has
 * read up to), sleeps in larder_wait_change until the file changes, and reads what changed with
 * larder_read_changes. The file keeps the last 128 changes: a reader that falls further behind
 * gets LARDER_CHANGE_LOST and looks at the keys it cares about again. Writers record which keys
 * changed only while a watcher is counted: a read-write handle counts from its first
 * larder_change_cursor until larder_close (counted out while suspended); changes made while none
 * is counted read as LARDER_CHANGE_LOST. */
#define LARDER_CHANGE_STORED 1  /* a value was stored for the key */
#define LARDER_CHANGE_REMOVED 2 /* a caller removed it (delete, prefix, age) */
#define LARDER_CHANGE_EVICTED 3 /* dropped to make room, or by a trim */
#define LARDER_CHANGE_EXPIRED 4 /* dropped because its time was up */
#define LARDER_CHANGE_CLEARED 5 /* every entry went (larder_clear); key_hash is 0 */
#define LARDER_CHANGE_LOST 6    /* changes were lost (too many, no watcher counted, or the file was rebuilt); key_hash is 0 */

typedef struct larder_change {
    uint64_t key_hash; /* larder_key_hash of the key changed */
    uint32_t kind;     /* LARDER_CHANGE_... */
    uint32_t reserved;
} larder_change;

/* The hash a change of `key` carries: compare it with larder_change.key_hash. Two keys may share
 * one (rarely: 61 bits); look the key up to be sure. 0 for a NULL key. */
uint64_t larder_key_hash(const void *key, size_t key_len);

/* The cursor of changes from now on, in *cursor. From the first call, a read-write handle counts
 * as a watcher until it is closed: writers then record each change's key for it. */
int larder_change_cursor(larder *db, uint64_t *cursor);

/* Blocks the calling thread until the file has changed since `cursor` (LARDER_OK), or until
 * timeout_ms milliseconds have passed (LARDER_NOT_FOUND). It sleeps in the kernel (a futex on
 * Linux) and wakes within microseconds of a write by any process; a read-only handle looks every
 * 20 ms. Does not move the cursor: read the changes with larder_read_changes. */
int larder_wait_change(larder *db, uint64_t cursor, uint32_t timeout_ms);

/* Writes up to `capacity` changes after *cursor into changes[], oldest first, their number into
 * *count (0 when there are none), and moves *cursor past them. When the file no longer holds
 * them all, one change of kind LARDER_CHANGE_LOST, and *cursor moves to now. */
int larder_read_changes(larder *db, uint64_t *cursor, larder_change *changes, size_t capacity, size_t *count);

/* ---- Errors and version -------------------------------------------------------------------- */

/* A static description of a status code. */
const char *larder_strerror(int status);

/* The detail of the last error on this thread, or "" when there was none: "Larder ", the status
 * as larder_strerror gives it, the file in parentheses when one is concerned, ": " and what
 * happened (with the system's errno text for LARDER_IO), as in
 * "Larder I/O error (/data/app.larder): open: Permission denied". Valid until the next call into
 * the library on this thread. */
const char *larder_last_error_message(void);

/* The library's version, e.g. "0.1.0". */
const char *larder_version(void);

#ifdef __cplusplus
}
#endif
#endif /* LARDER_H */
