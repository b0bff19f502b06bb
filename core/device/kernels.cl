/* kernels.cl: the device kernels of every op (reference goldens, fp32, one work-item per output
 * element or row) and the device candidates, in ONE source for OpenCL C and CUDA/HIP: the PK_*
 * macros below are the only dialect differences (OpenCL compiles this text at run time; the .cu
 * backend #includes it). Indices are long (64-bit on both), scalars float.
 *
 * Goldens accumulate sequentially in fp32 in the order of the CPU goldens, so their error stays
 * within the same gamma_K bound of the fp64 exact reference; candidates use other orders
 * (tiles, online softmax, Welford, flash attention) on purpose. */
#ifdef __OPENCL_VERSION__
#define PK_KERNEL __kernel
#define PK_FN
#define PK_G __global
#define PK_LOCAL __local
#define PK_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define PK_GID0 ((long)get_global_id(0))
#define PK_GID1 ((long)get_global_id(1))
#define PK_GID2 ((long)get_global_id(2))
#define PK_LID0 ((long)get_local_id(0))
#define PK_LID1 ((long)get_local_id(1))
#define PK_GRP0 ((long)get_group_id(0))
#define PK_GRP1 ((long)get_group_id(1))
#else
#define PK_KERNEL extern "C" __global__
#define PK_FN static __device__
#define PK_G
#define PK_LOCAL __shared__
#define PK_BARRIER() __syncthreads()
#define PK_GID0 ((long)(blockIdx.x * blockDim.x + threadIdx.x))
#define PK_GID1 ((long)(blockIdx.y * blockDim.y + threadIdx.y))
#define PK_GID2 ((long)(blockIdx.z * blockDim.z + threadIdx.z))
#define PK_LID0 ((long)threadIdx.x)
#define PK_LID1 ((long)threadIdx.y)
#define PK_GRP0 ((long)blockIdx.x)
#define PK_GRP1 ((long)blockIdx.y)
#endif

#define PK_TILE 16 /* gemm_new tile edge; the host launches PK_TILE x PK_TILE work-groups */

/* ---- plumbing ---- */

PK_KERNEL void pk_copy(PK_G const float *x, PK_G float *y, long n)
{
    long i = PK_GID0;
    if (i < n) y[i] = x[i];
}

/* ---- GEMM: row-major, batch in dimension 2; C is read only when has_c ---- */

PK_FN float pk_a(PK_G const float *A, long tA, long M, long K, long i, long k)
{
    return tA ? A[k * M + i] : A[i * K + k];
}
PK_FN float pk_b(PK_G const float *B, long tB, long N, long K, long k, long j)
{
    return tB ? B[j * K + k] : B[k * N + j];
}

PK_KERNEL void pk_gemm_ref(long tA, long tB, long M, long N, long K, float alpha, float beta,
                           long has_c, PK_G const float *A, PK_G const float *B,
                           PK_G const float *C, PK_G float *D)
{
    long j = PK_GID0, i = PK_GID1, b = PK_GID2;
    if (i >= M || j >= N) return;
    PK_G const float *Ab = A + b * M * K;
    PK_G const float *Bb = B + b * K * N;
    float s = 0.0f;
    for (long k = 0; k < K; k++) s += pk_a(Ab, tA, M, K, i, k) * pk_b(Bb, tB, N, K, k, j);
    long o = b * M * N + i * N + j;
    D[o] = has_c ? alpha * s + beta * C[o] : alpha * s;
}

/* Candidate: PK_TILE x PK_TILE local-memory tiles; k is summed tile by tile. */
PK_KERNEL void pk_gemm_tiled(long tA, long tB, long M, long N, long K, float alpha, float beta,
                             long has_c, PK_G const float *A, PK_G const float *B,
                             PK_G const float *C, PK_G float *D)
{
    PK_LOCAL float as[PK_TILE][PK_TILE + 1];
    PK_LOCAL float bs[PK_TILE][PK_TILE + 1];
    long tx = PK_LID0, ty = PK_LID1, b = PK_GID2;
    long j = PK_GRP0 * PK_TILE + tx, i = PK_GRP1 * PK_TILE + ty;
    PK_G const float *Ab = A + b * M * K;
    PK_G const float *Bb = B + b * K * N;
    float acc = 0.0f;
    for (long k0 = 0; k0 < K; k0 += PK_TILE) {
        long ka = k0 + tx, kb = k0 + ty;
        as[ty][tx] = (i < M && ka < K) ? pk_a(Ab, tA, M, K, i, ka) : 0.0f;
        bs[ty][tx] = (kb < K && j < N) ? pk_b(Bb, tB, N, K, kb, j) : 0.0f;
        PK_BARRIER();
        for (int k = 0; k < PK_TILE; k++) acc += as[ty][k] * bs[k][tx];
        PK_BARRIER();
    }
    if (i < M && j < N) {
        long o = b * M * N + i * N + j;
        D[o] = has_c ? alpha * acc + beta * C[o] : alpha * acc;
    }
}

