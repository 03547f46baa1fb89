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
static int use_record_lock = 0;

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

#if defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__))
#include <linux/futex.h>
#include <stddef.h>
#include <sys/syscall.h>
/* glibc's robust mutex taken and given back without glibc's call, in the one case a write meets:
 * no other holder, no waiter, and no other robust mutex held by the thread. It follows glibc's own
 * steps for a robust mutex (nptl/pthread_mutex_lock.c, pthread_mutex_unlock.c) on the fields of
 * pthread_mutex_t and the thread's robust list the kernel walks when a thread dies (the kernel's
 * ABI: the list head, the futex offset, the operation pending). So a holder that dies is found by
 * the kernel as before, and a lock taken here can be given back by glibc and the other way round.
 * Anything else (another holder, waiters, a dead holder's mark, a list not empty, a list head
 * that is not glibc's) goes to pthread_mutex_lock or pthread_mutex_unlock. */
#define FAST_ROBUST 1

/* The kernel's struct robust_list_head, as glibc registers it for every thread. */
struct robust_head {
    void *list;
    long futex_offset;
    void *list_op_pending;
};

/* This thread's robust list head and thread id, for the fork generation `stamp - 1` (0: not
 * looked up yet). A child of a fork has another thread id, and looks them up again. */
typedef struct {
    uint64_t stamp;
    struct robust_head *head;
    int tid;
} robust_thread;
static _Thread_local __attribute__((tls_model("initial-exec"))) robust_thread robust_self;

/* glibc's own values (nptl/pthreadP.h): the kind of a robust mutex of the default type, without
 * its process-shared bit (128); the owner of one whose dead holder's successor gave it back
 * without making it consistent. */
#define ROBUST_NORMAL_KIND 16
#define OWNER_NOT_RECOVERABLE 0x7ffffffe

#define ENTRY(m) ((void *)&(m)->__data.__list.__next)
#define BARRIER() __asm__ __volatile__("" ::: "memory")

/* Looks up the head the kernel has for this thread; NULL when it is not glibc's as expected. */
__attribute__((noinline, cold)) static struct robust_head *robust_thread_setup(uint64_t generation) {
    struct robust_head *head = NULL;
    size_t length = 0;
    long offset = (long)offsetof(pthread_mutex_t, __data.__lock) - (long)offsetof(pthread_mutex_t, __data.__list.__next);
    if (syscall(SYS_get_robust_list, 0, &head, &length) != 0 || head == NULL || length != sizeof *head ||
        head->futex_offset != offset) {
        head = NULL;
    }
    robust_self.head = head;
    robust_self.tid = (int)syscall(SYS_gettid);
    robust_self.stamp = generation + 1;
    return head;
}

static inline struct robust_head *robust_thread_head(void) {
    uint64_t generation = lrd_fork_generation();
    if (__builtin_expect(robust_self.stamp == generation + 1, 1)) return robust_self.head;
    return robust_thread_setup(generation);
}

/* 1 when taken here; 0 for glibc's path. */
static inline int robust_lock_fast(pthread_mutex_t *m) {
    struct robust_head *head = robust_thread_head();
    if (head == NULL || head->list != (void *)head || (m->__data.__kind & 127) != ROBUST_NORMAL_KIND) return 0;
    int tid = robust_self.tid;
    head->list_op_pending = ENTRY(m);
    BARRIER();
    int expected = 0;
    if (!__atomic_compare_exchange_n(&m->__data.__lock, &expected, tid, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        BARRIER();
        head->list_op_pending = NULL;
        return 0;
    }
    /* A dead holder's lock given back without being made consistent: glibc's path says so. */
    if (__builtin_expect(m->__data.__owner == OWNER_NOT_RECOVERABLE, 0)) {
        if (__atomic_exchange_n(&m->__data.__lock, 0, __ATOMIC_RELEASE) & FUTEX_WAITERS)
            syscall(SYS_futex, &m->__data.__lock, FUTEX_WAKE, 1, NULL, NULL, 0);
        BARRIER();
        head->list_op_pending = NULL;
        return 0;
    }
    m->__data.__count = 1;
    BARRIER();
    /* Enqueued as glibc enqueues in an empty list (the list's own back link, glibc's, is written
     * by nobody else and read by nobody: left alone). */
    m->__data.__list.__next = (void *)head;
    m->__data.__list.__prev = (void *)head;
    BARRIER();
    head->list = ENTRY(m);
    BARRIER();
    head->list_op_pending = NULL;
    m->__data.__owner = tid;
    ++m->__data.__nusers;
    return 1;
}

/* 1 when given back here; 0 for glibc's path. */
static inline int robust_unlock_fast(pthread_mutex_t *m) {
    if (__builtin_expect(robust_self.stamp != lrd_fork_generation() + 1, 0)) return 0;
    struct robust_head *head = robust_self.head;
    int tid = robust_self.tid;
    if (head == NULL || head->list != ENTRY(m) || m->__data.__list.__next != (void *)head || m->__data.__owner != tid ||
        (m->__data.__lock & FUTEX_TID_MASK) != (unsigned)tid) {
        return 0;
    }
    head->list_op_pending = ENTRY(m);
    BARRIER();
    head->list = (void *)head;
    BARRIER();
    m->__data.__list.__prev = NULL;
    m->__data.__list.__next = NULL;
    m->__data.__owner = 0;
    --m->__data.__nusers;
    if (__atomic_exchange_n(&m->__data.__lock, 0, __ATOMIC_RELEASE) & FUTEX_WAITERS)
        syscall(SYS_futex, &m->__data.__lock, FUTEX_WAKE, 1, NULL, NULL, 0);
    BARRIER();
    head->list_op_pending = NULL;
    return 1;
}
#endif

int lrd_writer_lock(void *area, int fd) {
    if (__builtin_expect(use_record_lock, 0)) return record_lock(area, fd);
#if defined(FAST_ROBUST)
    if (__builtin_expect(robust_lock_fast((pthread_mutex_t *)area), 1)) return LRD_LOCK_ACQUIRED;
#endif
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
#if defined(FAST_ROBUST)
    if (__builtin_expect(robust_unlock_fast((pthread_mutex_t *)area), 1)) return;
#endif
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
