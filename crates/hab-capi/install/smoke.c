/* A program built against an installed libhab (see check.sh): checks the ABI version, then one
 * thread allocates through the inline hab_alloc in every mode until the heap is full, collects,
 * and checks that the walk finds every object. Exit 0 on success. */
#include <hab.h>

#include <stdio.h>
#include <string.h>

static size_t object_size(void *user, const void *object) {
    (void)user;
    return (size_t)(*(const uint64_t *)object & ~(uint64_t)1);
}
static void write_filler(void *user, void *address, size_t bytes) {
    (void)user;
    *(uint64_t *)address = (uint64_t)bytes | 1;
}
static int is_filler(void *user, const void *object) {
    (void)user;
    return (int)(*(const uint64_t *)object & 1);
}
static void count(void *user, void *address, size_t bytes, int filler) {
    (void)address;
    (void)bytes;
    if (!filler) {
        ++*(size_t *)user;
    }
}

static int run(const char *mode) {
    hab_config *config = hab_config_new();
    if (hab_config_set(config, "capacity", "4MiB") != HAB_OK ||
        hab_config_set(config, "mode", mode) != HAB_OK ||
        (strcmp(mode, "hab") == 0 && hab_config_set(config, "middle", "core:256KiB") != HAB_OK)) {
        fprintf(stderr, "%s: %s\n", mode, hab_last_error());
        return 1;
    }
    hab_object_model model = {object_size, write_filler, is_filler, 8, NULL};
    hab_heap *heap = NULL;
    if (hab_heap_new(config, &model, &heap) != HAB_OK) {
        fprintf(stderr, "%s: %s\n", mode, hab_last_error());
        return 1;
    }
    hab_config_free(config);
    hab_mutator *mutator = hab_attach(heap);
    size_t allocated = 0;
    uint64_t *object;
    while ((object = hab_alloc(mutator, 32)) != NULL) {
        object[0] = 32;
        allocated++;
    }
    int failed = strstr(hab_last_error(), "exhausted") == NULL;
    hab_park(mutator);
    hab_collection *collection = NULL;
    size_t walked = 0;
    failed |= hab_collection_begin(heap, 0, &collection) != HAB_OK;
    failed |= hab_collection_walk(collection, count, &walked) != HAB_OK;
    failed |= hab_collection_finish(collection) != HAB_OK;
    failed |= walked != allocated || allocated < 4 * 1024 * 1024 / 32 / 2;
    hab_unpark(mutator);
    hab_detach(mutator);
    hab_heap_free(heap);
    printf("%s: %zu objects allocated, %zu walked%s\n", mode, allocated, walked,
           failed ? " FAILED" : "");
    return failed;
}

int main(void) {
    if (hab_abi_version() != HAB_ABI_VERSION) {
        fprintf(stderr, "libhab has ABI %u, hab.h %d\n", hab_abi_version(), HAB_ABI_VERSION);
        return 1;
    }
    int failed = 0;
    const char *modes[] = {"shared", "tlab", "hab", "cpu-lab", "flip"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        failed |= run(modes[i]);
    }
    return failed;
}
