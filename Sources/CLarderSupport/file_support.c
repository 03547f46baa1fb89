#if defined(__linux__)
#define _GNU_SOURCE
#endif
#include "CLarderSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#if defined(__linux__) && !defined(F_OFD_SETLK)
#define F_OFD_GETLK 36
#define F_OFD_SETLK 37
#define F_OFD_SETLKW 38
#endif

/* A lock request of `type` on the one byte at `start` (l_pid 0, as OFD locks require). */
static struct flock one_byte(uint64_t start, short type) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)start;
    fl.l_len = 1;
    return fl;
}

int lrd_lock_byte(int fd, uint64_t start, int mode, int wait, int process_owned) {
    struct flock fl = one_byte(start, mode == LRD_UNLOCK ? F_UNLCK : (mode == LRD_LOCK_SHARED ? F_RDLCK : F_WRLCK));
#if defined(__linux__)
    int cmd = process_owned ? (wait ? F_SETLKW : F_SETLK) : (wait ? F_OFD_SETLKW : F_OFD_SETLK);
#else
    (void)process_owned;
    int cmd = wait ? F_SETLKW : F_SETLK;
#endif
    for (;;) {
        if (fcntl(fd, cmd, &fl) == 0) return 0;
        if (errno == EINTR) continue;
        /* Record locks' deadlock check looks at processes, not threads: a process waiting here
         * while another of its threads holds what the holder of this byte waits for is told
         * EDEADLK, though that thread will let go. Larder's waits never close a cycle (bytes 1
         * and 3 are waited for only shared, and taken exclusively only without waiting; the
         * holder of byte 2 waits for no other byte), so the wait goes on. */
        if (errno == EDEADLK && wait) {
            usleep(1000);
            continue;
        }
        return errno;
    }
}

int lrd_byte_is_locked(int fd, uint64_t start, int process_owned) {
    struct flock fl = one_byte(start, F_WRLCK); /* asked about, not taken: allowed read-only */
#if defined(__linux__)
    int cmd = process_owned ? F_GETLK : F_OFD_GETLK;
#else
    (void)process_owned;
    int cmd = F_GETLK;
#endif
    for (;;) {
        if (fcntl(fd, cmd, &fl) == 0) return fl.l_type != F_UNLCK;
        if (errno != EINTR) return -errno;
    }
}

/* /dev/null, opened once: a retirement then needs no free descriptor, and so cannot fail for
 * want of one (a failed retirement would leave the number naming the file, to be closed later,
 * dropping the process's locks where they belong to the process). */
static int null_descriptor = -1;
static dev_t null_device;
static pthread_once_t null_once = PTHREAD_ONCE_INIT;

static void open_null(void) {
    null_descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC);
    struct stat info;
    if (null_descriptor >= 0 && fstat(null_descriptor, &info) == 0) null_device = info.st_rdev;
}

/* Whether `fd` is still /dev/null: a program that closed every descriptor may have had the number
 * given to another file since (a cache file, even), which a retirement must not copy. */
static int is_null_descriptor(int fd) {
    struct stat info;
    return fd >= 0 && fstat(fd, &info) == 0 && S_ISCHR(info.st_mode) && info.st_rdev == null_device;
}

void lrd_prepare_retirement(void) { pthread_once(&null_once, open_null); }

void lrd_fill_standard_descriptors(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        /* open takes the lowest free number: this one, unless another thread took it first. */
        int null = open("/dev/null", O_RDONLY);
        if (null < 0) return;
        if (null > 2) close(null);
    }
}

