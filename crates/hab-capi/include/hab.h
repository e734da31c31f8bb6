/*
 * hab.h — the C ABI of Hab, hierarchical allocation buffers for garbage-collected runtimes.
 *
 * C11 and C++ compatible. `make -C crates/hab-capi install PREFIX=DIR` installs libhab.so,
 * libhab.a (link the static one with -lpthread -ldl -lm), this header, DIR/lib/pkgconfig/hab.pc
 * (`pkg-config --cflags --libs hab`) and a CMake package (`find_package(Hab)`, target
 * Hab::hab or Hab::hab_static). Every function that can
 * fail returns a hab_status (or NULL) and leaves a message for hab_last_error() on the calling
 * thread; NULL and out-of-range arguments give HAB_INVALID_ARGUMENT, never a crash; a bug in
 * Hab is reported as HAB_INTERNAL_ERROR, never as an exception or an unwind. Every call may be
 * made from a pthread_key_create destructor (a thread detaching as it exits); a message longer
 * than 2 KiB is cut there.
 *
 * Calls that would wait for the calling thread itself fail instead: hab_attach, hab_unpark,
 * hab_blocking_end and hab_collection_begin on a thread that began a collection and has not
 * finished it, and hab_collection_begin on a thread whose own mutator is running, return
 * HAB_INVALID_ARGUMENT naming the call and the state. hab_detach of a parked mutator never
 * waits: a collection holding it detaches it when it ends.
 *
 * The protocol (docs/embedding.md tells it step by step):
 *   1. describe your objects (hab_object_model) and build a heap (hab_config_*, hab_heap_new);
 *   2. attach each thread (hab_attach) and allocate with hab_alloc: write the object's header
 *      before the thread's next allocation, poll or park;
 *   3. poll (hab_poll) at loop back-edges; park around blocking calls (hab_park/hab_unpark);
 *   4. when hab_alloc returns NULL with HAB_OUT_OF_MEMORY, park, collect (hab_collection_*)
 *      and allocate the failed object inside the collection (hab_collection_alloc): NULL
 *      there means the collection left no room, i.e. out of memory; then unpark.
 */
#ifndef HAB_H
#define HAB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes; compare with hab_abi_version() at start-up. */
#define HAB_ABI_VERSION 11

/* The layout the inline paths below read, from a mutator's tlab address. */
#define HAB_TLAB_TOP_OFFSET 0
#define HAB_TLAB_SOFT_END_OFFSET 8
#define HAB_SAFEPOINT_POLL_OFFSET 56

/* The per-CPU LAB path's layout (cpu-lab mode): CPU c's LAB is the slot at
 * cpu_lab_slots + c * HAB_CPU_LAB_SLOT_BYTES, holding top and end at these offsets; the rseq
 * ABI's signature precedes every abort handler. */
#define HAB_CPU_LAB_SLOT_SHIFT 7
#define HAB_CPU_LAB_SLOT_BYTES 128
#define HAB_CPU_LAB_TOP_OFFSET 0
#define HAB_CPU_LAB_END_OFFSET 8
#define HAB_RSEQ_SIGNATURE 0x53053053
/* Where a restartable section stores its descriptor's address in the rseq area (`rseq_cs`). */
#define HAB_RSEQ_CS_OFFSET 8
/* cpu_lab_cpu while the mutator has no per-CPU LAB path: no CPU or concurrency id has it. */
#define HAB_CPU_LAB_INACTIVE 0x80000000u

/* Whether hab_alloc inlines the per-CPU LAB path (a restartable sequence): x86_64 Linux with a
 * compiler that has `asm goto` with outputs (GCC 11 and later, Clang with the extension),
 * unless HAB_NO_INLINE_RSEQ is defined. Elsewhere that path is out of line. */
#if defined(__clang__) && defined(__has_extension)
#if __has_extension(gnu_asm_goto_with_outputs)
#define HAB_ASM_GOTO_OUTPUTS_ 1
#endif
#elif defined(__GNUC__) && __GNUC__ >= 11
#define HAB_ASM_GOTO_OUTPUTS_ 1
#endif
#if defined(__x86_64__) && defined(__linux__) && defined(HAB_ASM_GOTO_OUTPUTS_) &&            \
    !defined(HAB_NO_INLINE_RSEQ)
#define HAB_INLINE_RSEQ 1
#else
#define HAB_INLINE_RSEQ 0
#endif

/* Why a call failed. */
typedef enum hab_status {
    HAB_OK = 0,
    /* A NULL or out-of-range argument, or a handle in the wrong state. */
    HAB_INVALID_ARGUMENT = 1,
    /* A configuration key or value, or a combination of values, was rejected. */
    HAB_CONFIG_ERROR = 2,
    /* The heap is full: collect and retry. */
    HAB_OUT_OF_MEMORY = 3,
    /* The mutators did not stop within the timeout. */
    HAB_TIMEOUT = 4,
    /* The operating system refused the heap's memory. */
    HAB_SYSTEM_ERROR = 5,
    /* The heap walk met something that is not an object. */
    HAB_VERIFY_ERROR = 6,
    /* A bug in Hab; the message says where. */
    HAB_INTERNAL_ERROR = 7
} hab_status;

/* The library's HAB_ABI_VERSION: refuse to run with a library whose version differs. */
uint32_t hab_abi_version(void);

/* The status of the calling thread's last failed call (HAB_OK if none): after hab_alloc
 * returned NULL, HAB_OUT_OF_MEMORY means collect and retry. */
hab_status hab_last_status(void);

/* The message of the calling thread's last failed call ("" if none); valid until its next
 * failed call. */
const char *hab_last_error(void);

