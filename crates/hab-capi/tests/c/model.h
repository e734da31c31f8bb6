/* The C tests' object model: one header word holding the size, bit 0 marking fillers. */
#ifndef HAB_TESTS_MODEL_H
#define HAB_TESTS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define FILLER_BIT 1u

static size_t object_size(void *user, const void *object) {
    (void)user;
    return (size_t)(*(const uint64_t *)object & ~(uint64_t)FILLER_BIT);
}
static void write_filler(void *user, void *address, size_t bytes) {
    (void)user;
    *(uint64_t *)address = (uint64_t)bytes | FILLER_BIT;
}
static int is_filler(void *user, const void *object) {
    (void)user;
    return (int)(*(const uint64_t *)object & FILLER_BIT);
}

#endif /* HAB_TESTS_MODEL_H */