/* ---- conv2d (NCHW): i = N, C, H, W, O, KH, KW, stride, pad ---- */

PK_KERNEL void pk_conv2d(long N, long C, long H, long W, long O, long KH, long KW, long st,
                         long pad, long OH, long OW, PK_G const float *X, PK_G const float *Wt,
                         PK_G float *Y)
{
    long e = PK_GID0;
    if (e >= N * O * OH * OW) return;
    long ow = e % OW, oh = (e / OW) % OH, o = (e / (OW * OH)) % O, n = e / (OW * OH * O);
    float s = 0.0f;
    for (long c = 0; c < C; c++)
        for (long kh = 0; kh < KH; kh++)
            for (long kw = 0; kw < KW; kw++) {
                long h = oh * st - pad + kh, w = ow * st - pad + kw;
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                s += X[((n * C + c) * H + h) * W + w] * Wt[((o * C + c) * KH + kh) * KW + kw];
            }
    Y[e] = s;
}

PK_KERNEL void pk_conv2d_bwd_data(long N, long C, long H, long W, long O, long KH, long KW,
                                  long st, long pad, long OH, long OW, PK_G const float *dY,
                                  PK_G const float *Wt, PK_G float *dX)
{
    long e = PK_GID0;
    if (e >= N * C * H * W) return;
    long w = e % W, h = (e / W) % H, c = (e / (W * H)) % C, n = e / (W * H * C);
    float s = 0.0f;
    for (long o = 0; o < O; o++)
        for (long kh = 0; kh < KH; kh++)
            for (long kw = 0; kw < KW; kw++) {
                long th = h + pad - kh, tw = w + pad - kw;
                if (th < 0 || tw < 0 || th % st || tw % st) continue;
                long oh = th / st, ow = tw / st;
                if (oh >= OH || ow >= OW) continue;
                s += dY[((n * O + o) * OH + oh) * OW + ow] * Wt[((o * C + c) * KH + kh) * KW + kw];
            }
    dX[e] = s;
}

PK_KERNEL void pk_conv2d_bwd_filter(long N, long C, long H, long W, long O, long KH, long KW,
                                    long st, long pad, long OH, long OW, PK_G const float *X,
                                    PK_G const float *dY, PK_G float *dW)
{
    long e = PK_GID0;
    if (e >= O * C * KH * KW) return;
    long kw = e % KW, kh = (e / KW) % KH, c = (e / (KW * KH)) % C, o = e / (KW * KH * C);
    float s = 0.0f;
    for (long n = 0; n < N; n++)
        for (long oh = 0; oh < OH; oh++)
            for (long ow = 0; ow < OW; ow++) {
                long h = oh * st - pad + kh, w = ow * st - pad + kw;
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                s += X[((n * C + c) * H + h) * W + w] * dY[((n * O + o) * OH + oh) * OW + ow];
            }
    dW[e] = s;
}

/* ---- bias, activations ---- */

PK_KERNEL void pk_bias_add(long R, long C, long S, PK_G const float *X, PK_G const float *b,
                           PK_G float *Y)
{
    long e = PK_GID0;
    if (e < R * C * S) Y[e] = X[e] + b[(e / S) % C];
}

PK_KERNEL void pk_bias_add_bwd(long R, long C, long S, PK_G const float *dY, PK_G float *db)
{
    long c = PK_GID0;
    if (c >= C) return;
    float s = 0.0f;
    for (long r = 0; r < R; r++)
        for (long k = 0; k < S; k++) s += dY[(r * C + c) * S + k];
    db[c] = s;
}

PK_KERNEL void pk_relu(long n, PK_G const float *X, PK_G float *Y)
{
    long i = PK_GID0;
    if (i < n) Y[i] = X[i] > 0.0f ? X[i] : 0.0f;
}

PK_KERNEL void pk_relu_bwd(long n, PK_G const float *X, PK_G const float *dY, PK_G float *dX)
{
    long i = PK_GID0;
    if (i < n) dX[i] = X[i] > 0.0f ? dY[i] : 0.0f;
}