/* ---- Configuration ---------------------------------------------------------------------- */

typedef struct hab_config hab_config;

/* A configuration with every default; free it with hab_config_free. */
hab_config *hab_config_new(void);

/* Sets `key` to `value`, as the builder and `hab run` take them: capacity ("256MiB"), mode
 * (shared, tlab, hab, cpu-lab, flip), middle ("core:1MiB"), tlab ("adaptive", "growing",
 * "64KiB"), min_tlab, max_tlab, zero (ahead, refill, never), alignment (bytes), pretouch
 * (true/false), end_of_cycle (true/false: TLABs shrink to each thread's part of what is left
 * near the end of the range; default true), refill_waste_fraction, waste_target_percent,
 * cpu_id (rseq, getcpu, ...).
 * HAB_CONFIG_ERROR names the key; combinations are checked by hab_heap_new. */
hab_status hab_config_set(hab_config *config, const char *key, const char *value);

/* Frees a configuration (NULL: nothing). */
void hab_config_free(hab_config *config);

/* ---- Object model and heap ---------------------------------------------------------------- */

/* The runtime's object model. The callbacks may be called from any thread (allocating threads
 * write fillers, collections read sizes), each with `user`. They must return: a callback that
 * leaves by longjmp (or a C++ exception, which aborts the process at the library's boundary)
 * leaves Hab's locks and the stopped world as they were, so that every later collection and
 * safepoint waits for ever. They must not call Hab. */
typedef struct hab_object_model {
    /* The size in bytes of the object or filler at `object`: a positive multiple of the heap's
     * alignment for a well-formed one. */
    size_t (*object_size)(void *user, const void *object);
    /* Writes a filler covering exactly `bytes` bytes at `address` (aligned, at least
     * min_filler_bytes). */
    void (*write_filler)(void *user, void *address, size_t bytes);
    /* Non-zero when the object at `object` is a filler written by write_filler. */
    int (*is_filler)(void *user, const void *object);
    /* The smallest gap a filler covers (its header). 0, or any value up to the heap's
     * alignment, means every aligned gap; a larger one is rounded up to the alignment, and
     * each TLAB then keeps that much below its end for its tail's filler. */
    size_t min_filler_bytes;
    void *user;
} hab_object_model;

typedef struct hab_heap hab_heap;

/* Builds a heap from `config` (still the caller's) and `model` (copied) into *out. */
hab_status hab_heap_new(const hab_config *config, const hab_object_model *model, hab_heap **out);

/* Frees the caller's reference (NULL: nothing); attached mutators keep the heap alive. */
void hab_heap_free(hab_heap *heap);

/* The heap's memory [*start, *end): allocation ranges (hab_collection_set_range) lie inside
 * it; a copying collector can split it into two halves. */
hab_status hab_heap_range(const hab_heap *heap, uintptr_t *start, uintptr_t *end);

/* Asks every mutator to stop at its next safepoint (hab_poll or allocation slow path); they
 * stay stopped until a collection ends. The caller collects, or a collector thread waiting in
 * hab_wait_for_collection_request does: a request nobody serves stops the mutators for ever. */
hab_status hab_request_collection(hab_heap *heap);

/* For a collector thread: sleeps until a collection is requested, at most timeout_ms. HAB_OK
 * when one is (then hab_collection_begin), HAB_TIMEOUT when none was. */
hab_status hab_wait_for_collection_request(hab_heap *heap, uint64_t timeout_ms);

/* The heap's statistics as JSON, NUL-terminated in buffer when len exceeds their length;
 * returns the length (call with len 0, or buffer NULL, to size the buffer), 0 on error. */
size_t hab_stats_json(hab_heap *heap, char *buffer, size_t len);

/* ---- Mutators ---------------------------------------------------------------------------- */

/* One thread's allocation handle. Its address is stable for its life. The library writes
 * these fields; the inline paths read them (a JIT may too). The rest is private. */
typedef struct hab_mutator {
    /* The TLAB's {top, soft end} and the poll word (offsets above); fixed for its life. */
    unsigned char *const tlab;
    /* The per-CPU LAB path. The LABs are indexed by the CPU number or, where the kernel has
     * them (Linux 6.3 and later), by concurrency ids (mm_cid): the uint32_t at
     * rseq_index_offset from the thread pointer, in the thread's rseq area, whose rseq_cs
     * field is at the address rseq_cs_field. The inline section stores its descriptor there,
     * checks that the thread's index still is cpu_lab_cpu (the thread's when it last left the
     * library) and bumps cpu_lab_slot, that index's LAB slot. For a JIT: index c's slot is
     * cpu_lab_slots + c * HAB_CPU_LAB_SLOT_BYTES, and an index at or beyond cpu_lab_cpus uses
     * the always-empty slot at cpu_lab_cpus.
     *
     * While the mutator allocates in its TLAB, is parked, or has no per-CPU LABs: cpu_lab_cpu
     * is HAB_CPU_LAB_INACTIVE, cpu_lab_slot an always-empty slot, rseq_cs_field a word of the
     * mutator's own, rseq_index_offset 0 and cpu_lab_slots and cpu_lab_cpus 0, so that the
     * section runs harmlessly and misses, with no test before it. Changed only by the
     * out-of-line calls (hab_alloc_slow, hab_poll_slow, hab_unpark, hab_blocking_end), on the
     * mutator's own thread. */
    const uintptr_t cpu_lab_slot;
    const uintptr_t rseq_cs_field;
    const intptr_t rseq_index_offset;
    const uint32_t cpu_lab_cpu;
    const uint32_t cpu_lab_cpus;
    const uintptr_t cpu_lab_slots;
} hab_mutator;

