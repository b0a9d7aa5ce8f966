/* fma_peak.c -- this CPU's float32 FMA peak, single core and all cores.
 *
 *     cc -O2 -pthread -o fma_peak benchmarks/fma_peak.c && ./fma_peak [threads] [seconds]
 *     (benchmarks/fma_peak.py builds, caches and runs it)
 *
 * Each variant keeps CHAINS independent accumulators in vector registers and updates every one
 * with a fused multiply-add per step (acc = acc * a + b), so the loop is bound by the FMA units'
 * throughput, not by one chain's latency: at least (FMA latency x FMA ports) chains are needed,
 * 4 x 2 on current x86 cores, and we keep more. One FMA on a W-lane vector counts 2W flops.
 * The AVX-512 and AVX2 variants are compiled from this one file with per-function target
 * attributes and run only where the CPU has them. "threads" (default: all online CPUs) copies
 * run at once, one per thread, and the figure is total flops over the wall time of the slowest.
 * Prints one line per variant: ISA, threads, GFLOP/s (best of seven timed rounds).
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 7

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile float g_sink;

/* 16 chains of 16 lanes: 16 of the 32 zmm registers, 512 flops per step. */
__attribute__((target("avx512f"), noinline)) static void fma_avx512(uint64_t steps) {
    const __m512 a = _mm512_set1_ps(0.9999999f), b = _mm512_set1_ps(1e-7f);
    __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(0.1f), c2 = _mm512_set1_ps(0.2f),
           c3 = _mm512_set1_ps(0.3f), c4 = _mm512_set1_ps(0.4f), c5 = _mm512_set1_ps(0.5f),
           c6 = _mm512_set1_ps(0.6f), c7 = _mm512_set1_ps(0.7f), c8 = _mm512_set1_ps(0.8f),
           c9 = _mm512_set1_ps(0.9f), c10 = _mm512_set1_ps(1.0f), c11 = _mm512_set1_ps(1.1f),
           c12 = _mm512_set1_ps(1.2f), c13 = _mm512_set1_ps(1.3f), c14 = _mm512_set1_ps(1.4f),
           c15 = _mm512_set1_ps(1.5f);
    for (uint64_t i = 0; i < steps; ++i) {
        c0 = _mm512_fmadd_ps(c0, a, b);   c1 = _mm512_fmadd_ps(c1, a, b);
        c2 = _mm512_fmadd_ps(c2, a, b);   c3 = _mm512_fmadd_ps(c3, a, b);
        c4 = _mm512_fmadd_ps(c4, a, b);   c5 = _mm512_fmadd_ps(c5, a, b);
        c6 = _mm512_fmadd_ps(c6, a, b);   c7 = _mm512_fmadd_ps(c7, a, b);
        c8 = _mm512_fmadd_ps(c8, a, b);   c9 = _mm512_fmadd_ps(c9, a, b);
        c10 = _mm512_fmadd_ps(c10, a, b); c11 = _mm512_fmadd_ps(c11, a, b);
        c12 = _mm512_fmadd_ps(c12, a, b); c13 = _mm512_fmadd_ps(c13, a, b);
        c14 = _mm512_fmadd_ps(c14, a, b); c15 = _mm512_fmadd_ps(c15, a, b);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                                       _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
    g_sink = _mm512_reduce_add_ps(s);
}

/* 12 chains of 8 lanes: 12 of the 16 ymm registers (a and b take two more), 192 flops per step. */
__attribute__((target("avx2,fma"), noinline)) static void fma_avx2(uint64_t steps) {
    const __m256 a = _mm256_set1_ps(0.9999999f), b = _mm256_set1_ps(1e-7f);
    __m256 c0 = _mm256_set1_ps(0.0f), c1 = _mm256_set1_ps(0.1f), c2 = _mm256_set1_ps(0.2f),
           c3 = _mm256_set1_ps(0.3f), c4 = _mm256_set1_ps(0.4f), c5 = _mm256_set1_ps(0.5f),
           c6 = _mm256_set1_ps(0.6f), c7 = _mm256_set1_ps(0.7f), c8 = _mm256_set1_ps(0.8f),
           c9 = _mm256_set1_ps(0.9f), c10 = _mm256_set1_ps(1.0f), c11 = _mm256_set1_ps(1.1f);
    for (uint64_t i = 0; i < steps; ++i) {
        c0 = _mm256_fmadd_ps(c0, a, b);   c1 = _mm256_fmadd_ps(c1, a, b);
        c2 = _mm256_fmadd_ps(c2, a, b);   c3 = _mm256_fmadd_ps(c3, a, b);
        c4 = _mm256_fmadd_ps(c4, a, b);   c5 = _mm256_fmadd_ps(c5, a, b);
        c6 = _mm256_fmadd_ps(c6, a, b);   c7 = _mm256_fmadd_ps(c7, a, b);
        c8 = _mm256_fmadd_ps(c8, a, b);   c9 = _mm256_fmadd_ps(c9, a, b);
        c10 = _mm256_fmadd_ps(c10, a, b); c11 = _mm256_fmadd_ps(c11, a, b);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    g_sink = lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

typedef struct {
    const char *isa;
    void (*kernel)(uint64_t steps);
    double flops_per_step;
    int (*supported)(void);
} Variant;

static int has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static int has_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

static const Variant VARIANTS[] = {
    {"avx512", fma_avx512, 16.0 * 16.0 * 2.0, has_avx512},
    {"avx2", fma_avx2, 12.0 * 8.0 * 2.0, has_avx2},
};

typedef struct {
    const Variant *v;
    uint64_t steps;
    pthread_barrier_t *start;
    double end;
} Job;

static void *worker(void *arg) {
    Job *job = arg;
    pthread_barrier_wait(job->start);
    job->v->kernel(job->steps);
    job->end = now();
    return NULL;
}

/* Wall seconds for `threads` copies of `steps` steps each, started together. */
static double timed(const Variant *v, uint64_t steps, int threads) {
    pthread_t tid[threads];
    Job jobs[threads];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; ++t) {
        jobs[t] = (Job){v, steps, &start, 0.0};
        if (pthread_create(&tid[t], NULL, worker, &jobs[t]) != 0) {
            fprintf(stderr, "fma_peak: pthread_create failed\n");
            exit(1);
        }
    }
    pthread_barrier_wait(&start);
    double t0 = now(), last = t0;
    for (int t = 0; t < threads; ++t) {
        pthread_join(tid[t], NULL);
        if (jobs[t].end > last) last = jobs[t].end;
    }
    pthread_barrier_destroy(&start);
    return last - t0;
}

/* Best GFLOP/s of ROUNDS rounds, each sized to take about `seconds`. */
static double peak(const Variant *v, int threads, double seconds) {
    uint64_t steps = 1u << 16;
    while (timed(v, steps, 1) < 0.02) steps *= 2;  /* calibrate on one thread */
    steps = (uint64_t)((double)steps * seconds / timed(v, steps, 1));
    if (steps == 0) steps = 1;
    double best = 0.0;
    for (int r = 0; r < ROUNDS; ++r) {
        double gflops = v->flops_per_step * (double)steps * threads / timed(v, steps, threads) * 1e-9;
        if (gflops > best) best = gflops;
    }
    return best;
}

int main(int argc, char **argv) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = argc > 1 ? atoi(argv[1]) : (int)cores;
    double seconds = argc > 2 ? atof(argv[2]) : 0.3;
    if (threads < 1 || threads > 1024 || !(seconds > 0.0 && seconds < 60.0)) {
        fprintf(stderr, "usage: fma_peak [threads 1..1024] [seconds per round, 0..60]\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; ++i) {
        const Variant *v = &VARIANTS[i];
        if (!v->supported()) {
            printf("%s unsupported\n", v->isa);
            continue;
        }
        printf("%s 1 %.2f\n", v->isa, peak(v, 1, seconds));
        if (threads > 1) printf("%s %d %.2f\n", v->isa, threads, peak(v, threads, seconds));
        fflush(stdout);
    }
    return 0;
}
