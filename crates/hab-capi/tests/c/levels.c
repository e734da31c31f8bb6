/* The middle levels through the C ABI, over a fake eden (a bump pointer that records its
 * fillers): more threads than CPUs, moving between CPUs, carve TLABs until the eden is
 * exhausted; after hab_levels_retire_all the TLABs and the fillers tile exactly what the eden
 * handed out (no gap, no overlap). Three rounds per level list, the eden reset between them.
 * Over a restartable cpu level the threads also bump objects straight from the per-CPU
 * buffers (hab_cpu_buffer_bump, the path compiled code takes), carving them out of line when
 * it misses, and those objects tile with the rest. Then bad arguments and an upstream that
 * breaks its contract. Exit 0 on success. */
#define _GNU_SOURCE
#include "hab.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 8
#define EDEN_BYTES (16u << 20)
#define MAX_TLAB_BYTES (16u << 10)
#define MAX_RANGES (EDEN_BYTES / 64)


struct range {
    uintptr_t start, end;
};

/* The eden: [start, end) bumped at top; its fillers recorded under a lock. */
static struct {
    uintptr_t start, end;
    _Atomic uintptr_t top;
    size_t min_filler_bytes;
    pthread_mutex_t lock;
    struct range *fillers;
    size_t filler_count;
    atomic_int bad_fillers;
} eden = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t carve(void *user, size_t min_bytes, size_t desired_bytes, uintptr_t *start) {
    (void)user;
    uintptr_t top = atomic_load(&eden.top);
    for (;;) {
        size_t left = eden.end - top;
        size_t len = desired_bytes < left ? desired_bytes : left;
        if (len < min_bytes) {
            return 0;
        }
        if (atomic_compare_exchange_weak(&eden.top, &top, top + len)) {
            *start = top;
            return len;
        }
    }
}

/* What the eden has left: with it, buffers refilled near the end take a share of it. */
static size_t eden_free(void *user) {
    (void)user;
    return eden.end - atomic_load(&eden.top);
}

static void write_filler(void *user, uintptr_t start, size_t bytes) {
    (void)user;
    if (bytes < eden.min_filler_bytes || (start | bytes) % 8 != 0) {
        atomic_fetch_add(&eden.bad_fillers, 1);
    }
    pthread_mutex_lock(&eden.lock);
    if (eden.filler_count < MAX_RANGES) {
        eden.fillers[eden.filler_count++] = (struct range){start, start + bytes};
    }
    pthread_mutex_unlock(&eden.lock);
}

struct worker {
    hab_levels *levels;
    /* Where the worker bumps objects itself, or NULL. */
    const hab_cpu_buffer_path *path;
    size_t index;
    struct range *tlabs;
    size_t count;
    size_t capacity;
    /* Objects asked of the inline bump, and those it served. */
    size_t bump_attempts;
    size_t bumped;
};

/* An object of 8 to 2048 bytes from the buffer of the CPU the thread runs on: bumped inline,
 * or, when that misses, carved out of line (which refills the buffer). 0: eden is exhausted. */
static size_t object(struct worker *worker, hab_levels_thread *thread, size_t bytes,
                     uintptr_t *start) {
#if HAB_INLINE_RSEQ
    worker->bump_attempts++;
    uintptr_t address = hab_cpu_buffer_bump(worker->path, bytes);
    if (address != 0) {
        worker->bumped++;
        *start = address;
        return bytes;
    }
#endif
    return hab_levels_carve_tlab(thread, bytes, bytes, start);
}

static void *carver(void *argument) {
    struct worker *worker = argument;
    hab_levels_thread *thread = hab_levels_thread_new(worker->levels);
    CHECK(thread != NULL);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned seed = (unsigned)worker->index * 7919u + 1;
    for (;;) {
        if (worker->count % 64 == 0 && cpus > 1) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET((int)((worker->index + worker->count / 64) % (size_t)cpus), &set);
            sched_setaffinity(0, sizeof set, &set);
        }
        seed = seed * 1103515245u + 12345u;
        size_t desired = 8 * (1 + (seed >> 8) % (MAX_TLAB_BYTES / 8));
        seed = seed * 1103515245u + 12345u;
        size_t min = 8 * (1 + (seed >> 8) % (desired / 8));
        uintptr_t start = 0;
        /* Every other request an object, while the worker has room to record them. */
        size_t len = worker->path != NULL && seed % 2 == 0 && worker->count < worker->capacity / 2
                         ? object(worker, thread, 8 * (1 + (seed >> 9) % 256), &start)
                         : hab_levels_carve_tlab(thread, min, desired, &start);
        if (len == 0) {
            CHECK(strstr(hab_last_error(), "exhausted") != NULL);
            break;
        }
        CHECK(len >= 8 && len < MAX_TLAB_BYTES + 64 && start % 8 == 0);
        CHECK(start >= eden.start && start + len <= eden.end);
        CHECK(worker->count < worker->capacity);
        worker->tlabs[worker->count++] = (struct range){start, start + len};
    }
    hab_levels_thread_free(thread);
    return NULL;
}