/* Attaches the calling thread: a running mutator, NULL on error. Waits while a collection is
 * in progress (HAB_INVALID_ARGUMENT where the calling thread runs it). A mutator is used by one
 * thread at a time; to hand it to another thread, park it on the old one (hab_park or
 * hab_blocking_begin) and unpark it on the new one: the inline per-CPU path stores into the
 * rseq area of the thread that last left the library, and a running mutator moved without
 * that would run its sections unprotected. */
hab_mutator *hab_attach(hab_heap *heap);

/* Detaches and frees a mutator, running or parked (NULL: nothing); its TLAB's rest becomes a
 * filler. Never waits for a collection. */
void hab_detach(hab_mutator *mutator);

/* The out-of-line allocation: stops at a requested safepoint first. NULL on failure:
 * HAB_OUT_OF_MEMORY (collect and retry) or HAB_INVALID_ARGUMENT (a size of 0, not a multiple of
 * the heap's alignment, or larger than the heap; a parked mutator). */
void *hab_alloc_slow(hab_mutator *mutator, size_t bytes);

/* The TLAB bump: load top, add, compare with the soft end, store; 0 when it does not fit. The
 * soft end is 0 while a collection is requested, while the mutator is parked and while its
 * TLAB is empty (always, in cpu-lab mode), so those miss. */
static inline uintptr_t hab_tlab_bump_(hab_mutator *mutator, size_t bytes) {
    uintptr_t *top = (uintptr_t *)(void *)(mutator->tlab + HAB_TLAB_TOP_OFFSET);
    uintptr_t soft_end =
        __atomic_load_n((uintptr_t *)(void *)(mutator->tlab + HAB_TLAB_SOFT_END_OFFSET),
                        __ATOMIC_RELAXED);
    uintptr_t object = *top;
    uintptr_t new_top = object + bytes;
    if (new_top > soft_end) {
        return 0;
    }
    *top = new_top;
#if defined(__GNUC__)
    /* An empty TLAB has top = soft end = 0, which no size of at least 1 passes: a TLAB object
     * is never at address 0, and the caller's test of it then costs nothing here. */
    if (object == 0) {
        __builtin_unreachable();
    }
#endif
    return object;
}

#if HAB_INLINE_RSEQ
/* What every inline section shares, as assembler text: its descriptor (struct rseq_cs: the
 * section runs from label 81 to its commit at label 82, and aborts to label 83) in __rseq_cs,
 * and, out of line after the commit, the abort handler behind the registered signature, which
 * jumps to the caller's miss label. A section stores the descriptor's address (label 80) in
 * rseq_cs, then begins at 81. */
#define HAB_RSEQ_DESCRIPTOR_                                                                   \
    ".pushsection __rseq_cs, \"aw\"\n\t"                                                       \
    ".balign 32\n\t"                                                                           \
    "80:\n\t"                                                                                  \
    ".long 0, 0\n\t"                                                                           \
    ".quad 81f, (82f - 81f), 83f\n\t"                                                          \
    ".popsection\n\t"
#define HAB_RSEQ_ABORT_TO_MISS_                                                                \
    "82:\n\t"                                                                                  \
    ".pushsection .text.hab_rseq_abort, \"ax\"\n\t"                                            \
    ".long %c[signature]\n\t"                                                                  \
    "83:\n\t"                                                                                  \
    "jmp %l[miss]\n\t"                                                                         \
    ".popsection\n\t"

/* The per-CPU LAB bump, a restartable sequence of 13 instructions with its loads: store the
 * descriptor's address in rseq_cs, check the thread's index, bump the slot's top against its
 * end, commit. 0 when it missed (the thread's index is no longer cpu_lab_cpu, the kernel
 * aborted the section on a preemption or signal, the LAB is full, or the mutator has no
 * per-CPU LAB path); the slow path then looks the index up again. The descriptor goes to
 * __rseq_cs, the abort handler after the signature out of line; both exits are jumps to the
 * caller's miss branch (asm goto), so a hit returns without a test. */
static inline uintptr_t hab_cpu_lab_bump_(const hab_mutator *mutator, uintptr_t bytes) {
    uintptr_t object, new_top;
    __asm__ goto(
        HAB_RSEQ_DESCRIPTOR_
        "leaq 80b(%%rip), %[new_top]\n\t"
        "movq %[new_top], (%[rseq_cs])\n\t"
        "81:\n\t"
        "cmpl %[cpu], %%fs:(%[index])\n\t"
        "jne %l[miss]\n\t"
        "movq %c[top](%[slot]), %[object]\n\t"
        "leaq (%[object], %[bytes]), %[new_top]\n\t"
        "cmpq %c[end](%[slot]), %[new_top]\n\t"
        "ja %l[miss]\n\t"
        "movq %[new_top], %c[top](%[slot])\n\t"
        HAB_RSEQ_ABORT_TO_MISS_
        : [object] "=&r"(object), [new_top] "=&r"(new_top)
        : [rseq_cs] "r"(mutator->rseq_cs_field), [index] "r"(mutator->rseq_index_offset),
          [slot] "r"(mutator->cpu_lab_slot), [cpu] "r"(mutator->cpu_lab_cpu), [bytes] "r"(bytes),
          [top] "i"(HAB_CPU_LAB_TOP_OFFSET), [end] "i"(HAB_CPU_LAB_END_OFFSET),
          [signature] "i"(HAB_RSEQ_SIGNATURE)
        : "memory", "cc"
        : miss);
    /* A LAB object is never at address 0. */
    if (object == 0) {
        __builtin_unreachable();
    }
    return object;
miss:
    return 0;
}
#endif

