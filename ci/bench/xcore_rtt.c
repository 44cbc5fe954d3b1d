// Cross-core round trip: how long one cache line takes to go from CPU A to CPU B
// and back, in nanoseconds (median of ROUNDS rounds of ITERS round trips).
//
// A benchmark of two processes on two CPUs passing packets through shared rings
// (ci/bench-vhost) is bound by the lines the two cores pass each other. On a
// virtual machine the hypervisor may hold the two vCPUs near each other on the host
// (a shared cache) or far apart, and move them while a benchmark runs; the round
// trip shows which. The script runs this before and after each run and prints it
// beside the rate.
//
// Usage: xcore_rtt [CPU_A CPU_B [ITERS [ROUNDS]]]     (defaults 0 1 200000 5)

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(64) _Atomic uint64_t line;
static uint64_t iters;

static int pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

// Answers each odd value with the next even one until told to stop (UINT64_MAX).
static void *echo(void *unused) {
    (void)unused;
    uint64_t want = 1;
    for (;;) {
        uint64_t v = atomic_load_explicit(&line, memory_order_acquire);
        if (v == UINT64_MAX)
            return NULL;
        if (v == want) {
            atomic_store_explicit(&line, v + 1, memory_order_release);
            want += 2;
        }
    }
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// A whole number from `s` in [lo, hi], or -1.
static long long arg(const char *s, long long lo, long long hi) {
    char *end;
    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return -1;
    return v;
}

// Times ITERS round trips.
static double round_ns(uint64_t *v) {
    double t0 = now_ns();
    for (uint64_t i = 0; i < iters; i++) {
        atomic_store_explicit(&line, ++*v, memory_order_release);
        while (atomic_load_explicit(&line, memory_order_acquire) != *v + 1)
            ;
        ++*v;
    }
    return (now_ns() - t0) / (double)iters;
}

int main(int argc, char **argv) {
    long long a = argc > 1 ? arg(argv[1], 0, CPU_SETSIZE - 1) : 0;
    long long b = argc > 2 ? arg(argv[2], 0, CPU_SETSIZE - 1) : 1;
    long long n = argc > 3 ? arg(argv[3], 1, 100000000) : 200000;
    long long rounds = argc > 4 ? arg(argv[4], 1, 100) : 5;
    if (argc > 5 || a < 0 || b < 0 || a == b || n < 0 || rounds < 0) {
        fprintf(stderr, "usage: xcore_rtt [CPU_A CPU_B [ITERS [ROUNDS]]]: two different CPUs, "
                        "1..100000000 round trips a round, 1..100 rounds\n");
        return 2;
    }
    iters = (uint64_t)n;
    int cpu_b = (int)b;
    if (pin((int)a) != 0) {
        fprintf(stderr, "xcore_rtt: cannot run on CPU %lld\n", a);
        return 1;
    }
    // The echo thread starts on its CPU (not on ours until it could move).
    pthread_attr_t attr;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu_b, &set);
    pthread_t t;
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setaffinity_np(&attr, sizeof set, &set) != 0 ||
        pthread_create(&t, &attr, echo, NULL) != 0) {
        fprintf(stderr, "xcore_rtt: cannot run on CPU %d\n", cpu_b);
        return 1;
    }
    pthread_attr_destroy(&attr);
    double ns[100];
    uint64_t v = 0;
    round_ns(&v); // warm-up, not counted
    for (int r = 0; r < rounds; r++)
        ns[r] = round_ns(&v);
    atomic_store_explicit(&line, UINT64_MAX, memory_order_release);
    pthread_join(t, NULL);
    qsort(ns, (size_t)rounds, sizeof ns[0], cmp);
    printf("%.0f\n", ns[rounds / 2]);
    return 0;
}