int lrd_retire_descriptor(int fd) {
    lrd_prepare_retirement();
    int null = null_descriptor;
    /* Closed by the program since, its number perhaps another file's now: a fresh one, this once. */
    int own = !is_null_descriptor(null);
    if (own && (null = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) return errno;
    int rc = 0;
    while (dup2(null, fd) < 0) {
        if (errno != EINTR && errno != EBUSY) {
            rc = errno;
            break;
        }
    }
    /* dup2 does not carry close-on-exec over (Apple platforms have no dup3). */
    if (rc == 0) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (own) close(null);
    return rc;
}

#if defined(__APPLE__)
/* Takes the blocks of [from, end), past the file's end or a hole in it, by writing zeros over them (glibc's
 * posix_fallocate does the same where the file system cannot preallocate), 64 KiB a call: on a
 * network volume each call is a round trip. */
static int write_zeros(int fd, uint64_t from, uint64_t end) {
    static const char zeros[65536];
    for (uint64_t at = from; at < end;) {
        size_t count = end - at < sizeof zeros ? (size_t)(end - at) : sizeof zeros;
        ssize_t written = pwrite(fd, zeros, count, (off_t)at);
        if (written < 0) {
            if (errno != EINTR) return errno;
            continue;
        }
        at += (uint64_t)written;
    }
    return 0;
}
#endif

int lrd_preallocate(int fd, uint64_t offset, uint64_t length) {
#if defined(__APPLE__)
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    uint64_t end = offset + length;
    if ((uint64_t)st.st_size >= end) return 0;
    fstore_t store;
    memset(&store, 0, sizeof store);
    store.fst_flags = F_ALLOCATECONTIG;
    store.fst_posmode = F_PEOFPOSMODE;
    store.fst_offset = 0;
    store.fst_length = (off_t)(end - (uint64_t)st.st_size);
    if (fcntl(fd, F_PREALLOCATE, &store) == -1) {
        store.fst_flags = F_ALLOCATEALL;
        if (fcntl(fd, F_PREALLOCATE, &store) == -1) {
            /* FAT, exFAT and network volumes may not preallocate at all. */
            if (errno != ENOTSUP && errno != EOPNOTSUPP && errno != EINVAL) return errno;
            int rc = write_zeros(fd, (uint64_t)st.st_size, end);
            if (rc != 0) return rc;
        }
    }
    for (;;) {
        if (ftruncate(fd, (off_t)end) == 0) return 0;
        if (errno != EINTR) return errno;
    }
#else
    for (;;) {
        int rc = posix_fallocate(fd, (off_t)offset, (off_t)length);
        if (rc != EINTR) return rc;
    }
#endif
}

/* Reserves disk blocks for the holes of [0, size): a file copied sparse (cp --sparse, rsync -S,
 * a backup restored) has none for its runs of zeros, and a store through the map into a hole on
 * a full disk is SIGBUS, not an error. A file with as many blocks as bytes has no hole (one
 * fstat); otherwise Linux reserves the whole range (fallocate keeps every byte), and Apple
 * platforms, whose F_PREALLOCATE reserves only past the end of the file, write zeros into each
 * hole the file system reports (a hole reads as zeros anyway). */
int lrd_reserve_holes(int fd, uint64_t size) {
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    uint64_t reserved = (uint64_t)st.st_blocks * 512;
    if (reserved >= size) return 0;
    /* A file claiming more than the disk holds (a hostile sparse file of a terabyte) is refused
     * at once, rather than after filling the disk, which other programs need too. */
    struct statvfs fs;
    if (fstatvfs(fd, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < size - reserved) return ENOSPC;
#if defined(__APPLE__)
    off_t hole = lseek(fd, 0, SEEK_HOLE);
    if (hole < 0) return errno == EINVAL || errno == ENXIO || errno == ENOTSUP ? 0 : errno;
    while ((uint64_t)hole < size) {
        off_t data = lseek(fd, hole, SEEK_DATA);
        if (data < 0 && errno != ENXIO) return errno;
        uint64_t end = data < 0 || (uint64_t)data > size ? size : (uint64_t)data;
        int rc = write_zeros(fd, (uint64_t)hole, end);
        if (rc != 0) return rc;
        if (end >= size) break;
        hole = lseek(fd, (off_t)end, SEEK_HOLE);
        if (hole < 0) return errno;
    }
    return 0;
#else
    /* fallocate, not posix_fallocate: where the file system cannot reserve (ZFS; or compressed,
     * with fewer blocks than bytes on every open), glibc's stand-in would write a byte into every
     * block of the file, and the file stays as safe as its growth made it. */
    for (;;) {
        if (fallocate(fd, 0, 0, (off_t)size) == 0) return 0;
        if (errno == EOPNOTSUPP) return 0;
        if (errno != EINTR) return errno;
    }
#endif
}

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23
#endif

int lrd_populate_for_writing(void *address, size_t length) {
#if defined(__linux__)
    for (;;) {
        if (madvise(address, length, MADV_POPULATE_WRITE) == 0) return 0;
        if (errno != EINTR) return errno;
    }
#else
    (void)address;
    (void)length;
    return ENOTSUP;
#endif
}

typedef struct {
    uint8_t *address;
    size_t length;
    void (*done)(void *context);
    void *context;
} populate_job;

static void *populate_run(void *argument) {
    populate_job job = *(populate_job *)argument;
    free(argument);
    const size_t chunk = (size_t)1 << 20;
    for (size_t at = 0; at < job.length; at += chunk) {
        size_t length = job.length - at < chunk ? job.length - at : chunk;
        /* A failure (the file cut short by another process, memory pressure) leaves the rest to
         * be faulted by the writer. */
        if (lrd_populate_for_writing(job.address + at, length) != 0) break;
    }
    job.done(job.context);
    return NULL;
}

int lrd_populate_in_background(void *address, size_t length, void (*done)(void *context), void *context) {
    populate_job *job = malloc(sizeof *job);
    if (!job) return ENOMEM;
    job->address = (uint8_t *)address;
    job->length = length;
    job->done = done;
    job->context = context;
    pthread_attr_t attributes;
    int rc = pthread_attr_init(&attributes);
    if (rc) {
        free(job);
        return rc;
    }
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    /* The thread starts with every signal blocked: they stay the application's threads' to take. */
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pthread_t thread;
    rc = pthread_create(&thread, &attributes, populate_run, job);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    pthread_attr_destroy(&attributes);
    if (rc) free(job);
    return rc;
}