static int by_start(const void *a, const void *b) {
    uintptr_t x = ((const struct range *)a)->start, y = ((const struct range *)b)->start;
    return x < y ? -1 : x > y;
}

/* cpu_id: NULL (hab_levels_new), or a source for hab_levels_new_with_cpu_id; says_free:
 * whether the eden says what it has left (buffers then shrink at its end); bump: whether the
 * threads also bump objects inline, which needs the levels' path for compiled code. */
static void tile(const char *list, size_t min_filler_bytes, const char *cpu_id, int says_free,
                 int bump) {
    hab_upstream upstream = {carve, write_filler, NULL, says_free ? eden_free : NULL};
    hab_levels *levels = NULL;
    hab_per_cpu_support support;
    CHECK(hab_per_cpu_support_get(&support) == HAB_OK);
    if (cpu_id != NULL && strcmp(cpu_id, "rseq") == 0 && strcmp(support.cpu_id, "rseq") != 0) {
        /* An explicit rseq source where the CPU cannot be read from the rseq area (the kernel
         * refuses rseq, or the areas are thread-local) is an error that says why. */
        CHECK(hab_levels_new_with_cpu_id(list, cpu_id, MAX_TLAB_BYTES, min_filler_bytes,
                                         eden.start, &upstream, &levels) == HAB_CONFIG_ERROR);
        CHECK(levels == NULL && strstr(hab_last_error(), "rseq area") != NULL);
        printf("%s with cpu_id rseq: refused here (%s)\n", list, support.description);
        return;
    }
    CHECK((cpu_id == NULL ? hab_levels_new(list, MAX_TLAB_BYTES, min_filler_bytes, eden.start,
                                           &upstream, &levels)
                          : hab_levels_new_with_cpu_id(list, cpu_id, MAX_TLAB_BYTES,
                                                       min_filler_bytes, eden.start, &upstream,
                                                       &levels)) == HAB_OK);
    if (levels == NULL) {
        return;
    }
    eden.min_filler_bytes = min_filler_bytes;
    hab_cpu_buffer_path path;
    const hab_cpu_buffer_path *bump_path = NULL;
    if (bump) {
        CHECK(hab_levels_cpu_buffer_path(levels, &path) == HAB_OK);
        CHECK(path.slots != 0 && path.slot_count > 0 && path.base == eden.start);
        bump_path = &path;
    } else {
        /* Compare-and-swap buffers have no such path. */
        CHECK(strncmp(list, "cpu", 3) == 0 || hab_levels_cpu_buffer_path(levels, &path) ==
                                                  HAB_CONFIG_ERROR);
    }
    struct range *all = malloc(2 * MAX_RANGES * sizeof *all);
    struct worker workers[THREADS];
    uint64_t all_tlabs = 0;
    uint64_t all_bump_attempts = 0;
    for (int round = 0; round < 3; round++) {
        atomic_store(&eden.top, eden.start);
        eden.filler_count = 0;
        pthread_t threads[THREADS];
        for (size_t i = 0; i < THREADS; i++) {
            workers[i] = (struct worker){
                .levels = levels,
                .path = bump_path,
                .index = i + (size_t)round,
                .tlabs = malloc(MAX_RANGES / THREADS * sizeof(struct range)),
                .capacity = MAX_RANGES / THREADS,
            };
            pthread_create(&threads[i], NULL, carver, &workers[i]);
        }
        for (size_t i = 0; i < THREADS; i++) {
            pthread_join(threads[i], NULL);
        }
        CHECK(hab_levels_retire_all(levels) == HAB_OK);
        size_t n = 0, tlabs = 0, bump_attempts = 0, bumped = 0;
        for (size_t i = 0; i < THREADS; i++) {
            memcpy(all + n, workers[i].tlabs, workers[i].count * sizeof *all);
            n += workers[i].count;
            tlabs += workers[i].count - workers[i].bumped;
            bump_attempts += workers[i].bump_attempts;
            bumped += workers[i].bumped;
            free(workers[i].tlabs);
        }
        /* The inline bump serves most of the objects asked of it: a miss carves out of line,
         * which refills the buffer. (How many objects a round asks for depends on how the
         * scheduler shares the eden between the workers that bump and those that carve.) */
        CHECK(bump_attempts < 64 || bumped * 2 > bump_attempts);
        all_bump_attempts += bump_attempts;
        all_tlabs += tlabs;
        memcpy(all + n, eden.fillers, eden.filler_count * sizeof *all);
        n += eden.filler_count;
        qsort(all, n, sizeof *all, by_start);
        uintptr_t at = eden.start;
        size_t gaps = 0;
        for (size_t i = 0; i < n; i++) {
            gaps += all[i].start != at;
            at = all[i].end;
        }
        CHECK(gaps == 0);
        CHECK(at == atomic_load(&eden.top));
        CHECK(atomic_load(&eden.top) + MAX_TLAB_BYTES > eden.end);
        CHECK(atomic_load(&eden.bad_fillers) == 0);
        printf("%s, cpu id %s, smallest filler %zu, eden %s, round %d: %zu TLABs, %zu of %zu "
               "objects bumped inline and %zu fillers tile %zu KiB\n",
               list, cpu_id == NULL ? "default" : cpu_id, min_filler_bytes,
               says_free ? "says what is left" : "silent", round, tlabs, bumped, bump_attempts,
               eden.filler_count, (size_t)(at - eden.start) >> 10);
    }
    CHECK(!bump || all_bump_attempts > 0);
    char json[4096];
    size_t length = hab_levels_stats_json(levels, json, sizeof json);
    CHECK(length > 0 && length < sizeof json && strstr(json, "\"allocs\"") != NULL);
    hab_level_stats stats[4];
    size_t count = hab_levels_stats(levels, stats, 4);
    CHECK(count >= 1 && count <= 4 && hab_levels_stats(levels, NULL, 0) == count);
    CHECK(strncmp(list, stats[0].level, strlen(stats[0].level)) == 0);
    CHECK(stats[0].allocs > 0 && stats[count - 1].refills > 0);
    /* Near the eden's end the highest level's refills take a share of what is left: the
     * eden runs out only through them, and only below four buffers per domain left. */
    CHECK(says_free ? stats[count - 1].short_refills > 0 : stats[count - 1].short_refills == 0);
    /* Each TLAB is counted by the level that served it, or as past every level. */
    uint64_t past = hab_levels_tlabs_past_levels(levels);
    CHECK(stats[0].allocs + past <= all_tlabs);
    if (count == 1) {
        CHECK(stats[0].allocs + past == all_tlabs);
    }
    printf("  %llu of %llu TLABs past every level\n", (unsigned long long)past,
           (unsigned long long)all_tlabs);
    if (strcmp(stats[0].level, "cpu") == 0 && cpu_id != NULL && strcmp(cpu_id, "rseq") == 0 &&
        !says_free) {
        /* Restartable buffers: a chunk is carved by a section on the CPU it belongs to, or
         * by the compare-and-swap fallback (or, where the eden says it ran out, from another
         * CPU's buffer tail). */
        CHECK(stats[0].foreign_allocs <= stats[0].rseq_fallbacks);
    }
    for (size_t i = 0; i < count; i++) {
        /* Requests from CPUs beyond the per-CPU array are some of the fallbacks. */
        CHECK(stats[i].out_of_range_cpus <= stats[i].rseq_fallbacks);
        CHECK(stats[i].short_refills <= stats[i].refills);
        printf("  %s: %llu allocs, %llu foreign, %llu refills (%llu short), %llu waste bytes, "
               "%llu aborts, %llu fallbacks\n",
               stats[i].level, (unsigned long long)stats[i].allocs,
               (unsigned long long)stats[i].foreign_allocs, (unsigned long long)stats[i].refills,
               (unsigned long long)stats[i].short_refills,
               (unsigned long long)stats[i].waste_bytes,
               (unsigned long long)stats[i].rseq_aborts,
               (unsigned long long)stats[i].rseq_fallbacks);
    }
    free(all);
    hab_levels_free(levels);
}