PK_KERNEL void pk_gelu(long n, PK_G const float *X, PK_G float *Y)
{
    long i = PK_GID0;
    if (i < n) Y[i] = 0.5f * X[i] * (1.0f + erf(X[i] * 0.70710678118654752f));
}

PK_KERNEL void pk_gelu_bwd(long n, PK_G const float *X, PK_G const float *dY, PK_G float *dX)
{
    long i = PK_GID0;
    if (i >= n) return;
    float x = X[i];
    float cdf = 0.5f * (1.0f + erf(x * 0.70710678118654752f));
    float pdf = exp(-0.5f * x * x) * 0.39894228040143268f;
    dX[i] = dY[i] * (cdf + x * pdf);
}

/* ---- softmax over rows ---- */

PK_KERNEL void pk_softmax(long R, long C, PK_G const float *X, PK_G float *Y)
{
    long r = PK_GID0;
    if (r >= R) return;
    PK_G const float *x = X + r * C;
    float m = x[0], s = 0.0f;
    for (long j = 1; j < C; j++) m = x[j] > m ? x[j] : m;
    for (long j = 0; j < C; j++) s += exp(x[j] - m);
    for (long j = 0; j < C; j++) Y[r * C + j] = exp(x[j] - m) / s;
}

/* Candidate: one pass for max and sum together (the running sum is rescaled when the max grows). */
PK_KERNEL void pk_softmax_online(long R, long C, PK_G const float *X, PK_G float *Y)
{
    long r = PK_GID0;
    if (r >= R) return;
    PK_G const float *x = X + r * C;
    float m = -INFINITY, s = 0.0f;
    for (long j = 0; j < C; j++) {
        float mn = x[j] > m ? x[j] : m;
        s = s * exp(m - mn) + exp(x[j] - mn);
        m = mn;
    }
    for (long j = 0; j < C; j++) Y[r * C + j] = exp(x[j] - m) / s;
}

PK_KERNEL void pk_softmax_bwd(long R, long C, PK_G const float *Yv, PK_G const float *dY,
                              PK_G float *dX)
{
    long r = PK_GID0;
    if (r >= R) return;
    float dot = 0.0f;
    for (long j = 0; j < C; j++) dot += dY[r * C + j] * Yv[r * C + j];
    for (long j = 0; j < C; j++) dX[r * C + j] = Yv[r * C + j] * (dY[r * C + j] - dot);
}

/* ---- layernorm over rows: biased variance, rstd = 1/sqrt(var + eps) ---- */

PK_FN void pk_ln_write(long C, PK_G const float *x, PK_G const float *g, PK_G const float *be,
                       float mean, float rstd, PK_G float *y)
{
    for (long j = 0; j < C; j++) y[j] = (x[j] - mean) * rstd * g[j] + be[j];
}

PK_KERNEL void pk_layernorm(long R, long C, float eps, PK_G const float *X, PK_G const float *g,
                            PK_G const float *be, PK_G float *Y, PK_G float *Mean,
                            PK_G float *Rstd)
{
    long r = PK_GID0;
    if (r >= R) return;
    PK_G const float *x = X + r * C;
    float s = 0.0f, v = 0.0f;
    for (long j = 0; j < C; j++) s += x[j];
    float mean = s / (float)C;
    for (long j = 0; j < C; j++) v += (x[j] - mean) * (x[j] - mean);
    float rstd = 1.0f / sqrt(v / (float)C + eps);
    pk_ln_write(C, x, g, be, mean, rstd, Y + r * C);
    Mean[r] = mean, Rstd[r] = rstd;
}

/* Candidate: Welford's one-pass mean and variance. */
PK_KERNEL void pk_layernorm_welford(long R, long C, float eps, PK_G const float *X,
                                    PK_G const float *g, PK_G const float *be, PK_G float *Y,
                                    PK_G float *Mean, PK_G float *Rstd)
{
    long r = PK_GID0;
    if (r >= R) return;
    PK_G const float *x = X + r * C;
    float mean = 0.0f, m2 = 0.0f;
    for (long j = 0; j < C; j++) {
        float d = x[j] - mean;
        mean += d / (float)(j + 1);
        m2 += d * (x[j] - mean);
    }
    float rstd = 1.0f / sqrt(m2 / (float)C + eps);
    pk_ln_write(C, x, g, be, mean, rstd, Y + r * C);
    Mean[r] = mean, Rstd[r] = rstd;
}

