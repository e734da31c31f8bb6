/* Every entry point of hab.h with NULL handles, handles in the wrong state or of another heap,
 * and sizes at their edges (0, 1, alignment - 1, SIZE_MAX, 2^63, the heap's size): each call
 * returns its documented failure, never crashes, hangs or corrupts the heap. Prints one
 * Markdown row per case (the table in docs/embedding.md, "What a caller can rely on") and
 * checks each against what hab.h says. Freed handles are not tried: using one is undefined
 * behaviour in C, and the header says so. Exit 0 when every case held. */
#define _GNU_SOURCE
#include "hab.h"
#include "check.h"
#include "model.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* What a case must return: success, or a failure with this status. */
#define SUCCEEDS HAB_OK

static const char *status_name(hab_status status) {
    switch (status) {
    case HAB_OK: return "HAB_OK";
    case HAB_INVALID_ARGUMENT: return "HAB_INVALID_ARGUMENT";
    case HAB_CONFIG_ERROR: return "HAB_CONFIG_ERROR";
    case HAB_OUT_OF_MEMORY: return "HAB_OUT_OF_MEMORY";
    case HAB_TIMEOUT: return "HAB_TIMEOUT";
    case HAB_SYSTEM_ERROR: return "HAB_SYSTEM_ERROR";
    case HAB_VERIFY_ERROR: return "HAB_VERIFY_ERROR";
    case HAB_INTERNAL_ERROR: return "HAB_INTERNAL_ERROR";
    }
    return "an unknown status";
}

/* One row: the call, what it returned, and its message (or what was expected instead). */
static void report(const char *call, hab_status expected, hab_status got) {
    char message[200] = "";
    if (got != expected) {
        snprintf(message, sizeof message, "**expected %s**: %s", status_name(expected),
                 hab_last_error());
        fprintf(stderr, "%s: expected %s, got %s (%s)\n", call, status_name(expected),
                status_name(got), hab_last_error());
        atomic_fetch_add(&check_failures, 1);
    } else if (got != HAB_OK) {
        snprintf(message, sizeof message, "%s", hab_last_error());
    }
    for (char *c = message; *c != '\0'; c++) {
        if (*c == '|' || *c == '\n') {
            *c = ' ';
        }
    }
    printf("| `%s` | %s | %s |\n", call, got == HAB_OK ? "succeeds" : status_name(got), message);
}

/* A call returning a status. */
#define STATUS(expected, call) report(#call, expected, (call))
/* A call returning a pointer or a size: NULL or 0 is a failure, told by hab_last_status. */
#define VALUE(expected, call) report(#call, expected, (call) ? HAB_OK : hab_last_status())

static hab_object_model model = {object_size, write_filler, is_filler, 8, NULL};

static hab_heap *heap_of(const char *capacity, const char *mode) {
    hab_config *config = hab_config_new();
    CHECK(hab_config_set(config, "capacity", capacity) == HAB_OK);
    CHECK(hab_config_set(config, "mode", mode) == HAB_OK);
    hab_heap *heap = NULL;
    CHECK(hab_heap_new(config, &model, &heap) == HAB_OK);
    hab_config_free(config);
    return heap;
}

static void visit(void *user, void *address, size_t bytes, int is_filler_object) {
    (void)user;
    (void)address;
    (void)bytes;
    (void)is_filler_object;
}

static size_t eden_carve(void *user, size_t min_bytes, size_t desired_bytes, uintptr_t *start) {
    (void)user;
    (void)min_bytes;
    (void)desired_bytes;
    (void)start;
    return 0; /* an eden with no room: the levels report out of memory */
}

static void eden_filler(void *user, uintptr_t start, size_t bytes) {
    (void)user;
    (void)start;
    (void)bytes;
}

