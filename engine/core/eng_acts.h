/* eng_acts.h - remat's central rule, once: which activations a section keeps under each
 * mode, and the one path that lays them out for a policy.
 *
 * Legend: B batch, T time, C channels, NH heads, V vocab, N = B*T rows, R rows of one
 * logits chunk, NKV key/value heads, hs head size, I the Llama MLP's width.
 *
 * A block's activations and the head's are each one table below (ENG_BLOCK_FIELDS,
 * ENG_HEAD_FIELDS): a field's size as a function of the shapes, whether it is always
 * float32 (statistics) or of the activation type, the modes whose sections keep it from
 * forward to backward (`keep`, ENG_MEM_ACTIVATIONS) and the modes that rebuild it into the
 * shared recompute pool instead (`pool`, ENG_MEM_RECOMPUTE). The CPU model (eng_model.c),
 * the CUDA model (eng_cuda.c), the planner (eng_plan.c) and the memory accounting all read
 * these tables; nothing else says which mode keeps what.
 *
 * eng_layout_set is the one policy change: free what the new layout does not reuse, then
 * allocate what it needs besides, so that a change never holds two layouts at once and the
 * switching step's peak is at most the larger of the two policies' (between steps no
 * activation is alive). On a failed allocation it frees what it allocated and lays the
 * previous policy out again in the memory just given back. The backends give it their
 * allocator (eng_layout_mem): the CPU's eng_mem, the GPU's device and pinned host memory.
 */
#ifndef ENG_ACTS_H
#define ENG_ACTS_H

#include <stddef.h>

#include "eng_config.h"
#include "eng_err.h"
#include "eng_mem.h"
#include "eng_policy.h"

#define ENG_KEEP(mode) (1u << (mode))
#define ENG_K_OFF ENG_KEEP(ENG_MODE_OFF)
#define ENG_K_SEL ENG_KEEP(ENG_MODE_SELECTIVE)
#define ENG_K_FULL ENG_KEEP(ENG_MODE_FULL)
#define ENG_K_OFFLOAD ENG_KEEP(ENG_MODE_OFFLOAD)
#define ENG_K_CHUNKED ENG_KEEP(ENG_MODE_CHUNKED)
#define ENG_K_BLOCK (ENG_K_OFF | ENG_K_SEL | ENG_K_FULL | ENG_K_OFFLOAD)
#define ENG_K_HEAD (ENG_K_OFF | ENG_K_CHUNKED)

/* How wide a field is, per row of the N = B*T rows (its elements: N times that), in terms
 * of the model's shape, one table for both families (eng_config.h): */
enum {
	ENG_W_C,     /* C */
	ENG_W_ROW,   /* 1: a statistic of the row */
	ENG_W_MEAN,  /* 1 under LayerNorm (its mean), 0 under RMSNorm (none) */
	ENG_W_LSE,   /* NH: the attention's log-sum-exp per head */
	ENG_W_QKV,   /* q|k|v: 3C, or (NH + 2 NKV) hs under grouped-query attention */
	ENG_W_FFI,   /* the MLP's first product: 4C before GELU, or gate|up 2I */
	ENG_W_FF,    /* the MLP's hidden activation: GELU's 4C, or SwiGLU's I */
	ENG_W_LORA,  /* r per adapter of the block (LoRA's x A^T), 0 without adapters */
	ENG_W_V,     /* V: a row of logits */
	ENG_W_CHUNK, /* R*V in all (not per row): one chunk of logits */
};

/* X(name, width, f32, mm, keep, pool). mm: read only by matmuls (and their backward), so
 * stored in bf16 under the CPU's precision bf16 (where everything else stays float32);
 * f32: float32 whatever a GPU's activation type. The Llama family's block has the same
 * fields: ln1 and ln2 are its RMSNorm outputs (no mean), qkv holds q and k after the
 * rotary embedding, fch is gate|up and gelu SwiGLU's product silu(gate) * up.
 * `offload` keeps x on the device and what `off` keeps besides in pinned host memory
 * (eng_act_offloaded); it rebuilds nothing, so it needs no pool. */
