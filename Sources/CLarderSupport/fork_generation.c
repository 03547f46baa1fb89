#include "CLarderSupport.h"

#include <pthread.h>

/* Hidden, as the per-thread words are: two copies of the library in one process count their own. */
__attribute__((visibility("hidden"))) uint64_t lrd_fork_generation_counter;

static void count_fork_in_child(void) {
    __atomic_fetch_add(&lrd_fork_generation_counter, 1, __ATOMIC_RELAXED);
}

static void register_fork_handler(void) {
    /* Fails only for want of memory; handles opened meanwhile then go unwatched, as before. */
    (void)pthread_atfork(NULL, NULL, count_fork_in_child);
}

static pthread_once_t watching = PTHREAD_ONCE_INIT;

uint64_t lrd_watch_forks(void) {
    pthread_once(&watching, register_fork_handler);
    return lrd_fork_generation();
}
