#ifndef LRD_WRITER_LOCK_H
#define LRD_WRITER_LOCK_H
/* The writer lock's usual path, inline (included by CLarderSupport.h, after LRD_THREAD_LOCAL and
 * lrd_fork_generation). lrd_writer_lock_fast takes the lock and lrd_writer_unlock_fast gives it
 * back when nothing is in the way; each returns 0, having done nothing, otherwise, and the caller
 * then calls lrd_writer_lock or lrd_writer_unlock. */
#include <stdint.h>

#if defined(__linux__) && defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__))
#include <pthread.h>
/* glibc's robust mutex taken and given back without glibc's call, in the one case a write meets:
 * no other holder, no waiter, and no other robust mutex held by the thread. It follows glibc's own
 * steps for a robust mutex (nptl/pthread_mutex_lock.c, pthread_mutex_unlock.c) on the fields of
 * pthread_mutex_t and the thread's robust list the kernel walks when a thread dies (the kernel's
 * ABI: the list head, the futex offset, the operation pending). So a holder that dies is found by
 * the kernel as before, and a lock taken here can be given back by glibc and the other way round.
 * Anything else (another holder, waiters, a dead holder's mark, a list not empty, a list head
 * that is not glibc's, the record lock tests choose) is left to glibc. */
#define LRD_WRITER_LOCK_INLINE 1

/* The kernel's struct robust_list_head, as glibc registers it for every thread. */
struct lrd_robust_head {
    void *list;
    long futex_offset;
    void *list_op_pending;
};

/* This thread's robust list head (NULL when it is not glibc's as expected) and thread id, for
 * the fork generation `stamp - 1` (0: not looked up yet). A child of a fork has another thread
 * id, and looks them up again. */
typedef struct {
    uint64_t stamp;
    struct lrd_robust_head *head;
    int tid;
} lrd_robust_thread;
extern LRD_THREAD_LOCAL lrd_robust_thread lrd_robust_self;
/* Whether tests chose the record lock (lrd_use_record_writer_lock). */
extern __attribute__((visibility("hidden"))) int lrd_writer_lock_by_record;
/* Looks up this thread's head and id for `generation`; returns the head. */
__attribute__((visibility("hidden"), cold)) struct lrd_robust_head *lrd_robust_thread_setup(uint64_t generation);
/* Wakes one waiter on `lock` (process-shared). */
__attribute__((visibility("hidden"), cold)) void lrd_robust_wake(int *lock);
/* lrd_writer_unlock_fast's end when a waiter is to be woken: the wake, then `head`'s operation
 * pending cleared, as glibc orders them. Out of line and last, so that the usual release keeps
 * nothing in registers across a call. Returns 1. */
__attribute__((visibility("hidden"), cold)) int lrd_robust_wake_then_settle(int *lock, struct lrd_robust_head *head);

/* glibc's own values (nptl/pthreadP.h): the kind of a robust mutex of the default type, without
 * its process-shared bit (128); the owner of one whose dead holder's successor gave it back
 * without making it consistent; the waiters bit and the thread id's bits of the lock word. */
enum { LRD_ROBUST_NORMAL_KIND = 16, LRD_OWNER_NOT_RECOVERABLE = 0x7ffffffe };
#define LRD_FUTEX_WAITERS 0x80000000u
#define LRD_FUTEX_TID_MASK 0x3fffffffu
#define LRD_ENTRY(m) ((void *)&(m)->__data.__list.__next)
#define LRD_BARRIER() __asm__ __volatile__("" ::: "memory")

static inline __attribute__((always_inline)) int lrd_writer_lock_fast(void *area) {
    pthread_mutex_t *m = (pthread_mutex_t *)area;
    uint64_t generation = lrd_fork_generation();
    struct lrd_robust_head *head = lrd_robust_self.head;
    if (__builtin_expect(lrd_robust_self.stamp != generation + 1, 0)) head = lrd_robust_thread_setup(generation);
    if (head == NULL || head->list != (void *)head || (m->__data.__kind & 127) != LRD_ROBUST_NORMAL_KIND ||
        lrd_writer_lock_by_record) {
        return 0;
    }
    int tid = lrd_robust_self.tid;
    head->list_op_pending = LRD_ENTRY(m);
    LRD_BARRIER();
    int expected = 0;
    if (!__atomic_compare_exchange_n(&m->__data.__lock, &expected, tid, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        LRD_BARRIER();
        head->list_op_pending = NULL;
        return 0;
    }
    /* A dead holder's lock given back without being made consistent: glibc's path says so. */
    if (__builtin_expect(m->__data.__owner == LRD_OWNER_NOT_RECOVERABLE, 0)) {
        if ((unsigned)__atomic_exchange_n(&m->__data.__lock, 0, __ATOMIC_RELEASE) & LRD_FUTEX_WAITERS)
            lrd_robust_wake(&m->__data.__lock);
        LRD_BARRIER();
        head->list_op_pending = NULL;
        return 0;
    }
    m->__data.__count = 1;
    LRD_BARRIER();
    /* Enqueued as glibc enqueues in an empty list (the list's own back link, glibc's, is written
     * by nobody else and read by nobody: left alone). */
    m->__data.__list.__next = (void *)head;
    m->__data.__list.__prev = (void *)head;
    LRD_BARRIER();
    head->list = LRD_ENTRY(m);
    LRD_BARRIER();
    head->list_op_pending = NULL;
    m->__data.__owner = tid;
    ++m->__data.__nusers;
    return 1;
}

static inline __attribute__((always_inline)) int lrd_writer_unlock_fast(void *area) {
    pthread_mutex_t *m = (pthread_mutex_t *)area;
    if (__builtin_expect(lrd_robust_self.stamp != lrd_fork_generation() + 1, 0)) return 0;
    struct lrd_robust_head *head = lrd_robust_self.head;
    int tid = lrd_robust_self.tid;
    if (head == NULL || head->list != LRD_ENTRY(m) || m->__data.__list.__next != (void *)head ||
        m->__data.__owner != tid || ((unsigned)m->__data.__lock & LRD_FUTEX_TID_MASK) != (unsigned)tid) {
        return 0;
    }
    head->list_op_pending = LRD_ENTRY(m);
    LRD_BARRIER();
    head->list = (void *)head;
    LRD_BARRIER();
    m->__data.__list.__prev = NULL;
    m->__data.__list.__next = NULL;
    m->__data.__owner = 0;
    --m->__data.__nusers;
    if (__builtin_expect((unsigned)__atomic_exchange_n(&m->__data.__lock, 0, __ATOMIC_RELEASE) & LRD_FUTEX_WAITERS, 0))
        return lrd_robust_wake_then_settle(&m->__data.__lock, head);
    LRD_BARRIER();
    head->list_op_pending = NULL;
    return 1;
}
#else
static inline int lrd_writer_lock_fast(void *area) { (void)area; return 0; }
static inline int lrd_writer_unlock_fast(void *area) { (void)area; return 0; }
#endif

#endif /* LRD_WRITER_LOCK_H */
