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
static void *echo(void *arg) {
    pin(*(int *)arg); // checked by main before this thread starts
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

int main(int argc, char **argv) {
    int a = argc > 1 ? atoi(argv[1]) : 0;
    int b = argc > 2 ? atoi(argv[2]) : 1;
    iters = argc > 3 ? strtoull(argv[3], NULL, 10) : 200000;
    int rounds = argc > 4 ? atoi(argv[4]) : 5;
    if (iters == 0 || rounds <= 0 || rounds > 100) {
        fprintf(stderr, "usage: xcore_rtt [CPU_A CPU_B [ITERS [ROUNDS]]]\n");
        return 2;
    }
    if (pin(b) != 0 || pin(a) != 0) {
        fprintf(stderr, "xcore_rtt: cannot run on CPU %d and CPU %d\n", a, b);
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, echo, &b) != 0) {
        fprintf(stderr, "xcore_rtt: no thread\n");
        return 1;
    }
    double ns[100];
    uint64_t v = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        for (uint64_t i = 0; i < iters; i++) {
            atomic_store_explicit(&line, ++v, memory_order_release);
            while (atomic_load_explicit(&line, memory_order_acquire) != v + 1)
                ;
            v++;
        }
        ns[r] = (now_ns() - t0) / (double)iters;
    }
    atomic_store_explicit(&line, UINT64_MAX, memory_order_release);
    pthread_join(t, NULL);
    qsort(ns, rounds, sizeof ns[0], cmp);
    printf("%.0f\n", ns[rounds / 2]);
    return 0;
}