/* Allocates `bytes` for the calling thread's running mutator: NULL with HAB_INVALID_ARGUMENT
 * for a size of 0, not a multiple of the heap's alignment or larger than the heap, or a
 * parked mutator; NULL with HAB_OUT_OF_MEMORY when the heap is full (collect: see
 * hab_collection_alloc). The memory is zero unless the heap was built with zero = never.
 *
 * Inline: check the size, then the TLAB bump (hab_tlab_bump_); when that misses and
 * HAB_INLINE_RSEQ, the per-CPU LAB bump (hab_cpu_lab_bump_, which misses at once unless the
 * mutator allocates in per-CPU LABs); else hab_alloc_slow, which stops at a requested
 * safepoint, refuses, refills or collects. The size check sends 0 and every size of 2^63 or
 * more (SIZE_MAX, (size_t)-64, an overflowing n * size) out of line, where hab_alloc_slow
 * refuses them: with addresses below 2^57 (x86_64, aarch64), top + size then never wraps, so
 * no top moves backwards. It costs two instructions for a size only known at run time, none
 * for a constant (the compiler folds it). The order suits the tlab, hab and flip modes; in
 * cpu-lab mode hab_alloc_cpu_lab_first is shorter. */
static inline void *hab_alloc(hab_mutator *mutator, size_t bytes) {
    if ((intptr_t)bytes <= 0) {
        return hab_alloc_slow(mutator, bytes);
    }
    uintptr_t object = hab_tlab_bump_(mutator, bytes);
    if (object != 0) {
        return (void *)object;
    }
#if HAB_INLINE_RSEQ
    object = hab_cpu_lab_bump_(mutator, bytes);
    if (object != 0) {
        return (void *)object;
    }
#endif
    return hab_alloc_slow(mutator, bytes);
}

/* hab_alloc with the per-CPU LAB bump first, then the TLAB's: for a heap in cpu-lab mode,
 * where the TLAB is always empty (a C loop allocating 16-byte objects: 17 instructions per
 * object, against 23 through hab_alloc). In the other modes it is correct but longer (the
 * section runs and misses before every TLAB bump). */
static inline void *hab_alloc_cpu_lab_first(hab_mutator *mutator, size_t bytes) {
    if ((intptr_t)bytes <= 0) {
        return hab_alloc_slow(mutator, bytes);
    }
    uintptr_t object;
#if HAB_INLINE_RSEQ
    object = hab_cpu_lab_bump_(mutator, bytes);
    if (object != 0) {
        return (void *)object;
    }
#endif
    object = hab_tlab_bump_(mutator, bytes);
    if (object != 0) {
        return (void *)object;
    }
    return hab_alloc_slow(mutator, bytes);
}

/* The out-of-line poll: stops if a collection is requested; the collections slept through. */
uint64_t hab_poll_slow(hab_mutator *mutator);

/* A safepoint poll: one load and a branch when nothing is requested; when a collection is,
 * parks until it has ended and returns how many ended meanwhile (0: did not stop). */
static inline uint64_t hab_poll(hab_mutator *mutator) {
    if (__atomic_load_n((uintptr_t *)(void *)(mutator->tlab + HAB_SAFEPOINT_POLL_OFFSET),
                        __ATOMIC_RELAXED) == 0) {
        return 0;
    }
    return hab_poll_slow(mutator);
}

/* Parks a running mutator: collections need not wait for it (a safepoint, or around a blocking
 * call). HAB_INVALID_ARGUMENT if it is parked already. */
hab_status hab_park(hab_mutator *mutator);

/* Unparks a parked mutator, first waiting for a collection in progress to end. */
hab_status hab_unpark(hab_mutator *mutator);

/* A safe region around a blocking call (I/O, a lock, a sleep): hab_blocking_begin parks the
 * running mutator, so collections need not wait for it; hab_blocking_end unparks it, first
 * waiting for a collection in progress to end. The same as hab_park and hab_unpark, named for
 * the use. Between the two the thread must not allocate or touch the heap. */
hab_status hab_blocking_begin(hab_mutator *mutator);
hab_status hab_blocking_end(hab_mutator *mutator);

/* ---- Collections ------------------------------------------------------------------------- */

typedef struct hab_collection hab_collection;

/* Stops the world (every mutator at a safepoint or parked), waiting at most timeout_ms
 * (0: without bound; HAB_TIMEOUT names the mutators that did not stop), and retires every
 * LAB (fillers over their rests), so the allocation range walks. One collection at a time in
 * a process, whatever thread holds the handle. HAB_INVALID_ARGUMENT when the calling thread
 * holds a running mutator (park it first) or began a collection it has not finished. */
hab_status hab_collection_begin(hab_heap *heap, uint64_t timeout_ms, hab_collection **out);

/* Visits every object and filler of the allocation range in address order. */
hab_status hab_collection_walk(hab_collection *collection,
                               void (*visit)(void *user, void *address, size_t bytes,
                                             int is_filler),
                               void *user);

/* Checks that the allocation range parses up to its top (HAB_VERIFY_ERROR says where not). */
hab_status hab_collection_verify(hab_collection *collection);

/* Sets the next allocation range [start, end), inside the heap's memory (not after
 * hab_collection_alloc). */
hab_status hab_collection_set_range(hab_collection *collection, uintptr_t start, uintptr_t end);

/* Everything allocated is dead: allocate from the bottom again (HAB_INVALID_ARGUMENT after
 * hab_collection_alloc). */
hab_status hab_collection_reset(hab_collection *collection);