/* An upstream that hands out a range below the base. */
static size_t broken_carve(void *user, size_t min_bytes, size_t desired_bytes, uintptr_t *start) {
    (void)user;
    (void)min_bytes;
    *start = eden.start - 4096;
    return desired_bytes;
}

static void bad_arguments(void) {
    hab_upstream upstream = {carve, write_filler, NULL, NULL};
    hab_levels *levels = NULL;
    CHECK(hab_levels_new("core:1MiB", MAX_TLAB_BYTES, 8, eden.start, NULL, &levels) ==
          HAB_INVALID_ARGUMENT);
    CHECK(hab_levels_new("lunar:1MiB", MAX_TLAB_BYTES, 8, eden.start, &upstream, &levels) ==
          HAB_CONFIG_ERROR);
    CHECK(strstr(hab_last_error(), "lunar") != NULL);
    CHECK(hab_levels_new("core:1MiB", 12, 8, eden.start, &upstream, &levels) == HAB_CONFIG_ERROR);
    /* max_tlab_bytes 0 is the documented default: a zero buffer is the list's fault. */
    CHECK(hab_levels_new("cpu:0", 0, 8, eden.start, &upstream, &levels) == HAB_CONFIG_ERROR);
    CHECK(strstr(hab_last_error(), "middle") != NULL && strstr(hab_last_error(), "max_tlab") == NULL);
    hab_upstream incomplete = {carve, NULL, NULL, NULL};
    CHECK(hab_levels_new("core:1MiB", MAX_TLAB_BYTES, 8, eden.start, &incomplete, &levels) ==
          HAB_INVALID_ARGUMENT);
    CHECK(levels == NULL);
    CHECK(hab_levels_thread_new(NULL) == NULL);
    uintptr_t start = 0;
    CHECK(hab_levels_carve_tlab(NULL, 8, 8, &start) == 0);
    CHECK(hab_levels_retire_all(NULL) == HAB_INVALID_ARGUMENT);
    CHECK(hab_levels_stats_json(NULL, NULL, 0) == 0);
    CHECK(hab_levels_stats(NULL, NULL, 0) == 0);
    CHECK(hab_levels_max_tlab_bytes(NULL) == 0);
    CHECK(hab_levels_new("cpu:64KiB,core:1MiB", 0, 16, eden.start, &upstream, &levels) == HAB_OK);
    CHECK(hab_levels_max_tlab_bytes(levels) == 64u << 10);
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    CHECK(hab_levels_buffered_bytes(levels) >= (size_t)(64u << 10) + (1u << 20));
    CHECK(hab_levels_buffered_bytes(levels) <= (size_t)cpus * ((64u << 10) + (1u << 20)));
    CHECK(hab_levels_buffered_bytes(NULL) == 0);
    CHECK(hab_levels_tlabs_past_levels(levels) == 0);
    CHECK(hab_levels_tlabs_past_levels(NULL) == 0);
    /* An upstream that does not say what it has left puts no bound on a TLAB. */
    CHECK(hab_levels_tlab_limit_bytes(levels) == SIZE_MAX);
    CHECK(hab_levels_tlab_limit_bytes(NULL) == 0);
    hab_levels_free(levels);
    levels = NULL;
    CHECK(hab_levels_new("core:1MiB", 3u << 20, 16, eden.start, &upstream, &levels) ==
          HAB_CONFIG_ERROR);
    CHECK(hab_levels_new_with_cpu_id("core:1MiB", "sundial", MAX_TLAB_BYTES, 8, eden.start,
                                     &upstream, &levels) == HAB_CONFIG_ERROR);
    CHECK(strstr(hab_last_error(), "getcpu") != NULL);

    hab_upstream broken = {broken_carve, write_filler, NULL, NULL};
    CHECK(hab_levels_new("core:1MiB", MAX_TLAB_BYTES, 8, eden.start, &broken, &levels) ==
          HAB_OK);
    hab_levels_thread *thread = hab_levels_thread_new(levels);
    CHECK(hab_levels_carve_tlab(thread, 8, 12, &start) == 0);
    CHECK(strstr(hab_last_error(), "multiples of 8") != NULL);
    CHECK(hab_levels_carve_tlab(thread, 64, 8, &start) == 0);
    CHECK(hab_levels_carve_tlab(thread, 8, 64, NULL) == 0);
    CHECK(hab_levels_carve_tlab(thread, 4096, 4096, &start) == 0);
    CHECK(strstr(hab_last_error(), "internal error") != NULL);
    CHECK(hab_levels_carve_tlab(thread, 4096, 4096, &start) == 0);
    CHECK(strstr(hab_last_error(), "broke its contract") != NULL);
    CHECK(hab_levels_retire_all(levels) == HAB_INTERNAL_ERROR);
    hab_levels_thread_free(thread);
    hab_levels_free(levels);
}

