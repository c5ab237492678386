/* eng_tensors.c - the tensor table of a shape, and train.freeze over it (see eng_tensors.h). */
#include "eng_tensors.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_quant.h"
#include "eng_util.h"

#define ALIGN_FLOATS 16 /* 64 bytes: every tensor starts on a cache line */

/* Where the next tensor goes: in the parameters' block, in the gradients' (trainable
 * tensors only); which frozen bits to read */
typedef struct table_at {
	size_t off, goff, qoff; /* qoff: bytes into the 4-bit block */
	const eng_config *cfg;
	int section, unit;      /* of the tensors added next (eng_ptensor) */
} table_at;

/* Appends a tensor; the next one starts 64-byte aligned, or right after it with `join`
 * (q|k|v_proj, gate|up_proj: one weight of one product, frozen or trained together) */
static void add_tensor(eng_ptensor *tab, int *n, table_at *at, const char *name, eng_slot slot,
	int ndim, int64_t d0, int64_t d1, int decay, int join)
{
	eng_ptensor *t = &tab[*n];
	t->slot = slot;
	t->section = at->section;
	t->unit = at->unit;
	snprintf(t->name, sizeof t->name, "%s", name);
	t->ndim = ndim;
	t->shape[0] = d0;
	t->shape[1] = ndim == 2 ? d1 : 0;
	t->numel = (size_t)d0 * (ndim == 2 ? (size_t)d1 : 1);
	t->decay = decay;
	t->joined = join;
	t->frozen = eng_config_is_frozen(at->cfg, *n);
	t->goff = t->frozen ? SIZE_MAX : at->goff;
	t->quant = eng_quant_targets(at->cfg, slot == ENG_SLOT_LORA_A || slot == ENG_SLOT_LORA_B,
		ndim, at->section);
	t->offset = t->quant ? SIZE_MAX : at->off;
	t->qoff = 0;
	if (t->quant) { /* frozen (eng_spec_finish): its floats are its 4 bits' */
		eng_q4_layout q;
		eng_q4_layout_of(at->cfg, t->numel, &q);
		t->qoff = at->qoff;
		at->qoff += q.bytes;
	} else {
		at->off = join ? at->off + t->numel
			       : eng_round_up(at->off + t->numel, ALIGN_FLOATS);
	}
	if (!t->frozen)
		at->goff = join ? at->goff + t->numel
				: eng_round_up(at->goff + t->numel, ALIGN_FLOATS);
	(*n)++;
}

/* The base model's tensors: every one but the adapters */
static int base_tensors(const eng_config *c)
{
	if (c->arch == ENG_ARCH_LLAMA)
		return 2 + 9 * c->n_layer + !eng_config_tied(c);
	return 4 + 12 * c->n_layer;
}

int eng_model_ntensors(const eng_config *c)
{
	return base_tensors(c) + 2 * eng_lora_count(c) * c->n_layer;
}

/* A block's tensors, in Hugging Face's order: the name's suffix, the weight it is, the
 * rank, the two dimensions (LT_* below), weight decay, joined to the next. */
enum { LT_0, LT_C, LT_3C, LT_4C, LT_Q, LT_KV, LT_I };
typedef struct layer_tensor {
	const char *suffix;
	eng_slot slot;
	int ndim, d0, d1, decay, join;
} layer_tensor;

static const layer_tensor gpt2_layer[] = {
	{"ln_1.weight", ENG_SLOT_LN1W, 1, LT_C, LT_0, 0, 0},
	{"ln_1.bias", ENG_SLOT_LN1B, 1, LT_C, LT_0, 0, 0},
	{"attn.c_attn.weight", ENG_SLOT_QKVW, 2, LT_C, LT_3C, 1, 0},
	{"attn.c_attn.bias", ENG_SLOT_QKVB, 1, LT_3C, LT_0, 0, 0},
	{"attn.c_proj.weight", ENG_SLOT_PROJW, 2, LT_C, LT_C, 1, 0},
	{"attn.c_proj.bias", ENG_SLOT_PROJB, 1, LT_C, LT_0, 0, 0},
	{"ln_2.weight", ENG_SLOT_LN2W, 1, LT_C, LT_0, 0, 0},
	{"ln_2.bias", ENG_SLOT_LN2B, 1, LT_C, LT_0, 0, 0},
	{"mlp.c_fc.weight", ENG_SLOT_FCW, 2, LT_C, LT_4C, 1, 0},
	{"mlp.c_fc.bias", ENG_SLOT_FCB, 1, LT_4C, LT_0, 0, 0},
	{"mlp.c_proj.weight", ENG_SLOT_FCPROJW, 2, LT_4C, LT_C, 1, 0},
	{"mlp.c_proj.bias", ENG_SLOT_FCPROJB, 1, LT_C, LT_0, 0, 0},
};
static const layer_tensor llama_layer[] = {
	{"input_layernorm.weight", ENG_SLOT_LN1W, 1, LT_C, LT_0, 0, 0},
	{"self_attn.q_proj.weight", ENG_SLOT_QKVW, 2, LT_Q, LT_C, 1, 1},
	{"self_attn.k_proj.weight", ENG_SLOT_JOINED, 2, LT_KV, LT_C, 1, 1},
	{"self_attn.v_proj.weight", ENG_SLOT_JOINED, 2, LT_KV, LT_C, 1, 0},
	{"self_attn.o_proj.weight", ENG_SLOT_PROJW, 2, LT_C, LT_Q, 1, 0},
	{"post_attention_layernorm.weight", ENG_SLOT_LN2W, 1, LT_C, LT_0, 0, 0},
	{"mlp.gate_proj.weight", ENG_SLOT_FCW, 2, LT_I, LT_C, 1, 1},
	{"mlp.up_proj.weight", ENG_SLOT_JOINED, 2, LT_I, LT_C, 1, 0},
	{"mlp.down_proj.weight", ENG_SLOT_FCPROJW, 2, LT_C, LT_I, 1, 0},
};

