/* The system liblz4 (Debian: liblz4-dev), found through pkg-config. Not used on Apple platforms,
 * whose system LZ4 is the Compression framework (LZ4Codec.swift). */
#include <lz4.h>
