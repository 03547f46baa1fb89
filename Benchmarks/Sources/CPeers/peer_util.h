/* Helpers shared by the peers (not part of the CPeers module). */
#ifndef PEER_UTIL_H
#define PEER_UTIL_H

#include <stdarg.h>
#include <stdio.h>

#include "CPeers.h"

/* Remembers why the last call failed on this thread (bench_last_error). */
void bench_set_error(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* The bytes of key `index` of the data set (its length is data->key_lens[index]). */
static inline const uint8_t *bench_key(const bench_data *data, uint32_t index) {
    return data->keys + (size_t)index * BENCH_KEY_STRIDE;
}

/* "dir/name" into out (PATH_MAX bytes). */
static inline void bench_path(char *out, size_t size, const char *dir, const char *name) {
    snprintf(out, size, "%s/%s", dir, name);
}

#endif
