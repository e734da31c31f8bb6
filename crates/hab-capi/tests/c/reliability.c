/* hab.h under hostile use, in the mode given on the command line: sizes of 0 and sizes that
 * wrap on fresh, used and collected mutators (inline and out of line); a parked mutator that
 * allocates; a collection begun on a thread that exits; every call that would wait for the
 * calling thread itself; a collection that allocates for the thread that asked for it; calls
 * from a pthread key destructor; and fork while a collector thread collects. Built at -O2
 * (where the compiler trusts the header's promises) and under the sanitizers. Exit 0 when
 * every check held; an alarm turns a hang into a failure. */
#define _GNU_SOURCE
#include "hab.h"
#include "check.h"
#include "model.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static const char *mode = "tlab";

static hab_heap *new_heap(const char *capacity) {
    hab_config *config = hab_config_new();
    CHECK(hab_config_set(config, "capacity", capacity) == HAB_OK);
    CHECK(hab_config_set(config, "mode", mode) == HAB_OK);
    if (strcmp(mode, "hab") == 0) {
        CHECK(hab_config_set(config, "middle", "core:256KiB") == HAB_OK);
    }
    hab_object_model model = {object_size, write_filler, is_filler, 8, NULL};
    hab_heap *heap = NULL;
    CHECK(hab_heap_new(config, &model, &heap) == HAB_OK);
    hab_config_free(config);
    return heap;
}

/* An object of `bytes` with its header written, or NULL. */
static uint64_t *object(hab_mutator *mutator, size_t bytes) {
    uint64_t *address = hab_alloc(mutator, bytes);
    if (address != NULL) {
        address[0] = bytes;
    }
    return address;
}

/* Counts the objects (not fillers) a walk meets. */
static void count_object(void *user, void *address, size_t bytes, int filler) {
    (void)address;
    (void)bytes;
    if (!filler) {
        ++*(size_t *)user;
    }
}

/* Stops the world from a thread with no running mutator; checks the walk holds `objects`. */
static void collect_and_check(hab_heap *heap, size_t objects, int reset) {
    hab_collection *collection = NULL;
    CHECK(hab_collection_begin(heap, 10000, &collection) == HAB_OK);
    size_t walked = 0;
    CHECK(hab_collection_walk(collection, count_object, &walked) == HAB_OK);
    CHECK(walked == objects);
    if (reset) {
        CHECK(hab_collection_reset(collection) == HAB_OK);
    }
    CHECK(hab_collection_finish(collection) == HAB_OK);
}

/* The size reaches hab_alloc unknown to the compiler. */
static volatile size_t hidden_size;

static int refused(void *address, hab_status status) {
    return address == NULL && hab_last_status() == status;
}

/* Items 2 and 3: 0 and wrapping sizes, constant and hidden, on an empty TLAB (fresh, and after
 * a collection) and a used one; they never move a top, so later objects never overlap. */
static void sizes_that_wrap_or_are_zero(void) {
    hab_heap *heap = new_heap("4MiB");
    hab_mutator *mutator = hab_attach(heap);
    CHECK(refused(hab_alloc(mutator, 0), HAB_INVALID_ARGUMENT)); /* fresh: empty TLAB */
    hidden_size = 0;
    CHECK(refused(hab_alloc(mutator, hidden_size), HAB_INVALID_ARGUMENT));
    uint64_t *first = object(mutator, 16);
    CHECK(first != NULL);
    size_t objects = 1;
    size_t n = (size_t)1 << 59; /* n * 24 overflows: an array length times an element size */
    size_t wrapping[] = {0, SIZE_MAX, (size_t)-64, (size_t)-8, n * 24, (size_t)1 << 63};
    uint64_t *last = first;
    for (size_t i = 0; i < sizeof wrapping / sizeof wrapping[0]; i++) {
        hidden_size = wrapping[i];
        CHECK(refused(hab_alloc(mutator, hidden_size), HAB_INVALID_ARGUMENT));
        uint64_t *next = object(mutator, 16);
        CHECK(next != NULL && next != last);
        last = next;
        objects++;
    }
    CHECK(refused(hab_alloc(mutator, SIZE_MAX), HAB_INVALID_ARGUMENT)); /* constant sizes */
    CHECK(refused(hab_alloc(mutator, (size_t)-64), HAB_INVALID_ARGUMENT));
    CHECK(refused(hab_alloc(mutator, 0), HAB_INVALID_ARGUMENT)); /* a used TLAB or LAB */
    CHECK(hab_park(mutator) == HAB_OK);
    collect_and_check(heap, objects, 1);
    CHECK(hab_unpark(mutator) == HAB_OK);
    CHECK(refused(hab_alloc(mutator, 0), HAB_INVALID_ARGUMENT)); /* emptied by the collection */
    CHECK(refused(hab_alloc(mutator, SIZE_MAX), HAB_INVALID_ARGUMENT));
    CHECK(object(mutator, 32) != NULL);
    CHECK(hab_park(mutator) == HAB_OK);
    collect_and_check(heap, 1, 1);
    hab_detach(mutator);
    hab_heap_free(heap);
}