PK_KERNEL void pk_layernorm_bwd_dx(long R, long C, PK_G const float *X, PK_G const float *g,
                                   PK_G const float *Mean, PK_G const float *Rstd,
                                   PK_G const float *dY, PK_G float *dX)
{
    long r = PK_GID0;
    if (r >= R) return;
    PK_G const float *x = X + r * C;
    PK_G const float *dy = dY + r * C;
    float sg = 0.0f, sgx = 0.0f, mu = Mean[r], rs = Rstd[r];
    for (long j = 0; j < C; j++) {
        float xh = (x[j] - mu) * rs, gg = dy[j] * g[j];
        sg += gg, sgx += gg * xh;
    }
    sg /= (float)C, sgx /= (float)C;
    for (long j = 0; j < C; j++) {
        float xh = (x[j] - mu) * rs, gg = dy[j] * g[j];
        dX[r * C + j] = rs * (gg - sg - xh * sgx);
    }
}

PK_KERNEL void pk_layernorm_bwd_dg(long R, long C, PK_G const float *X, PK_G const float *Mean,
                                   PK_G const float *Rstd, PK_G const float *dY, PK_G float *dg,
                                   PK_G float *db)
{
    long j = PK_GID0;
    if (j >= C) return;
    float sg = 0.0f, sb = 0.0f;
    for (long r = 0; r < R; r++) {
        float xh = (X[r * C + j] - Mean[r]) * Rstd[r];
        sg += dY[r * C + j] * xh, sb += dY[r * C + j];
    }
    dg[j] = sg, db[j] = sb;
}

/* ---- attention [B,H,T,D]: one work-item per (b,h,t) row ---- */

