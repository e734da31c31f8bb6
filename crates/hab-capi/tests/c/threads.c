/* hab.h from C: version and bad-argument checks, then pthreads allocating through the inline
 * hab_alloc (odd threads: hab_alloc_cpu_lab_first) in a mode given on the command line, with collections when the heap fills up,
 * while each thread moves itself between CPUs and another thread sends them a storm of
 * signals (each aborts the restartable section it lands in). Every collection checks that the
 * walk meets exactly the objects allocated since the last one (by count and bytes) and that
 * every payload is intact. A second argument "inline" asserts that the per-CPU LAB path is
 * published for the inline hab_alloc. Exit 0 on success. */
#define _GNU_SOURCE
#include "hab.h"
#include "check.h"
#include "model.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 6
/* Objects per thread; in cpu-lab mode many more, so that preemptions land inside restartable
 * sections often enough for a broken section to show in the walks. */
static size_t objects_per_thread = 200000;

/* The object model is model.h's; a second word of each object holds a payload derived from
 * the address, checked by every walk. */

static hab_heap *heap;

struct census {
    unsigned long long objects, bytes, bad_payloads;
};
static pthread_mutex_t collector = PTHREAD_MUTEX_INITIALIZER;
/* Each thread's objects and bytes since the last collection: written by their thread alone
 * while it runs, read and cleared by the collector while every thread is stopped (the stop
 * orders the accesses; relaxed atomics only keep the compiler honest, and cost no more than
 * plain loads and stores). */
static struct {
    atomic_ullong objects, bytes;
} allocated[THREADS];

static void count(size_t thread, size_t bytes) {
    atomic_store_explicit(&allocated[thread].objects,
                          atomic_load_explicit(&allocated[thread].objects, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&allocated[thread].bytes,
                          atomic_load_explicit(&allocated[thread].bytes, memory_order_relaxed) +
                              bytes,
                          memory_order_relaxed);
}

/* The objects and bytes of every thread since the last collection; clears them. */
static struct census allocated_since_last_collection(void) {
    struct census total = {0, 0, 0};
    for (size_t i = 0; i < THREADS; i++) {
        total.objects += atomic_exchange_explicit(&allocated[i].objects, 0, memory_order_relaxed);
        total.bytes += atomic_exchange_explicit(&allocated[i].bytes, 0, memory_order_relaxed);
    }
    return total;
}
/* Written under `collector`, read by running threads without it: a running thread must never
 * block on a lock a collector holds (the collector waits for it to stop). */
static atomic_ullong collections;


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
        struct census expected = allocated_since_last_collection();
        CHECK(census.objects == expected.objects);
        CHECK(census.bytes == expected.bytes);
        CHECK(census.bad_payloads == 0);
        CHECK(hab_collection_reset(collection) == HAB_OK);
        atomic_fetch_add(&collections, 1);
        CHECK(hab_collection_finish(collection) == HAB_OK);
    }
    pthread_mutex_unlock(&collector);
    CHECK(hab_unpark(mutator) == HAB_OK);
}

static int expect_inline_cpu_lab;
static atomic_int running_threads;
static atomic_ullong signals_sent;

/* Moves the calling thread to the next online CPU (round robin); nothing if it cannot. */
static void migrate(size_t step) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 1) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((int)(step % (size_t)cpus), &set);
        sched_setaffinity(0, sizeof set, &set);
    }
}

static void on_signal(int signal) {
    (void)signal;
}

static pthread_t threads[THREADS];

/* Sends SIGUSR1 to every mutator thread, round after round, while any runs. */
static void *signal_storm(void *argument) {
    (void)argument;
    while (atomic_load(&running_threads) > 0) {
        for (size_t i = 0; i < THREADS; i++) {
            if (pthread_kill(threads[i], SIGUSR1) == 0) {
                atomic_fetch_add(&signals_sent, 1);
            }
        }
        usleep(200);
    }
    return NULL;
}

