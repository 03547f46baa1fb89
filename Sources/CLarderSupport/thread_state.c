#include "CLarderSupport.h"

LRD_THREAD_LOCAL void *lrd_thread_borrowed;
LRD_THREAD_LOCAL int lrd_thread_has_error_message;
