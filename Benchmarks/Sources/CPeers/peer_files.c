#define _GNU_SOURCE
/* One file per key, the way most app disk caches work: the file name is the hex of a hash of the
 * key (in 256 subdirectories), the file holds the key then the value, and a write goes to a
 * temporary file that is then renamed over the old one. No fsync. */
#include "CPeers.h"
#include "peer_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct files_peer {
    char dir[3072];
} files_peer;

static uint64_t hash_key(const void *key, size_t len) {
    const uint8_t *p = key;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* dir/xx/xxxxxxxxxxxxxxxx, the name of key's file. */
static void key_path(const files_peer *p, char *out, size_t size, const void *key, size_t key_len) {
    uint64_t h = hash_key(key, key_len);
    snprintf(out, size, "%s/%02x/%016llx", p->dir, (unsigned)(h >> 56), (unsigned long long)h);
}

static void *fp_open(const bench_config *config) {
    files_peer *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->dir, sizeof p->dir, "%s/files", config->dir);
    if (!config->read_only) {
        mkdir(p->dir, 0700);
        for (int i = 0; i < 256; i++) {
            char sub[3200];
            snprintf(sub, sizeof sub, "%s/%02x", p->dir, i);
            if (mkdir(sub, 0700) != 0 && errno != EEXIST) {
                bench_set_error("mkdir %s: %s", sub, strerror(errno));
                free(p);
                return NULL;
            }
        }
    }
    return p;
}

static int write_all(int fd, const void *bytes, size_t len) {
    const uint8_t *b = bytes;
    while (len) {
        ssize_t n = write(fd, b, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

static _Thread_local unsigned temp_counter;

static int fp_put(void *handle, const void *key, size_t key_len, const void *value, size_t value_len) {
    files_peer *p = handle;
    char path[3200], temp[3300];
    key_path(p, path, sizeof path, key, key_len);
    snprintf(temp, sizeof temp, "%s.%d.%u.tmp", path, (int)gettid(), temp_counter++);
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) { bench_set_error("open %s: %s", temp, strerror(errno)); return -1; }
    uint16_t klen = (uint16_t)key_len;
    int ok = write_all(fd, &klen, 2) == 0 && write_all(fd, key, key_len) == 0 && write_all(fd, value, value_len) == 0;
    if (close(fd) != 0) ok = 0;
    if (!ok || rename(temp, path) != 0) {
        bench_set_error("write %s: %s", path, strerror(errno));
        unlink(temp);
        return -1;
    }
    return 0;
}

static int fp_get(void *handle, const void *key, size_t key_len, void *buf, size_t buf_len, size_t *value_len) {
    files_peer *p = handle;
    char path[3200];
    key_path(p, path, sizeof path, key, key_len);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return BENCH_NOT_FOUND;
        bench_set_error("open %s: %s", path, strerror(errno));
        return BENCH_ERROR;
    }
    /* The stored key (to tell hash collisions apart) and the value, in one read when it fits. */
    uint8_t head[2 + 4096];
    struct stat st;
    int result = BENCH_ERROR;
    if (fstat(fd, &st) == 0 && st.st_size >= 2) {
        size_t header = 2 + key_len, total = (size_t)st.st_size;
        if (header <= sizeof head && total >= header && total - header <= buf_len) {
            ssize_t n = pread(fd, head, header, 0);
            uint16_t stored;
            memcpy(&stored, head, 2);
            if (n == (ssize_t)header && stored == key_len && memcmp(head + 2, key, key_len) == 0) {
                size_t want = total - header;
                ssize_t got = want ? pread(fd, buf, want, (off_t)header) : 0;
                if (got == (ssize_t)want) { *value_len = want; result = BENCH_FOUND; }
            } else if (n == (ssize_t)header) {
                result = BENCH_NOT_FOUND;
            }
        }
    }
    close(fd);
    if (result == BENCH_ERROR) bench_set_error("read %s failed", path);
    return result;
}

static int fp_del(void *handle, const void *key, size_t key_len) {
    files_peer *p = handle;
    char path[3200];
    key_path(p, path, sizeof path, key, key_len);
    if (unlink(path) == 0) return BENCH_FOUND;
    if (errno == ENOENT) return BENCH_NOT_FOUND;
    bench_set_error("unlink %s: %s", path, strerror(errno));
    return BENCH_ERROR;
}

static void fp_close(void *handle) { free(handle); }

const bench_peer bench_peer_files = {
    .name = "files", .shared_handle = 1, .multi_process = 1, .multi_process_writer = 1,
    .open = fp_open, .put = fp_put, .get = fp_get, .del = fp_del, .close = fp_close,
};
