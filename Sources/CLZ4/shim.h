/* The system liblz4 (Debian: liblz4-dev; Homebrew: lz4), found through pkg-config. */
#include <lz4.h>
