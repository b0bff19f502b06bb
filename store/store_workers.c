/* store_workers.c: encodes a batch of chunks on several cores (HDF5 calls stay on one thread). */
#include "store/store_impl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void job_run(store_workers *w, int p, store_job *job)
{
    if (job->plane >= 0)
        job->st = store_plane_encode(job->src, job->nelem, job->nvalid, job->elsize,
                                     (size_t)job->plane, job->level, w->shuf[p], job->out,
                                     job->out_cap, &job->out_len, &job->adler);
    else
        job->st = store_chunk_encode(&w->codec[p], job->src, job->nelem, job->nvalid, job->elsize,
                                     job->is_float, job->level, w->shuf[p], job->out, job->out_cap,
                                     &job->out_len);
}

/* Runs the jobs of the current batch until none is left; participant p uses its own codec and
 * shuffle buffer. Returns with the mutex unlocked. */
static void drain(store_workers *w, int p)
{
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int j = w->next < w->n_jobs ? w->next++ : -1;
        pthread_mutex_unlock(&w->mu);
        if (j < 0) return;
        job_run(w, p, &w->jobs[j]);
        store_job *job = &w->jobs[j];
        if (job->st != PEAT_OK) snprintf(job->msg, sizeof job->msg, "%s", peat_error_last());
        pthread_mutex_lock(&w->mu);
        if (++w->finished == w->n_jobs) pthread_cond_signal(&w->done);
        pthread_mutex_unlock(&w->mu);
    }
}

typedef struct {
    store_workers *w;
    int p;
} worker_arg;

static void *worker_main(void *arg)
{
    worker_arg *a = arg;
    store_workers *w = a->w;
    int p = a->p;
    free(a);
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->stop && w->gen == seen) pthread_cond_wait(&w->go, &w->mu);
        int stop = w->stop;
        seen = w->gen;
        pthread_mutex_unlock(&w->mu);
        if (stop) return NULL;
        drain(w, p);
    }
}

static int threads_wanted(void)
{
    const char *e = getenv("PEAT_STORE_THREADS"); /* participants, this thread included */
    long n = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > 8 ? 8 : (int)n; /* the HDF5 writes are serial: more cores stop paying off */
}

peat_status store_workers_start(store_workers *w, size_t shuf_bytes)
{
    memset(w, 0, sizeof *w);
    int parts = threads_wanted();
    w->codec = calloc((size_t)parts, sizeof *w->codec);
    w->shuf = calloc((size_t)parts, sizeof *w->shuf);
    w->th = calloc((size_t)parts, sizeof *w->th);
    if (!w->codec || !w->shuf || !w->th) {
        store_workers_stop(w);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "store workers");
    }
    w->parts = parts;
    for (int p = 0; p < parts; p++)
        if (!(w->shuf[p] = malloc(shuf_bytes))) {
            store_workers_stop(w);
            return PEAT_ERROR(PEAT_ERR_NOMEM, "store workers");
        }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->go, NULL);
    pthread_cond_init(&w->done, NULL);
    w->sync_ready = 1;
    for (int p = 1; p < parts; p++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a) break;
        *a = (worker_arg){w, p};
        if (pthread_create(&w->th[p], NULL, worker_main, a) != 0) {
            free(a);
            break; /* fewer helpers is still correct */
        }
        w->n_threads++;
    }
    return PEAT_OK;
}

void store_workers_stop(store_workers *w)
{
    if (w->sync_ready) {
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_broadcast(&w->go);
        pthread_mutex_unlock(&w->mu);
        for (int p = 1; p <= w->n_threads; p++) pthread_join(w->th[p], NULL);
        pthread_cond_destroy(&w->done);
        pthread_cond_destroy(&w->go);
        pthread_mutex_destroy(&w->mu);
    }
    for (int p = 0; p < w->parts; p++) {
        store_codec_free(&w->codec[p]);
        free(w->shuf[p]);
    }
    free(w->codec);
    free(w->shuf);
    free(w->th);
    memset(w, 0, sizeof *w);
}

void store_workers_begin(store_workers *w, store_job *jobs, int n_jobs, int parallel)
{
    w->inline_jobs = NULL;
    w->inline_n = 0;
    if (n_jobs <= 0) return;
    if (n_jobs == 1 || w->n_threads == 0 || !parallel) {
        /* little work (most records of small flows): waking a helper costs more than it saves;
         * store_workers_end runs them here */
        w->inline_jobs = jobs;
        w->inline_n = n_jobs;
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->jobs = jobs;
    w->n_jobs = n_jobs;
    w->next = 0;
    w->finished = 0;
    w->gen++;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->mu);
}

peat_status store_workers_end(store_workers *w)
{
    if (w->inline_n > 0) {
        store_job *jobs = w->inline_jobs;
        int n = w->inline_n;
        w->inline_jobs = NULL;
        w->inline_n = 0;
        for (int j = 0; j < n; j++) {
            job_run(w, 0, &jobs[j]);
            if (jobs[j].st != PEAT_OK) return jobs[j].st;
        }
        return PEAT_OK;
    }
    pthread_mutex_lock(&w->mu);
    int active = w->n_jobs;
    pthread_mutex_unlock(&w->mu);
    if (active == 0) return PEAT_OK;
    drain(w, 0);
    pthread_mutex_lock(&w->mu);
    while (w->finished < w->n_jobs) pthread_cond_wait(&w->done, &w->mu);
    store_job *jobs = w->jobs;
    int n_jobs = w->n_jobs;
    w->n_jobs = 0;
    pthread_mutex_unlock(&w->mu);
    for (int j = 0; j < n_jobs; j++)
        if (jobs[j].st != PEAT_OK) return PEAT_ERROR(jobs[j].st, "%s", jobs[j].msg);
    return PEAT_OK;
}