static void configuration(void) {
    hab_config *config = hab_config_new();
    hab_heap *heap = NULL;
    STATUS(HAB_INVALID_ARGUMENT, hab_config_set(NULL, "mode", "tlab"));
    STATUS(HAB_INVALID_ARGUMENT, hab_config_set(config, NULL, "tlab"));
    STATUS(HAB_INVALID_ARGUMENT, hab_config_set(config, "mode", NULL));
    STATUS(HAB_INVALID_ARGUMENT, hab_config_set(config, "mode", "\xff\xfe"));
    STATUS(HAB_CONFIG_ERROR, hab_config_set(config, "sizes", "1"));
    STATUS(HAB_CONFIG_ERROR, hab_config_set(config, "capacity", "-1"));
    STATUS(HAB_CONFIG_ERROR, hab_config_set(config, "capacity", "18446744073709551616"));
    STATUS(HAB_CONFIG_ERROR, hab_config_set(config, "capacity", "16EiB"));
    STATUS(HAB_CONFIG_ERROR, hab_config_set(config, "middle", ""));
    STATUS(HAB_CONFIG_ERROR, hab_config_set(config, "alignment", "-8"));
    STATUS(HAB_CONFIG_ERROR, hab_config_set(config, "waste_target_percent", "x"));
    static const char *const refused[][2] = {
        {"capacity", "0"}, {"capacity", "1"}, {"capacity", "7"}, {"capacity", "18446744073709551615"},
        {"capacity", "9223372036854775808"}, {"capacity", "17TiB"}, {"alignment", "0"},
        {"alignment", "7"}, {"alignment", "8192"}, {"min_tlab", "0"}, {"min_tlab", "7"},
        {"max_tlab", "18446744073709551615"}, {"tlab", "0"}, {"tlab", "9"},
        {"refill_waste_fraction", "0"}, {"waste_target_percent", "0"},
        {"waste_target_percent", "nan"}, {"waste_target_percent", "51"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        hab_config *bad = hab_config_new();
        char call[128];
        snprintf(call, sizeof call, "hab_heap_new(%s = %s)", refused[i][0], refused[i][1]);
        CHECK(hab_config_set(bad, refused[i][0], refused[i][1]) == HAB_OK);
        report(call, HAB_CONFIG_ERROR, hab_heap_new(bad, &model, &heap));
        CHECK(heap == NULL);
        hab_config_free(bad);
    }
    STATUS(HAB_INVALID_ARGUMENT, hab_heap_new(NULL, &model, &heap));
    STATUS(HAB_INVALID_ARGUMENT, hab_heap_new(config, NULL, &heap));
    STATUS(HAB_INVALID_ARGUMENT, hab_heap_new(config, &model, NULL));
    hab_object_model no_size = {NULL, write_filler, is_filler, 8, NULL};
    STATUS(HAB_INVALID_ARGUMENT, hab_heap_new(config, &no_size, &heap));
    hab_object_model huge_filler = {object_size, write_filler, is_filler, SIZE_MAX, NULL};
    STATUS(HAB_CONFIG_ERROR, hab_heap_new(config, &huge_filler, &heap));
    CHECK(heap == NULL);
    /* 0 covers any aligned gap, as the alignment does; 12 is rounded up to the alignment. */
    hab_object_model zero_filler = {object_size, write_filler, is_filler, 0, NULL};
    STATUS(SUCCEEDS, hab_heap_new(config, &zero_filler, &heap));
    hab_heap_free(heap);
    hab_object_model odd_filler = {object_size, write_filler, is_filler, 12, NULL};
    STATUS(SUCCEEDS, hab_heap_new(config, &odd_filler, &heap));
    hab_heap_free(heap);
    hab_config_free(config);
    hab_config_free(NULL);
}

static void heaps_and_mutators(void) {
    hab_heap *heap = heap_of("1MiB", "tlab");
    uintptr_t start = 0, end = 0;
    STATUS(HAB_INVALID_ARGUMENT, hab_heap_range(NULL, &start, &end));
    STATUS(HAB_INVALID_ARGUMENT, hab_heap_range(heap, NULL, &end));
    STATUS(HAB_INVALID_ARGUMENT, hab_heap_range(heap, &start, NULL));
    STATUS(SUCCEEDS, hab_heap_range(heap, &start, &end));
    STATUS(HAB_INVALID_ARGUMENT, hab_request_collection(NULL));
    STATUS(HAB_INVALID_ARGUMENT, hab_wait_for_collection_request(NULL, 1));
    STATUS(HAB_TIMEOUT, hab_wait_for_collection_request(heap, 1));
    VALUE(HAB_INVALID_ARGUMENT, hab_stats_json(NULL, NULL, 0));
    VALUE(SUCCEEDS, hab_stats_json(heap, NULL, 0));
    VALUE(SUCCEEDS, hab_stats_json(heap, NULL, 4096)); /* NULL asks, whatever the length */
    VALUE(HAB_INVALID_ARGUMENT, hab_attach(NULL));
    hab_detach(NULL);
    VALUE(HAB_INVALID_ARGUMENT, hab_alloc_slow(NULL, 16));
    CHECK(hab_poll_slow(NULL) == 0);
    STATUS(HAB_INVALID_ARGUMENT, hab_park(NULL));
    STATUS(HAB_INVALID_ARGUMENT, hab_unpark(NULL));
    STATUS(HAB_INVALID_ARGUMENT, hab_blocking_begin(NULL));
    STATUS(HAB_INVALID_ARGUMENT, hab_blocking_end(NULL));

    hab_mutator *mutator = hab_attach(heap);
    CHECK(mutator != NULL);
    const size_t capacity = (size_t)(end - start);
    VALUE(HAB_INVALID_ARGUMENT, hab_alloc(mutator, 0));
    VALUE(HAB_INVALID_ARGUMENT, hab_alloc(mutator, 1));
    VALUE(HAB_INVALID_ARGUMENT, hab_alloc(mutator, 7));
    VALUE(HAB_INVALID_ARGUMENT, hab_alloc(mutator, SIZE_MAX));
    VALUE(HAB_INVALID_ARGUMENT, hab_alloc(mutator, (size_t)1 << 63));
    VALUE(HAB_INVALID_ARGUMENT, hab_alloc(mutator, capacity + 8));
    VALUE(HAB_INVALID_ARGUMENT, hab_alloc_slow(mutator, SIZE_MAX - 7));
    uint64_t *object = hab_alloc(mutator, 16);
    VALUE(SUCCEEDS, object);
    if (object != NULL) {
        object[0] = 16;
    }
    /* The whole heap: more than is left, so out of memory; nothing moved. */
    VALUE(HAB_OUT_OF_MEMORY, hab_alloc(mutator, capacity));
    STATUS(HAB_INVALID_ARGUMENT, hab_unpark(mutator));
    STATUS(HAB_INVALID_ARGUMENT, hab_blocking_end(mutator));
    STATUS(SUCCEEDS, hab_park(mutator));
    STATUS(HAB_INVALID_ARGUMENT, hab_park(mutator));
    STATUS(HAB_INVALID_ARGUMENT, hab_blocking_begin(mutator));
    VALUE(HAB_INVALID_ARGUMENT, hab_alloc(mutator, 16));
    CHECK(hab_poll_slow(mutator) == 0);
    STATUS(SUCCEEDS, hab_unpark(mutator));
    hab_detach(mutator);
    hab_heap_free(heap);
    hab_heap_free(NULL);
}

static void collections(void) {
    hab_heap *heap = heap_of("1MiB", "tlab");
    hab_heap *other = heap_of("1MiB", "tlab");
    uintptr_t start = 0, end = 0;
    CHECK(hab_heap_range(heap, &start, &end) == HAB_OK);
    hab_collection *collection = NULL;
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_begin(NULL, 0, &collection));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_begin(heap, 0, NULL));
    hab_mutator *mutator = hab_attach(heap);
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_begin(heap, 0, &collection));
    CHECK(hab_park(mutator) == HAB_OK);
    hab_mutator *foreign = hab_attach(other);
    CHECK(hab_park(foreign) == HAB_OK);
    STATUS(SUCCEEDS, hab_collection_begin(heap, 0, &collection));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_begin(heap, 0, &collection));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_walk(NULL, visit, NULL));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_walk(collection, NULL, NULL));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_verify(NULL));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_set_range(NULL, start, end));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_set_range(collection, end, start));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_set_range(collection, start, end + 8));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_set_range(collection, start - 8, end));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_set_range(collection, start + 1, end));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_set_range(collection, 0, UINTPTR_MAX));
    STATUS(SUCCEEDS, hab_collection_set_range(collection, start, start));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_reset(NULL));
    STATUS(SUCCEEDS, hab_collection_reset(collection));
    VALUE(HAB_INVALID_ARGUMENT, hab_collection_alloc(NULL, mutator, 16));
    VALUE(HAB_INVALID_ARGUMENT, hab_collection_alloc(collection, NULL, 16));
    VALUE(HAB_INVALID_ARGUMENT, hab_collection_alloc(collection, foreign, 16));
    VALUE(HAB_INVALID_ARGUMENT, hab_collection_alloc(collection, mutator, 0));
    VALUE(HAB_INVALID_ARGUMENT, hab_collection_alloc(collection, mutator, 7));
    VALUE(HAB_INVALID_ARGUMENT, hab_collection_alloc(collection, mutator, SIZE_MAX));
    VALUE(HAB_INVALID_ARGUMENT, hab_collection_alloc(collection, mutator, (size_t)1 << 63));
    uint64_t *object = hab_collection_alloc(collection, mutator, end - start);
    VALUE(SUCCEEDS, object);
    if (object != NULL) {
        object[0] = end - start;
    }
    VALUE(HAB_OUT_OF_MEMORY, hab_collection_alloc(collection, mutator, 8));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_set_range(collection, start, end));
    STATUS(HAB_INVALID_ARGUMENT, hab_collection_finish(NULL));
    STATUS(SUCCEEDS, hab_collection_finish(collection));
    /* The object the collection allocated is the heap's one object. */
    CHECK(hab_collection_begin(heap, 0, &collection) == HAB_OK);
    STATUS(SUCCEEDS, hab_collection_verify(collection));
    STATUS(SUCCEEDS, hab_collection_reset(collection));
    CHECK(hab_collection_finish(collection) == HAB_OK);
    hab_detach(mutator);
    hab_detach(foreign);
    hab_heap_free(heap);
    hab_heap_free(other);
}