/* Item 4: a parked mutator's inline hab_alloc reaches the slow path, which refuses. */
static void parked_mutator_allocates(void) {
    hab_heap *heap = new_heap("4MiB");
    hab_mutator *mutator = hab_attach(heap);
    CHECK(object(mutator, 16) != NULL);
    CHECK(hab_park(mutator) == HAB_OK);
    CHECK(refused(hab_alloc(mutator, 16), HAB_INVALID_ARGUMENT));
    CHECK(strstr(hab_last_error(), "parked") != NULL);
    CHECK(hab_blocking_end(mutator) == HAB_OK);
    CHECK(object(mutator, 16) != NULL);
    CHECK(hab_blocking_begin(mutator) == HAB_OK);
    CHECK(refused(hab_alloc(mutator, 64), HAB_INVALID_ARGUMENT));
    collect_and_check(heap, 2, 0);
    hab_detach(mutator);
    hab_heap_free(heap);
}

/* Item 1: a collection begun on a thread that then exits stays the only one. */
static hab_collection *orphan;
static void *begin_and_exit(void *heap) {
    CHECK(hab_collection_begin(heap, 0, &orphan) == HAB_OK);
    return NULL;
}
static void collection_outlives_its_thread(void) {
    hab_heap *heap = new_heap("4MiB");
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, begin_and_exit, heap) == 0);
    CHECK(pthread_join(thread, NULL) == 0);
    hab_collection *second = NULL;
    CHECK(hab_collection_begin(heap, 200, &second) == HAB_TIMEOUT);
    CHECK(strstr(hab_last_error(), "another collection is in progress") != NULL);
    CHECK(hab_collection_finish(orphan) == HAB_OK);
    CHECK(hab_collection_begin(heap, 200, &second) == HAB_OK);
    CHECK(hab_collection_finish(second) == HAB_OK);
    hab_heap_free(heap);
}

/* Item 7: every call that would wait for the calling thread fails at once, naming itself. */
static void no_self_deadlock(void) {
    hab_heap *heap = new_heap("4MiB");
    hab_mutator *mutator = hab_attach(heap);
    hab_mutator *kept = hab_attach(heap);
    CHECK(object(mutator, 16) != NULL);
    hab_collection *collection = NULL;
    CHECK(hab_collection_begin(heap, 0, &collection) == HAB_INVALID_ARGUMENT);
    CHECK(strstr(hab_last_error(), "hab_collection_begin") != NULL &&
          strstr(hab_last_error(), "park it first") != NULL);
    CHECK(hab_park(mutator) == HAB_OK);
    CHECK(hab_park(kept) == HAB_OK);
    CHECK(hab_collection_begin(heap, 0, &collection) == HAB_OK);
    CHECK(hab_attach(heap) == NULL && hab_last_status() == HAB_INVALID_ARGUMENT);
    CHECK(strstr(hab_last_error(), "hab_attach") != NULL);
    hab_collection *second = NULL;
    CHECK(hab_collection_begin(heap, 0, &second) == HAB_INVALID_ARGUMENT);
    CHECK(hab_collection_begin(heap, 50, &second) == HAB_INVALID_ARGUMENT);
    CHECK(hab_unpark(kept) == HAB_INVALID_ARGUMENT);
    CHECK(hab_blocking_end(kept) == HAB_INVALID_ARGUMENT);
    hab_detach(mutator); /* parked and held by this thread's collection: never waits */
    CHECK(hab_collection_finish(collection) == HAB_OK);
    CHECK(hab_unpark(kept) == HAB_OK);
    CHECK(object(kept, 16) != NULL);
    CHECK(hab_park(kept) == HAB_OK);
    collect_and_check(heap, 2, 0);
    /* A request with no collector: a collector thread can wait for it, with a deadline. */
    CHECK(hab_wait_for_collection_request(heap, 20) == HAB_TIMEOUT);
    CHECK(hab_request_collection(heap) == HAB_OK);
    CHECK(hab_wait_for_collection_request(heap, 20) == HAB_OK);
    collect_and_check(heap, 2, 0);
    CHECK(hab_wait_for_collection_request(heap, 20) == HAB_TIMEOUT);
    char stats[4096];
    CHECK(hab_stats_json(heap, stats, sizeof stats) > 0);
    CHECK(strstr(stats, "\"live_mutators\":1") != NULL);
    hab_detach(kept);
    hab_heap_free(heap);
}

