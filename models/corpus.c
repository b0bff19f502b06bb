/* corpus.c: the gpt language-modelling corpus: a seeded sparse Markov language over V tokens
 * whose token frequencies are Zipf-distributed (exactly, in the chain's stationary law), plus an
 * in-context copy rule that gives attention something to read over a long row. */
#include "models/flow_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One uniform in [0, 1) from a splitmix64 state. */
static double corpus_u01(uint64_t *st)
{
    return (double)(peat_splitmix64(st) >> 11) * 0x1.0p-53;
}

/* First index k in [0, n) with cdf[k] > u (cdf ascending, cdf[n-1] = 1). */
static int corpus_pick(const double *cdf, int n, double u)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cdf[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

typedef struct corpus_edge {
    int i, j;
} corpus_edge;

static int edge_cmp(const void *a, const void *b)
{
    const corpus_edge *x = a, *y = b;
    if (x->i != y->i) return x->i < y->i ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

void peat_models_corpus_free(peat_models_corpus *c)
{
    if (!c) return;
    free(c->pi);
    free(c->pcdf);
    free(c->off);
    free(c->nb);
    free(c->cdf);
    memset(c, 0, sizeof *c);
}

/* The Zipf law over the ranks (token id = frequency rank) and its cumulative sums. */
static void zipf_law(peat_models_corpus *c)
{
    int V = c->V;
    double z = 0, acc = 0;
    for (int r = 0; r < V; r++) z += c->pi[r] = pow((double)(r + 1), -c->zipf_s);
    for (int r = 0; r < V; r++) {
        c->pi[r] /= z;
        c->pcdf[r] = acc += c->pi[r];
    }
    c->pcdf[V - 1] = 1.0;
}

/* The undirected graph: token i picks 6 + 2 V pi_i partners (half from the Zipf law, half
 * uniformly), no self-loops, each edge once; its neighbour lists in c->off / c->nb. */
static peat_status graph_build(peat_models_corpus *c, uint64_t seed)
{
    int V = c->V;
    int64_t ne = 0;
    for (int i = 0; i < V; i++) ne += 6 + (int64_t)ceil(2.0 * V * c->pi[i]);
    corpus_edge *e = malloc((size_t)(2 * ne) * sizeof *e);
    int *deg = calloc((size_t)V, sizeof *deg);
    if (!e || !deg) {
        free(e), free(deg);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "corpus: %lld edges", (long long)ne);
    }
    uint64_t rs = peat_models_hash(seed, 0xC0u, 0x5u);
    int64_t n = 0;
    for (int i = 0; i < V; i++) {
        int k = 6 + (int)ceil(2.0 * V * c->pi[i]);
        for (int q = 0; q < k; q++) {
            int j = corpus_u01(&rs) < 0.5 ? corpus_pick(c->pcdf, V, corpus_u01(&rs))
                                          : (int)(corpus_u01(&rs) * V);
            if (j == i) continue; /* no self-loops: a token is not followed by itself */
            e[n++] = (corpus_edge){i, j};
            e[n++] = (corpus_edge){j, i};
        }
    }
    qsort(e, (size_t)n, sizeof *e, edge_cmp);
    int64_t m = 0;
    for (int64_t k = 0; k < n; k++)
        if (m == 0 || e[k].i != e[m - 1].i || e[k].j != e[m - 1].j) e[m++] = e[k];
    c->nb = malloc((size_t)m * sizeof *c->nb);
    c->cdf = malloc((size_t)m * sizeof *c->cdf);
    peat_status st =
        c->nb && c->cdf ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "corpus: %lld edges", (long long)m);
    for (int64_t k = 0; st == PEAT_OK && k < m; k++) deg[e[k].i]++, c->nb[k] = e[k].j;
    for (int i = 0; st == PEAT_OK && i < V; i++) {
        c->off[i + 1] = c->off[i] + deg[i];
        if (!deg[i]) st = PEAT_ERROR(PEAT_ERR_INTERNAL, "corpus: token %d has no neighbour", i);
    }
    c->edges = m;
    free(e);
    free(deg);
    return st;
}

/* Symmetric matrix balancing: a <- sqrt(a pi / (S a)) until a_i sum_j a_j = pi_i (it converges
 * on a connected graph with odd cycles); sa is scratch of V. */
