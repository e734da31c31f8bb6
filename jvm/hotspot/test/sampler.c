/*
 * A JVMTI allocation sampler, as allocation profilers are (async-profiler's event=alloc, any
 * agent using SampledObjectAlloc): it asks for a sample every `interval` bytes a thread
 * allocates (SetHeapSamplingInterval; 0: every allocation) and counts the samples, their
 * bytes and, per class, the samples taken; at the VM's death it prints
 *
 *   sampler: interval=524288 samples=2290 sampled_bytes=47112 top=[I:770,Lhab/bench/Observed$Small;:765,...
 *
 * to standard error, so that the samples can be held against the bytes the program allocated
 * (about allocated / interval of them) and the classes against what it allocated.
 *
 *   java -agentpath:/path/libsampler.so=interval=524288 ...
 *
 * Build: cc -shared -fPIC -O2 -Wall -Wextra -Werror -I$JDK/include -I$JDK/include/linux
 *        sampler.c -lpthread -o libsampler.so
 * Part of Hab's HotSpot tests; like the scripts beside it, it keeps Hab's license.
 */
#include <jvmti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLASSES 64

static jvmtiEnv *jvmti;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long long samples, sampled_bytes, untallied;
static jint interval;
static struct {
    char *signature;
    long long samples;
} classes[CLASSES];

static void JNICALL sampled(jvmtiEnv *env, JNIEnv *jni, jthread thread, jobject object,
                            jclass klass, jlong size) {
    (void)jni;
    (void)thread;
    (void)object;
    char *signature = NULL;
    if ((*env)->GetClassSignature(env, klass, &signature, NULL) != JVMTI_ERROR_NONE) {
        signature = NULL;
    }
    pthread_mutex_lock(&lock);
    samples++;
    sampled_bytes += size;
    int slot = -1;
    for (int i = 0; signature != NULL && i < CLASSES; i++) {
        if (classes[i].signature == NULL) {
            classes[i].signature = strdup(signature);
        }
        if (strcmp(classes[i].signature, signature) == 0) {
            slot = i;
            break;
        }
    }
    if (slot >= 0) {
        classes[slot].samples++;
    } else {
        untallied++;
    }
    pthread_mutex_unlock(&lock);
    if (signature != NULL) {
        (*env)->Deallocate(env, (unsigned char *)signature);
    }
}

static int by_samples(const void *a, const void *b) {
    long long x = ((const typeof(classes[0]) *)a)->samples;
    long long y = ((const typeof(classes[0]) *)b)->samples;
    return (x < y) - (x > y);
}

static void JNICALL death(jvmtiEnv *env, JNIEnv *jni) {
    (void)env;
    (void)jni;
    pthread_mutex_lock(&lock);
    qsort(classes, CLASSES, sizeof classes[0], by_samples);
    fprintf(stderr, "sampler: interval=%d samples=%lld sampled_bytes=%lld top=", (int)interval,
            samples, sampled_bytes);
    for (int i = 0; i < 5 && i < CLASSES && classes[i].samples > 0; i++) {
        fprintf(stderr, "%s%s:%lld", i == 0 ? "" : ",", classes[i].signature, classes[i].samples);
    }
    fprintf(stderr, " untallied=%lld\n", untallied);
    pthread_mutex_unlock(&lock);
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved) {
    (void)reserved;
    interval = 512 * 1024;
    if (options != NULL && strncmp(options, "interval=", 9) == 0) {
        interval = (jint)atol(options + 9);
    } else if (options != NULL && options[0] != '\0') {
        fprintf(stderr, "sampler: unknown options %s (give interval=BYTES)\n", options);
        return JNI_ERR;
    }
    if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_11) != JNI_OK) {
        fprintf(stderr, "sampler: no JVMTI 11\n");
        return JNI_ERR;
    }
    jvmtiCapabilities capabilities;
    memset(&capabilities, 0, sizeof capabilities);
    capabilities.can_generate_sampled_object_alloc_events = 1;
    jvmtiEventCallbacks callbacks;
    memset(&callbacks, 0, sizeof callbacks);
    callbacks.SampledObjectAlloc = sampled;
    callbacks.VMDeath = death;
    if ((*jvmti)->AddCapabilities(jvmti, &capabilities) != JVMTI_ERROR_NONE ||
        (*jvmti)->SetEventCallbacks(jvmti, &callbacks, sizeof callbacks) != JVMTI_ERROR_NONE ||
        (*jvmti)->SetHeapSamplingInterval(jvmti, interval) != JVMTI_ERROR_NONE ||
        (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                           NULL) != JVMTI_ERROR_NONE ||
        (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, NULL) !=
            JVMTI_ERROR_NONE) {
        fprintf(stderr, "sampler: JVMTI refused the sampling set-up\n");
        return JNI_ERR;
    }
    return JNI_OK;
}
