/* The hand-written header and the header the Swift compiler writes for the @c exports, in one
 * translation unit: any difference in a signature is a "conflicting types" error. */
#include "larder.h"
#include "LarderC-Swift.h"

int main(void) { return 0; }
