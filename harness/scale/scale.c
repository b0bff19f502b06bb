/* scale.c: shards by id and PEAT's every MPI call (docs/scale-out.md). Without PEAT_HAVE_MPI the
 * MPI functions are those of a single process. */
#include "harness/scale/scale.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PEAT_HAVE_MPI
#include <mpi.h>
#endif

peat_status peat_scale_shard_parse(const char *s, peat_scale_shard *out)
{
    long i = -1, n = -1;
    char tail = 0;
    if (!s || sscanf(s, "%ld/%ld%c", &i, &n, &tail) != 2 || n < 1 || n > PEAT_SCALE_MAX_SHARDS ||
        i < 0 || i >= n)
        return PEAT_ERROR(PEAT_ERR_INVAL, "'%s' is not a shard I/N with 0 <= I < N <= %d",
                          s ? s : "", PEAT_SCALE_MAX_SHARDS);
    out->i = (int)i, out->n = (int)n;
    return PEAT_OK;
}

int peat_scale_shard_mine(peat_scale_shard s, int64_t id)
{
    return s.n <= 1 || id % s.n == s.i;
}

void peat_scale_shard_name(const char *prefix, peat_scale_shard s, const char *suffix, char *buf,
                           size_t n)
{
    snprintf(buf, n, "%s%d-of-%d%s", prefix, s.i, s.n, suffix);
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int peat_scale_mpi_local_rank(void)
{
    int r = env_int("OMPI_COMM_WORLD_LOCAL_RANK", -1);
    if (r < 0) r = env_int("MPI_LOCALRANKID", -1);
    if (r < 0) r = env_int("SLURM_LOCALID", 0);
    return r;
}

int peat_scale_gpu_choose(const char *visible, int ndev, int local_rank, char *out, size_t n)
{
    out[0] = 0;
    if (local_rank < 0) local_rank = 0;
    if (visible && *visible) {
        int k = 1;
        for (const char *s = visible; *s; s++) k += *s == ',';
        const char *s = visible;
        for (int skip = local_rank % k; skip > 0; skip--) s = strchr(s, ',') + 1;
        size_t len = strcspn(s, ",");
        snprintf(out, n, "%.*s", (int)len, s);
        return out[0] != 0;
    }
    if (ndev < 1) return 0;
    snprintf(out, n, "%d", local_rank % ndev);
    return 1;
}

/* GPUs on this node, without starting a GPU runtime (the choice must be made before one
 * starts): $PEAT_GPUS_PER_NODE, else the NVIDIA driver's list, else AMD's KFD nodes with a GPU. */
static int node_gpus(void)
{
    int n = env_int("PEAT_GPUS_PER_NODE", -1);
    if (n >= 0) return n;
    n = 0;
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* A rank's GPU: set for this process and what it starts (CUDA, HIP) before any runtime starts. */
static void gpu_pick(void)
{
    char dev[64];
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (!vis || !*vis) vis = getenv("HIP_VISIBLE_DEVICES");
    if (!peat_scale_gpu_choose(vis, node_gpus(), peat_scale_mpi_local_rank(), dev, sizeof dev))
        return;
    setenv("CUDA_VISIBLE_DEVICES", dev, 1);
    setenv("HIP_VISIBLE_DEVICES", dev, 1);
}

#ifdef PEAT_HAVE_MPI

static int started;

int peat_scale_mpi_built(void)
{
    return 1;
}

/* launched by mpirun / srun with more than one rank: the launchers' environment */
static int launched(void)
{
    /* a process a rank started (peat ci's items) inherits the launcher's environment: it is no
     * rank of its own */
    if (getenv("PEAT_MPI_RANK_CHILD")) return 0;
    return env_int("OMPI_COMM_WORLD_SIZE", 0) > 1 || env_int("PMI_SIZE", 0) > 1 ||
           env_int("PMIX_SIZE", 0) > 1;
}

static void local_size_count(void);

peat_status peat_scale_mpi_init(int *argc, char ***argv)
{
    if (started || !launched()) return PEAT_OK;
    gpu_pick(); /* before anything (MPI included) can start a GPU runtime */
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return PEAT_ERROR(PEAT_ERR_IO, "MPI_Init failed");
    started = 1;
    setenv("PEAT_MPI_RANK_CHILD", "1", 1);
    local_size_count();
    return PEAT_OK;
}

void peat_scale_mpi_finalize(void)
{
    if (started) MPI_Finalize();
    started = 0;
}

int peat_scale_mpi_rank(void)
{
    int r = 0;
    if (started) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int peat_scale_mpi_size(void)
{
    int n = 1;
    if (started) MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

/* Waits for every rank asleep: a rank that ends early would otherwise spin in the collective
 * (Open MPI polls), taking a core from the ranks still working. */
static int wait_sleeping(MPI_Request *rq)
{
    int done = 0, rc = MPI_SUCCESS;
    struct timespec ms = {0, 1000000};
    for (rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE); rc == MPI_SUCCESS && !done;
         rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE))
        nanosleep(&ms, NULL);
    return rc;
}

static void barrier_sleeping(void)
{
    MPI_Request rq;
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    wait_sleeping(&rq);
}

static int local_size = 1;

/* Collective: every rank at MPI_Init. */
static void local_size_count(void)
{
    MPI_Comm node;
    int n = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return;
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    local_size = n > 0 ? n : 1;
}

int peat_scale_mpi_local_size(void)
{
    return started ? local_size : 1;
}

/* Messages of any length in pieces MPI's int count holds; every wait asleep. */
#define PIECE ((size_t)1 << 30)

static peat_status bytes_bcast(unsigned char *buf, size_t n)
{
    for (size_t at = 0; at < n; at += PIECE) {
        MPI_Request rq;
        int k = (int)(n - at < PIECE ? n - at : PIECE);
        if (MPI_Ibcast(buf + at, k, MPI_BYTE, 0, MPI_COMM_WORLD, &rq) != MPI_SUCCESS ||
            wait_sleeping(&rq) != MPI_SUCCESS)
            return PEAT_ERROR(PEAT_ERR_IO, "MPI broadcast failed");
    }
    return PEAT_OK;
}

peat_status peat_scale_mpi_bcast(void **buf, size_t *n)
{
    if (!started) return PEAT_OK;
    uint64_t len = peat_scale_mpi_rank() == 0 ? (uint64_t)*n : 0;
    PEAT_TRY(bytes_bcast((unsigned char *)&len, sizeof len));
    if (peat_scale_mpi_rank() != 0) {
        *buf = malloc(len + 1);
        *n = (size_t)len;
        if (!*buf)
            return PEAT_ERROR(PEAT_ERR_NOMEM, "a broadcast of %llu bytes", (unsigned long long)len);
    }
    return bytes_bcast(*buf, (size_t)len);
}

#define TAG_LEN  7101
#define TAG_BODY 7102

peat_status peat_scale_mpi_send0(const void *buf, size_t n)
{
    if (!started) return PEAT_OK;
    uint64_t len = n;
    MPI_Request rq;
    if (MPI_Isend(&len, 1, MPI_UINT64_T, 0, TAG_LEN, MPI_COMM_WORLD, &rq) != MPI_SUCCESS ||
        wait_sleeping(&rq) != MPI_SUCCESS)
        return PEAT_ERROR(PEAT_ERR_IO, "MPI send to rank 0 failed");
    for (size_t at = 0; at < n; at += PIECE) {
        int k = (int)(n - at < PIECE ? n - at : PIECE);
        if (MPI_Isend((const unsigned char *)buf + at, k, MPI_BYTE, 0, TAG_BODY, MPI_COMM_WORLD,
                      &rq) != MPI_SUCCESS ||
            wait_sleeping(&rq) != MPI_SUCCESS)
            return PEAT_ERROR(PEAT_ERR_IO, "MPI send to rank 0 failed");
    }
    return PEAT_OK;
}

peat_status peat_scale_mpi_recv(int from, void **buf, size_t *n)
{
    *buf = NULL, *n = 0;
    if (!started) return PEAT_ERROR(PEAT_ERR_INVAL, "no MPI ranks to receive from");
    uint64_t len = 0;
    MPI_Request rq;
    if (MPI_Irecv(&len, 1, MPI_UINT64_T, from, TAG_LEN, MPI_COMM_WORLD, &rq) != MPI_SUCCESS ||
        wait_sleeping(&rq) != MPI_SUCCESS)
        return PEAT_ERROR(PEAT_ERR_IO, "MPI receive from rank %d failed", from);
    unsigned char *b = malloc((size_t)len + 1);
    if (!b)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "%llu bytes from rank %d", (unsigned long long)len, from);
    for (size_t at = 0; at < len; at += PIECE) {
        int k = (int)(len - at < PIECE ? len - at : PIECE);
        if (MPI_Irecv(b + at, k, MPI_BYTE, from, TAG_BODY, MPI_COMM_WORLD, &rq) != MPI_SUCCESS ||
            wait_sleeping(&rq) != MPI_SUCCESS) {
            free(b);
            return PEAT_ERROR(PEAT_ERR_IO, "MPI receive from rank %d failed", from);
        }
    }
    *buf = b, *n = (size_t)len;
    return PEAT_OK;
}

peat_status peat_scale_mpi_status_all(peat_status mine, uint64_t *failed)
{
    uint64_t bit = 0, all = 0;
    int r = peat_scale_mpi_rank();
    if (mine != PEAT_OK && r < 64) bit = 1ull << r;
    int worst = mine != PEAT_OK, any = worst;
    if (started) {
        barrier_sleeping();
        MPI_Allreduce(&bit, &all, 1, MPI_UINT64_T, MPI_BOR, MPI_COMM_WORLD);
        MPI_Allreduce(&worst, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    } else
        all = bit;
    if (failed) *failed = all;
    if (mine != PEAT_OK) return mine;
    return any ? PEAT_ERR_IO : PEAT_OK;
}

void peat_scale_mpi_sum(double *v, int n)
{
    if (started) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

void peat_scale_mpi_max(double *v, int n)
{
    if (started) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

#else

int peat_scale_mpi_local_size(void)
{
    return 1;
}

peat_status peat_scale_mpi_bcast(void **buf, size_t *n)
{
    (void)buf, (void)n;
    return PEAT_OK;
}

peat_status peat_scale_mpi_send0(const void *buf, size_t n)
{
    (void)buf, (void)n;
    return PEAT_OK;
}

peat_status peat_scale_mpi_recv(int from, void **buf, size_t *n)
{
    (void)from;
    *buf = NULL, *n = 0;
    return PEAT_ERROR(PEAT_ERR_INVAL, "no MPI ranks to receive from");
}

void peat_scale_mpi_sum(double *v, int n)
{
    (void)v, (void)n;
}

void peat_scale_mpi_max(double *v, int n)
{
    (void)v, (void)n;
}

int peat_scale_mpi_built(void)
{
    return 0;
}

peat_status peat_scale_mpi_init(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    (void)gpu_pick; /* ranks exist only with MPI */
    return PEAT_OK;
}

void peat_scale_mpi_finalize(void) {}

int peat_scale_mpi_rank(void)
{
    return 0;
}

int peat_scale_mpi_size(void)
{
    return 1;
}

peat_status peat_scale_mpi_status_all(peat_status mine, uint64_t *failed)
{
    if (failed) *failed = mine != PEAT_OK;
    return mine;
}

#endif
