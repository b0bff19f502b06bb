/* kernels.h: candidate kernels under validation (CPU; GPU ones live in core/gpu). */
#ifndef PEAT_KERNELS_H
#define PEAT_KERNELS_H

#include "peat/peat.h"

/* Registers every built-in candidate kernel. */
peat_status peat_kernels_register(void);

/* Per-file registration of the candidates (register.c calls them from peat_kernels_register). */
peat_status peat_kernels_register_conv(void);      /* conv_im2col, _bwd_data, _bwd_filter */
peat_status peat_kernels_register_softmax(void);   /* softmax_online, softmax_online_bwd */
peat_status peat_kernels_register_layernorm(void); /* layernorm_welford(_bwd), _bf16, _fp16 */
peat_status peat_kernels_register_gelu(void);      /* gelu_tanh, gelu_tanh_bwd */
peat_status peat_kernels_register_attention(void); /* attention_flash(_bwd), attention_bf16 */
peat_status peat_kernels_register_optim(void);     /* adamw_fused */
peat_status peat_kernels_register_lowp(void);      /* gemm_fp16 */
peat_status peat_kernels_register_rmsnorm(void);   /* rmsnorm_lanes, rmsnorm_lanes_bwd */
peat_status peat_kernels_register_silu(void);      /* silu_split(_bwd), swiglu_fused(_bwd) */
peat_status peat_kernels_register_rope(void);      /* rope_table, rope_table_bwd */
peat_status peat_kernels_register_batchnorm(void); /* batchnorm_welford, _onepass_bwd */
peat_status peat_kernels_register_pool(void);      /* maxpool2d_cols, avgpool2d_recip (+ bwd) */

#endif