/* Allocates `bytes` for `mutator`, parked (its allocation failed), inside the collection: from
 * the next allocation range, before any mutator resumes, so no other thread takes the room
 * first. Call it last (after hab_collection_set_range or _reset, which it fixes; the walk
 * still covers the old range). NULL with HAB_OUT_OF_MEMORY when the collection left no room
 * for the object (the runtime is out of memory), HAB_INVALID_ARGUMENT for a bad size, a
 * running mutator or one of another heap. Write the object's header (and root it) before hab_collection_finish:
 * another thread's collection may stop this mutator again before its thread runs. */
void *hab_collection_alloc(hab_collection *collection, hab_mutator *mutator, size_t bytes);

/* Ends the collection and frees it: the mutators run again. */
hab_status hab_collection_finish(hab_collection *collection);

/* ---- Per-CPU support ---------------------------------------------------------------------- */

/* How this process's threads get their rseq areas, decided once (by the first call of
 * anything that needs it, in the thread that makes it). */
#define HAB_RSEQ_UNAVAILABLE 0      /* the kernel refuses rseq: compare-and-swap, getcpu */
#define HAB_RSEQ_GLIBC 1            /* glibc registered an area for every thread */
#define HAB_RSEQ_OWN 2              /* Hab registers one per thread, at area_offset in each */
#define HAB_RSEQ_OWN_THREAD_LOCAL 3 /* Hab registers a thread-local one per thread (no offset
                                     * common to all threads: no hab_cpu_buffer_path) */
#define HAB_RSEQ_UNREGISTERED 4     /* glibc's area unregistered: instruction counting only */

/* The flip between TLABs and per-CPU LABs (Garthwaite, Dice and White), for a runtime that
 * flips its own LABs at collections: the rule Hab's flip mode follows. One cycle as the rule
 * reads it, at the collection that ends it: */
typedef struct hab_flip_cycle {
    int in_cpu_labs;            /* nonzero: the cycle allocated in per-CPU LABs (else TLABs) */
    int first;                  /* nonzero: the first cycle (TLABs sized before any thread
                                 * allocated) */
    uint64_t unused_tlab_bytes; /* free tails of the TLABs retired in it (refills, collection) */
    uint64_t unused_lab_bytes;  /* free memory the per-CPU LABs left in it */
    uint64_t lab_bytes;         /* the largest LAB: the largest TLAB, or the per-CPU buffer */
    uint64_t cpus;              /* CPUs online */
    uint64_t running_threads;   /* threads that ran in it */
    uint64_t cycle_bytes;       /* what it took from the space (eden, where a cycle fills it) */
    uint64_t min_unused_tlab_percent; /* the least TLAB tails, in percent of cycle_bytes, worth
                                 * per-CPU LABs' longer path (0: no such bound) */
    uint64_t previous_cycles_over_bound; /* the judged cycles in TLABs in a row right before
                                 * this one that left tails over the bound: what
                                 * hab_flip_cycles_over_bound said of the cycle before (0 at
                                 * first) */
} hab_flip_cycle;

/* The cycles in TLABs, in a row, that left tails over the bound (more than lab_bytes per CPU
 * and more than min_unused_tlab_percent of cycle_bytes unused), this one included: 0 when it
 * did not, was in per-CPU LABs or is the first; else previous_cycles_over_bound + 1. The next
 * judged cycle's previous_cycles_over_bound. 0 for a NULL cycle (HAB_INVALID_ARGUMENT). */
uint64_t hab_flip_cycles_over_bound(const hab_flip_cycle *cycle);

/* How many cycles in a row over the bound send the next to per-CPU LABs: fewer can be threads
 * that just started, in TLABs sized for the fewer before them (hab::CYCLES_OVER_BOUND_TO_FLIP). */
#define HAB_FLIP_CYCLES_OVER_BOUND 3

/* Whether the next cycle allocates in per-CPU LABs: 1 or 0 (-1 for a NULL cycle,
 * HAB_INVALID_ARGUMENT). After a cycle in TLABs, per-CPU LABs when hab_flip_cycles_over_bound
 * reaches HAB_FLIP_CYCLES_OVER_BOUND; after a cycle in per-CPU LABs, TLABs again when those
 * left more than lab_bytes per running thread. */
int hab_flip_next_in_cpu_labs(const hab_flip_cycle *cycle);

/* The process's per-CPU support, the one answer Hab's command, logs and this ABI give:
 * registration is a HAB_RSEQ_ value; area_offset every thread's area from its thread pointer
 * (HAB_RSEQ_GLIBC, HAB_RSEQ_OWN; else 0); cpu_id the CPU-id source that a NULL cpu_id picks,
 * "rseq" (restartable per-CPU buffers) or "getcpu" (compare-and-swap ones, where rseq is
 * unavailable); description all of it in one line for a log, with why rseq is unavailable
 * where it is. Both strings live as long as the process. */
typedef struct hab_per_cpu_support {
    int registration;
    intptr_t area_offset;
    const char *cpu_id;
    const char *description;
} hab_per_cpu_support;

hab_status hab_per_cpu_support_get(hab_per_cpu_support *out);

/* Registers the calling thread's rseq area where Hab owns the registrations (HAB_RSEQ_OWN):
 * 1 when the thread has a registered area (glibc's or Hab's), 0 where rseq is unavailable or
 * the kernel refused this thread (its levels then take compare-and-swap). A thread that runs a
 * restartable section through area_offset itself (hab_cpu_buffer_bump, a JIT's code) calls it
 * first, once; hab_levels_thread_new calls it. An area never registered reads as glibc left
 * it, so a section run on it is not protected: never skip this call. The area stays registered
 * until the thread exits (its memory is the thread's own). */