/* The levels Hab picks for this eden, as a list hab_levels_new takes; its errors. */
static void auto_levels(void) {
    char list[128];
    size_t len = hab_levels_auto(EDEN_BYTES, MAX_TLAB_BYTES, list, sizeof list);
    CHECK(len > 0 && len < sizeof list && strlen(list) == len);
    char small[4] = "xyz";
    CHECK(hab_levels_auto(EDEN_BYTES, MAX_TLAB_BYTES, small, sizeof small) == len);
    CHECK(strcmp(small, "xyz") == 0);
    CHECK(hab_levels_auto(EDEN_BYTES, MAX_TLAB_BYTES, NULL, 0) == len);
    CHECK(hab_levels_auto(0, MAX_TLAB_BYTES, small, sizeof small) == 0);
    CHECK(strstr(hab_last_error(), "hab_levels_auto") != NULL);
    CHECK(hab_levels_auto(4096, 8192, NULL, 0) == 0);
    hab_upstream upstream = {carve, write_filler, NULL, NULL};
    hab_levels *levels = NULL;
    CHECK(hab_levels_new("auto", 0, 8, eden.start, &upstream, &levels) == HAB_CONFIG_ERROR);
    CHECK(strstr(hab_last_error(), "hab_levels_auto") != NULL);
    tile(list, 16, NULL, 1, 0);

    /* Resized after a cycle that carved nothing: the lowest buffer halves (or stays at four
     * of the largest TLAB), and the figures say so. */
    atomic_store(&eden.top, eden.start);
    eden.filler_count = 0;
    CHECK(hab_levels_new("core:1MiB", 16u << 10, 8, eden.start, &upstream, &levels) == HAB_OK);
    hab_levels_thread *thread = hab_levels_thread_new(levels);
    uintptr_t start = 0;
    CHECK(hab_levels_carve_tlab(thread, 16u << 10, 16u << 10, &start) == 16u << 10);
    CHECK(hab_levels_retire_all(levels) == HAB_OK);
    CHECK(hab_levels_resize(levels, EDEN_BYTES) == HAB_OK);
    hab_level_stats stats[5];
    CHECK(hab_levels_stats(levels, stats, 5) == 1);
    CHECK(stats[0].buffer_bytes == 512u << 10);
    CHECK(hab_levels_resize(levels, 0) == HAB_INVALID_ARGUMENT);
    CHECK(hab_levels_resize(NULL, EDEN_BYTES) == HAB_INVALID_ARGUMENT);
    hab_levels_thread_free(thread);
    hab_levels_free(levels);
}

