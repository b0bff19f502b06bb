/* findings.c: a campaign's findings from every source (the runner, the signature rules, the
 * arithmetic properties, the probes, runtime FI) assembled into one list by one ordering rule
 * (docs/detector.md, "Order of findings"). */
#include "detector/detector.h"

#include <stdio.h>
#include <string.h>

void peat_detector_tag(peat_finding *f, const char *experiment)
{
    if (f->experiment[0]) return;
    /* the repeats of the recorded calls decide nondeterminism and a transient upset */
    int repeats = f->cls == PEAT_FIND_NONDETERMINISTIC ||
                  (f->cls == PEAT_FIND_BITFLIP && strstr(f->params, "transient"));
    snprintf(f->experiment, sizeof f->experiment, "%s",
             repeats && !strcmp(experiment, "recorded calls") ? "repeats of the recorded calls"
                                                              : experiment);
}

/* A finding the runner made: cls on `count` calls, the first message as evidence; it fails the
 * kernel whatever its other outputs show. NULL when the list is full. */
static peat_finding *runner_finding(peat_finding *out, int *n, int max, peat_finding_class cls,
                                    const char *what, int64_t count, int64_t n_records,
                                    const char *first)
{
    if (*n >= max) return NULL;
    peat_finding *fd = &out[(*n)++];
    memset(fd, 0, sizeof *fd);
    fd->cls = cls;
    fd->confidence = 1.0;
    snprintf(fd->params, sizeof fd->params, "calls=%lld", (long long)count);
    snprintf(fd->evidence[0], sizeof fd->evidence[0],
             "the kernel %s on %lld of %lld calls; first: %.150s", what, (long long)count,
             (long long)n_records, first ? first : "");
    fd->n_evidence = 1;
    fd->accept = PEAT_ACCEPT_FAIL;
    snprintf(fd->experiment, sizeof fd->experiment, "%s",
             cls == PEAT_FIND_STATEFUL ? "call sequences" : "isolated replay");
    return fd;
}

/* Crashes, hangs and errors (OUT_OF_BOUND), early exits (DUE), stray writes, input writes. */
static int runner_findings(const peat_runner_counts *r, peat_finding *out, int max)
{
    int n = 0;
    int64_t failed = r->n_failures - r->n_due - r->n_hang_skipped;
    if (failed > 0) {
        peat_finding *fd = runner_finding(out, &n, max, PEAT_FIND_OUT_OF_BOUND, "failed", failed,
                                          r->n_records, r->failure);
        if (fd && r->n_hang_skipped > 0)
            snprintf(fd->evidence[fd->n_evidence++], sizeof fd->evidence[0],
                     "%lld later calls skipped: the kernel hung (--hang-policy wait runs them)",
                     (long long)r->n_hang_skipped);
    }
    if (r->n_due > 0)
        runner_finding(out, &n, max, PEAT_FIND_DUE, "ended its process without completing the call",
                       r->n_due, r->n_records, r->due);
    if (r->n_oob_writes > 0)
        runner_finding(out, &n, max, PEAT_FIND_OUT_OF_BOUNDS_WRITE, "wrote outside an output",
                       r->n_oob_writes, r->n_records, r->oob_write);
    if (r->n_input_mutations > 0)
        runner_finding(out, &n, max, PEAT_FIND_INPUT_MUTATION, "wrote into an input",
                       r->n_input_mutations, r->n_records, r->input_mutation);
    if (r->n_stateful > 0)
        runner_finding(out, &n, max, PEAT_FIND_STATEFUL,
                       "left the bound, where the same call in a fresh process did not,",
                       r->n_stateful, r->n_sequence_calls, r->stateful);
    return n;
}

/* The numeric findings: the signature's, combined with the properties' and the probes' when
 * there are any (peat_detector_combine: the primary first). */
static int numeric_findings(const peat_finding_sources *s, peat_finding *out, int max)
{
    int n;
    if (s->n_props == 0 && s->n_probes == 0) {
        n = s->n_signature < max ? s->n_signature : max;
        if (n > 0) memcpy(out, s->signature, (size_t)n * sizeof *out);
        for (int i = 0; i < n; i++) peat_detector_tag(&out[i], "recorded calls");
    } else
        n = peat_detector_combine(s->signature, s->n_signature, s->probes, s->n_probes, s->props,
                                  s->n_props, out, max);
    /* the differential diagnosis decides the primary: the finding it ruled out or confirmed
     * gives way, and a later one of the decided class says the same */
    if (s->diagnosed && n > 0) {
        out[0] = *s->diagnosed;
        int k = 1;
        for (int i = 1; i < n; i++)
            if (out[i].cls != out[0].cls) out[k++] = out[i];
        n = k;
    }
    return n;
}

int peat_detector_assemble(const peat_finding_sources *s, peat_finding *out, int max)
{
    if (max <= 0) return 0;
    int n_rt = s->n_runtime < max - 1 ? s->n_runtime : max - 1;
    if (n_rt < 0) n_rt = 0;
    int head = max - n_rt; /* the runner's and the numeric findings' share of the list */
    int n = runner_findings(&s->runner, out, head);
    n += numeric_findings(s, out + n, head - n);
    for (int i = 0; i < n_rt; i++) {
        out[n] = s->runtime[i];
        peat_detector_tag(&out[n++], "runtime FI");
    }
    return n;
}