int hab_rseq_register_thread(void);

/* Offers the area at offset from every thread's pointer for Hab's own registration, where
 * glibc registers none: for a runtime whose generated code runs sections through a fixed
 * offset on a C library that keeps no area (glibc before 2.35), typically 32 bytes aligned to
 * 32 in its static TLS (tls_model("initial-exec")), initialised with cpu_id -1 and cpu_id_start
 * and mm_cid 0xffffffff, so that a section run by a thread not yet registered misses. Preferred
 * to glibc's unused area where both exist. Call it before anything else of Hab's:
 * HAB_CONFIG_ERROR once the registration was decided, or on a second call. The memory must
 * exist in every thread, present and future, live as long as the thread, used by nothing else. */
hab_status hab_rseq_provide_area(intptr_t offset);

/* ---- The middle levels on their own ------------------------------------------------------ */

/* For a runtime that keeps its own TLABs and eden (HotSpot, say) and wants only Hab's per-CPU,
 * per-core and per-package buffers between them: it gives the upstream (its eden) and asks
 * for TLABs. docs/embedding.md, "The middle levels on their own", tells the protocol. */

/* The runtime's eden, called from any thread that carves, concurrently, with `user`. */
typedef struct hab_upstream {
    /* Carves desired_bytes, or what is left if that is at least min_bytes (both multiples of
     * 8): writes the start (a multiple of 8, at or above the levels' base) to *start and
     * returns the length, between min_bytes and desired_bytes; returns 0 when there is no
     * room. */
    size_t (*carve)(void *user, size_t min_bytes, size_t desired_bytes, uintptr_t *start);
    /* Makes [start, start + bytes) parseable with a filler object (a buffer's tail); bytes is
     * a multiple of 8, at least the smallest filler the levels were given. */
    void (*write_filler)(void *user, uintptr_t start, size_t bytes);
    void *user;
    /* The bytes eden has left before its next collection (end less top; an estimate is
     * fine), or NULL where the runtime does not say. Where it says, a buffer refilled near the
     * end of eden takes only its share of what is left (a quarter over the level's buffers)
     * instead of a whole buffer, so that little is left in buffers at the collection; those
     * refills are counted as short_refills. */
    size_t (*free_bytes)(void *user);
} hab_upstream;

typedef struct hab_levels hab_levels;
typedef struct hab_levels_thread hab_levels_thread;

/* The levels Hab picks on this machine ("auto") for a space (eden) of space_bytes whose
 * smallest TLAB is min_tlab_bytes: a restartable cpu level where rseq works, else core; one
 * compare-and-swap level above where the machine has several caches, packages or nodes;
 * buffers a share of the space, each within it and a power of two of at least one smallest
 * TLAB. Writes the list for hab_levels_new, NUL-terminated, into buffer when its len bytes
 * hold it; returns its length (as snprintf does), 0 on error (HAB_CONFIG_ERROR: a space of 0
 * or over 16 TiB, a smallest TLAB that is not a positive multiple of 8 or is larger than the
 * space, or a space that holds no power-of-two buffer of at least one smallest TLAB). */
size_t hab_levels_auto(size_t space_bytes, size_t min_tlab_bytes, char *buffer, size_t len);

/* A list of levels (the grammar of hab_levels_new; not "auto") brought within a space (eden)
 * of space_bytes on this machine, for a runtime given explicit sizes that must keep its
 * buffers at any eden: each level's buffers together hold at most a quarter of the space, and
 * each at most max_buffer_bytes (the largest piece the space hands out, such as a G1 region;
 * 0: no bound). A level that does not fit shrinks: the lowest to a power of two of at least
 * one smallest TLAB (min_tlab_bytes), a level above to a whole number of at least two buffers
 * below, or it is dropped with every level above it. A list that fits comes back as given
 * (the same text), so a caller can compare to tell. Writes the list as hab_levels_auto does; returns its
 * length, 0 on error (HAB_CONFIG_ERROR: a list that does not parse, a space of 0 or over
 * 16 TiB, a smallest TLAB that is not a positive multiple of 8 within the space). */
size_t hab_levels_fit(const char *levels, size_t space_bytes, size_t min_tlab_bytes,
                      size_t max_buffer_bytes, char *buffer, size_t len);

/* Levels from a list like "core:1MiB" or "cpu:256KiB,package:32MiB" (the grammar of the
 * `middle` key), handing out TLABs of at most max_tlab_bytes (0: the lowest level's buffer;
 * each buffer must hold a whole number of the chunks below it), never leaving a tail shorter
 * than min_filler_bytes (a positive multiple of 8; the largest TLAB holds at least four), over
 * an upstream whose chunks lie at or above base (within 32 TiB). HAB_CONFIG_ERROR names what
 * is wrong with the list or the sizes. */
hab_status hab_levels_new(const char *levels, size_t max_tlab_bytes, size_t min_filler_bytes,
                          uintptr_t base, const hab_upstream *upstream, hab_levels **out);

/* hab_levels_new with the current CPU read by cpu_id: "rseq", "getcpu" or "rdpid" (NULL: the
 * cpu_id of hab_per_cpu_support, as hab_levels_new). Only with "rseq" are the cpu level's
 * buffers restartable; with another source they are compare-and-swap buffers. */
hab_status hab_levels_new_with_cpu_id(const char *levels, const char *cpu_id,
                                      size_t max_tlab_bytes, size_t min_filler_bytes,
                                      uintptr_t base, const hab_upstream *upstream,
                                      hab_levels **out);

/* The largest TLAB the levels hand out (max_tlab_bytes, or the lowest level's buffer where
 * that was 0); 0 for NULL. Carve larger TLABs straight from the runtime's space. */