/* Lists hab_levels_auto gives at the edges of its inputs are lists hab_levels_new takes, each
 * buffer within the space; inputs no buffer can serve are refused (they gave cpu:4B, buffers
 * beyond the space and the 16 TiB limit, and a wrapped 4 * SIZE_MAX). */
static void auto_levels_at_the_edges(void) {
    static const size_t usable[][2] = {
        {64, 32}, {4096, 2048}, {3000, 2048}, {16u << 20, 2048}, {(size_t)1 << 44, 2048},
        {(size_t)1 << 44, (size_t)1 << 43},
    };
    hab_upstream upstream = {carve, write_filler, NULL, NULL};
    for (size_t i = 0; i < sizeof usable / sizeof usable[0]; i++) {
        char list[128];
        size_t len = hab_levels_auto(usable[i][0], usable[i][1], list, sizeof list);
        CHECK(len > 0 && len < sizeof list);
        hab_levels *levels = NULL;
        CHECK(hab_levels_new(list, 0, 8, eden.start, &upstream, &levels) == HAB_OK);
        hab_level_stats stats[5];
        size_t count = hab_levels_stats(levels, stats, 5);
        CHECK(count >= 1);
        for (size_t level = 0; level < count && level < 5; level++) {
            CHECK(stats[level].buffer_bytes <= usable[i][0]);
            CHECK(stats[level].buffer_bytes >= usable[i][1]);
        }
        hab_levels_free(levels);
    }
    static const size_t refused[][2] = {
        {0, 2048}, {SIZE_MAX, 2048}, {((size_t)1 << 44) + 8, 2048}, {64, 4}, {64, 1},
        {64, 0}, {16u << 20, SIZE_MAX}, {16u << 20, SIZE_MAX / 4 + 1}, {3000, 2560},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        CHECK(hab_levels_auto(refused[i][0], refused[i][1], NULL, 0) == 0);
        CHECK(hab_last_status() == HAB_CONFIG_ERROR);
    }
}

