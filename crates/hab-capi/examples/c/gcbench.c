/* Boehm's GCBench on the runtime of runtime.h: a long-lived tree and a long-lived array stay
 * reachable while temporary trees of depths 4, 6, ... are built top-down (a node, then its
 * children) and bottom-up (children first). Scaled by its largest tree depth (16 in the
 * original); prints the lines hab-vm's GCBench prints.
 *
 *   gcbench DEPTH [MODE [MIDDLE]]
 *
 * Prints the program's lines on stdout, and a JSON line of figures on stderr. */
#define _POSIX_C_SOURCE 200809L
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN_DEPTH 4
/* A node: left, right, and two integers (i, j) in a data word each. */
#define NODE_REFS 2
#define NODE_DATA_BYTES 16
#define NODE_BYTES (8 + 8 * NODE_REFS + NODE_DATA_BYTES)

static long tree_size(int depth) {
    return (2L << depth) - 1;
}

static rt_object *new_node(rt_thread *thread) {
    return rt_alloc(thread, NODE_REFS, NODE_DATA_BYTES);
}

/* Builds the children of the node in root `slot` down to `depth`, top-down. */
static void populate(rt_thread *thread, int depth, size_t slot) {
    if (depth <= 0) {
        return;
    }
    rt_object *left = new_node(thread);
    rt_root(thread, slot)->refs[0] = left;
    rt_object *right = new_node(thread);
    rt_root(thread, slot)->refs[1] = right;
    size_t children = rt_push(thread, rt_root(thread, slot)->refs[0]);
    rt_push(thread, rt_root(thread, slot)->refs[1]);
    populate(thread, depth - 1, children);
    populate(thread, depth - 1, children + 1);
    rt_pop(thread, 2);
}

/* A tree of `depth`, bottom-up. */
static rt_object *make_tree(rt_thread *thread, int depth) {
    if (depth <= 0) {
        return new_node(thread);
    }
    size_t left = rt_push(thread, make_tree(thread, depth - 1));
    rt_push(thread, make_tree(thread, depth - 1));
    rt_object *node = new_node(thread);
    node->refs[0] = rt_root(thread, left);
    node->refs[1] = rt_root(thread, left + 1);
    rt_pop(thread, 2);
    return node;
}

static long count(const rt_object *node) {
    if (node->refs[0] == NULL) {
        return 1;
    }
    return 1 + count(node->refs[0]) + count(node->refs[1]);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    int max_depth = argc > 1 ? atoi(argv[1]) : 16;
    if (max_depth < MIN_DEPTH) {
        max_depth = MIN_DEPTH;
    }
    if (max_depth > 30) {
        fprintf(stderr, "usage: gcbench DEPTH(<=30) [MODE [MIDDLE]]\n");
        return 1;
    }
    int stretch_depth = max_depth + 2;
    size_t array_len = (size_t)500000 >> (16 - (max_depth < 16 ? max_depth : 16));
    if (array_len < 1000) {
        array_len = 1000;
    }
    /* The space holds three times the most that is live at once: the stretch tree, or the
     * long-lived data and the largest temporary tree. */
    size_t stretch = (size_t)tree_size(stretch_depth) * NODE_BYTES;
    size_t long_lived_data = 2 * (size_t)tree_size(max_depth) * NODE_BYTES + array_len * 8;
    size_t live = stretch > long_lived_data ? stretch : long_lived_data;
    size_t space = (3 * live + (1 << 20)) & ~(size_t)((1 << 20) - 1);
    const char *mode = argc > 2 ? argv[2] : "tlab";
    const char *middle = argc > 3 ? argv[3] : strcmp(mode, "hab") == 0 ? "core:1MiB" : NULL;
    rt_options options = {space, mode, middle, getenv("RT_VERIFY") != NULL};
    rt_runtime *runtime = rt_new(&options);
    if (runtime == NULL) {
        return 1;
    }
    double started = now_ms();
    rt_thread *thread = rt_attach(runtime);
    long nodes = 0;
    printf("Garbage Collector Test\n");
    printf(" Stretching memory with a binary tree of depth %d\n", stretch_depth);
    make_tree(thread, stretch_depth);
    nodes += tree_size(stretch_depth);

    printf(" Creating a long-lived binary tree of depth %d\n", max_depth);
    size_t long_lived = rt_push(thread, new_node(thread));
    populate(thread, max_depth, long_lived);
    nodes += tree_size(max_depth);

    printf(" Creating a long-lived array of %zu doubles\n", array_len);
    size_t array = rt_push(thread, rt_alloc(thread, 0, array_len * 8));
    double *values = rt_data(rt_root(thread, array));
    for (size_t i = 0; i < array_len / 2; i++) {
        values[i] = 1.0 / (double)i;
    }

    for (int depth = MIN_DEPTH; depth <= max_depth; depth += 2) {
        long iterations = 2 * tree_size(stretch_depth) / tree_size(depth);
        printf("Creating %ld trees of depth %d\n", iterations, depth);
        for (long i = 0; i < iterations; i++) {
            size_t tree = rt_push(thread, new_node(thread));
            populate(thread, depth, tree);
            rt_pop(thread, 1);
        }
        for (long i = 0; i < iterations; i++) {
            make_tree(thread, depth);
        }
        nodes += 2 * iterations * tree_size(depth);
    }

    size_t probe = 1000 < array_len / 2 - 1 ? 1000 : array_len / 2 - 1;
    values = rt_data(rt_root(thread, array));
    if (rt_root(thread, long_lived)->refs[0] == NULL || !(values[probe] > 0.0)) {
        fprintf(stderr, "gcbench: the long-lived data was lost\n");
        return 3;
    }
    printf(" Long-lived tree and array still reachable (%ld nodes checked)\n",
           count(rt_root(thread, long_lived)));
    rt_pop(thread, 2);
    rt_detach(thread);
    double elapsed = now_ms() - started;
    rt_stats stats = rt_statistics(runtime);
    fprintf(stderr,
            "{\"workload\":\"gcbench\",\"depth\":%d,\"threads\":1,\"mode\":\"%s\","
            "\"elapsed_ms\":%.3f,\"collections\":%llu,\"pause_ms\":%.3f,\"copied_bytes\":%llu,"
            "\"space_bytes\":%zu,\"nodes\":%ld}\n",
            max_depth, mode, elapsed, (unsigned long long)stats.collections, stats.pause_ms,
            (unsigned long long)stats.copied_bytes, space, nodes);
    rt_free(runtime);
    return 0;
}