#define ENG_BLOCK_FIELDS(X)                                                                 \
	X(x, ENG_W_C, 0, 0, ENG_K_BLOCK, 0)                     /* (B,T,C) block input */   \
	X(ln1, ENG_W_C, 0, 1, ENG_K_OFF, ENG_K_SEL | ENG_K_FULL) /* (B,T,C) */              \
	X(ln1_mean, ENG_W_MEAN, 1, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL) /* (B,T) */        \
	X(ln1_rstd, ENG_W_ROW, 1, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL) /* (B,T) */         \
	X(qkv, ENG_W_QKV, 0, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL)   /* (B,T,3C) */         \
	X(att_lse, ENG_W_LSE, 1, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL) /* (B,NH,T) row lse */ \
	X(atty, ENG_W_C, 0, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL) /* (B,T,C) before c_proj */ \
	X(res2, ENG_W_C, 0, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL) /* (B,T,C) after attention */ \
	X(ln2, ENG_W_C, 0, 1, ENG_K_OFF, ENG_K_SEL | ENG_K_FULL) /* (B,T,C) */              \
	X(ln2_mean, ENG_W_MEAN, 1, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL) /* (B,T) */        \
	X(ln2_rstd, ENG_W_ROW, 1, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL) /* (B,T) */         \
	X(fch, ENG_W_FFI, 0, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL) /* (B,T,4C) before GELU */ \
	X(gelu, ENG_W_FF, 0, 1, ENG_K_OFF, ENG_K_SEL | ENG_K_FULL) /* (B,T,4C) */             \
	X(lora, ENG_W_LORA, 0, 0, ENG_K_OFF | ENG_K_SEL, ENG_K_FULL) /* (n, B,T,r) x A^T */

/* X(name, width, f32, mm, keep, pool). The head works in chunks of R rows under both
 * modes: `off` keeps every chunk's logits, `chunked` only the log-sum-exp, and rebuilds
 * one chunk at a time into `chunk`. lnf is ln_f's output (the final RMSNorm's under llama). */
#define ENG_HEAD_FIELDS(X)                                                                  \
	X(xf, ENG_W_C, 0, 0, ENG_K_HEAD, 0)          /* (B,T,C) last block's output */       \
	X(lnf, ENG_W_C, 0, 1, ENG_K_HEAD, 0)         /* (B,T,C) ln_f output */               \
	X(lnf_mean, ENG_W_MEAN, 1, 0, ENG_K_HEAD, 0) /* (B,T) */                             \
	X(lnf_rstd, ENG_W_ROW, 1, 0, ENG_K_HEAD, 0)  /* (B,T) */                             \
	X(lse, ENG_W_ROW, 1, 0, ENG_K_HEAD, 0)       /* (B,T) log-sum-exp of the logits rows */ \
	X(logits, ENG_W_V, 0, 0, ENG_K_OFF, 0)       /* (N,V) in chunks of (R,V), each aligned */ \
	X(chunk, ENG_W_CHUNK, 0, 0, 0, ENG_K_CHUNKED) /* (R,V) one chunk, rebuilt in backward */

#define ENG_ACT_ENUM(name, ...) ENG_ACT_##name,
#define ENG_HEAD_ENUM(name, ...) ENG_HEAD_##name,
#define ENG_ACT_MEMBER(name, ...) void *name;
enum { ENG_BLOCK_FIELDS(ENG_ACT_ENUM) ENG_ACT_N };
enum { ENG_HEAD_FIELDS(ENG_HEAD_ENUM) ENG_HEAD_N };

/* A block's activation pointers, by name or by table index. In a layout's `saved`, NULL
 * where the mode drops the field; in a view for one pass, dropped ones point into the pool
 * (or an offload slot). void *: float on the CPU, the activation type or float32 on a GPU
 * (eng_act_field.f32). */
typedef union eng_acts {
	struct {
		ENG_BLOCK_FIELDS(ENG_ACT_MEMBER)
	};
	void *f[ENG_ACT_N];
} eng_acts;

