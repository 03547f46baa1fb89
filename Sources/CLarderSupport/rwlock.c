#if defined(__linux__)
#define _GNU_SOURCE
#endif
#include "CLarderSupport.h"

#include <sched.h>
#include <time.h>

#define WRITER LRD_RWLOCK_WRITER
#define WAITING (1ull << 62)
#define READER_WAITING LRD_RWLOCK_READER_WAITING
#define READERS (READER_WAITING - 1)

/* Waits a little longer each time: pause, then yield, then 50 µs sleeps. */
static void back_off(unsigned attempt) {
    if (attempt < 64) {
        lrd_spin_pause();
    } else if (attempt < 256) {
        sched_yield();
    } else {
        struct timespec pause = {0, 50 * 1000};
        nanosleep(&pause, NULL);
    }
}

/* In a child forked since the lock was last cleared: clears the state the parent's threads left
 * (once per fork: the thread that moves the count on clears it). Called only when the lock is
 * found taken, so that an uncontended lock costs nothing more. */
static void clear_if_forked(uint64_t *word) {
    uint64_t was = __atomic_load_n(word + 1, __ATOMIC_RELAXED), now = lrd_fork_generation();
    if (was != now && __atomic_compare_exchange_n(word + 1, &was, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        __atomic_store_n(word, 0, __ATOMIC_RELEASE);
    }
}

void lrd_rwlock_read_lock(uint64_t *word) {
    for (unsigned attempt = 0;; attempt++) {
        uint64_t state = __atomic_load_n(word, __ATOMIC_RELAXED);
        /* A waiting writer goes first, unless this reader has waited long (it may be nested in
         * a read of its own thread that the writer is waiting for). */
        uint64_t blocking = attempt < 300 ? (WRITER | WAITING) : WRITER;
        if ((state & blocking) == 0 &&
            __atomic_compare_exchange_n(word, &state, (state + 1) & ~READER_WAITING, 1, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            return;
        }
        /* Tell the writer, which would otherwise take the lock again at once, to let a reader in. */
        if ((state & WRITER) && !(state & READER_WAITING)) __atomic_fetch_or(word, READER_WAITING, __ATOMIC_RELAXED);
        clear_if_forked(word);
        back_off(attempt);
    }
}

void lrd_rwlock_read_unlock(uint64_t *word) {
    __atomic_fetch_sub(word, 1, __ATOMIC_RELEASE);
}

/* lrd_rwlock_write_lock when the word was not 0. */
void lrd_rwlock_write_lock_contended(uint64_t *word) {
    /* A reader waited through the last write: give it a moment to get in first, so that a writer
     * writing back to back does not keep readers out (bounded: writers are not starved either). */
    for (unsigned spin = 0; spin < 128 && (__atomic_load_n(word, __ATOMIC_RELAXED) & READER_WAITING); spin++) lrd_spin_pause();
    for (unsigned attempt = 0;; attempt++) {
        uint64_t state = __atomic_load_n(word, __ATOMIC_RELAXED);
        if ((state & (WRITER | READERS)) == 0) {
            if (__atomic_compare_exchange_n(word, &state, WRITER, 1, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
            continue;
        }
        if (!(state & WAITING)) __atomic_fetch_or(word, WAITING, __ATOMIC_RELAXED);
        clear_if_forked(word);
        back_off(attempt);
    }
}
