/*
 * What one rseq registration costs: a thread registers and unregisters a 32-byte area 200 000
 * times (glibc's own registration must be off, or the kernel answers EBUSY).
 *   cc -O2 -Wall -Wextra -o registration-cost registration-cost.c
 *   GLIBC_TUNABLES=glibc.pthread.rseq=0 ./registration-cost
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
struct __attribute__((aligned(32))) area { uint32_t a, cpu_id; uint64_t cs; uint32_t f, n, m, r; };
static __thread struct area my = {0, (uint32_t)-1, 0, 0, 0, 0, 0};
int main(void) {
    struct timespec s, e;
    int n = 200000;
    clock_gettime(CLOCK_MONOTONIC, &s);
    for (int i = 0; i < n; i++) {
        if (syscall(334, &my, 32, 0, 0x53053053) != 0) { perror("rseq"); return 1; }
        if (syscall(334, &my, 32, 1, 0x53053053) != 0) { perror("unreg"); return 1; }
    }
    clock_gettime(CLOCK_MONOTONIC, &e);
    printf("register+unregister: %.0f ns\n", ((e.tv_sec - s.tv_sec) * 1e9 + (e.tv_nsec - s.tv_nsec)) / n);
    return 0;
}