static void levels(void) {
    hab_upstream upstream = {eden_carve, eden_filler, NULL, NULL};
    hab_levels *levels = NULL;
    STATUS(HAB_INVALID_ARGUMENT, hab_levels_new(NULL, 0, 16, 4096, &upstream, &levels));
    STATUS(HAB_INVALID_ARGUMENT, hab_levels_new("core:1MiB", 0, 16, 4096, NULL, &levels));
    STATUS(HAB_INVALID_ARGUMENT, hab_levels_new("core:1MiB", 0, 16, 4096, &upstream, NULL));
    STATUS(HAB_CONFIG_ERROR, hab_levels_new("core:1MiB", SIZE_MAX, 16, 4096, &upstream, &levels));
    STATUS(HAB_CONFIG_ERROR, hab_levels_new("core:1MiB", 7, 16, 4096, &upstream, &levels));
    STATUS(HAB_CONFIG_ERROR, hab_levels_new("core:1MiB", 0, 0, 4096, &upstream, &levels));
    STATUS(HAB_CONFIG_ERROR, hab_levels_new("core:1MiB", 0, SIZE_MAX, 4096, &upstream, &levels));
    STATUS(HAB_CONFIG_ERROR, hab_levels_new("core:16TiB,package:1MiB", 0, 16, 4096, &upstream,
                                            &levels));
    STATUS(HAB_CONFIG_ERROR, hab_levels_new_with_cpu_id("core:1MiB", "", 0, 16, 4096, &upstream,
                                                        &levels));
    STATUS(SUCCEEDS, hab_levels_new("core:1MiB", 0, 16, 4096, &upstream, &levels));
    CHECK(hab_levels_max_tlab_bytes(NULL) == 0 && hab_levels_buffered_bytes(NULL) == 0);
    CHECK(hab_levels_tlabs_past_levels(NULL) == 0);
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_thread_new(NULL));
    hab_levels_thread_free(NULL);
    hab_levels_thread *thread = hab_levels_thread_new(levels);
    uintptr_t start = 0;
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_carve_tlab(NULL, 16, 16, &start));
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_carve_tlab(thread, 16, 16, NULL));
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_carve_tlab(thread, 0, 16, &start));
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_carve_tlab(thread, 8, 12, &start));
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_carve_tlab(thread, 32, 16, &start));
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_carve_tlab(thread, SIZE_MAX, SIZE_MAX, &start));
    /* As much as there is, at least 8 bytes: the eden has none. */
    VALUE(HAB_OUT_OF_MEMORY, hab_levels_carve_tlab(thread, 8, (size_t)1 << 63, &start));
    VALUE(HAB_OUT_OF_MEMORY, hab_levels_carve_tlab(thread, 4096, 4096, &start));
    STATUS(HAB_INVALID_ARGUMENT, hab_levels_retire_all(NULL));
    STATUS(SUCCEEDS, hab_levels_retire_all(levels));
    STATUS(HAB_INVALID_ARGUMENT, hab_levels_resize(NULL, 1u << 20));
    STATUS(HAB_INVALID_ARGUMENT, hab_levels_resize(levels, 0));
    STATUS(SUCCEEDS, hab_levels_resize(levels, SIZE_MAX));
    STATUS(HAB_INVALID_ARGUMENT, hab_levels_resize_within(NULL, 1u << 20, 0));
    STATUS(HAB_INVALID_ARGUMENT, hab_levels_resize_within(levels, 0, 4096));
    STATUS(SUCCEEDS, hab_levels_resize_within(levels, SIZE_MAX, SIZE_MAX));
    STATUS(SUCCEEDS, hab_levels_resize_within(levels, 1u << 20, 8));
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_fit(NULL, 1u << 20, 2048, 0, NULL, 0));
    VALUE(HAB_CONFIG_ERROR, hab_levels_fit("auto", 1u << 20, 2048, 0, NULL, 0));
    VALUE(HAB_CONFIG_ERROR, hab_levels_fit("core:1MiB,cpu:64KiB", 1u << 20, 2048, 0, NULL, 0));
    VALUE(HAB_CONFIG_ERROR, hab_levels_fit("core:1MiB", 0, 2048, 0, NULL, 0));
    VALUE(HAB_CONFIG_ERROR, hab_levels_fit("core:1MiB", SIZE_MAX, 2048, 0, NULL, 0));
    VALUE(HAB_CONFIG_ERROR, hab_levels_fit("core:1MiB", 1u << 20, 12, 0, NULL, 0));
    VALUE(HAB_CONFIG_ERROR, hab_levels_fit("core:1MiB", 1024, 2048, 0, NULL, 0));
    VALUE(SUCCEEDS, hab_levels_fit("core:1MiB", 1u << 20, 8, 1, NULL, 0));
    VALUE(SUCCEEDS, hab_levels_fit("core:16TiB", (size_t)1 << 44, 8, SIZE_MAX, NULL, 0));
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_stats_json(NULL, NULL, 0));
    VALUE(SUCCEEDS, hab_levels_stats_json(levels, NULL, 0));
    VALUE(SUCCEEDS, hab_levels_stats_json(levels, NULL, 4096));
    VALUE(HAB_INVALID_ARGUMENT, hab_levels_stats(NULL, NULL, 0));
    VALUE(SUCCEEDS, hab_levels_stats(levels, NULL, 0));
    VALUE(SUCCEEDS, hab_levels_stats(levels, NULL, 5));
    hab_level_stats stats[2];
    CHECK(hab_levels_stats(levels, stats, 2) == 1);
    VALUE(HAB_INVALID_ARGUMENT, hab_level_stats_line(NULL, NULL, NULL, 0));
    /* Every figure unchanged but buffer_bytes, a size, which is now's. */
    char only_size[64];
    snprintf(only_size, sizeof only_size, "buffer_bytes: %llu",
             (unsigned long long)stats[0].buffer_bytes);
    CHECK(hab_level_stats_line(&stats[0], &stats[0], NULL, 0) == strlen(only_size));
    VALUE(SUCCEEDS, hab_level_stats_line(&stats[0], NULL, NULL, 0));
    VALUE(SUCCEEDS, hab_level_stats_line(&stats[0], NULL, NULL, 4096));
    hab_levels_thread_free(thread);
    hab_levels_free(levels);
    hab_levels_free(NULL);
}

