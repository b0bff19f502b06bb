/* rng.c: seeded random numbers (GSL mt19937) and seed derivation for named sub-streams. */
#include "peat/peat.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <stdlib.h>

struct peat_rng {
    gsl_rng *r;
    uint64_t seed;
};

peat_rng_t *peat_rng_alloc(uint64_t seed)
{
    peat_rng_t *p = malloc(sizeof *p);
    if (!p) return NULL;
    p->r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!p->r) {
        free(p);
        return NULL;
    }
    p->seed = seed;
    /* mt19937 takes an unsigned long seed; fold 64 bits so distinct seeds stay distinct */
    gsl_rng_set(p->r, (unsigned long)(seed ^ (seed >> 32)) + (seed == 0 ? 4357ul : 0ul));
    return p;
}

void peat_rng_free(peat_rng_t *r)
{
    if (!r) return;
    gsl_rng_free(r->r);
    free(r);
}

uint64_t peat_rng_seed(const peat_rng_t *r)
{
    return r->seed;
}
double peat_rng_uniform(peat_rng_t *r)
{
    return gsl_rng_uniform(r->r);
}
double peat_rng_gaussian(peat_rng_t *r, double sigma)
{
    return gsl_ran_gaussian_ziggurat(r->r, sigma);
}
uint64_t peat_rng_int(peat_rng_t *r, uint64_t n)
{
    if (n == 0) return 0;
    if (n <= gsl_rng_max(r->r)) return gsl_rng_uniform_int(r->r, (unsigned long)n);
    return (uint64_t)(gsl_rng_uniform(r->r) * (double)n);
}

void peat_rng_fill_uniform(peat_rng_t *r, peat_tensor *t, double lo, double hi)
{
    int64_t n = peat_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) peat_tensor_set(t, i, lo + (hi - lo) * gsl_rng_uniform(r->r));
}

void peat_rng_fill_gaussian(peat_rng_t *r, peat_tensor *t, double sigma)
{
    int64_t n = peat_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) peat_tensor_set(t, i, gsl_ran_gaussian_ziggurat(r->r, sigma));
}

/* splitmix64 over the seed and an FNV-1a hash of the stream name */
uint64_t peat_seed_derive(uint64_t seed, const char *stream)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *c = stream; c && *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (h | 1ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
