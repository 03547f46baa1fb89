#if defined(__linux__)
#define _GNU_SOURCE
#endif
#include "CLarderSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* Layout of the area: on Linux the pthread_mutex_t at offset 0; everywhere the "held" word at
 * offset 120 (used only where there are no robust mutexes). */
#define HELD_OFFSET 120

/* The record-lock writer lock (Apple platforms): byte LRD_WRITER_LOCK_BYTE, waited for, and the
 * held word. */
/* Out of line and cold on Linux, where only tests take it, so that the mutex's path stays as
 * short as it was. */
#if defined(__linux__)
#define RECORD_LOCK_PATH __attribute__((noinline, cold))
#else
#define RECORD_LOCK_PATH
#endif

RECORD_LOCK_PATH static int record_lock(void *area, int fd) {
    int rc = lrd_lock_byte(fd, LRD_WRITER_LOCK_BYTE, LRD_LOCK_EXCLUSIVE, 1, 1);
    if (rc) return -rc;
    uint64_t *held = (uint64_t *)((char *)area + HELD_OFFSET);
    /* Still set: its last holder died between lock and unlock. */
    int died = __atomic_load_n(held, __ATOMIC_ACQUIRE) != 0;
    __atomic_store_n(held, 1, __ATOMIC_RELEASE);
    return died ? LRD_LOCK_OWNER_DIED : LRD_LOCK_ACQUIRED;
}

RECORD_LOCK_PATH static void record_unlock(void *area, int fd) {
    uint64_t *held = (uint64_t *)((char *)area + HELD_OFFSET);
    __atomic_store_n(held, 0, __ATOMIC_RELEASE);
    (void)lrd_lock_byte(fd, LRD_WRITER_LOCK_BYTE, LRD_UNLOCK, 1, 1);
}

#if defined(__linux__)
_Static_assert(sizeof(pthread_mutex_t) <= HELD_OFFSET, "pthread_mutex_t must fit the lock area");

/* Set by tests only, before any file is opened: Apple platforms' writer lock, on Linux. */
int lrd_writer_lock_by_record = 0;
#define use_record_lock lrd_writer_lock_by_record

void lrd_use_record_writer_lock(int on) { use_record_lock = on; }

int lrd_writer_lock_init(void *area) {
    memset(area, 0, LRD_WRITER_LOCK_SIZE);
    pthread_mutexattr_t attr;
    int rc = pthread_mutexattr_init(&attr);
    if (rc) return rc;
    if ((rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED)) == 0 &&
        (rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST)) == 0) {
        rc = pthread_mutex_init((pthread_mutex_t *)area, &attr);
    }
    pthread_mutexattr_destroy(&attr);
    return rc;
}

#if defined(LRD_WRITER_LOCK_INLINE)
#include <linux/futex.h>
#include <sys/syscall.h>
LRD_THREAD_LOCAL lrd_robust_thread lrd_robust_self;

struct lrd_robust_head *lrd_robust_thread_setup(uint64_t generation) {
    struct lrd_robust_head *head = NULL;
    size_t length = 0;
    long offset = (long)offsetof(pthread_mutex_t, __data.__lock) - (long)offsetof(pthread_mutex_t, __data.__list.__next);
    if (syscall(SYS_get_robust_list, 0, &head, &length) != 0 || head == NULL || length != sizeof *head ||
        head->futex_offset != offset) {
        head = NULL;
    }
    lrd_robust_self.head = head;
    lrd_robust_self.tid = (int)syscall(SYS_gettid);
    lrd_robust_self.stamp = generation + 1;
    return head;
}

void lrd_robust_wake(int *lock) {
    syscall(SYS_futex, lock, FUTEX_WAKE, 1, NULL, NULL, 0);
}

int lrd_robust_wake_then_settle(int *lock, struct lrd_robust_head *head) {
    lrd_robust_wake(lock);
    LRD_BARRIER();
    head->list_op_pending = NULL;
    return 1;
}
#endif

int lrd_writer_lock(void *area, int fd) {
    if (__builtin_expect(use_record_lock, 0)) return record_lock(area, fd);
    if (__builtin_expect(lrd_writer_lock_fast(area), 1)) return LRD_LOCK_ACQUIRED;
    int rc = pthread_mutex_lock((pthread_mutex_t *)area);
    if (rc == 0) return LRD_LOCK_ACQUIRED;
    if (rc == EOWNERDEAD) return LRD_LOCK_OWNER_DIED;
    return -rc;
}

void lrd_writer_lock_consistent(void *area) {
    if (!use_record_lock) pthread_mutex_consistent((pthread_mutex_t *)area);
}

void lrd_writer_unlock(void *area, int fd) {
    if (__builtin_expect(use_record_lock, 0)) {
        record_unlock(area, fd);
        return;
    }
    if (__builtin_expect(lrd_writer_unlock_fast(area), 1)) return;
    pthread_mutex_unlock((pthread_mutex_t *)area);
}
#else
void lrd_use_record_writer_lock(int on) { (void)on; }

int lrd_writer_lock_init(void *area) {
    memset(area, 0, LRD_WRITER_LOCK_SIZE);
    return 0;
}

int lrd_writer_lock(void *area, int fd) { return record_lock(area, fd); }

void lrd_writer_lock_consistent(void *area) { (void)area; }

void lrd_writer_unlock(void *area, int fd) { record_unlock(area, fd); }
#endif

int lrd_process_exists(int64_t pid) {
    if (pid <= 0) return 0;
    return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}