/* The smallest filler is a positive multiple of 8 that the largest TLAB holds four times;
 * buffers that are the largest TLAB hold four fillers (0, 12, 1 MiB, 2^40 and SIZE_MAX were
 * taken, SIZE_MAX wrapping to 0; cpu:8 gave "TLABs up to 0K"). */
/* Near the end of an eden that says what it has left, the largest TLAB the levels hand out
 * is the per-CPU buffers' share of it, and a TLAB carved then takes no more. */
static void tlab_limit_near_the_end(void) {
    hab_upstream upstream = {carve, write_filler, NULL, eden_free};
    hab_levels *levels = NULL;
    CHECK(hab_levels_new("cpu:64KiB", 0, 16, eden.start, &upstream, &levels) == HAB_OK);
    if (levels == NULL) {
        return;
    }
    atomic_store(&eden.top, eden.start);
    eden.min_filler_bytes = 16;
    size_t far = hab_levels_tlab_limit_bytes(levels);
    CHECK(far % 8 == 0);
    atomic_store(&eden.top, eden.end - (256u << 10));
    size_t near = hab_levels_tlab_limit_bytes(levels);
    CHECK(near < far && near <= (256u << 10) / 4 && near % 8 == 0);
    hab_levels_thread *thread = hab_levels_thread_new(levels);
    CHECK(thread != NULL);
    uintptr_t start = 0;
    size_t min = 1u << 10, desired = 64u << 10;
    size_t bytes = hab_levels_carve_tlab(thread, min, desired, &start);
    size_t bound = (near > min ? near : min) + 16;
    CHECK(bytes >= min && bytes <= bound && start >= eden.start && start + bytes <= eden.end);
    printf("TLAB limit: %zu KiB with eden empty, %zu bytes with 256 KiB left: a TLAB of %zu "
           "bytes for %zu desired\n", far >> 10, near, bytes, desired);
    hab_levels_thread_free(thread);
    CHECK(hab_levels_retire_all(levels) == HAB_OK);
    hab_levels_free(levels);
}

static void fillers_and_tiny_buffers(void) {
    hab_upstream upstream = {carve, write_filler, NULL, NULL};
    hab_levels *levels = NULL;
    static const size_t fillers[] = {0, 12, 1u << 20, (size_t)1 << 40, SIZE_MAX, SIZE_MAX - 7};
    for (size_t i = 0; i < sizeof fillers / sizeof fillers[0]; i++) {
        CHECK(hab_levels_new("core:1MiB", MAX_TLAB_BYTES, fillers[i], eden.start, &upstream,
                             &levels) == HAB_CONFIG_ERROR);
        CHECK(strstr(hab_last_error(), "min_filler") != NULL);
    }
    CHECK(hab_levels_new("cpu:8", 0, 16, eden.start, &upstream, &levels) == HAB_CONFIG_ERROR);
    CHECK(hab_levels_new("cpu:24", 0, 16, eden.start, &upstream, &levels) == HAB_CONFIG_ERROR);
    CHECK(strstr(hab_last_error(), "middle") != NULL);
    CHECK(levels == NULL);
    CHECK(hab_levels_new("core:1MiB", MAX_TLAB_BYTES, MAX_TLAB_BYTES / 4, eden.start, &upstream,
                         &levels) == HAB_OK);
    hab_levels_free(levels);
}

/* hab_levels_resize keeps the order of bounds hab.h states: the floor (the average TLAB)
 * over the quarter of the space over the halving. */
