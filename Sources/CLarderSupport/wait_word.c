#include "CLarderSupport.h"

#include <errno.h>
#include <limits.h>
#include <time.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__APPLE__)
/* The kernel's compare-and-wait, which libdispatch and os_sync_wait_on_address are built on. Declared
 * here: no public header has it. UL_COMPARE_AND_WAIT_SHARED works across processes on a shared
 * mapping. */
extern int __ulock_wait(uint32_t operation, void *address, uint64_t value, uint32_t timeout_us);
extern int __ulock_wake(uint32_t operation, void *address, uint64_t wake_value);
#define LRD_UL_COMPARE_AND_WAIT_SHARED 3
#define LRD_ULF_WAKE_ALL 0x00000100
#endif

/* Linux: FUTEX_WAIT without FUTEX_PRIVATE_FLAG (the word is in a file mapping other processes
 * share). It reads the word and may wait on a read-only mapping. */
int lrd_wait_word(const void *word, uint32_t expected, uint32_t timeout_ms) {
#if defined(__linux__)
    struct timespec timeout = { .tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L };
    long rc = syscall(SYS_futex, word, FUTEX_WAIT, expected, &timeout, NULL, 0);
    if (rc == 0) return 0;
    if (errno == EAGAIN || errno == EINTR) return 0;
    if (errno == ETIMEDOUT) return 1;
    return -errno;
#elif defined(__APPLE__)
    uint32_t micros = timeout_ms > UINT32_MAX / 1000 ? UINT32_MAX : timeout_ms * 1000;
    int rc = __ulock_wait(LRD_UL_COMPARE_AND_WAIT_SHARED, (void *)word, expected, micros);
    if (rc >= 0) return 0;
    if (errno == EINTR || errno == EFAULT) return 0;
    if (errno == ETIMEDOUT) return 1;
    return -errno;
#else
    (void)word; (void)expected;
    struct timespec pause = { .tv_sec = 0, .tv_nsec = (long)(timeout_ms < 10 ? timeout_ms : 10) * 1000000L };
    nanosleep(&pause, NULL);
    return 1;
#endif
}

void lrd_wake_word(const void *word) {
#if defined(__linux__)
    (void)syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#elif defined(__APPLE__)
    (void)__ulock_wake(LRD_UL_COMPARE_AND_WAIT_SHARED | LRD_ULF_WAKE_ALL, (void *)word, 0);
#else
    (void)word;
#endif
}