static int64_t lt_dim(const eng_config *c, int d)
{
	int64_t C = c->n_embd, hs = C / c->n_head;
	switch (d) {
	case LT_C: return C;
	case LT_3C: return 3 * C;
	case LT_4C: return 4 * C;
	case LT_Q: return c->n_head * hs;
	case LT_KV: return eng_config_kv_heads(c) * hs;
	case LT_I: return c->intermediate_size;
	default: return 0;
	}
}

size_t eng_model_table(const eng_config *c, eng_ptensor *tab, size_t *ngrad)
{
	int llama = c->arch == ENG_ARCH_LLAMA;
	const char *pre = llama ? "model" : "transformer", *blocks = llama ? "layers" : "h";
	const layer_tensor *lt = llama ? llama_layer : gpt2_layer;
	size_t nlt = llama ? sizeof llama_layer / sizeof llama_layer[0]
			   : sizeof gpt2_layer / sizeof gpt2_layer[0];
	int64_t C = c->n_embd, V = c->vocab_size;
	table_at at = {0, 0, 0, c, -1, 0}, *off = &at;
	int n = 0;
	char name[ENG_NAME_MAX];
	add_tensor(tab, &n, off, llama ? "model.embed_tokens.weight" : "transformer.wte.weight",
		ENG_SLOT_WTE, 2, V, C, 1, 0);
	if (!llama)
		add_tensor(tab, &n, off, "transformer.wpe.weight", ENG_SLOT_WPE, 2, c->n_positions,
			C, 1, 0);
	for (int l = 0; l < c->n_layer; l++)
		for (size_t k = 0; k < nlt; k++) {
			at.section = l;
			snprintf(name, sizeof name, "%s.%s.%d.%s", pre, blocks, l, lt[k].suffix);
			add_tensor(tab, &n, off, name, lt[k].slot, lt[k].ndim, lt_dim(c, lt[k].d0),
				lt_dim(c, lt[k].d1), lt[k].decay, lt[k].join);
		}
	at.section = c->n_layer; /* the head */
	if (llama) {
		add_tensor(tab, &n, off, "model.norm.weight", ENG_SLOT_LNFW, 1, C, 0, 0, 0);
		if (!eng_config_tied(c))
			add_tensor(tab, &n, off, "lm_head.weight", ENG_SLOT_LMW, 2, V, C, 1, 0);
	} else {
		add_tensor(tab, &n, off, "transformer.ln_f.weight", ENG_SLOT_LNFW, 1, C, 0, 0, 0);
		add_tensor(tab, &n, off, "transformer.ln_f.bias", ENG_SLOT_LNFB, 1, C, 0, 0, 0);
	}
	/* the adapters last, block by block: A (r, in) and B (out, r) of each targeted unit,
	 * named after their weight's module as PEFT names them (less its "base_model.model.") */
	eng_lora_unit u[ENG_LORA_UNITS];
	int nu = eng_lora_units(c, u);
	for (int l = 0; c->lora_r && l < c->n_layer; l++)
		for (int k = 0; k < nu; k++) {
			if (!(c->lora_units >> k & 1))
				continue;
			at.section = l;
			at.unit = k;
			snprintf(name, sizeof name, "%s.%s.%d.%s.lora_A.weight", pre, blocks, l,
				u[k].module);
			add_tensor(tab, &n, off, name, ENG_SLOT_LORA_A, 2, c->lora_r, u[k].in, 1, 0);
			snprintf(name, sizeof name, "%s.%s.%d.%s.lora_B.weight", pre, blocks, l,
				u[k].module);
			add_tensor(tab, &n, off, name, ENG_SLOT_LORA_B, 2, u[k].cols, c->lora_r, 1, 0);
		}
	ENG_ASSERT(n == eng_model_ntensors(c));
	if (ngrad)
		*ngrad = at.goff;
	return at.off;
}

