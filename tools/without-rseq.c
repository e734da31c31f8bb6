/*
 * without-rseq: runs a command in a process where the rseq system call fails, as under a
 * container's seccomp profile that does not know it.
 *
 *   without-rseq enosys|eperm COMMAND [ARGUMENT...]
 *
 * Installs a seccomp filter (inherited by every thread and child of COMMAND) that answers rseq
 * with ENOSYS (a kernel or profile that lacks it) or EPERM (a profile that forbids it) and lets
 * every other system call through, then executes COMMAND. glibc's own registration then fails
 * at start-up, and so does any library's. Build: cc -O2 -Wall -Wextra -Werror -o without-rseq
 * without-rseq.c
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#else
#error "without-rseq knows x86_64 and aarch64"
#endif

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "enosys") != 0 && strcmp(argv[1], "eperm") != 0)) {
        fprintf(stderr, "usage: %s enosys|eperm COMMAND [ARGUMENT...]\n", argv[0]);
        return 2;
    }
    unsigned error = strcmp(argv[1], "enosys") == 0 ? ENOSYS : EPERM;
    struct sock_filter filter[] = {
        /* Another architecture's system call numbers mean other calls: let them through. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rseq, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (error & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {
        .len = (unsigned short)(sizeof(filter) / sizeof(filter[0])),
        .filter = filter,
    };
    /* Without privileges, a filter needs no_new_privs. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        perror("without-rseq: prctl(PR_SET_NO_NEW_PRIVS)");
        return 126;
    }
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("without-rseq: prctl(PR_SET_SECCOMP)");
        return 126;
    }
    execvp(argv[2], argv + 2);
    fprintf(stderr, "without-rseq: %s: %s\n", argv[2], strerror(errno));
    return 127;
}