static peat_status balance(const peat_models_corpus *c, double *a, double *sa)
{
    int V = c->V;
    for (int i = 0; i < V; i++) a[i] = sqrt(c->pi[i]);
    double res = 1;
    for (int it = 0; it < 20000 && res > 1e-12; it++) {
        res = 0;
        for (int i = 0; i < V; i++) {
            double s = 0;
            for (int k = c->off[i]; k < c->off[i + 1]; k++) s += a[c->nb[k]];
            sa[i] = s;
            res = fmax(res, fabs(a[i] * s / c->pi[i] - 1));
        }
        for (int i = 0; i < V; i++) a[i] = sqrt(a[i] * c->pi[i] / sa[i]);
    }
    if (res > 1e-9)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "corpus: balancing did not converge (%g)", res);
    return PEAT_OK;
}

/* The walk's cumulative step laws P(j | i) = a_j / sum_k a_k, and the entropies. */
static void steps_set(peat_models_corpus *c, const double *a)
{
    c->h_unigram = c->h_bigram = 0;
    for (int i = 0; i < c->V; i++) {
        double s = 0, h = 0, acc = 0;
        for (int k = c->off[i]; k < c->off[i + 1]; k++) s += a[c->nb[k]];
        for (int k = c->off[i]; k < c->off[i + 1]; k++) {
            double p = a[c->nb[k]] / s;
            c->cdf[k] = acc += p;
            h -= p * log(p);
        }
        c->cdf[c->off[i + 1] - 1] = 1.0;
        c->h_bigram += c->pi[i] * h;
        c->h_unigram -= c->pi[i] * log(c->pi[i]);
    }
}

/* The chain: an undirected graph in which token i picks 6 + 2 V pi_i partners (half drawn from
 * the Zipf law, half uniformly: frequent tokens follow and precede many tokens), and symmetric
 * weights w_ij = a_i a_j on its edges. With a scaled so that a_i sum_j a_j = pi_i (symmetric
 * matrix balancing), the walk P(j | i) = a_j / sum_k a_k is reversible with stationary law pi. */
peat_status peat_models_corpus_alloc(peat_models_corpus *c, int V, double zipf_s, double copy_p,
                                     uint64_t seed)
{
    memset(c, 0, sizeof *c);
    if (V < 16 || V > (1 << 20) || !(zipf_s > 0) || !(copy_p >= 0 && copy_p < 1))
        return PEAT_ERROR(PEAT_ERR_INVAL, "corpus: vocabulary %d, exponent %g, copy %g", V, zipf_s,
                          copy_p);
    c->V = V, c->zipf_s = zipf_s, c->copy_p = copy_p;
    c->pi = calloc((size_t)V, sizeof *c->pi);
    c->pcdf = calloc((size_t)V, sizeof *c->pcdf);
    c->off = calloc((size_t)V + 1, sizeof *c->off);
    double *a = calloc((size_t)V, sizeof *a), *sa = calloc((size_t)V, sizeof *sa);
    peat_status st =
        c->pi && c->pcdf && c->off && a && sa ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "corpus");
    if (st == PEAT_OK) zipf_law(c);
    if (st == PEAT_OK) st = graph_build(c, seed);
    if (st == PEAT_OK) st = balance(c, a, sa);
    if (st == PEAT_OK) steps_set(c, a);
    free(a);
    free(sa);
    if (st != PEAT_OK) peat_models_corpus_free(c);
    return st;
}

/* The first token from the Zipf law; then, with probability copy_p, when the current token
 * occurred earlier in the row, the token that followed its latest occurrence (an in-context
 * repeat: what induction heads learn), else a step of the chain. */
void peat_models_corpus_sample(const peat_models_corpus *c, uint64_t seed, uint64_t a, uint64_t b,
                               int n, int32_t *out)
{
    uint64_t st = peat_models_hash(seed, a, b);
    for (int t = 0; t < n; t++) {
        if (t == 0) {
            out[0] = corpus_pick(c->pcdf, c->V, corpus_u01(&st));
            continue;
        }
        int32_t i = out[t - 1];
        double u = corpus_u01(&st);
        if (c->copy_p > 0 && u < c->copy_p) {
            int s = t - 2;
            while (s >= 0 && out[s] != i) s--;
            if (s >= 0) {
                out[t] = out[s + 1];
                continue;
            }
        }
        int lo = c->off[i], k = c->off[i + 1] - lo;
        out[t] = c->nb[lo + corpus_pick(c->cdf + lo, k, corpus_u01(&st))];
    }
}