size_t eng_model_floats(const eng_config *c, size_t *ngrad)
{
	eng_ptensor *tab = calloc((size_t)eng_model_ntensors(c), sizeof *tab);
	size_t n = 0;
	*ngrad = 0;
	if (tab)
		n = eng_model_table(c, tab, ngrad);
	free(tab);
	return n;
}

size_t eng_model_q4_bytes(const eng_config *c, size_t *weights)
{
	eng_ptensor *tab = c->quant ? calloc((size_t)eng_model_ntensors(c), sizeof *tab) : NULL;
	size_t n = 0, w = 0;
	if (tab) {
		eng_model_table(c, tab, NULL);
		for (int i = 0; i < eng_model_ntensors(c); i++) {
			eng_q4_layout q;
			eng_q4_layout_of(c, tab[i].numel, &q);
			n += tab[i].quant ? q.bytes : 0;
			w += tab[i].quant ? tab[i].numel : 0;
		}
	}
	free(tab);
	if (weights)
		*weights = w;
	return n;
}

/* The tensors item names, marked in hit[nt] (the table tab): 0, or -1 when it names none
 * or is not a selector */
static int freeze_item(const eng_config *c, const eng_aliases *al, const eng_ptensor *tab,
	int nt, const char *item, unsigned char *hit, eng_err *err)
{
	int any = 0, lo, hi, head;
	eng_err e;
	if (strpbrk(item, "*?[")) {
		for (int i = 0; i < nt; i++)
			any |= hit[i] = fnmatch(item, tab[i].name, 0) == 0;
	} else if (strcmp(item, "embed") == 0 || strcmp(item, "all") == 0) {
		/* "all" here is every tensor: the embedding too, which no policy names */
		for (int i = 0; i < nt; i++)
			any |= hit[i] = item[0] == 'a' || tab[i].section < 0;
	} else {
		for (int i = 0; i < nt; i++)
			any |= hit[i] = strcmp(item, tab[i].name) == 0;
		if (!any && eng_selector_sections(al, item, c->n_layer, &lo, &hi, &head, &e) < 0)
			return eng_errf(err, "'%s' is neither \"embed\", a section (%s) nor a tensor "
					     "of the model", item, e.msg);
		for (int i = 0; !any && i < nt; i++) {
			int s = tab[i].section;
			hit[i] = (s >= lo && s <= hi) || (head && s == c->n_layer);
		}
		for (int i = 0; i < nt; i++)
			any |= hit[i];
	}
	return any ? 0 : eng_errf(err, "'%s' names no tensor of the model", item);
}

int eng_freeze_resolve(eng_config *c, const eng_aliases *al, const char (*items)[ENG_SELECTOR_LEN],
	int n, eng_err *err)
{
	int nt = eng_model_ntensors(c), rc = -1, trained = 0;
	memset(c->frozen, 0, sizeof c->frozen);
	eng_ptensor *tab = calloc((size_t)nt, sizeof *tab);
	unsigned char *hit = calloc((size_t)nt, 1);
	if (!tab || !hit) {
		eng_errf(err, "out of memory");
		goto out;
	}
	eng_model_table(c, tab, NULL);
	for (int k = 0; k < n; k++) {
		eng_err e;
		if (freeze_item(c, al, tab, nt, items[k], hit, &e) < 0) {
			eng_errf(err, "'train.freeze[%d]': %s", k, e.msg);
			goto out;
		}
		for (int i = 0; i < nt; i++)
			if (hit[i])
				eng_config_freeze(c, i);
	}
	eng_model_table(c, tab, NULL); /* now with the frozen bits */
	for (int i = 0; i < nt; i++) {
		trained |= !tab[i].frozen;
		/* a joined weight (q|k|v, gate|up) is one product: frozen whole or not at all */
		if (tab[i].joined && tab[i].frozen != tab[i + 1].frozen) {
			eng_errf(err, "'train.freeze' freezes %s but not %s: they are one weight of "
				      "one product here; freeze both or neither",
				tab[tab[i].frozen ? i : i + 1].name, tab[tab[i].frozen ? i + 1 : i].name);
			goto out;
		}
	}
	if (!trained) {
		eng_errf(err, "'train.freeze' freezes every tensor: nothing would train");
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		memset(c->frozen, 0, sizeof c->frozen);
	free(hit);
	free(tab);
	return rc;
}

size_t eng_model_params(const eng_config *c, size_t *trainable)
{
	int nt = eng_model_ntensors(c);
	size_t all = 0, train = 0;
	eng_ptensor *tab = calloc((size_t)nt, sizeof *tab);
	if (tab) {
		eng_model_table(c, tab, NULL);
		for (int i = 0; i < nt; i++) {
			all += tab[i].numel;
			train += tab[i].frozen ? 0 : tab[i].numel;
		}
	}
	free(tab);
	*trainable = train;
	return all;
}

int eng_lora_base_tensors(const eng_config *c)
{
	return base_tensors(c);
}