static void resize_keeps_its_contract(void) {
    hab_upstream upstream = {carve, write_filler, NULL, NULL};
    hab_levels *levels = NULL;
    atomic_store(&eden.top, eden.start);
    eden.filler_count = 0;
    CHECK(hab_levels_new("core:4MiB", 64u << 10, 16, eden.start, &upstream, &levels) == HAB_OK);
    size_t domains = hab_levels_buffered_bytes(levels) / (4u << 20);
    CHECK(domains >= 1);
    hab_levels_thread *thread = hab_levels_thread_new(levels);
    uintptr_t start = 0;
    CHECK(hab_levels_carve_tlab(thread, 64u << 10, 64u << 10, &start) == 64u << 10);
    CHECK(hab_levels_retire_all(levels) == HAB_OK);
    hab_level_stats stats[1];
    /* A large space: one refill in the cycle, so the buffer halves, and no more. */
    CHECK(hab_levels_resize(levels, (size_t)1 << 40) == HAB_OK);
    CHECK(hab_levels_stats(levels, stats, 1) == 1 && stats[0].buffer_bytes == 2u << 20);
    /* A space whose quarter over the buffers is 256 KiB each: the share wins over halving. */
    CHECK(hab_levels_resize(levels, domains * (1u << 20)) == HAB_OK);
    CHECK(hab_levels_stats(levels, stats, 1) == 1 && stats[0].buffer_bytes == 256u << 10);
    CHECK(stats[0].buffer_bytes * domains <= domains * (1u << 20) / 4);
    /* Spaces of 1, 8 and 4096 bytes: the floor, the 64 KiB TLABs, wins over the share. */
    static const size_t tiny[] = {1, 8, 4096};
    for (size_t i = 0; i < 3; i++) {
        CHECK(hab_levels_resize(levels, tiny[i]) == HAB_OK);
        CHECK(hab_levels_stats(levels, stats, 1) == 1 && stats[0].buffer_bytes == 64u << 10);
    }
    hab_levels_thread_free(thread);
    hab_levels_free(levels);
}

/* Explicit levels fitted to a small eden or a region: a list that fits comes back as given (as
 * written),
 * one that does not shrinks to a list hab_levels_new takes, within the space; a resize within
 * a largest piece stays below it. */
static void fitted_levels(void) {
    char list[128];
    size_t len = hab_levels_fit("core:64K", EDEN_BYTES, 2048, 0, list, sizeof list);
    CHECK(len > 0 && strcmp(list, "core:64K") == 0);
    len = hab_levels_fit("cpu:1GiB,package:4GiB", EDEN_BYTES, 2048, 256u << 10, list, sizeof list);
    CHECK(len > 0 && len < sizeof list && strlen(list) == len);
    CHECK(strstr(list, "GiB") == NULL);
    hab_upstream upstream = {carve, write_filler, NULL, NULL};
    hab_levels *levels = NULL;
    CHECK(hab_levels_new(list, 0, 16, eden.start, &upstream, &levels) == HAB_OK);
    hab_level_stats stats[5];
    size_t count = hab_levels_stats(levels, stats, 5);
    CHECK(count >= 1);
    for (size_t i = 0; i < count; i++) {
        CHECK(stats[i].buffer_bytes >= 2048 && stats[i].buffer_bytes <= 256u << 10);
    }
    hab_levels_free(levels);
    CHECK(hab_levels_fit("auto", EDEN_BYTES, 2048, 0, list, sizeof list) == 0);
    CHECK(strstr(hab_last_error(), "hab_levels_fit") != NULL);
    CHECK(hab_levels_fit(NULL, EDEN_BYTES, 2048, 0, list, sizeof list) == 0);
    CHECK(hab_levels_fit("core:1MiB", 0, 2048, 0, list, sizeof list) == 0);
    CHECK(hab_levels_fit("core:1MiB", EDEN_BYTES, 12, 0, list, sizeof list) == 0);
    CHECK(hab_levels_fit("core:1MiB", 1024, 2048, 0, list, sizeof list) == 0);

    atomic_store(&eden.top, eden.start);
    eden.filler_count = 0;
    CHECK(hab_levels_new("core:1MiB", 16u << 10, 8, eden.start, &upstream, &levels) == HAB_OK);
    hab_levels_thread *thread = hab_levels_thread_new(levels);
    uintptr_t start = 0;
    for (int i = 0; i < 512; i++) {
        CHECK(hab_levels_carve_tlab(thread, 16u << 10, 16u << 10, &start) == 16u << 10);
    }
    CHECK(hab_levels_retire_all(levels) == HAB_OK);
    CHECK(hab_levels_resize_within(levels, EDEN_BYTES, 64u << 10) == HAB_OK);
    CHECK(hab_levels_stats(levels, stats, 5) == 1);
    CHECK(stats[0].buffer_bytes == 64u << 10);
    CHECK(hab_levels_resize_within(levels, 0, 64u << 10) == HAB_INVALID_ARGUMENT);
    CHECK(strstr(hab_last_error(), "hab_levels_resize_within") != NULL);
    CHECK(hab_levels_resize_within(NULL, EDEN_BYTES, 0) == HAB_INVALID_ARGUMENT);
    hab_levels_thread_free(thread);
    hab_levels_free(levels);
}

