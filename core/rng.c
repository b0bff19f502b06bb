/* rng.c: seeded random numbers (xoshiro256** as a GSL generator, so GSL's distributions draw from
 * it) and seed derivation for named sub-streams. */
#include "peat/peat.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <stdlib.h>

/*
 * Why not GSL's mt19937: it keeps 32 bits of its seed and maps seed 0 to 4357, so seeds 1 and
 * 2^32 + 1, or 0 and 4357, gave the same stream. Here the 64-bit seed fills the 256-bit state of
 * xoshiro256** through splitmix64 (the seeding its authors recommend): the first state word is
 * a bijection of the seed, so every distinct 64-bit seed starts from its own state, and the
 * state never is all zero. The generator is registered with GSL as a gsl_rng_type (the public
 * struct of gsl_rng.h), so gsl_ran_* distributions draw from it unchanged.
 */
typedef struct {
    uint64_t s[4];
} xoshiro_state;

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman and Vigna, 2018) */
static uint64_t xoshiro_next(xoshiro_state *st)
{
    uint64_t *s = st->s;
    const uint64_t out = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t peat_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void xoshiro_seed(xoshiro_state *st, uint64_t seed)
{
    for (int i = 0; i < 4; i++) st->s[i] = peat_splitmix64(&seed);
}

/* GSL's seeding hook takes an unsigned long (32 bits on some ABIs): peat_rng_new seeds the
 * state itself with all 64 bits; this serves gsl_rng_set callers. */
static void gsl_xoshiro_set(void *state, unsigned long seed)
{
    xoshiro_seed(state, (uint64_t)seed);
}

/* the upper 32 bits: the best bits of the output, and a range every platform's long holds */
static unsigned long gsl_xoshiro_get(void *state)
{
    return (unsigned long)(xoshiro_next(state) >> 32);
}

/* 53 random bits in [0, 1) */
static double gsl_xoshiro_get_double(void *state)
{
    return (double)(xoshiro_next(state) >> 11) * 0x1p-53;
}

static const gsl_rng_type xoshiro_type = {
    "peat_xoshiro256starstar", 0xffffffffUL,           0, sizeof(xoshiro_state), gsl_xoshiro_set,
    gsl_xoshiro_get,           gsl_xoshiro_get_double,
};

struct peat_rng {
    gsl_rng *r;
    uint64_t seed;
};

peat_rng_t *peat_rng_new(uint64_t seed)
{
    peat_core_init();
    peat_rng_t *p = malloc(sizeof *p);
    if (!p) return NULL;
    p->r = gsl_rng_alloc(&xoshiro_type);
    if (!p->r) {
        free(p);
        return NULL;
    }
    p->seed = seed;
    xoshiro_seed(gsl_rng_state(p->r), seed);
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
    uint64_t x = seed + 0x9e3779b97f4a7c15ull * (h | 1ull) - 0x9e3779b97f4a7c15ull;
    return peat_splitmix64(&x);
}