static void *mutator_thread(void *argument) {
    size_t index = (size_t)(uintptr_t)argument;
    hab_mutator *mutator = hab_attach(heap);
    CHECK(mutator != NULL);
    if (expect_inline_cpu_lab) {
        CHECK(mutator->cpu_lab_slots != 0 && mutator->cpu_lab_cpus > 0);
    }
    for (size_t done = 0; done < objects_per_thread;) {
        size_t bytes = 16 + 8 * ((index + done) % 6);
        unsigned long long seen = atomic_load(&collections);
        /* Odd threads take the per-CPU LAB first, even ones the TLAB: both inline orders. */
        uint64_t *object =
            index % 2 ? hab_alloc_cpu_lab_first(mutator, bytes) : hab_alloc(mutator, bytes);
        if (object == NULL) {
            CHECK(hab_last_status() == HAB_OUT_OF_MEMORY);
            collect(mutator, seen);
            continue;
        }
        object[0] = bytes;
        object[1] = (uint64_t)(uintptr_t)object ^ 0x5a5a5a5aull;
        count(index, bytes);
        done++;
        if (done % 1024 == 0) {
            hab_poll(mutator);
        }
        if (done % 8192 == 0) {
            migrate(index + done / 8192);
        }
        if (done % 50000 == 0) {
            /* A safe region: a blocked thread never holds a collection up. */
            CHECK(hab_blocking_begin(mutator) == HAB_OK);
            usleep(100);
            CHECK(hab_blocking_end(mutator) == HAB_OK);
        }
    }
    hab_detach(mutator);
    atomic_fetch_sub(&running_threads, 1);
    return NULL;
}

static void bad_arguments(void) {
    hab_config *config = hab_config_new();
    CHECK(hab_config_set(config, "colour", "blue") == HAB_CONFIG_ERROR);
    CHECK(strstr(hab_last_error(), "colour") != NULL);
    CHECK(hab_config_set(config, "capacity", "lots") == HAB_CONFIG_ERROR);
    CHECK(strstr(hab_last_error(), "capacity") != NULL);
    CHECK(hab_config_set(config, "end_of_cycle", "sometimes") == HAB_CONFIG_ERROR);
    CHECK(hab_config_set(config, "end_of_cycle", "false") == HAB_OK);
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
    CHECK(hab_last_status() == HAB_INVALID_ARGUMENT);
    CHECK(hab_alloc_slow(mutator, 0) == NULL);
    CHECK(hab_unpark(mutator) == HAB_INVALID_ARGUMENT);
    CHECK(hab_park(mutator) == HAB_OK);
    CHECK(hab_alloc_slow(mutator, 16) == NULL);
    CHECK(hab_park(mutator) == HAB_INVALID_ARGUMENT);
    CHECK(hab_blocking_begin(mutator) == HAB_INVALID_ARGUMENT);
    CHECK(strstr(hab_last_error(), "hab_blocking_begin") != NULL);
    CHECK(hab_unpark(mutator) == HAB_OK);
    CHECK(hab_blocking_end(mutator) == HAB_INVALID_ARGUMENT);
    CHECK(hab_blocking_end(NULL) == HAB_INVALID_ARGUMENT);
    hab_detach(mutator);
    hab_heap_free(good);
    hab_config_free(config);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "tlab";
    expect_inline_cpu_lab = argc > 2 && strcmp(argv[2], "inline") == 0;
    if (strcmp(mode, "cpu-lab") == 0) {
        objects_per_thread = 2000000;
    }
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
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &action, NULL);
    atomic_store(&running_threads, THREADS);
    for (size_t i = 0; i < THREADS; i++) {
        pthread_create(&threads[i], NULL, mutator_thread, (void *)(uintptr_t)i);
    }
    pthread_t storm;
    pthread_create(&storm, NULL, signal_storm, NULL);
    /* The storm first: it stops once every mutator thread is done, before any is joined. */
    pthread_join(storm, NULL);
    for (size_t i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
    }
    CHECK(atomic_load(&collections) > 0);
    char json[4096];
    size_t length = hab_stats_json(heap, json, sizeof json);
    CHECK(length > 0 && length < sizeof json && strstr(json, "\"collections\"") != NULL);
    hab_heap_free(heap);
    printf("mode %s: %d threads, %zu objects each, %llu collections, %llu signals, every walk "
           "exact%s\n",
           mode, THREADS, objects_per_thread, atomic_load(&collections),
           atomic_load(&signals_sent),
           expect_inline_cpu_lab ? ", per-CPU LAB path inline" : "");
    return CHECK_EXIT_STATUS;
}
