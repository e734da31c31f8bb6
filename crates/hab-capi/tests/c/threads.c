/* hab.h from C: version and bad-argument checks, then pthreads allocating through the inline
 * hab_alloc in a mode given on the command line, with collections when the heap fills up.
 * Every collection checks that the walk meets exactly the objects allocated since the last
 * one (by count and bytes) and that every payload is intact. Exit 0 on success. */
#include "hab.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 6
#define OBJECTS_PER_THREAD 200000
#define FILLER_BIT 1u

static int failures;
#define CHECK(condition)                                                                    \
    do {                                                                                    \
        if (!(condition)) {                                                                 \
            fprintf(stderr, "%s:%d: %s failed (last error: %s)\n", __FILE__, __LINE__,     \
                    #condition, hab_last_error());                                          \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

/* The object model: one header word holding the size, bit 0 marking fillers; a second word
 * holds a payload derived from the address, checked by every walk. */
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

static hab_heap *heap;
static pthread_mutex_t collector = PTHREAD_MUTEX_INITIALIZER;
static atomic_ullong allocated_objects, allocated_bytes;
/* Written under `collector`, read by running threads without it: a running thread must never
 * block on a lock a collector holds (the collector waits for it to stop). */
static atomic_ullong collections;

struct census {
    unsigned long long objects, bytes, bad_payloads;
};

static void visit(void *user, void *address, size_t bytes, int filler) {
    struct census *census = user;
    if (filler) {
        return;
    }
    census->objects++;
    census->bytes += bytes;
    if (((uint64_t *)address)[1] != ((uint64_t)(uintptr_t)address ^ 0x5a5a5a5aull)) {
        census->bad_payloads++;
    }
}

/* The thread's heap is full: park, collect unless another thread just did, unpark. */
static void collect(hab_mutator *mutator, unsigned long long seen) {
    CHECK(hab_park(mutator) == HAB_OK);
    pthread_mutex_lock(&collector);
    if (atomic_load(&collections) == seen) {
        hab_collection *collection = NULL;
        CHECK(hab_collection_begin(heap, 10000, &collection) == HAB_OK);
        struct census census = {0, 0, 0};
        CHECK(hab_collection_walk(collection, visit, &census) == HAB_OK);
        CHECK(census.objects == atomic_load(&allocated_objects));
        CHECK(census.bytes == atomic_load(&allocated_bytes));
        CHECK(census.bad_payloads == 0);
        CHECK(hab_collection_reset(collection) == HAB_OK);
        atomic_store(&allocated_objects, 0);
        atomic_store(&allocated_bytes, 0);
        atomic_fetch_add(&collections, 1);
        CHECK(hab_collection_finish(collection) == HAB_OK);
    }
    pthread_mutex_unlock(&collector);
    CHECK(hab_unpark(mutator) == HAB_OK);
}

static void *mutator_thread(void *argument) {
    size_t index = (size_t)(uintptr_t)argument;
    hab_mutator *mutator = hab_attach(heap);
    CHECK(mutator != NULL);
    for (size_t done = 0; done < OBJECTS_PER_THREAD;) {
        size_t bytes = 16 + 8 * ((index + done) % 6);
        unsigned long long seen = atomic_load(&collections);
        uint64_t *object = hab_alloc(mutator, bytes);
        if (object == NULL) {
            collect(mutator, seen);
            continue;
        }
        object[0] = bytes;
        object[1] = (uint64_t)(uintptr_t)object ^ 0x5a5a5a5aull;
        atomic_fetch_add(&allocated_objects, 1);
        atomic_fetch_add(&allocated_bytes, bytes);
        done++;
        if (done % 1024 == 0) {
            hab_poll(mutator);
        }
    }
    hab_detach(mutator);
    return NULL;
}

static void bad_arguments(void) {
    hab_config *config = hab_config_new();
    CHECK(hab_config_set(config, "colour", "blue") == HAB_CONFIG_ERROR);
    CHECK(strstr(hab_last_error(), "colour") != NULL);
    CHECK(hab_config_set(config, "capacity", "lots") == HAB_CONFIG_ERROR);
    CHECK(strstr(hab_last_error(), "capacity") != NULL);
    CHECK(hab_config_set(NULL, "capacity", "1MiB") == HAB_INVALID_ARGUMENT);
    CHECK(hab_config_set(config, NULL, "1MiB") == HAB_INVALID_ARGUMENT);
    CHECK(hab_config_set(config, "min_tlab", "1MiB") == HAB_OK);
    CHECK(hab_config_set(config, "max_tlab", "64KiB") == HAB_OK);
    hab_object_model model = {object_size, write_filler, is_filler, 8, NULL};
    hab_heap *bad = NULL;
    CHECK(hab_heap_new(config, &model, &bad) == HAB_CONFIG_ERROR);
    CHECK(bad == NULL);
    CHECK(hab_heap_new(config, NULL, &bad) == HAB_INVALID_ARGUMENT);
    hab_object_model incomplete = {object_size, NULL, is_filler, 8, NULL};
    CHECK(hab_config_set(config, "min_tlab", "2KiB") == HAB_OK);
    CHECK(hab_heap_new(config, &incomplete, &bad) == HAB_INVALID_ARGUMENT);
    CHECK(hab_attach(NULL) == NULL);
    CHECK(hab_alloc_slow(NULL, 16) == NULL);
    CHECK(hab_park(NULL) == HAB_INVALID_ARGUMENT);
    CHECK(hab_collection_begin(NULL, 0, NULL) == HAB_INVALID_ARGUMENT);
    CHECK(hab_collection_finish(NULL) == HAB_INVALID_ARGUMENT);
    CHECK(hab_stats_json(NULL, NULL, 0) == 0);
    hab_heap *good = NULL;
    CHECK(hab_heap_new(config, &model, &good) == HAB_OK);
    hab_mutator *mutator = hab_attach(good);
    CHECK(hab_alloc_slow(mutator, 12) == NULL);
    CHECK(strstr(hab_last_error(), "alignment") != NULL);
    CHECK(hab_alloc_slow(mutator, 0) == NULL);
    CHECK(hab_unpark(mutator) == HAB_INVALID_ARGUMENT);
    CHECK(hab_park(mutator) == HAB_OK);
    CHECK(hab_alloc_slow(mutator, 16) == NULL);
    CHECK(hab_park(mutator) == HAB_INVALID_ARGUMENT);
    CHECK(hab_unpark(mutator) == HAB_OK);
    hab_detach(mutator);
    hab_heap_free(good);
    hab_config_free(config);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "tlab";
    CHECK(hab_abi_version() == HAB_ABI_VERSION);
    bad_arguments();

    hab_config *config = hab_config_new();
    CHECK(hab_config_set(config, "capacity", "8MiB") == HAB_OK);
    CHECK(hab_config_set(config, "mode", mode) == HAB_OK);
    CHECK(hab_config_set(config, "tlab", "16KiB") == HAB_OK);
    if (strcmp(mode, "hab") == 0) {
        CHECK(hab_config_set(config, "middle", "core:256KiB") == HAB_OK);
    }
    hab_object_model model = {object_size, write_filler, is_filler, 8, NULL};
    CHECK(hab_heap_new(config, &model, &heap) == HAB_OK);
    hab_config_free(config);
    if (heap == NULL) {
        return 1;
    }
    pthread_t threads[THREADS];
    for (size_t i = 0; i < THREADS; i++) {
        pthread_create(&threads[i], NULL, mutator_thread, (void *)(uintptr_t)i);
    }
    for (size_t i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
    }
    CHECK(atomic_load(&collections) > 0);
    char json[4096];
    size_t length = hab_stats_json(heap, json, sizeof json);
    CHECK(length > 0 && length < sizeof json && strstr(json, "\"collections\"") != NULL);
    hab_heap_free(heap);
    printf("mode %s: %d threads, %d objects each, %llu collections, every walk exact\n", mode,
           THREADS, OBJECTS_PER_THREAD, atomic_load(&collections));
    return failures == 0 ? 0 : 1;
}
