/* A small garbage-collected runtime on libhab: objects with one header word and reference
 * fields, per-thread root stacks, and a Cheney copying collector between the two halves of
 * Hab's heap (Hab allocates above the survivors). binary_trees.c and gcbench.c run on it.
 *
 * The rule every program on it follows: an object pointer held across an allocation (which
 * may collect, and move every object) lives in the thread's root stack, and is read back from
 * there afterwards. */
#ifndef RUNTIME_H
#define RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "hab.h"

/* An object: a header word, then `refs` references, then data. */
typedef struct rt_object {
    uint64_t header;
    struct rt_object *refs[];
} rt_object;

typedef struct rt_runtime rt_runtime;
typedef struct rt_thread rt_thread;

/* What a runtime is built with. */
typedef struct rt_options {
    size_t space_bytes;   /* each half of the heap */
    const char *mode;     /* Hab's mode: shared, tlab, hab, cpu-lab, flip */
    const char *middle;   /* Hab's middle levels in mode hab, e.g. "core:1MiB" */
    int verify;           /* check the heap before and after every collection */
} rt_options;

/* A runtime, or NULL with the reason on stderr. */
rt_runtime *rt_new(const rt_options *options);
void rt_free(rt_runtime *runtime);

/* Attaches the calling thread (running); rt_detach when it is done. */
rt_thread *rt_attach(rt_runtime *runtime);
void rt_detach(rt_thread *thread);

/* A new object with `refs` NULL references and `data_bytes` zeroed bytes (a multiple of 8).
 * May collect: every object pointer not in a root stack is stale afterwards. Exits the process
 * with a message when the heap holds no room even after a collection. */
rt_object *rt_alloc(rt_thread *thread, uint32_t refs, size_t data_bytes);

/* The object's data, after its references. */
void *rt_data(rt_object *object);

/* Root stack: push an object (NULL allowed) and get its slot; read a slot; pop `count`. */
size_t rt_push(rt_thread *thread, rt_object *object);
rt_object *rt_root(const rt_thread *thread, size_t slot);
void rt_pop(rt_thread *thread, size_t count);

/* A safe region around a blocking call (join, I/O): collections need not wait for it. */
void rt_blocking_begin(rt_thread *thread);
void rt_blocking_end(rt_thread *thread);

/* What the runtime did so far. */
typedef struct rt_stats {
    uint64_t collections;
    uint64_t copied_bytes;    /* survivors copied, over all collections */
    double pause_ms;          /* total time with the world stopped */
} rt_stats;
rt_stats rt_statistics(rt_runtime *runtime);

#endif /* RUNTIME_H */
