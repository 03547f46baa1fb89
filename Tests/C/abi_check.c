/* The hand-written header and the header the Swift compiler writes for the @c exports, in one
 * translation unit: any difference in a signature is a "conflicting types" error. */
#include "larder.h"
/* The macro of that name would rewrite the generated declaration of the function. */
#undef larder_options_init
#include "LarderC-Swift.h"

int main(void) { return 0; }
