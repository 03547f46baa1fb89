/* Completes `struct larder` for the Swift side only, so that Swift sees `larder *` (and the
 * generated header says `larder *`) rather than an untyped pointer. C users never include this:
 * to them the handle stays opaque. Its bytes are never read: the pointer is a retained Swift
 * object. */
#include "../../include/larder.h"
struct larder { unsigned char opaque_; };