/* Whether the inline bump can run here: compiled in, and the levels publish their path. */
static int bump_path_here(void) {
#if HAB_INLINE_RSEQ
    hab_upstream upstream = {carve, write_filler, NULL, NULL};
    hab_levels *levels = NULL;
    if (hab_levels_new_with_cpu_id("cpu:64KiB", "rseq", 0, 8, eden.start, &upstream, &levels) !=
        HAB_OK) {
        return 0;
    }
    hab_cpu_buffer_path path;
    int here = hab_levels_cpu_buffer_path(levels, &path) == HAB_OK;
    hab_levels_free(levels);
    return here;
#else
    return 0;
#endif
}

/* The process's per-CPU support, as hab topology says it: the CPU-id source follows the
 * registration, and a new thread registers where Hab owns the registrations. */
static void *registers(void *argument) {
    (void)argument;
    return (void *)(intptr_t)hab_rseq_register_thread();
}

static void per_cpu_support(void) {
    hab_per_cpu_support support;
    CHECK(hab_per_cpu_support_get(NULL) == HAB_INVALID_ARGUMENT);
    CHECK(hab_per_cpu_support_get(&support) == HAB_OK);
    CHECK(support.description != NULL && support.cpu_id != NULL);
    printf("per-CPU support: %s\n", support.description);
    int restartable = support.registration != HAB_RSEQ_UNAVAILABLE;
    int at_one_offset = support.registration == HAB_RSEQ_GLIBC ||
                        support.registration == HAB_RSEQ_OWN ||
                        support.registration == HAB_RSEQ_UNREGISTERED;
    /* The CPU is read from the area where it sits at one offset in every thread. */
    CHECK(strcmp(support.cpu_id, at_one_offset ? "rseq" : "getcpu") == 0);
    CHECK((support.area_offset != 0) == at_one_offset);
    pthread_t thread;
    void *registered = NULL;
    CHECK(pthread_create(&thread, NULL, registers, NULL) == 0);
    CHECK(pthread_join(thread, &registered) == 0);
    CHECK((intptr_t)registered == restartable);
    /* Too late: the registration is decided. */
    CHECK(hab_rseq_provide_area(64) == HAB_CONFIG_ERROR);
}

int main(void) {
    void *memory = aligned_alloc(4096, EDEN_BYTES + 4096);
    eden.start = (uintptr_t)memory + 4096;
    eden.end = eden.start + EDEN_BYTES - 4096;
    eden.fillers = malloc(MAX_RANGES * sizeof *eden.fillers);
    per_cpu_support();
    bad_arguments();
    tile("core:1MiB", 16, NULL, 1, 0);
    tile("core:1MiB", 16, NULL, 0, 0);
    tile("cpu:256KiB,core:1MiB", 8, NULL, 0, 0);
    /* HotSpot's smallest filler: the restartable buffers keep a two-word reserve. */
    tile("cpu:256KiB,core:1MiB", 16, "rseq", 1, 0);
    tile("cpu:256KiB,core:1MiB", 16, "getcpu", 1, 0);
    tile("cpu:64KiB,package:4MiB", 8, "rseq", 1, 0);
    /* Objects bumped inline where the path exists, with a one- and a two-word filler. */
    if (bump_path_here()) {
        tile("cpu:256KiB,core:1MiB", 16, "rseq", 1, 1);
        tile("cpu:64KiB", 8, "rseq", 0, 1);
    } else {
        printf("no inline bump of the per-CPU buffers here: skipped\n");
    }
    auto_levels();
    auto_levels_at_the_edges();
    tlab_limit_near_the_end();
    fillers_and_tiny_buffers();
    resize_keeps_its_contract();
    fitted_levels();
    free(eden.fillers);
    free(memory);
    return CHECK_EXIT_STATUS;
}
