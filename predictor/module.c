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

/* One hash per loaded module, computed on first use (the file may be replaced on disk while the
 * process runs; the code mapped is the one read first). */
enum { MAX_MODULES = 64 };
static struct {
    const void *base;
    uint64_t hash;
} seen[MAX_MODULES];
static int n_seen;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

/* ... and the module of each kernel function asked about (dladdr looks up the nearest symbol:
 * 15 us in libc, and a campaign's prediction asks for every call) */
enum { MAX_CODES = 256 };
static struct {
    const void *code;
    uint64_t hash;
} codes[MAX_CODES];
static int n_codes;

static uint64_t code_seen(const void *code)
{
    uint64_t h = 0;
    pthread_mutex_lock(&seen_lock);
    for (int i = 0; i < n_codes && !h; i++)
        if (codes[i].code == code) h = codes[i].hash;
    pthread_mutex_unlock(&seen_lock);
    return h;
}

static uint64_t module_hash(const void *code)
{
    Dl_info in, self;
    if (!dladdr(code, &in) || !in.dli_fbase) return 0;
    uint64_t h = 0;
    pthread_mutex_lock(&seen_lock);
    for (int i = 0; i < n_seen && !h; i++)
        if (seen[i].base == in.dli_fbase) h = seen[i].hash;
    pthread_mutex_unlock(&seen_lock);
    if (h) return h;
    /* the main program's dli_fname is whatever it was started as (maybe relative to another
     * directory): it is read through /proc; a shared object by the path it was loaded from */
    void *here = (void *)(uintptr_t)module_hash;
    int main_prog = dladdr(here, &self) && self.dli_fbase == in.dli_fbase &&
                    !(in.dli_fname && strstr(in.dli_fname, ".so"));
    h = hash_file(main_prog ? "/proc/self/exe" : in.dli_fname);
    if (!h) return 0;
    pthread_mutex_lock(&seen_lock);
    if (n_seen < MAX_MODULES) seen[n_seen].base = in.dli_fbase, seen[n_seen++].hash = h;
    pthread_mutex_unlock(&seen_lock);
    return h;
}

uint64_t peat_predictor_module_hash(const void *code)
{
    if (!code) return 0;
    uint64_t h = code_seen(code);
    if (h) return h;
    h = module_hash(code);
    pthread_mutex_lock(&seen_lock);
    if (h && n_codes < MAX_CODES) codes[n_codes].code = code, codes[n_codes++].hash = h;
    pthread_mutex_unlock(&seen_lock);
    return h;
}