PK_FN float pk_dot(PK_G const float *a, PK_G const float *b, long D)
{
    float s = 0.0f;
    for (long d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

/* The K/V head of query head plane bh (grouped-query attention: H query heads share Hkv K/V
 * heads, each group of H / Hkv consecutive heads one). */
PK_FN long pk_kv_of(long bh, long H, long Hkv)
{
    return bh / H * Hkv + bh % H / (H / Hkv);
}

PK_KERNEL void pk_attention(long BH, long H, long Hkv, long T, long D, long causal, float scale,
                            PK_G const float *Q, PK_G const float *K, PK_G const float *V,
                            PK_G float *O, PK_G float *L)
{
    long row = PK_GID0;
    if (row >= BH * T) return;
    long t = row % T, base = pk_kv_of(row / T, H, Hkv) * T * D;
    long send = causal ? t + 1 : T;
    PK_G const float *q = Q + row * D;
    float m = -INFINITY, l = 0.0f;
    for (long s = 0; s < send; s++) {
        float z = scale * pk_dot(q, K + base + s * D, D);
        m = z > m ? z : m;
    }
    for (long s = 0; s < send; s++) l += exp(scale * pk_dot(q, K + base + s * D, D) - m);
    for (long d = 0; d < D; d++) {
        float acc = 0.0f;
        for (long s = 0; s < send; s++)
            acc += exp(scale * pk_dot(q, K + base + s * D, D) - m) * V[base + s * D + d];
        O[row * D + d] = acc / l;
    }
    L[row] = m + log(l);
}

/* Candidate: flash attention, one pass over keys with a running max, sum and output (D <= 256). */
PK_KERNEL void pk_attention_flash(long BH, long H, long Hkv, long T, long D, long causal,
                                  float scale, PK_G const float *Q, PK_G const float *K,
                                  PK_G const float *V, PK_G float *O, PK_G float *L)
{
    long row = PK_GID0;
    if (row >= BH * T) return;
    long t = row % T, base = pk_kv_of(row / T, H, Hkv) * T * D;
    long send = causal ? t + 1 : T;
    PK_G const float *q = Q + row * D;
    float acc[256];
    float m = -INFINITY, l = 0.0f;
    for (long d = 0; d < D; d++) acc[d] = 0.0f;
    for (long s = 0; s < send; s++) {
        float z = scale * pk_dot(q, K + base + s * D, D);
        float mn = z > m ? z : m, c = exp(m - mn), p = exp(z - mn);
        l = l * c + p;
        for (long d = 0; d < D; d++) acc[d] = acc[d] * c + p * V[base + s * D + d];
        m = mn;
    }
    for (long d = 0; d < D; d++) O[row * D + d] = acc[d] / l;
    L[row] = m + log(l);
}

/* P[t,s] and dS[t,s] of the backward pass, recomputed from L (no T x T buffer); qb and kb: the
 * query head's and its K/V head's offsets. */
PK_FN float pk_att_p(PK_G const float *q, PK_G const float *k, long D, float scale, float Lt)
{
    return exp(scale * pk_dot(q, k, D) - Lt);
}
PK_FN float pk_att_ds(PK_G const float *Q, PK_G const float *K, PK_G const float *V,
                      PK_G const float *O, PK_G const float *L, PK_G const float *dO, long qb,
                      long kb, long D, float scale, long t, long s)
{
    float p = pk_att_p(Q + qb + t * D, K + kb + s * D, D, scale, L[qb / D + t]);
    float dp = pk_dot(dO + qb + t * D, V + kb + s * D, D);
    float dd = pk_dot(dO + qb + t * D, O + qb + t * D, D);
    return p * (dp - dd);
}

/* dQ[b,h,t,d]: one work-item per element. */
PK_KERNEL void pk_attention_bwd_dq(long BH, long H, long Hkv, long T, long D, long causal,
                                   float scale, PK_G const float *Q, PK_G const float *K,
                                   PK_G const float *V, PK_G const float *O, PK_G const float *L,
                                   PK_G const float *dO, PK_G float *dQ)
{
    long e = PK_GID0;
    if (e >= BH * T * D) return;
    long d = e % D, t = (e / D) % T, bh = e / (D * T), qb = bh * T * D;
    long kb = pk_kv_of(bh, H, Hkv) * T * D;
    long send = causal ? t + 1 : T;
    float s_ = 0.0f;
    for (long s = 0; s < send; s++)
        s_ += pk_att_ds(Q, K, V, O, L, dO, qb, kb, D, scale, t, s) * K[kb + s * D + d];
    dQ[e] = scale * s_;
}

/* dK and dV at [b,hkv,s,d]: one work-item per element, summing over the query heads of its group
 * and the queries t that see s. */
PK_KERNEL void pk_attention_bwd_dkv(long BH, long H, long Hkv, long T, long D, long causal,
                                    float scale, PK_G const float *Q, PK_G const float *K,
                                    PK_G const float *V, PK_G const float *O, PK_G const float *L,
                                    PK_G const float *dO, PK_G float *dK, PK_G float *dV)
{
    long e = PK_GID0, G = H / Hkv;
    if (e >= BH / G * T * D) return;
    long d = e % D, s = (e / D) % T, kvh = e / (D * T), kb = kvh * T * D;
    float sk = 0.0f, sv = 0.0f;
    for (long g = 0; g < G; g++) {
        long qb = (kvh / Hkv * H + kvh % Hkv * G + g) * T * D;
        for (long t = causal ? s : 0; t < T; t++) {
            float p = pk_att_p(Q + qb + t * D, K + kb + s * D, D, scale, L[qb / D + t]);
            sk += pk_att_ds(Q, K, V, O, L, dO, qb, kb, D, scale, t, s) * Q[qb + t * D + d];
            sv += p * dO[qb + t * D + d];
        }
    }
    dK[e] = scale * sk, dV[e] = sv;
}

/* ---- embedding, cross-entropy, reduce ---- */

PK_KERNEL void pk_embedding(long N, long V, long D, PK_G const float *table, PK_G const int *idx,
                            PK_G float *Y)
{
    long e = PK_GID0;
    if (e < N * D) Y[e] = table[(long)idx[e / D] * D + e % D];
}

/* dtable[v,d]: one work-item per element, adding the rows that hit v in order of n. */
PK_KERNEL void pk_embedding_bwd(long N, long V, long D, PK_G const int *idx, PK_G const float *dY,
                                PK_G float *dT)
{
    long e = PK_GID0;
    if (e >= V * D) return;
    long v = e / D, d = e % D;
    float s = 0.0f;
    for (long n = 0; n < N; n++)
        if (idx[n] == v) s += dY[n * D + d];
    dT[e] = s;
}

PK_FN float pk_row_lse(PK_G const float *x, long C)
{
    float m = x[0], s = 0.0f;
    for (long j = 1; j < C; j++) m = x[j] > m ? x[j] : m;
    for (long j = 0; j < C; j++) s += exp(x[j] - m);
    return m + log(s);
}

PK_KERNEL void pk_cross_entropy(long R, long C, PK_G const float *X, PK_G const int *tgt,
                                PK_G float *loss)
{
    long r = PK_GID0;
    if (r < R) loss[r] = pk_row_lse(X + r * C, C) - X[r * C + tgt[r]];
}

PK_KERNEL void pk_cross_entropy_bwd(long R, long C, PK_G const float *X, PK_G const int *tgt,
                                    PK_G const float *dl, PK_G float *dX)
{
    long r = PK_GID0;
    if (r >= R) return;
    float lse = pk_row_lse(X + r * C, C);
    for (long j = 0; j < C; j++)
        dX[r * C + j] = dl[r] * (exp(X[r * C + j] - lse) - (j == tgt[r] ? 1.0f : 0.0f));
}

PK_KERNEL void pk_reduce(long R, long C, long mean, PK_G const float *X, PK_G float *Y)
{
    long r = PK_GID0;
    if (r >= R) return;
    float s = 0.0f;
    for (long j = 0; j < C; j++) s += X[r * C + j];
    Y[r] = mean ? s / (float)C : s;
}

/* ---- optimizers (elementwise; scalars formed in double on the host, rounded once) ---- */

PK_KERNEL void pk_adamw(long n, float lr, float b1, float b2, float eps, float wd, float c1,
                        float c2, float bc1, float bc2, PK_G const float *P, PK_G const float *G,
                        PK_G const float *M, PK_G const float *Vv, PK_G float *Po, PK_G float *Mo,
                        PK_G float *Vo)
{
    long i = PK_GID0;
    if (i >= n) return;
    float p = P[i], g = G[i], m = M[i], v = Vv[i];
    m = b1 * m + c1 * g;
    v = b2 * v + c2 * g * g;
    float mhat = m / bc1, vhat = v / bc2;
    p = p - lr * (mhat / (sqrt(vhat) + eps) + wd * p);
    Po[i] = p, Mo[i] = m, Vo[i] = v;
}

PK_KERNEL void pk_sgd(long n, long nesterov, float lr, float mu, float wd, PK_G const float *P,
                      PK_G const float *G, PK_G const float *M, PK_G float *Po, PK_G float *Mo)
{
    long i = PK_GID0;
    if (i >= n) return;
    float p = P[i], m = mu * M[i] + G[i] + wd * p;
    float d = nesterov ? (G[i] + wd * p) + mu * m : m;
    Po[i] = p - lr * d, Mo[i] = m;
}

/* ---- RMSNorm: R C eps ; X, gamma -> Y, rstd ; backward X, gamma, rstd, dY -> dX, dgamma ---- */

PK_KERNEL void pk_rmsnorm(long R, long C, float eps, PK_G const float *X, PK_G const float *g,
                          PK_G float *Y, PK_G float *Rstd)
{
    long r = PK_GID0;
    if (r >= R) return;
    PK_G const float *x = X + r * C;
    float ss = 0.0f;
    for (long j = 0; j < C; j++) ss += x[j] * x[j];
    float rs = 1.0f / sqrt(ss / (float)C + eps);
    for (long j = 0; j < C; j++) Y[r * C + j] = x[j] * rs * g[j];
    Rstd[r] = rs;
}

/* Candidate: the sum of squares in 8 lanes joined pairwise, rstd folded into gamma. */
PK_KERNEL void pk_rmsnorm_lanes(long R, long C, float eps, PK_G const float *X,
                                PK_G const float *g, PK_G float *Y, PK_G float *Rstd)
{
    long r = PK_GID0;
    if (r >= R) return;
    PK_G const float *x = X + r * C;
    float l[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (long j = 0; j < C; j++) l[j % 8] += x[j] * x[j];
    float ss = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    float rs = 1.0f / sqrt(ss / (float)C + eps);
    for (long j = 0; j < C; j++) Y[r * C + j] = x[j] * (rs * g[j]);
    Rstd[r] = rs;
}

PK_KERNEL void pk_rmsnorm_bwd_dx(long R, long C, PK_G const float *X, PK_G const float *g,
                                 PK_G const float *Rstd, PK_G const float *dY, PK_G float *dX)
{
    long r = PK_GID0;
    if (r >= R) return;
    PK_G const float *x = X + r * C;
    PK_G const float *dy = dY + r * C;
    float rs = Rstd[r], sgx = 0.0f;
    for (long j = 0; j < C; j++) sgx += dy[j] * g[j] * x[j];
    sgx /= (float)C;
    for (long j = 0; j < C; j++) dX[r * C + j] = rs * (dy[j] * g[j] - x[j] * (rs * rs) * sgx);
}

PK_KERNEL void pk_rmsnorm_bwd_dg(long R, long C, PK_G const float *X, PK_G const float *Rstd,
                                 PK_G const float *dY, PK_G float *dg)
{
    long j = PK_GID0;
    if (j >= C) return;
    float s = 0.0f;
    for (long r = 0; r < R; r++) s += dY[r * C + j] * (X[r * C + j] * Rstd[r]);
    dg[j] = s;
}

/* ---- SiLU and SwiGLU (elementwise) ---- */

PK_FN float pk_sigmoid(float x)
{
    return 1.0f / (1.0f + exp(-x));
}

PK_KERNEL void pk_silu(long n, PK_G const float *X, PK_G float *Y)
{
    long i = PK_GID0;
    if (i < n) Y[i] = X[i] / (1.0f + exp(-X[i]));
}

PK_KERNEL void pk_silu_bwd(long n, PK_G const float *X, PK_G const float *dY, PK_G float *dX)
{
    long i = PK_GID0;
    if (i >= n) return;
    float x = X[i], s = pk_sigmoid(x);
    dX[i] = dY[i] * (s * (1.0f + x * (1.0f - s)));
}

PK_KERNEL void pk_swiglu(long n, PK_G const float *G, PK_G const float *U, PK_G float *Y)
{
    long i = PK_GID0;
    if (i < n) Y[i] = G[i] / (1.0f + exp(-G[i])) * U[i];
}

PK_KERNEL void pk_swiglu_bwd(long n, PK_G const float *G, PK_G const float *U,
                             PK_G const float *dY, PK_G float *dG, PK_G float *dU)
{
    long i = PK_GID0;
    if (i >= n) return;
    float g = G[i], s = pk_sigmoid(g);
    dG[i] = dY[i] * U[i] * (s * (1.0f + g * (1.0f - s)));
    dU[i] = dY[i] * (g * s);
}

/* ---- RoPE: B H T D layout (split: the half-split layout) pos0 base sign ; one work-item per
 * rotated pair ---- */

PK_KERNEL void pk_rope(long BHT, long T, long D, long split, long pos0, float base, float sign,
                       PK_G const float *X, PK_G float *Y)
{
    long e = PK_GID0, h = D / 2;
    if (e >= BHT * h) return;
    long j = e % h, row = e / h, t = row % T;
    long i0 = row * D + (split ? j : 2 * j), i1 = row * D + (split ? j + h : 2 * j + 1);
    float inv = 1.0f / pow(base, (float)(2 * j) / (float)D);
    float ang = (float)(pos0 + t) * inv, c = cos(ang), sn = sign * sin(ang);
    float x0 = X[i0], x1 = X[i1];
    Y[i0] = x0 * c - x1 * sn;
    Y[i1] = x0 * sn + x1 * c;
}

/* ---- batch norm: N C S eps momentum ; one work-item per channel ---- */

PK_KERNEL void pk_batchnorm(long N, long C, long S, float eps, float mom, PK_G const float *X,
                            PK_G const float *g, PK_G const float *be, PK_G const float *rm,
                            PK_G const float *rv, PK_G float *Y, PK_G float *Mean,
                            PK_G float *Rstd, PK_G float *RMo, PK_G float *RVo)
{
    long c = PK_GID0;
    if (c >= C) return;
    float M = (float)(N * S), s = 0.0f, v = 0.0f;
    for (long n = 0; n < N; n++)
        for (long k = 0; k < S; k++) s += X[(n * C + c) * S + k];
    float mean = s / M;
    for (long n = 0; n < N; n++)
        for (long k = 0; k < S; k++) {
            float d = X[(n * C + c) * S + k] - mean;
            v += d * d;
        }
    float var = v / M, rs = 1.0f / sqrt(var + eps);
    for (long n = 0; n < N; n++)
        for (long k = 0; k < S; k++) {
            long i = (n * C + c) * S + k;
            Y[i] = (X[i] - mean) * rs * g[c] + be[c];
        }
    Mean[c] = mean, Rstd[c] = rs;
    RMo[c] = (1.0f - mom) * rm[c] + mom * mean;
    RVo[c] = (1.0f - mom) * rv[c] + mom * (var * (M / (M - 1.0f)));
}

/* Candidate: Welford's one-pass mean and variance per channel. */
PK_KERNEL void pk_batchnorm_welford(long N, long C, long S, float eps, float mom,
                                    PK_G const float *X, PK_G const float *g,
                                    PK_G const float *be, PK_G const float *rm,
                                    PK_G const float *rv, PK_G float *Y, PK_G float *Mean,
                                    PK_G float *Rstd, PK_G float *RMo, PK_G float *RVo)
{
    long c = PK_GID0;
    if (c >= C) return;
    float M = (float)(N * S), mean = 0.0f, m2 = 0.0f, cnt = 0.0f;
    for (long n = 0; n < N; n++)
        for (long k = 0; k < S; k++) {
            float x = X[(n * C + c) * S + k], d = x - mean;
            cnt += 1.0f, mean += d / cnt, m2 += d * (x - mean);
        }
    float var = m2 / M, rs = 1.0f / sqrt(var + eps);
    for (long n = 0; n < N; n++)
        for (long k = 0; k < S; k++) {
            long i = (n * C + c) * S + k;
            Y[i] = (X[i] - mean) * (rs * g[c]) + be[c];
        }
    Mean[c] = mean, Rstd[c] = rs;
    RMo[c] = (1.0f - mom) * rm[c] + mom * mean;
    RVo[c] = (1.0f - mom) * rv[c] + mom * (m2 / (M - 1.0f));
}

PK_KERNEL void pk_batchnorm_bwd(long N, long C, long S, PK_G const float *X, PK_G const float *g,
                                PK_G const float *Mean, PK_G const float *Rstd,
                                PK_G const float *dY, PK_G float *dX, PK_G float *dg,
                                PK_G float *db)
{
    long c = PK_GID0;
    if (c >= C) return;
    float M = (float)(N * S), mu = Mean[c], rs = Rstd[c], sdy = 0.0f, sdx = 0.0f;
    for (long n = 0; n < N; n++)
        for (long k = 0; k < S; k++) {
            long i = (n * C + c) * S + k;
            sdy += dY[i], sdx += dY[i] * ((X[i] - mu) * rs);
        }
    for (long n = 0; n < N; n++)
        for (long k = 0; k < S; k++) {
            long i = (n * C + c) * S + k;
            float xh = (X[i] - mu) * rs;
            dX[i] = g[c] * rs * (dY[i] - sdy / M - xh * (sdx / M));
        }
    dg[c] = sdx, db[c] = sdy;
}

/* ---- pooling: N C H W K stride pad (OH, OW from the host) ---- */

/* The input index of window (nc, oh, ow)'s first maximum (row-major), -1 when it holds none. */
PK_FN long pk_pool_argmax(PK_G const float *X, long H, long W, long K, long st, long pad, long nc,
                          long oh, long ow)
{
    long best = -1;
    for (long kh = 0; kh < K; kh++)
        for (long kw = 0; kw < K; kw++) {
            long ih = oh * st - pad + kh, iw = ow * st - pad + kw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            long i = (nc * H + ih) * W + iw;
            if (best < 0 || X[i] > X[best]) best = i;
        }
    return best;
}

PK_KERNEL void pk_maxpool2d(long NC, long H, long W, long K, long st, long pad, long OH, long OW,
                            PK_G const float *X, PK_G float *Y)
{
    long e = PK_GID0;
    if (e >= NC * OH * OW) return;
    long ow = e % OW, oh = e / OW % OH, nc = e / (OW * OH);
    long b = pk_pool_argmax(X, H, W, K, st, pad, nc, oh, ow);
    Y[e] = b >= 0 ? X[b] : -INFINITY;
}

/* dX gathered per input pixel over the windows that cover it, in window order: max pooling
 * (is_max) the dY of the windows whose first maximum it is, average pooling each dY / K^2 */
PK_KERNEL void pk_pool2d_bwd(long is_max, long NC, long H, long W, long K, long st, long pad,
                             long OH, long OW, PK_G const float *X, PK_G const float *dY,
                             PK_G float *dX)
{
    long e = PK_GID0;
    if (e >= NC * H * W) return;
    long iw = e % W, ih = e / W % H, nc = e / (W * H);
    float s = 0.0f;
    for (long oh = 0; oh < OH; oh++)
        for (long ow = 0; ow < OW; ow++) {
            long h0 = oh * st - pad, w0 = ow * st - pad;
            if (ih < h0 || ih >= h0 + K || iw < w0 || iw >= w0 + K) continue;
            float g = dY[(nc * OH + oh) * OW + ow];
            if (!is_max)
                s += g / (float)(K * K);
            else if (pk_pool_argmax(X, H, W, K, st, pad, nc, oh, ow) == e)
                s += g;
        }
    dX[e] = s;
}

/* average pooling, the padding counted in the divisor K^2 */
PK_KERNEL void pk_avgpool2d(long NC, long H, long W, long K, long st, long pad, long OH, long OW,
                            PK_G const float *X, PK_G float *Y)
{
    long e = PK_GID0;
    if (e >= NC * OH * OW) return;
    long ow = e % OW, oh = e / OW % OH, nc = e / (OW * OH);
    float s = 0.0f;
    for (long kh = 0; kh < K; kh++)
        for (long kw = 0; kw < K; kw++) {
            long ih = oh * st - pad + kh, iw = ow * st - pad + kw;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) s += X[(nc * H + ih) * W + iw];
        }
    Y[e] = s / (float)(K * K);
}
