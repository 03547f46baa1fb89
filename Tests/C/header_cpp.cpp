// The public header must compile as C++ too (extern "C", no C-only constructs).
#include "larder.h"

#include <cstdio>

int main() {
    larder_options options;
    larder_options_init(&options);
    struct larder_stats stats = {};
    stats.struct_size = sizeof stats;
    std::printf("%s %u %u\n", larder_version(), options.struct_size, stats.struct_size);
    return 0;
}
