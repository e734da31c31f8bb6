/* Instructions per object of the inline hab_alloc, counted with callgrind: allocate N 16-byte
 * objects (writing each header) in a 16 MiB heap in a mode (default tlab), resetting it when
 * full; run it for two N and divide the difference in instructions by the difference in N
 * (cpu-lab: with HAB_RSEQ=unregistered, as the Rust figures, since valgrind does not run
 * restartable sequences). A third argument, cpu-lab-first, allocates with
 * hab_alloc_cpu_lab_first instead. It prints the elapsed time per object (resets included),
 * for timing the paths with the thread pinned (taskset) and rseq registered:
 *
 *   cargo build --release -p hab-capi      # cpu-lab: --features instruction-counting, which
 *                                            # lets HAB_RSEQ=unregistered publish the LAB slot
 *   cc -O2 -Icrates/hab-capi/include crates/hab-capi/bench/alloc_loop.c \
 *       target/release/libhab_capi.a -lpthread -ldl -lm -o target/alloc_loop
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null target/alloc_loop 200000 [MODE [ORDER]]
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null target/alloc_loop 400000 [MODE [ORDER]]
 */
#include "hab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t object_size(void *user, const void *object) {
    (void)user;
    return (size_t)(*(const uint64_t *)object & ~(uint64_t)1);
}
static void write_filler(void *user, void *address, size_t bytes) {
    (void)user;
    *(uint64_t *)address = (uint64_t)bytes | 1;
}
static int is_filler(void *user, const void *object) {
    (void)user;
    return (int)(*(const uint64_t *)object & 1);
}

/* The measured loops, out of line so that each one's code is the loop alone. */
__attribute__((noinline)) static size_t allocate(hab_mutator *mutator, size_t objects) {
    for (size_t done = 0; done < objects; done++) {
        uint64_t *object = hab_alloc(mutator, 16);
        if (object == NULL) {
            return done;
        }
        object[0] = 16;
    }
    return objects;
}
__attribute__((noinline)) static size_t allocate_cpu_lab_first(hab_mutator *mutator,
                                                               size_t objects) {
    for (size_t done = 0; done < objects; done++) {
        uint64_t *object = hab_alloc_cpu_lab_first(mutator, 16);
        if (object == NULL) {
            return done;
        }
        object[0] = 16;
    }
    return objects;
}

int main(int argc, char **argv) {
    size_t objects = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    const char *mode = argc > 2 ? argv[2] : "tlab";
    size_t (*loop)(hab_mutator *, size_t) = allocate;
    if (argc > 3 && strcmp(argv[3], "cpu-lab-first") == 0) {
        loop = allocate_cpu_lab_first;
    } else if (argc > 3) {
        fprintf(stderr, "order: cpu-lab-first, or none\n");
        return 1;
    }
    hab_config *config = hab_config_new();
    hab_config_set(config, "capacity", "16MiB");
    hab_config_set(config, "tlab", "256KiB");
    if (hab_config_set(config, "mode", mode) != HAB_OK) {
        fprintf(stderr, "%s\n", hab_last_error());
        return 1;
    }
    hab_object_model model = {object_size, write_filler, is_filler, 8, NULL};
    hab_heap *heap = NULL;
    if (hab_heap_new(config, &model, &heap) != HAB_OK) {
        fprintf(stderr, "%s\n", hab_last_error());
        return 1;
    }
    hab_config_free(config);
    hab_mutator *mutator = hab_attach(heap);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (size_t done = 0; done < objects;) {
        done += loop(mutator, objects - done);
        if (done < objects) {
            hab_park(mutator);
            hab_collection *collection = NULL;
            hab_collection_begin(heap, 0, &collection);
            hab_collection_reset(collection);
            hab_collection_finish(collection);
            hab_unpark(mutator);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double elapsed_ns =
        (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
    printf("ns_per_object %.3f\n", elapsed_ns / (double)objects);
    hab_detach(mutator);
    hab_heap_free(heap);
    return 0;
}
