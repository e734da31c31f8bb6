/* The runtime of runtime.h. Collections: the thread whose allocation failed parks, takes the
 * collector lock and, unless another thread collected meanwhile, stops the world
 * (hab_collection_begin), copies what the root stacks reach from the current half to the
 * other (Cheney: the copies are scanned in address order, each reference fixed as it is met),
 * hands Hab the rest of the other half as the next allocation range, and allocates the object
 * that failed inside the collection (hab_collection_alloc), so that threads that resume first
 * cannot take the room it made. */
#define _POSIX_C_SOURCE 200809L
#include "runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Header: bit 0 marks a filler, bit 1 a forwarded object (the rest is then the copy's
 * address); otherwise bits 3..31 are the size in bytes (a multiple of 8) and bits 32..63 the
 * number of references. */
#define FILLER_BIT 1u
#define FORWARDED_BIT 2u
#define SIZE_MASK 0xfffffff8u

static size_t object_bytes(uint64_t header) {
    return (size_t)(header & SIZE_MASK);
}
static uint32_t object_refs(uint64_t header) {
    return (uint32_t)(header >> 32);
}

/* The object model Hab walks by. */
static size_t model_object_size(void *user, const void *object) {
    (void)user;
    return object_bytes(*(const uint64_t *)object);
}
static void model_write_filler(void *user, void *address, size_t bytes) {
    (void)user;
    *(uint64_t *)address = (uint64_t)bytes | FILLER_BIT;
}
static int model_is_filler(void *user, const void *object) {
    (void)user;
    return (int)(*(const uint64_t *)object & FILLER_BIT);
}

struct rt_thread {
    rt_runtime *runtime;
    hab_mutator *mutator;
    rt_object **roots;
    size_t root_count, root_capacity;
    rt_thread *next;
};

struct rt_runtime {
    hab_heap *heap;
    uintptr_t halves[2][2]; /* [half][start, end) */
    int current;            /* the half allocated in */
    int verify;
    pthread_mutex_t collector; /* one collection at a time; guards `current` and statistics */
    pthread_mutex_t threads_lock;
    rt_thread *threads;
    atomic_ullong collections;
    uint64_t copied_bytes;
    double pause_ms;
};

static void die(const char *what) {
    fprintf(stderr, "runtime: %s: %s\n", what, hab_last_error());
    exit(2);
}

