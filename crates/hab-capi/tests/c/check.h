/* CHECK for the C tests: a failed condition is printed with the thread's last Hab error and
 * counted (from any thread); main returns CHECK_EXIT_STATUS. */
#ifndef HAB_TESTS_CHECK_H
#define HAB_TESTS_CHECK_H

#include <stdatomic.h>
#include <stdio.h>

#include "hab.h"

static atomic_int check_failures;

#define CHECK(condition)                                                                    \
    do {                                                                                    \
        if (!(condition)) {                                                                 \
            fprintf(stderr, "%s:%d: %s failed (last error: %s)\n", __FILE__, __LINE__,     \
                    #condition, hab_last_error());                                          \
            atomic_fetch_add(&check_failures, 1);                                           \
        }                                                                                   \
    } while (0)

#define CHECK_EXIT_STATUS (atomic_load(&check_failures) == 0 ? 0 : 1)

#endif /* HAB_TESTS_CHECK_H */
