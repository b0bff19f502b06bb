/* module.c: the identity of the code a kernel runs: a hash of the contents of the executable or
 * shared object its function lives in, so that a rebuilt plugin (or peat) is calibrated again
 * even when its descriptor is unchanged. */
#define _GNU_SOURCE /* dladdr */
#include "predictor/predictor.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The 64-bit FNV-1a step over 8-byte words (a file of megabytes in about a millisecond). */
static uint64_t hash_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static const uint64_t prime = 0x100000001b3ull;
    uint64_t h = 0xcbf29ce484222325ull, w;
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, buf + i, 8);
            h = (h ^ w) * prime;
        }
        for (; i < n; i++) h = (h ^ buf[i]) * prime;
    }
    int bad = ferror(f);
    fclose(f);
    return bad ? 0 : (h ? h : 1);
}

/* Hashes remembered by key: one per loaded module (by its base address), computed on first use
 * (the file may be replaced on disk while the process runs; the code mapped is the one read
 * first), and the module's hash of each kernel function asked about (dladdr looks up the nearest
 * symbol: 15 us in libc, and a campaign's prediction asks for every call). */
typedef struct memo {
    const void *key;
    uint64_t hash;
} memo;
enum { MAX_MODULES = 64, MAX_CODES = 256 };
static memo modules[MAX_MODULES], codes[MAX_CODES];
static int n_modules, n_codes;
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t memo_get(const memo *m, const int *n, const void *key)
{
    uint64_t h = 0;
    pthread_mutex_lock(&memo_lock);
    for (int i = 0; i < *n && !h; i++)
        if (m[i].key == key) h = m[i].hash;
    pthread_mutex_unlock(&memo_lock);
    return h;
}

static void memo_put(memo *m, int *n, int cap, const void *key, uint64_t h)
{
    pthread_mutex_lock(&memo_lock);
    if (h && *n < cap) m[*n].key = key, m[*n].hash = h, ++*n;
    pthread_mutex_unlock(&memo_lock);
}

static uint64_t module_hash(const void *code)
{
    Dl_info in, self;
    if (!dladdr(code, &in) || !in.dli_fbase) return 0;
    uint64_t h = memo_get(modules, &n_modules, in.dli_fbase);
    if (h) return h;
    /* the main program's dli_fname is whatever it was started as (maybe relative to another
     * directory): it is read through /proc; a shared object by the path it was loaded from */
    void *here = (void *)(uintptr_t)module_hash;
    int main_prog = dladdr(here, &self) && self.dli_fbase == in.dli_fbase &&
                    !(in.dli_fname && strstr(in.dli_fname, ".so"));
    h = hash_file(main_prog ? "/proc/self/exe" : in.dli_fname);
    memo_put(modules, &n_modules, MAX_MODULES, in.dli_fbase, h);
    return h;
}

uint64_t peat_predictor_module_hash(const void *code)
{
    if (!code) return 0;
    uint64_t h = memo_get(codes, &n_codes, code);
    if (h) return h;
    h = module_hash(code);
    memo_put(codes, &n_codes, MAX_CODES, code, h);
    return h;
}
