#include "CLarderSupport.h"

#include <errno.h>
#include <limits.h>
#include <time.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__APPLE__)
/* os_sync_wait_on_address (macOS 14.4, iOS 17.4 and later), public, with the shared flag: it works
 * across processes on a shared mapping. Where it is missing, a short sleep (no private call such
 * as __ulock_wait, which App Store review refuses). */
#if __has_include(<os/os_sync_wait_on_address.h>)
#include <os/clock.h>
#include <os/os_sync_wait_on_address.h>
#define LRD_HAS_OS_SYNC 1
#endif
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
#elif defined(__APPLE__) && defined(LRD_HAS_OS_SYNC)
    if (__builtin_available(macOS 14.4, iOS 17.4, tvOS 17.4, watchOS 10.4, *)) {
        if (timeout_ms == 0) return 1;  /* the call refuses a timeout of 0 */
        int rc = os_sync_wait_on_address_with_timeout((void *)word, expected, sizeof(uint32_t), OS_SYNC_WAIT_ON_ADDRESS_SHARED,
                                                      OS_CLOCK_MACH_ABSOLUTE_TIME, (uint64_t)timeout_ms * 1000000u);
        if (rc >= 0) return 0;
        if (errno == EINTR || errno == EFAULT || errno == EAGAIN) return 0;
        if (errno == ETIMEDOUT) return 1;
        return -errno;
    }
    struct timespec pause = { .tv_sec = 0, .tv_nsec = (long)(timeout_ms < 10 ? timeout_ms : 10) * 1000000L };
    nanosleep(&pause, NULL);
    return 1;
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
#elif defined(__APPLE__) && defined(LRD_HAS_OS_SYNC)
    if (__builtin_available(macOS 14.4, iOS 17.4, tvOS 17.4, watchOS 10.4, *))
        (void)os_sync_wake_by_address_all((void *)word, sizeof(uint32_t), OS_SYNC_WAKE_BY_ADDRESS_SHARED);
#else
    (void)word;
#endif
}
