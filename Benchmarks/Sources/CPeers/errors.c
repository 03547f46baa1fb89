#include "CPeers.h"
#include "peer_util.h"

static _Thread_local char last_error[512];

void bench_set_error(const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(last_error, sizeof last_error, format, args);
    va_end(args);
}

const char *bench_last_error(void) { return last_error; }
