#include "CLarderSupport.h"

LRD_THREAD_LOCAL void *lrd_thread_borrowed;
LRD_THREAD_LOCAL int lrd_thread_has_error_message;
LRD_THREAD_LOCAL uint32_t lrd_thread_number_value;

/* The last number given to a thread. */
static uint32_t lrd_last_thread_number;

uint32_t lrd_assign_thread_number(void) {
    uint32_t number;
    do {
        number = __atomic_add_fetch(&lrd_last_thread_number, 1, __ATOMIC_RELAXED);
    } while (number == 0);
    lrd_thread_number_value = number;
    return number;
}
