#include <hab.h>
#include <stdio.h>

/* The object model: one header word holding the object's size; a filler sets its low bit. */
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

int main(void) {
    hab_config *config = hab_config_new();
    hab_config_set(config, "capacity", "64MiB");
    hab_config_set(config, "mode", "hab"); /* TLABs through per-CPU/core/package buffers */
    hab_object_model model = {object_size, write_filler, is_filler, 8, NULL};
    hab_heap *heap = NULL;
    if (hab_heap_new(config, &model, &heap) != HAB_OK) {
        fprintf(stderr, "hab: %s\n", hab_last_error());
        return 1;
    }
    hab_config_free(config);

    hab_mutator *mutator = hab_attach(heap); /* one per thread */
    for (int i = 0; i < 100000; i++) {
        uint64_t *object = hab_alloc(mutator, 32); /* inline: a TLAB bump */
        if (object == NULL) {
            fprintf(stderr, "hab: %s\n", hab_last_error());
            return 1;
        }
        object[0] = 32; /* the header */
    }

    hab_park(mutator); /* at a safepoint */
    hab_collection *collection = NULL;
    if (hab_collection_begin(heap, 0, &collection) != HAB_OK ||
        hab_collection_verify(collection) != HAB_OK) {
        fprintf(stderr, "hab: %s\n", hab_last_error());
        return 1;
    }
    hab_collection_reset(collection); /* nothing survives */
    hab_collection_finish(collection);
    hab_unpark(mutator);
    printf("100000 objects allocated, the heap walked clean\n");
    hab_detach(mutator);
    hab_heap_free(heap);
    return 0;
}