size_t hab_levels_max_tlab_bytes(hab_levels *levels);

/* The largest TLAB hab_levels_carve_tlab hands out now, beside the minimum asked for: near
 * the end of the upstream's space, the lowest level's buffers' share of what its free_bytes
 * says is left (a quarter of it over the buffers); SIZE_MAX where the upstream has no
 * free_bytes; 0 for NULL. A runtime that also carves TLABs from the per-CPU buffers itself
 * (hab_cpu_buffer_path) keeps them within it, so that they shrink with the buffers. */
size_t hab_levels_tlab_limit_bytes(hab_levels *levels);

/* The most memory the levels' buffers hold at once: each level's buffer size times its
 * domains (CPUs, cores, packages...), summed; 0 for NULL. */
size_t hab_levels_buffered_bytes(hab_levels *levels);

/* TLABs carved straight from the upstream because every level's buffers were busy (another
 * thread refilling them) or too small: the TLABs no level's allocs count; 0 for NULL. */
uint64_t hab_levels_tlabs_past_levels(hab_levels *levels);

/* Frees the caller's reference (NULL: nothing); thread handles keep the levels alive. */
void hab_levels_free(hab_levels *levels);

/* A handle for the calling thread to carve TLABs with (it counts that thread's events); NULL
 * on error. One thread uses it at a time. */
hab_levels_thread *hab_levels_thread_new(hab_levels *levels);

/* Frees a thread handle (NULL: nothing); its counts stay in the levels' statistics. */
void hab_levels_thread_free(hab_levels_thread *thread);

/* A TLAB of desired_bytes, or at least min_bytes (multiples of 8), from the buffer of the
 * domain the thread runs in (then the other domains, the level above, the upstream): writes
 * its start to *start and returns its length, which may exceed desired_bytes by less than the
 * smallest filler. 0 when the levels and the upstream are exhausted (HAB_OUT_OF_MEMORY), for
 * bad sizes (HAB_INVALID_ARGUMENT), or when the upstream broke its contract
 * (HAB_INTERNAL_ERROR naming the range: the levels hand out nothing from it). */
size_t hab_levels_carve_tlab(hab_levels_thread *thread, size_t min_bytes, size_t desired_bytes,
                             uintptr_t *start);

/* Where compiled code bumps the lowest level's restartable per-CPU buffers itself, for an
 * object (a per-CPU LAB allocation) or a TLAB, on x86_64 Linux where every thread's rseq area
 * is at one offset (HAB_RSEQ_GLIBC, HAB_RSEQ_OWN: each thread calls hab_rseq_register_thread
 * before its first section).
 * Index c's buffer is one uint64_t at slots + c * HAB_CPU_LAB_SLOT_BYTES: its low
 * HAB_CPU_BUFFER_TOP_BITS bits the buffer's top in words from base, the bits above the words
 * left (0: an empty buffer). In a restartable section whose descriptor is stored at
 * fs:[rseq_area_offset + HAB_RSEQ_CS_OFFSET] and whose abort handler follows
 * HAB_RSEQ_SIGNATURE: read the uint32_t index at fs:[rseq_index_offset]; an index at or
 * beyond slot_count misses; load the word; subtract (n << HAB_CPU_BUFFER_TOP_BITS) - n for n
 * words, and a borrow (fewer than n words left) misses; commit by storing the difference.
 * The object is at base + 8 * (the old word's top). A miss takes hab_levels_carve_tlab of
 * the object's size, which refills the buffer; hab_levels_retire_all covers every tail with a
 * filler, as for TLABs. hab_cpu_buffer_bump below is that section in C. */
#define HAB_CPU_BUFFER_TOP_BITS 42
/* The largest bump: a buffer counts its words left in the bits above the top. */
#define HAB_CPU_BUFFER_MAX_BYTES ((size_t)8 << (64 - HAB_CPU_BUFFER_TOP_BITS))
typedef struct hab_cpu_buffer_path {
    intptr_t rseq_area_offset;
    intptr_t rseq_index_offset;
    uintptr_t slots;
    uintptr_t base;
    uint32_t slot_count;
} hab_cpu_buffer_path;

/* Fills *out with the levels' path for compiled code. HAB_CONFIG_ERROR where there is none:
 * the lowest level is not a restartable cpu level (another list, another cpu_id, rseq
 * unavailable), or the threads' rseq areas are not at one offset (HAB_RSEQ_OWN_THREAD_LOCAL). */
hab_status hab_levels_cpu_buffer_path(hab_levels *levels, hab_cpu_buffer_path *out);

#if HAB_INLINE_RSEQ
/* `bytes` (a positive multiple of 8) bumped from the buffer of the CPU the thread runs on, in
 * a restartable section of 12 instructions: the object's address, or 0 when it missed (no
 * buffer for the thread's index, fewer than `bytes` left, the section aborted, or a size of
 * HAB_CPU_BUFFER_MAX_BYTES or more); then carve it with hab_levels_carve_tlab. Every thread
 * that bumps has called hab_rseq_register_thread (or hab_levels_thread_new) first. */
