/*
 * Native threads attached to the JVM mid-flight allocate through HABs: a JVM is created with the
 * options given, then THREADS native threads each attach (AttachCurrentThread: the JVM gives the
 * thread its TLAB, and with HABs registers its rseq area where Hab owns the registrations),
 * allocate OBJECTS int arrays through JNI (placed by the runtime: in a cycle in per-CPU LABs,
 * bumped inline in the buffer of the thread's CPU), fill each with values of its own, keep every
 * one in a Java array, detach, and attach again for the next of ROUNDS rounds; System.gc()
 * runs between rounds. At the end every kept array's contents are summed and compared with the
 * sum the values must give: two allocations that overlapped would have overwritten each other.
 *
 *   attach THREADS ROUNDS OBJECTS [JVM OPTION...]     # prints "attached threads: ... ok"
 *
 * Build: cc -O2 -Wall -Wextra -Werror -I$JDK/include -I$JDK/include/linux attach.c
 *        -L$JDK/lib/server -ljvm -Wl,-rpath,$JDK/lib/server -lpthread -o attach
 * Part of Hab's HotSpot tests; like the scripts beside it, it keeps Hab's license.
 */
#include <jni.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static JavaVM *vm;
static int threads, rounds, objects;

struct worker {
    int index;
    jobjectArray kept; /* global reference: this worker's arrays, objects per round */
    int failed;
};

/* The values of array i of worker w in round r: 1 + i % 7 ints, each w * 1000 + r * 10 + k. */
static jint value(int w, int r, int k) { return w * 1000 + r * 10 + k; }

static void *work(void *argument) {
    struct worker *worker = argument;
    for (int round = 0; round < rounds; round++) {
        JNIEnv *env;
        if ((*vm)->AttachCurrentThread(vm, (void **)&env, NULL) != JNI_OK) {
            worker->failed = 1;
            return NULL;
        }
        for (int i = 0; i < objects; i++) {
            jsize length = 1 + i % 7;
            jintArray array = (*env)->NewIntArray(env, length);
            if (array == NULL) {
                worker->failed = 1;
                break;
            }
            jint values[7];
            for (jsize k = 0; k < length; k++) {
                values[k] = value(worker->index, round, k);
            }
            (*env)->SetIntArrayRegion(env, array, 0, length, values);
            (*env)->SetObjectArrayElement(env, worker->kept, round * objects + i, array);
            (*env)->DeleteLocalRef(env, array);
        }
        (*vm)->DetachCurrentThread(vm);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s THREADS ROUNDS OBJECTS [JVM OPTION...]\n", argv[0]);
        return 2;
    }
    threads = atoi(argv[1]);
    rounds = atoi(argv[2]);
    objects = atoi(argv[3]);
    if (threads < 1 || rounds < 1 || objects < 1) {
        fprintf(stderr, "THREADS, ROUNDS and OBJECTS must be positive\n");
        return 2;
    }
    JavaVMOption options[64];
    int count = 0;
    for (int i = 4; i < argc && count < 64; i++) {
        options[count++].optionString = argv[i];
    }
    JavaVMInitArgs args = {JNI_VERSION_10, count, options, JNI_FALSE};
    JNIEnv *env;
    if (JNI_CreateJavaVM(&vm, (void **)&env, &args) != JNI_OK) {
        fprintf(stderr, "the JVM did not start\n");
        return 1;
    }
    jclass int_array = (*env)->FindClass(env, "[I");
    jclass system = (*env)->FindClass(env, "java/lang/System");
    jmethodID gc = (*env)->GetStaticMethodID(env, system, "gc", "()V");
    struct worker *workers = calloc((size_t)threads, sizeof *workers);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    for (int t = 0; t < threads; t++) {
        workers[t].index = t;
        jobjectArray kept = (*env)->NewObjectArray(env, rounds * objects, int_array, NULL);
        workers[t].kept = (*env)->NewGlobalRef(env, kept);
    }
    /* The main thread stays attached; the workers attach and detach around each round. */
    for (int t = 0; t < threads; t++) {
        pthread_create(&ids[t], NULL, work, &workers[t]);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        (*env)->CallStaticVoidMethod(env, system, gc);
    }
    long long sum = 0, expected = 0;
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        failed |= workers[t].failed;
        for (int round = 0; round < rounds; round++) {
            for (int i = 0; i < objects; i++) {
                jsize length = 1 + i % 7;
                jintArray array = (*env)->GetObjectArrayElement(env, workers[t].kept, round * objects + i);
                if (array == NULL || (*env)->GetArrayLength(env, array) != length) {
                    failed = 1;
                    continue;
                }
                jint values[7];
                (*env)->GetIntArrayRegion(env, array, 0, length, values);
                for (jsize k = 0; k < length; k++) {
                    sum += values[k];
                    expected += value(t, round, k);
                }
                (*env)->DeleteLocalRef(env, array);
            }
        }
    }
    printf("attached threads: %d x %d rounds x %d arrays, sum %lld (expected %lld): %s\n", threads,
           rounds, objects, sum, expected, !failed && sum == expected ? "ok" : "WRONG");
    (*vm)->DestroyJavaVM(vm);
    return !failed && sum == expected ? 0 : 1;
}
