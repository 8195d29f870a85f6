/*
 * The one monotonic clock: every deadline, timeout and duration in the tree
 * (host and guest) reads it here, in milliseconds.
 */
#ifndef AIBOX_CLOCK_H
#define AIBOX_CLOCK_H

#include <stdint.h>

/*
 * CLOCK_MONOTONIC in milliseconds: never goes back, does not follow the
 * wall clock, and starts at an arbitrary point (compare two readings only).
 */
int64_t clock_ms(void);

#endif
