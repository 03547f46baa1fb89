/* The registry of C-side peers. */
#include "CPeers.h"

#include <lmdb.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

extern const bench_peer bench_peer_memhash, bench_peer_larder_c, bench_peer_tkrzw, bench_peer_lmdb,
    bench_peer_sqlite, bench_peer_files, bench_peer_slim_record;

static const bench_peer *const all_peers[] = {
    &bench_peer_memhash, &bench_peer_larder_c, &bench_peer_tkrzw,
    &bench_peer_lmdb, &bench_peer_sqlite, &bench_peer_files, &bench_peer_slim_record,
};

const bench_peer *bench_peer_named(const char *name) {
    for (size_t i = 0; i < sizeof all_peers / sizeof all_peers[0]; i++)
        if (strcmp(all_peers[i]->name, name) == 0) return all_peers[i];
    return NULL;
}

const char *bench_library_versions(void) {
    static char text[256];
    snprintf(text, sizeof text, "SQLite %s, %s", sqlite3_libversion(), mdb_version(NULL, NULL, NULL));
    return text;
}
