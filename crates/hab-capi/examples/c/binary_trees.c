/* The Computer Language Benchmarks Game's binary-trees on the runtime of runtime.h: perfect
 * binary trees of depths 4, 6, ... built bottom-up and checked (their nodes counted) while a
 * long-lived tree stays reachable. As its fastest C programs do, the depths are shared among
 * worker threads; the lines printed are the reference program's.
 *
 *   binary_trees DEPTH [THREADS [MODE [MIDDLE]]]
 *
 * Prints the program's lines on stdout, and a JSON line of figures on stderr. */
#define _POSIX_C_SOURCE 200809L
#include "runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN_DEPTH 4
/* A node: a header and two references. */
#define NODE_BYTES 24

static rt_object *bottom_up(rt_thread *thread, int depth) {
    if (depth == 0) {
        return rt_alloc(thread, 2, 0);
    }
    size_t left = rt_push(thread, bottom_up(thread, depth - 1));
    rt_push(thread, bottom_up(thread, depth - 1));
    rt_object *node = rt_alloc(thread, 2, 0);
    node->refs[0] = rt_root(thread, left);
    node->refs[1] = rt_root(thread, left + 1);
    rt_pop(thread, 2);
    return node;
}

/* Counts the nodes (allocates nothing, so nothing moves meanwhile). */
static long item_check(const rt_object *node) {
    if (node->refs[0] == NULL) {
        return 1;
    }
    return 1 + item_check(node->refs[0]) + item_check(node->refs[1]);
}

static rt_runtime *runtime;
static int max_depth;
static atomic_int next_depth;
static long checks[64];

/* Takes depths until none is left; each depth's check goes to `checks`. */
static void *worker(void *argument) {
    (void)argument;
    rt_thread *thread = rt_attach(runtime);
    for (;;) {
        int depth = atomic_fetch_add(&next_depth, 2);
        if (depth > max_depth) {
            break;
        }
        long iterations = 1L << (max_depth - depth + MIN_DEPTH), check = 0;
        for (long i = 0; i < iterations; i++) {
            check += item_check(bottom_up(thread, depth));
        }
        checks[depth] = check;
    }
    rt_detach(thread);
    return NULL;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 10;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    max_depth = depth > MIN_DEPTH + 2 ? depth : MIN_DEPTH + 2;
    if (max_depth > 40 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: binary_trees DEPTH(<=40) [THREADS(1-64) [MODE [MIDDLE]]]\n");
        return 1;
    }
    int stretch_depth = max_depth + 1;
    /* The space holds three times the most that is live at once: the stretch tree, or the
     * long-lived tree and one iterated tree per thread. */
    size_t tree_bytes = (((size_t)2 << max_depth) - 1) * NODE_BYTES;
    size_t live = 2 * tree_bytes > (size_t)(1 + threads) * tree_bytes
                      ? 2 * tree_bytes
                      : (size_t)(1 + threads) * tree_bytes;
    size_t space = (3 * live + (1 << 20)) & ~(size_t)((1 << 20) - 1);
    const char *mode = argc > 3 ? argv[3] : "tlab";
    const char *middle = argc > 4 ? argv[4] : strcmp(mode, "hab") == 0 ? "core:1MiB" : NULL;
    rt_options options = {space, mode, middle, getenv("RT_VERIFY") != NULL};
    runtime = rt_new(&options);
    if (runtime == NULL) {
        return 1;
    }
    double started = now_ms();
    rt_thread *main_thread = rt_attach(runtime);
    printf("stretch tree of depth %d\t check: %ld\n", stretch_depth,
           item_check(bottom_up(main_thread, stretch_depth)));
    size_t long_lived = rt_push(main_thread, bottom_up(main_thread, max_depth));

    atomic_store(&next_depth, MIN_DEPTH);
    pthread_t workers[64];
    /* The main thread blocks meanwhile: collections need not wait for it, and its root (the
     * long-lived tree) is still traced and moved. */
    rt_blocking_begin(main_thread);
    for (int i = 0; i < threads; i++) {
        pthread_create(&workers[i], NULL, worker, NULL);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(workers[i], NULL);
    }
    rt_blocking_end(main_thread);
    for (int d = MIN_DEPTH; d <= max_depth; d += 2) {
        printf("%ld\t trees of depth %d\t check: %ld\n", 1L << (max_depth - d + MIN_DEPTH), d,
               checks[d]);
    }
    printf("long lived tree of depth %d\t check: %ld\n", max_depth,
           item_check(rt_root(main_thread, long_lived)));
    rt_pop(main_thread, 1);
    rt_detach(main_thread);
    double elapsed = now_ms() - started;
    rt_stats stats = rt_statistics(runtime);
    fprintf(stderr,
            "{\"workload\":\"binary-trees\",\"depth\":%d,\"threads\":%d,\"mode\":\"%s\","
            "\"elapsed_ms\":%.3f,\"collections\":%llu,\"pause_ms\":%.3f,\"copied_bytes\":%llu,"
            "\"space_bytes\":%zu}\n",
            max_depth, threads, options.mode, elapsed, (unsigned long long)stats.collections,
            stats.pause_ms, (unsigned long long)stats.copied_bytes, space);
    rt_free(runtime);
    return 0;
}