/* `memory`, or exit with a message when the C heap refused it. */
static void *checked(void *memory) {
    if (memory == NULL) {
        fprintf(stderr, "runtime: out of C heap memory\n");
        exit(2);
    }
    return memory;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

rt_runtime *rt_new(const rt_options *options) {
    rt_runtime *runtime = checked(calloc(1, sizeof *runtime));
    char capacity[32];
    snprintf(capacity, sizeof capacity, "%zu", 2 * options->space_bytes);
    hab_config *config = hab_config_new();
    if (hab_config_set(config, "capacity", capacity) != HAB_OK ||
        hab_config_set(config, "mode", options->mode) != HAB_OK ||
        (options->middle != NULL && hab_config_set(config, "middle", options->middle) != HAB_OK)) {
        fprintf(stderr, "runtime: %s\n", hab_last_error());
        hab_config_free(config);
        free(runtime);
        return NULL;
    }
    hab_object_model model = {model_object_size, model_write_filler, model_is_filler, 8, NULL};
    hab_status status = hab_heap_new(config, &model, &runtime->heap);
    hab_config_free(config);
    if (status != HAB_OK) {
        fprintf(stderr, "runtime: %s\n", hab_last_error());
        free(runtime);
        return NULL;
    }
    uintptr_t start, end;
    if (hab_heap_range(runtime->heap, &start, &end) != HAB_OK) {
        die("hab_heap_range");
    }
    uintptr_t middle = start + options->space_bytes;
    runtime->halves[0][0] = start;
    runtime->halves[0][1] = middle;
    runtime->halves[1][0] = middle;
    runtime->halves[1][1] = middle + options->space_bytes;
    runtime->verify = options->verify;
    pthread_mutex_init(&runtime->collector, NULL);
    pthread_mutex_init(&runtime->threads_lock, NULL);
    /* No thread yet: this collection only installs the first half as the allocation range. */
    hab_collection *collection;
    if (hab_collection_begin(runtime->heap, 0, &collection) != HAB_OK ||
        hab_collection_set_range(collection, start, middle) != HAB_OK ||
        hab_collection_finish(collection) != HAB_OK) {
        die("the first allocation range");
    }
    return runtime;
}

void rt_free(rt_runtime *runtime) {
    hab_heap_free(runtime->heap);
    pthread_mutex_destroy(&runtime->collector);
    pthread_mutex_destroy(&runtime->threads_lock);
    free(runtime);
}

rt_thread *rt_attach(rt_runtime *runtime) {
    rt_thread *thread = checked(calloc(1, sizeof *thread));
    thread->runtime = runtime;
    thread->root_capacity = 256;
    thread->roots = checked(malloc(thread->root_capacity * sizeof *thread->roots));
    pthread_mutex_lock(&runtime->threads_lock);
    thread->next = runtime->threads;
    runtime->threads = thread;
    pthread_mutex_unlock(&runtime->threads_lock);
    thread->mutator = hab_attach(runtime->heap);
    if (thread->mutator == NULL) {
        die("hab_attach");
    }
    return thread;
}

void rt_detach(rt_thread *thread) {
    rt_runtime *runtime = thread->runtime;
    hab_detach(thread->mutator);
    pthread_mutex_lock(&runtime->threads_lock);
    for (rt_thread **link = &runtime->threads; *link != NULL; link = &(*link)->next) {
        if (*link == thread) {
            *link = thread->next;
            break;
        }
    }
    pthread_mutex_unlock(&runtime->threads_lock);
    free(thread->roots);
    free(thread);
}

size_t rt_push(rt_thread *thread, rt_object *object) {
    if (thread->root_count == thread->root_capacity) {
        /* Only this thread's running code and collections (with it stopped) touch its roots. */
        thread->root_capacity *= 2;
        thread->roots =
            checked(realloc(thread->roots, thread->root_capacity * sizeof *thread->roots));
    }
    thread->roots[thread->root_count] = object;
    return thread->root_count++;
}

rt_object *rt_root(const rt_thread *thread, size_t slot) {
    return thread->roots[slot];
}

void rt_pop(rt_thread *thread, size_t count) {
    thread->root_count -= count;
}

void *rt_data(rt_object *object) {
    return &object->refs[object_refs(object->header)];
}

void rt_blocking_begin(rt_thread *thread) {
    if (hab_blocking_begin(thread->mutator) != HAB_OK) {
        die("hab_blocking_begin");
    }
}

void rt_blocking_end(rt_thread *thread) {
    if (hab_blocking_end(thread->mutator) != HAB_OK) {
        die("hab_blocking_end");
    }
}

/* Copies `object` to `*free` unless it was copied already; its copy's address. */
static rt_object *forward(rt_object *object, uintptr_t *free) {
    if (object == NULL) {
        return NULL;
    }
    uint64_t header = object->header;
    if (header & FORWARDED_BIT) {
        return (rt_object *)(uintptr_t)(header & ~(uint64_t)FORWARDED_BIT);
    }
    size_t bytes = object_bytes(header);
    rt_object *copy = (rt_object *)*free;
    memcpy(copy, object, bytes);
    *free += bytes;
    object->header = (uint64_t)(uintptr_t)copy | FORWARDED_BIT;
    return copy;
}

/* Checks that [start, end) parses as objects whose references point at objects of it. */
static void check_half(uintptr_t start, uintptr_t end) {
    for (uintptr_t at = start; at < end;) {
        rt_object *object = (rt_object *)at;
        size_t bytes = object_bytes(object->header);
        if (bytes == 0 || (object->header & (FILLER_BIT | FORWARDED_BIT)) || at + bytes > end) {
            fprintf(stderr, "runtime: bad object at %#lx after a collection\n",
                    (unsigned long)at);
            exit(3);
        }
        for (uint32_t i = 0; i < object_refs(object->header); i++) {
            uintptr_t target = (uintptr_t)object->refs[i];
            if (target != 0 && (target < start || target >= end)) {
                fprintf(stderr, "runtime: a reference out of the survivors at %#lx\n",
                        (unsigned long)at);
                exit(3);
            }
        }
        at += bytes;
    }
}

/* The world is stopped (every thread parked): copy what the roots reach into the other half. */
static void copy_reachable(rt_runtime *runtime, hab_collection *collection) {
    if (runtime->verify && hab_collection_verify(collection) != HAB_OK) {
        die("the heap before a collection");
    }
    int to = 1 - runtime->current;
    uintptr_t start = runtime->halves[to][0], free = start;
    pthread_mutex_lock(&runtime->threads_lock);
    for (rt_thread *thread = runtime->threads; thread != NULL; thread = thread->next) {
        for (size_t i = 0; i < thread->root_count; i++) {
            thread->roots[i] = forward(thread->roots[i], &free);
        }
    }
    pthread_mutex_unlock(&runtime->threads_lock);
    for (uintptr_t scan = start; scan < free;) {
        rt_object *object = (rt_object *)scan;
        for (uint32_t i = 0; i < object_refs(object->header); i++) {
            object->refs[i] = forward(object->refs[i], &free);
        }
        scan += object_bytes(object->header);
    }
    if (runtime->verify) {
        check_half(start, free);
    }
    if (hab_collection_set_range(collection, free, runtime->halves[to][1]) != HAB_OK) {
        die("hab_collection_set_range");
    }
    runtime->current = to;
    runtime->copied_bytes += free - start;
}

/* A new object's header and references, before anything can walk or collect. */
static rt_object *initialise(rt_object *object, uint32_t refs, size_t bytes) {
    object->header = (uint64_t)refs << 32 | bytes;
    for (uint32_t i = 0; i < refs; i++) {
        object->refs[i] = NULL;
    }
    return object;
}

/* The calling thread's allocation of `bytes` failed after `seen` collections: collect, unless
 * another thread did meanwhile (then NULL: retry), and have the collection allocate the object
 * before any other thread resumes (hab_collection_alloc), so that no thread is starved. The
 * object rides on the thread's root stack until the thread runs again: another thread's
 * collection may stop it, and move the object, before it unparks. Out of memory only when the
 * collection left no room for the object. */
static rt_object *collect(rt_thread *thread, unsigned long long seen, uint32_t refs,
                          size_t bytes) {
    rt_runtime *runtime = thread->runtime;
    if (hab_park(thread->mutator) != HAB_OK) {
        die("hab_park");
    }
    int served = 0;
    pthread_mutex_lock(&runtime->collector);
    if (atomic_load(&runtime->collections) == seen) {
        double started = now_ms();
        hab_collection *collection;
        if (hab_collection_begin(runtime->heap, 0, &collection) != HAB_OK) {
            die("hab_collection_begin");
        }
        copy_reachable(runtime, collection);
        rt_object *object = hab_collection_alloc(collection, thread->mutator, bytes);
        if (object == NULL) {
            die(hab_last_status() == HAB_OUT_OF_MEMORY ? "out of memory" : "hab_collection_alloc");
        }
        rt_push(thread, initialise(object, refs, bytes));
        served = 1;
        if (hab_collection_finish(collection) != HAB_OK) {
            die("hab_collection_finish");
        }
        runtime->pause_ms += now_ms() - started;
        atomic_fetch_add(&runtime->collections, 1);
    }
    pthread_mutex_unlock(&runtime->collector);
    if (hab_unpark(thread->mutator) != HAB_OK) {
        die("hab_unpark");
    }
    if (!served) {
        return NULL;
    }
    rt_object *object = rt_root(thread, thread->root_count - 1);
    rt_pop(thread, 1);
    return object;
}

/* Allocation: inline, else a collection that allocates the object itself. A thread whose
 * every attempt meets another thread's collection first gives up after this many. */
#define STARVED_ATTEMPTS 64

rt_object *rt_alloc(rt_thread *thread, uint32_t refs, size_t data_bytes) {
    size_t bytes = sizeof(uint64_t) + refs * sizeof(rt_object *) + data_bytes;
    for (int attempt = 0; attempt < STARVED_ATTEMPTS; attempt++) {
        unsigned long long seen = atomic_load(&thread->runtime->collections);
        rt_object *object = hab_alloc(thread->mutator, bytes);
        if (object != NULL) {
            return initialise(object, refs, bytes);
        }
        if (hab_last_status() != HAB_OUT_OF_MEMORY) {
            die("hab_alloc");
        }
        object = collect(thread, seen, refs, bytes);
        if (object != NULL) {
            return object;
        }
    }
    die("starved: every attempt met another thread's collection");
    return NULL;
}

rt_stats rt_statistics(rt_runtime *runtime) {
    pthread_mutex_lock(&runtime->collector);
    rt_stats stats = {atomic_load(&runtime->collections), runtime->copied_bytes,
                      runtime->pause_ms};
    pthread_mutex_unlock(&runtime->collector);
    return stats;
}
