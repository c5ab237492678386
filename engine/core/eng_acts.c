/* eng_acts.c - the activation tables and the one policy change (see eng_acts.h). */
#include "eng_acts.h"

#include <stdio.h>
#include <string.h>

#define ENTRY(nm, w_, f32_, mm_, keep_, pool_)                                              \
	{.name = #nm, .width = w_, .f32 = f32_, .mm = mm_, .keep = keep_, .pool = pool_},

const eng_act_field eng_block_fields[ENG_ACT_N] = {ENG_BLOCK_FIELDS(ENTRY)};
const eng_act_field eng_head_fields[ENG_HEAD_N] = {ENG_HEAD_FIELDS(ENTRY)};

size_t eng_act_elems(const eng_act_field *f, const eng_config *cfg, int B, int T, int R)
{
	size_t N = (size_t)B * T, C = cfg->n_embd, V = cfg->vocab_size;
	switch (f->width) {
	case ENG_W_C: return N * C;
	case ENG_W_ROW: return N;
	case ENG_W_MEAN: return cfg->arch == ENG_ARCH_LLAMA ? 0 : N;
	case ENG_W_LSE: return N * (size_t)cfg->n_head;
	case ENG_W_QKV: return N * (size_t)eng_config_qkv(cfg);
	case ENG_W_FFI: return N * (size_t)eng_config_ffn_in(cfg);
	case ENG_W_FF: return N * (size_t)eng_config_ffn(cfg);
	case ENG_W_LORA: return N * (size_t)cfg->lora_r * eng_lora_count(cfg);
	case ENG_W_V: return N * V;
	default: return (size_t)R * V; /* ENG_W_CHUNK */
	}
}

size_t eng_act_bytes(const eng_act_field *f, const eng_config *cfg, int B, int T, int R)
{
	int two = (cfg->mm_bf16 && f->mm) || (cfg->act_bf16 && !f->f32);
	return (two ? 2 : 4) * eng_act_elems(f, cfg, B, T, R);
}

int eng_act_offloaded(int k)
{
	return k != ENG_ACT_x && (eng_block_fields[k].keep & ENG_K_OFF);
}

/* ---- the policy change ---- */

/* The buffers of one layout, by kind, as flat arrays of pointers: what the change walks. */
enum { KIND_SAVED, KIND_POOL, KIND_HEAD, KIND_HOST, KIND_SLOT };

/* How a walk of the layout goes (build), and what the allocation that failed was for. */
typedef struct want {
	int reuse_only;              /* 1: take only what the old layout has, allocate nothing */
	const char *section, *field; /* "h.3", "qkv" */
	int layer;                   /* -1: none */
	size_t bytes;
} want;

/* Sets *dst to the old buffer when the new layout keeps it, else to a new one (none with
 * w->reuse_only); on failure notes in *w what it was. */
static int take(void **dst, void *old, int wanted, const eng_layout_mem *mem, int kind,
	eng_mem_cat cat, size_t bytes, want *w)
{
	*dst = NULL;
	if (!wanted || !bytes) /* bytes 0: a field this family has not */
		return 0;
	if (old || w->reuse_only) {
		*dst = old;
		return 0;
	}
	*dst = kind == KIND_HOST ? mem->host_alloc(bytes) : mem->alloc(cat, bytes);
	w->bytes = bytes;
	return *dst ? 0 : -1;
}

static void release(const eng_layout_mem *mem, int kind, void *p)
{
	if (!p)
		return;
	if (kind == KIND_HOST)
		mem->host_free(p);
	else
		mem->free(p);
}

/* Frees, of each pointer in `from`, what `keep` does not hold at the same place. */
static void release_unshared(const eng_layout *from, const eng_layout *keep,
	const eng_layout_mem *mem)
{
	for (int l = 0; l < ENG_MAX_LAYERS; l++) {
		for (int k = 0; k < ENG_ACT_N; k++)
			if (from->saved[l].f[k] != keep->saved[l].f[k])
				release(mem, KIND_SAVED, from->saved[l].f[k]);
		if (from->host[l] != keep->host[l])
			release(mem, KIND_HOST, from->host[l]);
	}
	for (int k = 0; k < ENG_ACT_N; k++)
		if (from->pool.f[k] != keep->pool.f[k])
			release(mem, KIND_POOL, from->pool.f[k]);
	for (int k = 0; k < ENG_HEAD_N; k++)
		if (from->head.f[k] != keep->head.f[k])
			release(mem, KIND_HEAD, from->head.f[k]);
	for (int s = 0; s < ENG_LAYOUT_SLOTS; s++)
		if (from->slot[s] != keep->slot[s])
			release(mem, KIND_SLOT, from->slot[s]);
}

/* Fills n with p's buffers, reusing lay's: -1 as soon as one allocation fails. */
static int build(eng_layout *n, const eng_layout *lay, const eng_layout_mem *mem,
	const eng_policy *p, want *w)
{
	unsigned any = 0; /* modes present among the blocks */
	for (int l = 0; l < p->n_layer; l++) {
		unsigned mode = ENG_KEEP(p->block[l]);
		any |= mode;
		w->section = "block";
		w->layer = l;
		for (int k = 0; k < ENG_ACT_N; k++) {
			w->field = eng_block_fields[k].name;
			if (take(&n->saved[l].f[k], lay->saved[l].f[k], eng_block_fields[k].keep & mode,
				    mem, KIND_SAVED, ENG_MEM_ACTIVATIONS, mem->block_bytes[k], w) < 0)
				return -1;
		}
		w->field = "offloaded activations (pinned host memory)";
		if (mode == ENG_K_OFFLOAD && (!mem->host_alloc || !mem->offload_bytes) &&
			!w->reuse_only)
			return -1;
		if (take(&n->host[l], lay->host[l], mode == ENG_K_OFFLOAD, mem, KIND_HOST, 0,
			    mem->offload_bytes, w) < 0)
			return -1;
	}
	w->section = "the recompute pool";
	w->layer = -1;
	for (int k = 0; k < ENG_ACT_N; k++) {
		w->field = eng_block_fields[k].name;
		if (take(&n->pool.f[k], lay->pool.f[k], eng_block_fields[k].pool & any, mem,
			    KIND_POOL, ENG_MEM_RECOMPUTE, mem->block_bytes[k], w) < 0)
			return -1;
	}
	w->field = "offload slot";
	for (int s = 0; s < ENG_LAYOUT_SLOTS; s++)
		if (take(&n->slot[s], lay->slot[s], (any & ENG_K_OFFLOAD) != 0, mem, KIND_SLOT,
			    ENG_MEM_RECOMPUTE, mem->offload_bytes, w) < 0)
			return -1;
	unsigned head = ENG_KEEP(p->head);
	w->section = "head";
	for (int k = 0; k < ENG_HEAD_N; k++) {
		const eng_act_field *f = &eng_head_fields[k];
		w->field = f->name;
		if (take(&n->head.f[k], lay->head.f[k], (f->keep | f->pool) & head, mem, KIND_HEAD,
			    f->keep & head ? ENG_MEM_ACTIVATIONS : ENG_MEM_RECOMPUTE,
			    mem->head_bytes[k], w) < 0)
			return -1;
	}
	return 0;
}

/* "h.3" or "head" for the message about w. */
static void want_section(const want *w, char *sec, size_t len)
{
	if (w->layer >= 0)
		snprintf(sec, len, "h.%d", w->layer);
	else
		snprintf(sec, len, "%s", w->section);
}

int eng_layout_set(eng_layout *lay, const eng_layout_mem *mem, const eng_policy *p,
	eng_err *err)
{
	eng_layout kept, n, back;
	want only = {.reuse_only = 1}, w = {0}, wb = {0};
	char sec[32];
	/* What the new layout reuses of the old stays; the rest of the old goes first, so that
	 * a change never holds both layouts at once (it never raises the peak). Between steps
	 * no activation is alive: the buffers' contents need not survive. */
	memset(&kept, 0, sizeof kept);
	build(&kept, lay, mem, p, &only);
	release_unshared(lay, &kept, mem);
	memset(&n, 0, sizeof n);
	if (build(&n, &kept, mem, p, &w) == 0) {
		n.policy = *p;
		*lay = n;
		return 0;
	}
	release_unshared(&n, &kept, mem); /* only what this call allocated */
	want_section(&w, sec, sizeof sec);
	/* The previous layout again, in the memory just given back. */
	eng_policy prev = lay->policy;
	memset(&back, 0, sizeof back);
	if (prev.n_layer == 0 || build(&back, &kept, mem, &prev, &wb) == 0) {
		back.policy = prev;
		*lay = back;
		return eng_err_nomem(err, "cannot allocate %.1f MiB of %s for %s %s: out of memory; the "
				     "previous policy stays", w.bytes / 1048576.0, mem->where, sec,
			w.field);
	}
	release_unshared(&back, &kept, mem);
	eng_layout_free(&kept, mem);
	memset(lay, 0, sizeof *lay); /* nothing laid out: a step refuses to run */
	return eng_err_nomem(err, "cannot allocate %.1f MiB of %s for %s %s: out of memory, and the "
			     "previous policy no longer fits either: no activations are laid out",
		w.bytes / 1048576.0, mem->where, sec, w.field);
}

void eng_layout_free(eng_layout *lay, const eng_layout_mem *mem)
{
	eng_layout none;
	memset(&none, 0, sizeof none);
	release_unshared(lay, &none, mem);
	*lay = none;
}

eng_acts eng_layout_view(const eng_layout *lay, int l)
{
	eng_acts a = lay->saved[l];
	for (int k = 0; k < ENG_ACT_N; k++)
		if (!a.f[k])
			a.f[k] = lay->pool.f[k];
	return a;
}

size_t eng_layout_saved_bytes(const eng_layout *lay, const eng_layout_mem *mem, int i)
{
	size_t total = 0;
	if (i < lay->policy.n_layer) {
		for (int k = 0; k < ENG_ACT_N; k++)
			total += mem->size(lay->saved[i].f[k]);
		return total;
	}
	for (int k = 0; k < ENG_HEAD_N; k++)
		if (eng_head_fields[k].keep)
			total += mem->size(lay->head.f[k]);
	return total;
}

size_t eng_layout_host_bytes(const eng_layout *lay, const eng_layout_mem *mem, int i)
{
	return i < lay->policy.n_layer && mem->host_size ? mem->host_size(lay->host[i]) : 0;
}