/* Item 8: the collection allocates the failed object for its requester. */
static void collection_serves_its_requester(void) {
    hab_heap *heap = new_heap("1MiB");
    uintptr_t start, end;
    CHECK(hab_heap_range(heap, &start, &end) == HAB_OK);
    hab_mutator *mutator = hab_attach(heap);
    size_t objects = 0;
    while (object(mutator, 1024) != NULL) {
        objects++;
    }
    CHECK(hab_last_status() == HAB_OUT_OF_MEMORY && objects > 0);
    hab_collection *collection = NULL;
    CHECK(hab_collection_alloc(NULL, mutator, 1024) == NULL);
    CHECK(hab_park(mutator) == HAB_OK);
    CHECK(hab_collection_begin(heap, 0, &collection) == HAB_OK);
    CHECK(hab_collection_reset(collection) == HAB_OK);
    CHECK(refused(hab_collection_alloc(collection, mutator, 0), HAB_INVALID_ARGUMENT));
    uint64_t *served = hab_collection_alloc(collection, mutator, 1024);
    CHECK(served != NULL && (uintptr_t)served == start);
    if (served != NULL) {
        CHECK(served[1] == 0); /* zeroed: reused memory */
        served[0] = 1024;
    }
    CHECK(hab_collection_reset(collection) == HAB_INVALID_ARGUMENT); /* the range is fixed */
    CHECK(hab_collection_set_range(collection, start, end) == HAB_INVALID_ARGUMENT);
    CHECK(hab_collection_finish(collection) == HAB_OK);
    CHECK(hab_unpark(mutator) == HAB_OK);
    CHECK(hab_park(mutator) == HAB_OK);
    collect_and_check(heap, 1, 0);
    /* No room left by the collection: out of memory, for real. */
    CHECK(hab_collection_begin(heap, 0, &collection) == HAB_OK);
    CHECK(hab_collection_set_range(collection, start, start) == HAB_OK);
    CHECK(refused(hab_collection_alloc(collection, mutator, 1024), HAB_OUT_OF_MEMORY));
    CHECK(hab_collection_finish(collection) == HAB_OK);
    hab_detach(mutator);
    hab_heap_free(heap);
}

/* Two heaps, a parked mutator each: a collection of one allocates for its own heap's mutator
 * only (mutator ids collided across heaps, and the other heap's mutator got an object of
 * this heap, charged to this heap's mutator of the same id). */
static void collection_alloc_for_another_heaps_mutator(void) {
    hab_heap *heap_a = new_heap("1MiB");
    hab_heap *heap_b = new_heap("1MiB");
    hab_mutator *mutator_a = hab_attach(heap_a);
    hab_mutator *mutator_b = hab_attach(heap_b);
    CHECK(hab_park(mutator_a) == HAB_OK && hab_park(mutator_b) == HAB_OK);
    hab_collection *collection = NULL;
    CHECK(hab_collection_begin(heap_a, 0, &collection) == HAB_OK);
    CHECK(refused(hab_collection_alloc(collection, mutator_b, 64), HAB_INVALID_ARGUMENT));
    CHECK(strstr(hab_last_error(), "another heap") != NULL);
    uint64_t *served = hab_collection_alloc(collection, mutator_a, 64);
    uintptr_t start, end;
    CHECK(hab_heap_range(heap_a, &start, &end) == HAB_OK);
    CHECK(served != NULL && (uintptr_t)served >= start && (uintptr_t)served < end);
    if (served != NULL) {
        served[0] = 64;
    }
    CHECK(hab_collection_finish(collection) == HAB_OK);
    collect_and_check(heap_a, 1, 0);
    collect_and_check(heap_b, 0, 0);
    hab_detach(mutator_a);
    hab_detach(mutator_b);
    hab_heap_free(heap_a);
    hab_heap_free(heap_b);
}

/* Item 6: calls from a pthread key destructor, which runs after the thread's other
 * thread-locals are gone: failing calls return their status, detach and attach work. */