/* The flip rule: a NULL cycle refused; the first cycle keeps TLABs and its tails do not
 * count; tails past a tenth of the cycle and a LAB per CPU in HAB_FLIP_CYCLES_OVER_BOUND
 * cycles running flip to per-CPU LABs, and LABs' tails past one per running thread flip
 * back. */
static void flip(void) {
    CHECK(hab_flip_next_in_cpu_labs(NULL) == -1 && hab_last_status() == HAB_INVALID_ARGUMENT);
    CHECK(hab_flip_cycles_over_bound(NULL) == 0 && hab_last_status() == HAB_INVALID_ARGUMENT);
    hab_flip_cycle cycle = {0, 1, 40u << 20, 0, 64u << 10, 2, 1000, 64u << 20, 10, 0};
    CHECK(hab_flip_next_in_cpu_labs(&cycle) == 0);
    CHECK(hab_flip_cycles_over_bound(&cycle) == 0);
    cycle.first = 0;
    for (uint64_t n = 1; n < HAB_FLIP_CYCLES_OVER_BOUND; n++) { /* over the bound, too few */
        CHECK(hab_flip_next_in_cpu_labs(&cycle) == 0);
        cycle.previous_cycles_over_bound = hab_flip_cycles_over_bound(&cycle);
        CHECK(cycle.previous_cycles_over_bound == n);
    }
    CHECK(hab_flip_next_in_cpu_labs(&cycle) == 1); /* enough */
    cycle.unused_tlab_bytes = 6u << 20; /* under a tenth of 64 MiB */
    CHECK(hab_flip_next_in_cpu_labs(&cycle) == 0);
    CHECK(hab_flip_cycles_over_bound(&cycle) == 0);
    cycle.in_cpu_labs = 1;
    cycle.unused_lab_bytes = (64u << 10) * 1000; /* a LAB per running thread: stay */
    CHECK(hab_flip_next_in_cpu_labs(&cycle) == 1);
    cycle.unused_lab_bytes += 1;
    CHECK(hab_flip_next_in_cpu_labs(&cycle) == 0);
}

int main(void) {
    alarm(60); /* a hang is a failure */
    printf("| call | result | status and message |\n| --- | --- | --- |\n");
    configuration();
    heaps_and_mutators();
    collections();
    levels();
    flip();
    return CHECK_EXIT_STATUS;
}