static inline uintptr_t hab_cpu_buffer_bump(const hab_cpu_buffer_path *path, size_t bytes) {
    if (bytes >= HAB_CPU_BUFFER_MAX_BYTES) {
        return 0;
    }
    uint64_t words = bytes / 8;
    uint64_t delta = (words << HAB_CPU_BUFFER_TOP_BITS) - words;
    uint64_t slot, word, scratch;
    __asm__ goto(
        HAB_RSEQ_DESCRIPTOR_
        "leaq 80b(%%rip), %[scratch]\n\t"
        "movq %[scratch], %%fs:%c[rseq_cs](%[area])\n\t"
        "81:\n\t"
        "movl %%fs:(%[index]), %k[slot]\n\t"
        "cmpq %[count], %[slot]\n\t"
        "jae %l[miss]\n\t"
        "shlq %[shift], %[slot]\n\t"
        "addq %[slots], %[slot]\n\t"
        "movq (%[slot]), %[word]\n\t"
        "movq %[word], %[scratch]\n\t"
        "subq %[delta], %[scratch]\n\t"
        "jb %l[miss]\n\t"
        "movq %[scratch], (%[slot])\n\t"
        HAB_RSEQ_ABORT_TO_MISS_
        : [slot] "=&r"(slot), [word] "=&r"(word), [scratch] "=&r"(scratch)
        : [area] "r"(path->rseq_area_offset), [index] "r"(path->rseq_index_offset),
          [count] "r"((uint64_t)path->slot_count), [slots] "r"(path->slots), [delta] "r"(delta),
          [shift] "i"(HAB_CPU_LAB_SLOT_SHIFT), [signature] "i"(HAB_RSEQ_SIGNATURE),
          [rseq_cs] "i"(HAB_RSEQ_CS_OFFSET)
        : "memory", "cc"
        : miss);
    (void)slot;
    (void)scratch;
    return path->base + (word & (((uint64_t)1 << HAB_CPU_BUFFER_TOP_BITS) - 1)) * 8;
miss:
    return 0;
}
#endif

/* Empties every buffer: a filler over each free tail, through the upstream's write_filler.
 * Afterwards nothing the levels handed out is shared with them, and the runtime may reset its
 * eden. Only while no thread carves (the runtime's threads are stopped, as at a collection),
 * from one thread. */
hab_status hab_levels_retire_all(hab_levels *levels);

/* Resizes every level's buffers for the next cycle to follow the allocation, as a heap of
 * Hab's own does with auto levels: each domain that allocates refills its buffer about 16
 * times per cycle, to the nearest power of two, within these bounds, the first winning over
 * the others: (1) the lowest level's buffers are at least the average TLAB of the last cycle
 * that carved any (at least 8 bytes) and each level's above at least four of the new buffer
 * below; (2) all of a level's buffers hold at most a quarter of space_bytes (the next eden),
 * where (1) allows; (3) a buffer halves at most per call, where (2) allows (an eden that shrank
 * by more than half shrinks the buffers with it). Call it at a collection, after
 * hab_levels_retire_all; the sizes show as buffer_bytes in hab_level_stats.
 * HAB_INVALID_ARGUMENT for a space of 0. */
hab_status hab_levels_resize(hab_levels *levels, size_t space_bytes);

/* hab_levels_resize with no buffer above max_buffer_bytes (0: no bound), the largest piece the
 * runtime's space hands out (a G1 region), unless that is below a level's floor. */
hab_status hab_levels_resize_within(hab_levels *levels, size_t space_bytes,
                                    size_t max_buffer_bytes);

/* The levels' statistics as JSON: a list, lowest level first, of {"level": name, "stats":
 * {allocs, foreign_allocs, refills, waste_bytes, ...}} (the fields of hab_level_stats),
 * written as hab_stats_json writes (buffer NULL or len 0: the length only); 0 on error. */
size_t hab_levels_stats_json(hab_levels *levels, char *buffer, size_t len);

/* One level's figures, over every thread and every retire. */
typedef struct hab_level_stats {
    const char *level;        /* "cpu", "core", "llc", "package" or "node" (static) */
    uint64_t allocs;          /* chunks handed out: TLABs, or buffers of the level below */
    uint64_t foreign_allocs;  /* of those, served by another domain than the thread's */
    uint64_t refills;         /* buffers of this level claimed */
    uint64_t taken_bytes;     /* bytes of the chunks its buffers took from above (less
                               * waste_bytes, after a retire_all: what the level handed out) */
    uint64_t claims_lost;     /* claims of an exhausted buffer another thread won */
    uint64_t waste_bytes;     /* free tails retired as fillers (refills and retire_all) */
    uint64_t rseq_aborts;     /* restartable sections that aborted */
    uint64_t rseq_fallbacks;  /* requests of a restartable level that took compare-and-swap */
    uint64_t out_of_range_cpus; /* of rseq_fallbacks, from a CPU beyond the per-CPU array */
    uint64_t sidelined;       /* chunks a refill could not install, kept for later */
    uint64_t sideline_reused; /* refills served by a sidelined chunk */
    uint64_t short_refills;   /* refills cut short at the end of a cycle (a share of eden's rest) */
    uint64_t buffer_bytes;    /* the size of the chunk each buffer takes from above */
} hab_level_stats;

/* Writes each level's figures, lowest first, into out (at most capacity entries; out may be
 * NULL to ask); returns the number of levels, or 0 on error. */
size_t hab_levels_stats(hab_levels *levels, hab_level_stats *out, size_t capacity);

/* Writes the figures of now less those of since (NULL: none; buffer_bytes, a size, is now's)
 * that are not zero, as "name: value" pairs separated by spaces (the names of the fields
 * above, bytes exact), into buffer, NUL-terminated, when its len bytes hold them: a log line
 * in the library's words, e.g. "allocs: 1427 foreign_allocs: 3 refills: 498 waste_bytes:
 * 2962432 buffer_bytes: 1048576". Returns the
 * text's length (as snprintf does); 0 also when every figure is zero, or for a NULL now. */
size_t hab_level_stats_line(const hab_level_stats *now, const hab_level_stats *since,
                            char *buffer, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* HAB_H */