typedef union eng_head_acts {
	struct {
		ENG_HEAD_FIELDS(ENG_ACT_MEMBER)
	};
	void *f[ENG_HEAD_N];
} eng_head_acts;

typedef struct eng_act_field {
	const char *name;
	unsigned width;              /* ENG_W_*: elements per row (above) */
	unsigned f32;                /* 1: float32 whatever the activation type */
	unsigned mm;                 /* 1: a matmul's input only (bf16 under cpu precision bf16) */
	unsigned keep;               /* modes that keep it saved (ENG_KEEP bits) */
	unsigned pool;               /* modes that rebuild it into the recompute pool */
} eng_act_field;

extern const eng_act_field eng_block_fields[ENG_ACT_N];
extern const eng_act_field eng_head_fields[ENG_HEAD_N];

/* Elements of field f for batches of B x T (R rows per logits chunk); 0 for a field the
 * family has not (ln1_mean under RMSNorm): never allocated. */
size_t eng_act_elems(const eng_act_field *f, const eng_config *cfg, int B, int T, int R);

/* Bytes of field f: float32, but 2 a matmul input (mm) takes under the CPU's precision bf16
 * (cfg->mm_bf16), and 2 every field but the float32 ones under a GPU's bf16
 * (cfg->act_bf16). What the CPU model lays out, the GPU model's layout_mem too, and the
 * planner counts. */
size_t eng_act_bytes(const eng_act_field *f, const eng_config *cfg, int B, int T, int R);

/* 1 when an offloaded block's host copy holds block field k: what `off` keeps, but x. */
int eng_act_offloaded(int k);

#define ENG_LAYOUT_SLOTS 2 /* device slots of offloaded blocks: one in use, one loading */

/* Where a backend's buffers come from, and how big each is (bytes, alignment included). */
typedef struct eng_layout_mem {
	size_t block_bytes[ENG_ACT_N];
	size_t head_bytes[ENG_HEAD_N];
	size_t offload_bytes;                       /* one host copy, one slot; 0: no offload */
	const char *where;                          /* in errors: "memory", "device memory" */
	void *(*alloc)(eng_mem_cat cat, size_t bytes);
	void (*free)(void *p);
	size_t (*size)(const void *p);
	void *(*host_alloc)(size_t bytes);          /* pinned; NULL without offload */
	void (*host_free)(void *p);
	size_t (*host_size)(const void *p);
} eng_layout_mem;

typedef struct eng_layout {
	eng_policy policy;               /* what it is laid out for (n_layer 0: nothing yet) */
	eng_acts saved[ENG_MAX_LAYERS];  /* per block: what its mode keeps */
	eng_acts pool;                   /* what any block's mode rebuilds, shared */
	eng_head_acts head;              /* what the head's mode keeps, and its chunk */
	void *host[ENG_MAX_LAYERS];      /* offload: a block's pinned host copy */
	void *slot[ENG_LAYOUT_SLOTS];    /* offload: device slots, while any block offloads */
} eng_layout;

/* Lays out the buffers of policy p (p->n_layer blocks). 0, or -1 when an allocation failed:
 * err names what could not be allocated, and the previous policy is laid out again (its
 * buffers may have moved). Should even that fail, nothing is laid out (policy.n_layer 0:
 * a step refuses to run) and err says so. */
int eng_layout_set(eng_layout *lay, const eng_layout_mem *mem, const eng_policy *p,
	eng_err *err);

/* Frees every buffer; the layout is empty again (safe on an empty one). */
void eng_layout_free(eng_layout *lay, const eng_layout_mem *mem);

/* Block l's activations for one pass: its saved buffers, the pool for the rest. */
eng_acts eng_layout_view(const eng_layout *lay, int l);

/* Bytes the layout holds for block i (i < n_layer) or for the head (i == n_layer), as the
 * allocator measures them; `host` adds an offloaded block's host copy. */
size_t eng_layout_saved_bytes(const eng_layout *lay, const eng_layout_mem *mem, int i);
size_t eng_layout_host_bytes(const eng_layout *lay, const eng_layout_mem *mem, int i);

#endif