static pthread_key_t key;
static hab_heap *destructor_heap;
static atomic_int destructors_ran;
static void destructor(void *value) {
    hab_mutator *mutator = value;
    CHECK(hab_unpark(mutator) == HAB_INVALID_ARGUMENT); /* running: a failing call */
    CHECK(hab_last_status() == HAB_INVALID_ARGUMENT);
    CHECK(strstr(hab_last_error(), "hab_unpark") != NULL);
    CHECK(hab_collection_finish(NULL) == HAB_INVALID_ARGUMENT);
    CHECK(object(mutator, 16) != NULL);
    hab_detach(mutator);
    hab_mutator *late = hab_attach(destructor_heap);
    CHECK(late != NULL);
    CHECK(object(late, 16) != NULL);
    CHECK(hab_park(late) == HAB_OK);
    hab_detach(late);
    atomic_fetch_add(&destructors_ran, 1);
}
static void *thread_with_key(void *unused) {
    (void)unused;
    hab_mutator *mutator = hab_attach(destructor_heap);
    CHECK(object(mutator, 16) != NULL);
    CHECK(pthread_setspecific(key, mutator) == 0);
    return NULL;
}
static void calls_from_key_destructors(void) {
    destructor_heap = new_heap("4MiB");
    CHECK(pthread_key_create(&key, destructor) == 0);
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_create(&threads[i], NULL, thread_with_key, NULL) == 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
    }
    CHECK(atomic_load(&destructors_ran) == 4);
    collect_and_check(destructor_heap, 12, 0);
    hab_heap_free(destructor_heap);
}

/* Item 5: fork while a collector thread collects over and over; each child attaches,
 * allocates, collects and unparks the forking thread's mutator, within an alarm. */
static atomic_int collector_stop;
static void *collect_over_and_over(void *heap) {
    while (!atomic_load(&collector_stop)) {
        hab_collection *collection = NULL;
        CHECK(hab_collection_begin(heap, 0, &collection) == HAB_OK);
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
        CHECK(hab_collection_finish(collection) == HAB_OK);
    }
    return NULL;
}
static int child_after_fork(hab_heap *heap, hab_mutator *forking) {
    alarm(20);
    hab_mutator *mutator = hab_attach(heap);
    if (mutator == NULL || object(mutator, 16) == NULL || hab_park(mutator) != HAB_OK) {
        return 1;
    }
    hab_collection *collection = NULL;
    if (hab_collection_begin(heap, 10000, &collection) != HAB_OK ||
        hab_collection_reset(collection) != HAB_OK ||
        hab_collection_finish(collection) != HAB_OK) {
        return 2;
    }
    if (hab_unpark(forking) != HAB_OK || object(forking, 16) == NULL ||
        hab_unpark(mutator) != HAB_OK || object(mutator, 32) == NULL) {
        return 3;
    }
    hab_detach(mutator);
    hab_detach(forking);
    return 0;
}
static void fork_while_collecting(void) {
    hab_heap *heap = new_heap("16MiB");
    hab_mutator *forking = hab_attach(heap);
    CHECK(hab_park(forking) == HAB_OK);
    pthread_t collector;
    CHECK(pthread_create(&collector, NULL, collect_over_and_over, heap) == 0);
    int forks = 0, hangs = 0, failed = 0;
    for (int i = 0; i < 16; i++) {
        struct timespec pause = {0, 300000 + 37000 * i};
        nanosleep(&pause, NULL);
        pid_t child = fork();
        if (child == 0) {
            _exit(child_after_fork(heap, forking));
        }
        CHECK(child > 0);
        int status = 0;
        CHECK(waitpid(child, &status, 0) == child);
        forks++;
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
            hangs++;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed++;
            fprintf(stderr, "child %d: status %#x\n", i, status);
        }
    }
    atomic_store(&collector_stop, 1);
    CHECK(pthread_join(collector, NULL) == 0);
    CHECK(hangs == 0 && failed == 0);
    printf("%s: fork while collecting: %d forks, %d hangs, %d failed\n", mode, forks, hangs,
           failed);
    CHECK(hab_unpark(forking) == HAB_OK);
    hab_detach(forking);
    hab_heap_free(heap);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        mode = argv[1];
    }
    alarm(120); /* a hang is a failure */
    sizes_that_wrap_or_are_zero();
    parked_mutator_allocates();
    collection_outlives_its_thread();
    no_self_deadlock();
    collection_serves_its_requester();
    collection_alloc_for_another_heaps_mutator();
    calls_from_key_destructors();
    fork_while_collecting();
    printf("%s: reliability checks %s\n", mode, CHECK_EXIT_STATUS == 0 ? "passed" : "FAILED");
    return CHECK_EXIT_STATUS;
}
