/* test_import.c - models other programs wrote, in and out (eng_import.c, eng_llmc.c).
 *
 * What it covers: Hugging Face model.safetensors variants written here from the reference
 * tiny checkpoint (names with and without "transformer.", with lm_head.weight and the old
 * attention-mask buffers, F16 and BF16 built byte by byte) load to the same weights, and the
 * same loss on the same batch; files that mix prefixes, lack or add a tensor are refused.
 * Sharded checkpoints (an index and three shards, one in BF16) load to the same weights;
 * an index that maps out of its directory, leaves a tensor out, misplaces one or names a
 * missing shard, and an index that is not JSON are refused; a shard linked from Hugging
 * Face's hub cache layout (a symlink to a blob) loads. The start-time check
 * (eng_import_check) refuses, on the headers alone and with the load's own message, each
 * damaged file: cut short, garbage, a dtype, a shape against config.json, a shard, a FIFO,
 * a link to nothing or to a directory; a missing init_from is named as given, and JSON
 * errors never quote the file.
 * llm.c model files: export and import round trips (float32 exact, bfloat16 rounded to
 * nearest even, checked against a rounding written independently here), a file written by
 * hand with Vp > V whose every value says where it belongs (so each linear weight's
 * transposition is checked element by element), damaged files refused with the file named
 * and no crash, `remat-train --export-llmc` end to end, and a job whose init_from is the
 * exported file taking the very same first step as the job started from the directory.
 * What it does not: run llm.c itself (not available here): the layout the hand-written file
 * encodes is llm.c's train_gpt2.py write_model, read from its source.
 * Scratch files go to REMAT_TMP.
 */
#include "tests.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_hfconfig.h"
#include "eng_import.h"
#include "eng_llmc.h"
#include "eng_st.h"
#include "t_util.h"

#define TIMEOUT	    60 /* seconds per test; most take milliseconds, the CLI ones ~1 s */
#define TINY	    "reference/tiny" /* L 2, C 64, NH 4, P 64, V 1000 */
#define TINY_B	    2
#define TINY_T	    32
#define MAX_ENTRIES 64	 /* tensors one variant file holds here */
#define HEADER	    1024 /* bytes of an llm.c model header */

/* ---- files ----------------------------------------------------------------------------- */

static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

static char *tmp_path(const char *name)
{
	return join(t_env("REMAT_TMP"), name);
}

static unsigned char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	ck_assert(n >= 0);
	rewind(f);
	unsigned char *buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void write_all(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f != NULL, "cannot write %s: %s", path, strerror(errno));
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static void put_i32(unsigned char *p, int32_t v)
{
	for (int k = 0; k < 4; k++)
		p[k] = (unsigned char)((uint32_t)v >> (8 * k));
}

static int32_t get_i32(const unsigned char *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

/* ---- number formats, written independently of the engine ------------------------------ */

static float f32_bits(uint32_t b)
{
	float f;
	memcpy(&f, &b, sizeof f);
	return f;
}

/* The value of a bfloat16; the all-ones exponent with a zero mantissa stands for the first
 * power of two past the range (2^128) so that rounding can compare distances to it. */
static double bf16_value(uint16_t h)
{
	if ((h & 0x7fff) == 0x7f80)
		return (h & 0x8000) ? -ldexp(1.0, 128) : ldexp(1.0, 128);
	return f32_bits((uint32_t)h << 16);
}

/* float32 -> bfloat16 by picking the nearer of the two neighbours (ties: even mantissa). */
static uint16_t bf16_ref(float x)
{
	uint32_t b;
	memcpy(&b, &x, sizeof b);
	if (isnan(x))
		return (uint16_t)((b >> 16) | 0x40);
	if (isinf(x))
		return (uint16_t)(b >> 16);
	uint16_t lo = (uint16_t)(b >> 16), hi = (uint16_t)(lo + 1); /* magnitude down, up */
	double dl = fabs((double)x - bf16_value(lo)), dh = fabs((double)x - bf16_value(hi));
	return dl < dh || (dl == dh && !(lo & 1)) ? lo : hi;
}

/* float32 -> IEEE half, round to nearest even (the default rounding mode of lrintf). */
static uint16_t f16_ref(float x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	float a = fabsf(x);
	if (a >= 65520.0f)
		return sign | 0x7c00;
	if (a < ldexpf(1.0f, -14)) /* subnormal: units of 2^-24; 1024 is the first normal */
		return sign | (uint16_t)lrintf(a * ldexpf(1.0f, 24));
	int e;
	float fr = frexpf(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
	uint32_t mant = (uint32_t)lrintf((2.0f * fr - 1.0f) * 1024.0f); /* 1024: carry */
	return sign | (uint16_t)(((uint32_t)(e + 14) << 10) + mant);
}

static float f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	float v = e == 0    ? ldexpf((float)m, -24)
		  : e == 31 ? (m ? NAN : INFINITY)
			    : ldexpf((float)(m + 1024), e - 25);
	return (h & 0x8000) ? -v : v;
}

/* ---- models ----------------------------------------------------------------------------- */

static void tiny_config(eng_config *cfg)
{
	char *p = t_data(TINY "/config.json");
	eng_err err;
	ck_assert_msg(eng_hfconfig_read(p, cfg, &err) == 0, "%s", err.msg);
	free(p);
}

static void empty_model(eng_model *m, const eng_config *cfg)
{
	eng_err err;
	int T = cfg->n_positions < TINY_T ? cfg->n_positions : TINY_T;
	ck_assert_msg(eng_model_init(m, cfg, TINY_B, T, 0, &err) == 0, "%s", err.msg);
}

/* The reference tiny model from its model.safetensors (prefixed names, F32). */
static void tiny_model(eng_model *m)
{
	eng_config cfg;
	eng_err err;
	tiny_config(&cfg);
	empty_model(m, &cfg);
	char *p = t_data(TINY "/model.safetensors");
	ck_assert_msg(eng_model_load_safetensors(m, p, &err) == 0, "%s", err.msg);
	free(p);
}

/* Bit-for-bit equal weights; a failure names the first tensor and element that differ. */
static void assert_same_weights(const eng_model *a, const eng_model *b, const char *what)
{
	ck_assert_int_eq(a->ntensors, b->ntensors);
	for (int i = 0; i < a->ntensors; i++) {
		const eng_ptensor *t = &a->tensors[i];
		const float *x = a->params + t->offset, *y = b->params + t->offset;
		for (size_t k = 0; k < t->numel; k++)
			ck_assert_msg(memcmp(&x[k], &y[k], sizeof(float)) == 0,
				      "%s: %s[%zu] is %.9g, want %.9g", what, t->name, k, y[k],
				      x[k]);
	}
}

/* Loads path into a fresh model of a's shape with the loader given and compares. */
static void load_st_into(eng_model *m, const eng_config *cfg, const char *path)
{
	eng_err err;
	empty_model(m, cfg);
	ck_assert_msg(eng_model_load_safetensors(m, path, &err) == 0, "%s: %s", path, err.msg);
}

/* ---- Hugging Face variants --------------------------------------------------------------- */

typedef struct variant {
	int prefixed;	    /* names with "transformer." (GPT2LMHeadModel) or not (GPT2Model) */
	int lm_head;	    /* with lm_head.weight, a copy of wte */
	int masks;	    /* with h.N.attn.bias / h.N.attn.masked_bias buffers */
	eng_st_dtype dtype; /* F32 through eng_st_write; F16/BF16 built here */
} variant;

typedef struct entries {
	eng_st_entry e[MAX_ENTRIES];
	char names[MAX_ENTRIES][ENG_NAME_MAX];
	int n;
	float *zeros; /* data of the mask buffers */
} entries;

static void add_entry(entries *es, const char *name, int ndim, const int64_t *shape,
		      const float *data)
{
	ck_assert_int_lt(es->n, MAX_ENTRIES);
	eng_st_entry *e = &es->e[es->n];
	snprintf(es->names[es->n], ENG_NAME_MAX, "%s", name);
	e->name = es->names[es->n];
	e->ndim = ndim;
	for (int i = 0; i < ndim; i++)
		e->shape[i] = shape[i];
	e->data = data;
	es->n++;
}

/* The model's tensors as a variant names them, plus its extras. */
static void variant_entries(entries *es, const eng_model *m, const variant *v)
{
	memset(es, 0, sizeof *es);
	size_t P = (size_t)m->cfg.n_positions;
	es->zeros = calloc(P * P, sizeof(float));
	ck_assert_ptr_nonnull(es->zeros);
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		const char *name = v->prefixed ? t->name : t->name + strlen("transformer.");
		add_entry(es, name, t->ndim, t->shape, m->params + t->offset);
	}
	if (v->lm_head)
		add_entry(es, "lm_head.weight", 2, m->tensors[0].shape, m->w.wte);
	if (v->masks) {
		const char *pre = v->prefixed ? "transformer." : "";
		char name[ENG_NAME_MAX];
		int64_t shape[4] = {1, 1, (int64_t)P, (int64_t)P};
		for (int l = 0; l < m->cfg.n_layer; l++) {
			snprintf(name, sizeof name, "%sh.%d.attn.bias", pre, l);
			add_entry(es, name, 4, shape, es->zeros);
			snprintf(name, sizeof name, "%sh.%d.attn.masked_bias", pre, l);
			add_entry(es, name, 0, shape, es->zeros);
		}
	}
}

/* A safetensors file of F16 or BF16 tensors, byte by byte: the JSON header (padded with
 * spaces to a multiple of 8), its length before it, the little-endian data after it. */
static void write_st_half(const char *path, const entries *es, eng_st_dtype dtype)
{
	json_t *h = json_object();
	json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
	size_t off = 0;
	for (int i = 0; i < es->n; i++) {
		const eng_st_entry *e = &es->e[i];
		size_t n = 1;
		json_t *shape = json_array();
		for (int d = 0; d < e->ndim; d++) {
			json_array_append_new(shape, json_integer(e->shape[d]));
			n *= (size_t)e->shape[d];
		}
		json_object_set_new(
		    h, e->name,
		    json_pack("{s:s,s:o,s:[I,I]}", "dtype", eng_st_dtype_name(dtype), "shape",
			      shape, "data_offsets", (json_int_t)off, (json_int_t)(off + 2 * n)));
		off += 2 * n;
	}
	char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	ck_assert_ptr_nonnull(text);
	size_t hl = strlen(text), padded = (hl + 7) / 8 * 8, len = 8 + padded + off;
	unsigned char *buf = malloc(len);
	ck_assert_ptr_nonnull(buf);
	for (int k = 0; k < 8; k++)
		buf[k] = (unsigned char)((uint64_t)padded >> (8 * k));
	memcpy(buf + 8, text, hl);
	memset(buf + 8 + hl, ' ', padded - hl);
	unsigned char *d = buf + 8 + padded;
	for (int i = 0; i < es->n; i++) {
		const eng_st_entry *e = &es->e[i];
		size_t n = 1;
		for (int k = 0; k < e->ndim; k++)
			n *= (size_t)e->shape[k];
		for (size_t k = 0; k < n; k++) {
			uint16_t v =
			    dtype == ENG_ST_BF16 ? bf16_ref(e->data[k]) : f16_ref(e->data[k]);
			*d++ = (unsigned char)(v & 0xff);
			*d++ = (unsigned char)(v >> 8);
		}
	}
	write_all(path, buf, len);
	free(buf);
	free(text);
	json_decref(h);
}

static void write_variant(const char *path, const eng_model *m, const variant *v)
{
	entries *es = malloc(sizeof *es);
	eng_err err;
	ck_assert_ptr_nonnull(es);
	variant_entries(es, m, v);
	if (v->dtype == ENG_ST_F32)
		ck_assert_msg(eng_st_write(path, es->e, es->n, &err) == 0, "%s", err.msg);
	else
		write_st_half(path, es, v->dtype);
	free(es->zeros);
	free(es);
}

/* A fresh checkpoint directory holding the reference tiny config.json */
static char *tiny_config_dir(const char *prefix)
{
	char *dir = t_tmp_dir(prefix);
	size_t len;
	char *src = t_data(TINY "/config.json"), *dst = join(dir, "config.json");
	unsigned char *cfg = read_all(src, &len);
	write_all(dst, cfg, len);
	free(cfg);
	free(dst);
	free(src);
	return dir;
}

/* A checkpoint directory: the reference config.json and the variant's model.safetensors. */
static char *variant_dir(const char *prefix, const eng_model *m, const variant *v)
{
	char *dir = tiny_config_dir(prefix);
	char *st = join(dir, "model.safetensors");
	write_variant(st, m, v);
	free(st);
	return dir;
}

/* The loss of the job's first batch, forward only, from the model init_from names. */
static float first_batch_loss(const char *init_from)
{
	eng_trainer tr;
	char *data = t_data(TINY "/train.bin");
	t_trainer(&tr,
		  "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s\"},\"batch\":%d,"
		  "\"seq_len\":%d,\"steps\":1,\"threads\":2}",
		  init_from, data, TINY_B, TINY_T);
	t_next(&tr.train, tr.inp, tr.tgt);
	float loss;
	eng_err err = {0};
	ck_assert_msg(eng_model_loss(&tr.model, tr.inp, tr.tgt, &loss, &err) == 0, "%s", err.msg);
	eng_trainer_free(&tr);
	free(data);
	return loss;
}

START_TEST(test_load_safetensors_f32_variants)
{
	eng_model ref, got;
	tiny_model(&ref);
	char *ref_dir = t_data(TINY);
	float ref_loss = first_batch_loss(ref_dir);
	ck_assert_msg(isfinite(ref_loss) && ref_loss > 0, "reference loss %g", ref_loss);
	static const struct {
		const char *name;
		variant v;
	} cases[] = {
	    {"unprefixed", {0, 0, 0, ENG_ST_F32}},
	    {"prefixed+lm_head", {1, 1, 0, ENG_ST_F32}},
	    {"unprefixed+lm_head", {0, 1, 0, ENG_ST_F32}},
	    {"unprefixed+lm_head+masks", {0, 1, 1, ENG_ST_F32}},
	    {"prefixed+masks", {1, 0, 1, ENG_ST_F32}},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *dir = variant_dir("hf32", &ref, &cases[i].v);
		char *st = join(dir, "model.safetensors");
		load_st_into(&got, &ref.cfg, st);
		assert_same_weights(&ref, &got, cases[i].name);
		eng_model_free(&got);
		float loss = first_batch_loss(dir);
		ck_assert_msg(memcmp(&loss, &ref_loss, sizeof loss) == 0,
			      "%s: loss %.9g, want %.9g (same weights, same batch)", cases[i].name,
			      loss, ref_loss);
		free(st);
		free(dir);
	}
	free(ref_dir);
	eng_model_free(&ref);
}
END_TEST

START_TEST(test_load_safetensors_half_variants)
{
	eng_model ref, got;
	tiny_model(&ref);
	char *ref_dir = t_data(TINY);
	float ref_loss = first_batch_loss(ref_dir);
	static const struct {
		const char *name;
		variant v;
	} cases[] = {
	    {"F16 prefixed", {1, 0, 0, ENG_ST_F16}},
	    {"F16 unprefixed+lm_head", {0, 1, 0, ENG_ST_F16}},
	    {"BF16 prefixed", {1, 0, 0, ENG_ST_BF16}},
	    {"BF16 unprefixed+lm_head+masks", {0, 1, 1, ENG_ST_BF16}},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const variant *v = &cases[i].v;
		char *dir = variant_dir("hfhalf", &ref, v);
		char *st = join(dir, "model.safetensors");
		load_st_into(&got, &ref.cfg, st);
		size_t changed = 0;
		for (int t = 0; t < ref.ntensors; t++) {
			const eng_ptensor *pt = &ref.tensors[t];
			const float *x = ref.params + pt->offset, *y = got.params + pt->offset;
			for (size_t k = 0; k < pt->numel; k++) {
				/* exactly the rounded value (widening is exact), and within half a
				 * unit in the last place of the format */
				float want = v->dtype == ENG_ST_BF16
						 ? (float)bf16_value(bf16_ref(x[k]))
						 : f16_value(f16_ref(x[k]));
				double bound = v->dtype == ENG_ST_BF16
						   ? fabs(x[k]) * ldexp(1.0, -8)
						   : fabs(x[k]) * ldexp(1.0, -11) + ldexp(1.0, -25);
				ck_assert_msg(memcmp(&y[k], &want, sizeof want) == 0 &&
						  fabs((double)y[k] - x[k]) <= bound,
					      "%s: %s[%zu] is %.9g from %.9g, want %.9g",
					      cases[i].name, pt->name, k, y[k], x[k], want);
				changed += y[k] != x[k];
			}
		}
		ck_assert_msg(changed > 0, "%s: no weight changed: not converted?", cases[i].name);
		eng_model_free(&got);
		float loss = first_batch_loss(dir);
		ck_assert_msg(fabsf(loss - ref_loss) < 1e-2f * ref_loss, "%s: loss %.9g vs %.9g",
			      cases[i].name, loss, ref_loss);
		free(st);
		free(dir);
	}
	free(ref_dir);
	eng_model_free(&ref);
}
END_TEST

/* Writes entries es to a file, loads it into a model of ref's shape and expects a refusal
 * whose message names the file and holds needle. */
static void expect_st_refused(const char *name, const eng_model *ref, const entries *es,
			      const char *needle)
{
	char *path = tmp_path(name);
	eng_err err;
	eng_model m;
	ck_assert_msg(eng_st_write(path, es->e, es->n, &err) == 0, "%s", err.msg);
	empty_model(&m, &ref->cfg);
	int rc = eng_model_load_safetensors(&m, path, &err);
	ck_assert_msg(rc == -1, "%s: accepted", name);
	ck_assert_msg(strstr(err.msg, path) != NULL, "%s: message '%s' lacks the file", name,
		      err.msg);
	ck_assert_msg(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", name, err.msg,
		      needle);
	eng_model_free(&m);
	free(path);
}

START_TEST(test_load_safetensors_refused)
{
	eng_model ref;
	tiny_model(&ref);
	entries *es = malloc(sizeof *es);
	ck_assert_ptr_nonnull(es);
	const variant pre = {1, 0, 0, ENG_ST_F32}, bare = {0, 1, 0, ENG_ST_F32};

	/* one name without the prefix among prefixed ones, and the other way round */
	variant_entries(es, &ref, &pre);
	snprintf(es->names[5], ENG_NAME_MAX, "h.0.attn.c_attn.bias");
	expect_st_refused("mixed1.safetensors", &ref, es, "mixes");
	free(es->zeros);
	variant_entries(es, &ref, &bare);
	snprintf(es->names[0], ENG_NAME_MAX, "transformer.wte.weight");
	expect_st_refused("mixed2.safetensors", &ref, es, "'transformer.wte.weight'");
	free(es->zeros);

	/* a missing tensor, named as the file would spell it */
	variant_entries(es, &ref, &bare);
	es->e[13] = es->e[--es->n]; /* h.0.mlp.c_proj.bias (index 13) replaced by the last */
	expect_st_refused("missing_bare.safetensors", &ref, es, "'h.0.mlp.c_proj.bias'");
	free(es->zeros);
	variant_entries(es, &ref, &pre);
	es->n--; /* transformer.ln_f.bias */
	expect_st_refused("missing_pre.safetensors", &ref, es, "'transformer.ln_f.bias'");
	free(es->zeros);

	/* unknown tensors: a third block, a mask of a third block, a stray name */
	const struct {
		const char *name, *needle;
		int ndim;
	} extra[] = {
	    {"h.2.ln_1.weight", "unexpected tensor 'h.2.ln_1.weight'", 1},
	    {"h.2.attn.bias", "unexpected tensor 'h.2.attn.bias'", 1},
	    {"score.weight", "unexpected tensor 'score.weight'", 1},
	    {"h.0.attn.c_attn.weight.extra", "unexpected", 1},
	};
	for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
		variant_entries(es, &ref, &bare);
		add_entry(es, extra[i].name, extra[i].ndim, ref.tensors[2].shape, ref.w.h[0].ln1w);
		expect_st_refused("extra.safetensors", &ref, es, extra[i].needle);
		free(es->zeros);
	}

	/* lm_head.weight not of wte's shape; a tensor of the wrong shape */
	variant_entries(es, &ref, &bare);
	es->e[es->n - 1].shape[0] = ref.cfg.n_positions; /* lm_head [P, C], wpe's data */
	es->e[es->n - 1].data = ref.w.wpe;
	expect_st_refused("lm_head_shape.safetensors", &ref, es, "lm_head.weight");
	free(es->zeros);
	variant_entries(es, &ref, &pre);
	es->e[1].shape[0] = 32; /* wpe [32, C] */
	expect_st_refused("wpe_shape.safetensors", &ref, es, "transformer.wpe.weight");
	free(es->zeros);

	free(es);
	eng_model_free(&ref);
}
END_TEST

/* ---- llm.c model files ------------------------------------------------------------------ */

static void save_llmc(const eng_model *m, const char *path, int version)
{
	eng_err err;
	ck_assert_msg(eng_model_save_llmc(m, path, version, &err) == 0, "%s", err.msg);
}

static void load_llmc(eng_model *m, const char *path)
{
	eng_config cfg;
	eng_err err;
	ck_assert_msg(eng_llmc_read_config(path, &cfg, &err) == 0, "%s", err.msg);
	empty_model(m, &cfg);
	ck_assert_msg(eng_model_load_llmc(m, path, &err) == 0, "%s", err.msg);
}

START_TEST(test_llmc_round_trip_f32)
{
	eng_model ref, got;
	tiny_model(&ref);
	char *path = tmp_path("tiny_v3.bin"), *again = tmp_path("tiny_v3_again.bin");
	save_llmc(&ref, path, ENG_LLMC_F32);

	/* the header: llm.c's fields, V the real vocabulary, Vp padded to 128 */
	size_t len;
	unsigned char *b = read_all(path, &len);
	const int32_t want[8] = {20240326, 3, 64, 1000, 2, 4, 64, 1024};
	for (int i = 0; i < 8; i++)
		ck_assert_msg(get_i32(b + 4 * i) == want[i], "header[%d] = %d, want %d", i,
			      get_i32(b + 4 * i), want[i]);
	for (int i = 8; i < 256; i++)
		ck_assert_int_eq(get_i32(b + 4 * i), 0);
	eng_config padded = ref.cfg;
	padded.vocab_size = 1024;
	ck_assert_uint_eq(len, HEADER + 4 * eng_config_num_params(&padded));
	/* wte's rows 1000..1023 are zeros, and row 999 is wte's last row */
	const float *wte = (const float *)(b + HEADER);
	for (size_t k = 1000 * 64; k < 1024 * 64; k++)
		ck_assert_msg(wte[k] == 0.0f && !signbit(wte[k]), "padding wte[%zu] = %g", k,
			      wte[k]);
	ck_assert(memcmp(wte + 999 * 64, ref.w.wte + 999 * 64, 64 * sizeof(float)) == 0);

	eng_config cfg;
	eng_err err;
	ck_assert_msg(eng_llmc_read_config(path, &cfg, &err) == 0, "%s", err.msg);
	ck_assert(memcmp(&cfg, &ref.cfg, sizeof cfg) == 0);
	load_llmc(&got, path);
	assert_same_weights(&ref, &got, "llm.c v3 round trip");
	/* same model, same bytes */
	save_llmc(&got, again, ENG_LLMC_F32);
	size_t len2;
	unsigned char *b2 = read_all(again, &len2);
	ck_assert(len2 == len && memcmp(b, b2, len) == 0);
	free(b2);
	free(b);
	eng_model_free(&got);
	free(again);
	free(path);
	eng_model_free(&ref);
}
END_TEST

START_TEST(test_llmc_round_trip_bf16)
{
	eng_model ref, got;
	tiny_model(&ref);
	char *path = tmp_path("tiny_v5.bin");
	save_llmc(&ref, path, ENG_LLMC_BF16);
	size_t len;
	unsigned char *b = read_all(path, &len);
	ck_assert_int_eq(get_i32(b + 4), 5);
	eng_config padded = ref.cfg;
	padded.vocab_size = 1024;
	ck_assert_uint_eq(len, HEADER + 2 * eng_config_num_params(&padded));
	free(b);

	load_llmc(&got, path);
	for (int t = 0; t < ref.ntensors; t++) {
		const eng_ptensor *pt = &ref.tensors[t];
		const float *x = ref.params + pt->offset, *y = got.params + pt->offset;
		for (size_t k = 0; k < pt->numel; k++) {
			float want = (float)bf16_value(bf16_ref(x[k]));
			ck_assert_msg(memcmp(&y[k], &want, sizeof want) == 0 &&
					  fabs((double)y[k] - x[k]) <= fabs(x[k]) * ldexp(1, -8),
				      "%s[%zu]: %.9g exported as %.9g, want %.9g", pt->name, k,
				      x[k], y[k], want);
		}
	}
	eng_model_free(&got);

	/* rounding at the edges: ties to even both ways, just past a tie, infinities, NaN,
	 * negative zero, and FLT_MAX overflowing to infinity as PyTorch's cast does */
	static const struct {
		uint32_t in;
		uint16_t out;
	} edges[] =
	    {
		{0x3f808000, 0x3f80}, /* 1 + 2^-8: tie, 0x3f80 is even */
		{0x3f818000, 0x3f82}, /* 1 + 3*2^-8: tie, 0x3f82 is even */
		{0x3f808001, 0x3f81}, /* just past the tie */
		{0x3f80ffff, 0x3f81}, {0xbf818000, 0xbf82}, {0x7f800000, 0x7f80},
		{0xff800000, 0xff80}, {0x80000000, 0x8000}, {0x7f7fffff, 0x7f80},
		{0x00000001, 0x0000}, /* the smallest subnormal rounds to zero */
	    };
	size_t ne = sizeof edges / sizeof edges[0];
	for (size_t i = 0; i < ne; i++) {
		ref.w.wte[i] = f32_bits(edges[i].in);
		ck_assert_msg(bf16_ref(ref.w.wte[i]) == edges[i].out, "reference rounding of %08x",
			      edges[i].in);
	}
	ref.w.wte[ne] = NAN;
	save_llmc(&ref, path, ENG_LLMC_BF16);
	b = read_all(path, &len);
	for (size_t i = 0; i <= ne; i++) {
		uint16_t v = (uint16_t)(b[HEADER + 2 * i] | b[HEADER + 2 * i + 1] << 8);
		if (i == ne)
			ck_assert_msg((v & 0x7f80) == 0x7f80 && (v & 0x7f), "NaN became %04x", v);
		else
			ck_assert_msg(v == edges[i].out, "%08x became %04x, want %04x", edges[i].in,
				      v, edges[i].out);
	}
	free(b);
	free(path);
	eng_model_free(&ref);
}
END_TEST

/* A hand-written llm.c file: L 2, C 4, NH 2, maxT 3, V 5, Vp 8. Tensor k of the file (wte 0,
 * wpe 1, then group by group, layer by layer, lnfw, lnfb) holds at index i the value
 * (2i + 1) * 2^(k - 14): odd times a power of two, so every value in the file is distinct,
 * says where it came from, and is exact in bfloat16 (at most 127: seven bits). */
#define H_L  2
#define H_C  4
#define H_P  3
#define H_V  5
#define H_VP 8

static float hand_value(int k, size_t i)
{
	return ldexpf((float)(2 * i + 1), k - 14);
}

/* llm.c's order of the per-layer tensors, as Hugging Face suffixes; linear ones are
 * (out, in) in the file and (in, out) here. */
static const struct {
	const char *suffix;
	int linear;
} hand_groups[] = {
	{"ln_1.weight", 0}, {"ln_1.bias", 0}, {"attn.c_attn.weight", 1},
	{"attn.c_attn.bias", 0}, {"attn.c_proj.weight", 1}, {"attn.c_proj.bias", 0},
	{"ln_2.weight", 0}, {"ln_2.bias", 0}, {"mlp.c_fc.weight", 1},
	{"mlp.c_fc.bias", 0}, {"mlp.c_proj.weight", 1}, {"mlp.c_proj.bias", 0},
};
#define H_GROUPS (int)(sizeof hand_groups / sizeof hand_groups[0])

static void hand_config(eng_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->n_layer = H_L;
	cfg->n_embd = H_C;
	cfg->n_head = 2;
	cfg->n_positions = H_P;
	cfg->vocab_size = H_V;
}

/* Writes the file (version 3 or 5) and returns its path. */
static char *write_hand_file(const char *name, int version)
{
	eng_config cfg;
	eng_model m; /* only for the tensors' sizes */
	eng_err err;
	hand_config(&cfg);
	ck_assert_msg(eng_model_init(&m, &cfg, 1, 1, 0, &err) == 0, "%s", err.msg);
	size_t numel[4 + H_GROUPS * H_L], nt = 0, total = 0;
	numel[nt++] = (size_t)H_VP * H_C;
	numel[nt++] = (size_t)H_P * H_C;
	for (int g = 0; g < H_GROUPS; g++)
		for (int l = 0; l < H_L; l++)
			numel[nt++] = m.tensors[2 + 12 * l + g].numel;
	numel[nt++] = H_C;
	numel[nt++] = H_C;
	for (size_t k = 0; k < nt; k++)
		total += numel[k];
	eng_model_free(&m);
	size_t elem = version == 3 ? 4 : 2, len = HEADER + total * elem;
	unsigned char *b = calloc(1, len), *p = b + HEADER;
	ck_assert_ptr_nonnull(b);
	const int32_t head[8] = {20240326, version, H_P, H_V, H_L, 2, H_C, H_VP};
	for (int i = 0; i < 8; i++)
		put_i32(b + 4 * i, head[i]);
	for (size_t k = 0; k < nt; k++) {
		for (size_t i = 0; i < numel[k]; i++) {
			float v = hand_value((int)k, i);
			uint32_t bits;
			memcpy(&bits, &v, sizeof bits);
			if (version == 5)
				bits >>= 16; /* exact: the low half is zero */
			for (size_t j = 0; j < elem; j++)
				*p++ = (unsigned char)(bits >> (8 * j));
		}
	}
	ck_assert(p == b + len);
	char *path = tmp_path(name);
	write_all(path, b, len);
	free(b);
	return path;
}

/* Checks every value of a model loaded from the hand-written file. */
static void check_hand_model(const eng_model *m, const char *what)
{
	size_t C = H_C;
	for (size_t i = 0; i < (size_t)H_V * C; i++) /* rows V..Vp-1 of the file are dropped */
		ck_assert_msg(m->w.wte[i] == hand_value(0, i), "%s: wte[%zu]", what, i);
	for (size_t i = 0; i < (size_t)H_P * C; i++)
		ck_assert_msg(m->w.wpe[i] == hand_value(1, i), "%s: wpe[%zu]", what, i);
	char name[ENG_NAME_MAX];
	for (int g = 0; g < H_GROUPS; g++) {
		for (int l = 0; l < H_L; l++) {
			int k = 2 + g * H_L + l;
			snprintf(name, sizeof name, "transformer.h.%d.%s", l,
				 hand_groups[g].suffix);
			const eng_ptensor *t = eng_model_find(m, name);
			ck_assert_ptr_nonnull(t);
			const float *w = m->params + t->offset;
			if (!hand_groups[g].linear) {
				for (size_t i = 0; i < t->numel; i++)
					ck_assert_msg(w[i] == hand_value(k, i), "%s: %s[%zu]", what,
						      name, i);
				continue;
			}
			/* here [in][out]; in the file [out][in] */
			size_t in = (size_t)t->shape[0], out = (size_t)t->shape[1];
			for (size_t i = 0; i < in; i++)
				for (size_t o = 0; o < out; o++)
					ck_assert_msg(
					    w[i * out + o] == hand_value(k, o * in + i),
					    "%s: %s[%zu][%zu] is %g, want file's [%zu][%zu] "
					    "%g",
					    what, name, i, o, w[i * out + o], o, i,
					    hand_value(k, o * in + i));
		}
	}
	int k = 2 + H_GROUPS * H_L;
	for (size_t i = 0; i < C; i++) {
		ck_assert_msg(m->w.lnfw[i] == hand_value(k, i), "%s: lnfw[%zu]", what, i);
		ck_assert_msg(m->w.lnfb[i] == hand_value(k + 1, i), "%s: lnfb[%zu]", what, i);
	}
}

START_TEST(test_llmc_hand_written_layout)
{
	eng_model m3, m5, back;
	eng_config cfg, want;
	eng_err err;
	hand_config(&want);
	char *p3 = write_hand_file("hand_v3.bin", 3), *p5 = write_hand_file("hand_v5.bin", 5);
	ck_assert_msg(eng_llmc_read_config(p3, &cfg, &err) == 0, "%s", err.msg);
	ck_assert_msg(memcmp(&cfg, &want, sizeof cfg) == 0, "V must be 5 (not Vp 8): got %d",
		      cfg.vocab_size);
	load_llmc(&m3, p3);
	check_hand_model(&m3, "v3");
	load_llmc(&m5, p5);
	check_hand_model(&m5, "v5");

	/* exported again (Vp now 128) and read back: the same model, both versions */
	char *out = tmp_path("hand_again.bin");
	for (int version = 3; version <= 5; version += 2) {
		save_llmc(&m3, out, version);
		load_llmc(&back, out);
		assert_same_weights(&m3, &back, version == 3 ? "hand v3 again" : "hand v5 again");
		eng_model_free(&back);
	}
	free(out);
	eng_model_free(&m5);
	eng_model_free(&m3);
	free(p5);
	free(p3);
}
END_TEST

/* The file is refused by eng_llmc_read_config and by eng_model_load_llmc (into a model of
 * the tiny shape), with the file and needle in both messages. */
static void expect_llmc_refused(const char *what, const char *path, const char *needle)
{
	eng_config cfg, tiny;
	eng_model m;
	eng_err err;
	err.msg[0] = '\0';
	ck_assert_msg(eng_llmc_read_config(path, &cfg, &err) == -1, "%s: header accepted", what);
	ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, needle),
		      "%s: message '%s' lacks the file or '%s'", what, err.msg, needle);
	tiny_config(&tiny);
	empty_model(&m, &tiny);
	err.msg[0] = '\0';
	ck_assert_msg(eng_model_load_llmc(&m, path, &err) == -1, "%s: loaded", what);
	ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, needle),
		      "%s: load message '%s' lacks the file or '%s'", what, err.msg, needle);
	eng_model_free(&m);
}

START_TEST(test_llmc_corrupt_refused)
{
	eng_model ref;
	tiny_model(&ref);
	char *good = tmp_path("corrupt_src.bin"), *path = tmp_path("corrupt.bin");
	save_llmc(&ref, good, ENG_LLMC_F32);
	eng_model_free(&ref);
	size_t len;
	unsigned char *b = read_all(good, &len);
	unsigned char *c = malloc(len + 1);
	ck_assert_ptr_nonnull(c);

	/* header fields: index, value, what the message must say */
	static const struct {
		int field;
		int32_t value;
		const char *needle;
	} fields[] = {
	    {0, 20240520, "no llm.c model header"}, /* an llm.c token file */
	    {0, 0, "no llm.c model header"},
	    {1, 4, "version 4"},
	    {1, 1, "version 1"},
	    {1, -1, "version -1"},
	    {2, 0, "n_positions 0"},
	    {3, INT32_MIN, "vocab_size"},
	    {4, -1, "n_layer -1"},
	    {4, INT32_MAX, "n_layer"},
	    {5, 0, "n_head 0"},
	    {5, 3, "not a multiple"},
	    {6, INT32_MAX, "n_embd"},
	    {6, 1 << 30, "n_embd"},
	    {7, 999, "padded vocab 999"}, /* V 1000 > Vp */
	    {7, INT32_MAX, "padded vocab"},
	    {7, -1, "padded vocab"},
	};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		char what[64];
		snprintf(what, sizeof what, "header[%d] = %d", fields[i].field, fields[i].value);
		memcpy(c, b, len);
		put_i32(c + 4 * fields[i].field, fields[i].value);
		write_all(path, c, len);
		expect_llmc_refused(what, path, fields[i].needle);
	}

	/* the largest shape the limits allow, on a file of 680 kB: refused by length, before
	 * anything is allocated */
	memcpy(c, b, len);
	const int32_t huge[8] = {20240326, 3, 65536, 1 << 20, 128, 64, 8192, 1 << 20};
	for (int i = 0; i < 8; i++)
		put_i32(c + 4 * i, huge[i]);
	write_all(path, c, len);
	expect_llmc_refused("largest shape", path, "truncated");

	/* truncated anywhere, one byte too many */
	const struct {
		size_t len;
		const char *needle;
	} cuts[] = {{0, "shorter"},
		    {100, "shorter"},
		    {HEADER - 1, "shorter"},
		    {HEADER, "truncated"},
		    {len / 2, "truncated"},
		    {len - 1, "truncated"},
		    {len + 1, "past the last"}};
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		char what[64];
		snprintf(what, sizeof what, "%zu of %zu bytes", cuts[i].len, len);
		memcpy(c, b, len);
		c[len] = 0;
		write_all(path, c, cuts[i].len);
		expect_llmc_refused(what, path, cuts[i].needle);
	}

	/* a good file of another shape, into the tiny model; a directory; nothing */
	char *hand = write_hand_file("corrupt_hand.bin", 3);
	eng_config tiny;
	eng_model m;
	eng_err err;
	tiny_config(&tiny);
	empty_model(&m, &tiny);
	ck_assert_int_eq(eng_model_load_llmc(&m, hand, &err), -1);
	ck_assert_msg(strstr(err.msg, hand) && strstr(err.msg, "holds L 2, C 4"), "%s", err.msg);
	const char *dir = t_env("REMAT_TMP");
	ck_assert_int_eq(eng_model_load_llmc(&m, dir, &err), -1);
	ck_assert_msg(strstr(err.msg, "not a regular file"), "%s", err.msg);
	char *none = tmp_path("no_such_model.bin");
	ck_assert_int_eq(eng_model_load_llmc(&m, none, &err), -1);
	ck_assert_msg(strstr(err.msg, none) && strstr(err.msg, "No such file"), "%s", err.msg);
	eng_model_free(&m);

	free(none);
	free(hand);
	free(c);
	free(b);
	free(path);
	free(good);
}
END_TEST

START_TEST(test_llmc_save_errors)
{
	eng_model ref;
	eng_err err;
	struct stat st;
	tiny_model(&ref);
	char *path = tmp_path("save_v4.bin");
	ck_assert_int_eq(eng_model_save_llmc(&ref, path, 4, &err), -1);
	ck_assert_msg(strstr(err.msg, "version 4") && strstr(err.msg, path), "%s", err.msg);
	ck_assert_int_ne(stat(path, &st), 0);
	char *nodir = tmp_path("no_such_dir/model.bin");
	ck_assert_int_eq(eng_model_save_llmc(&ref, nodir, 3, &err), -1);
	ck_assert_msg(strstr(err.msg, nodir) && strstr(err.msg, "No such file"), "%s", err.msg);
	free(nodir);
	free(path);
	eng_model_free(&ref);
}
END_TEST

/* ---- sharded checkpoints: model.safetensors.index.json and its shards ---------------- */

/* A sharded checkpoint directory of m as transformers' save_pretrained writes one past its
 * max_shard_size: config.json, shard k (of 3, F32 but the middle one `mid_dtype`) holding
 * the tensors i of the prefixed names with i % 3 == k, lm_head.weight in the last, and the
 * index mapping each name to its shard. edit, when given, changes the index first. */
static char *sharded_dir(const char *prefix, const eng_model *m, eng_st_dtype mid_dtype,
	void (*edit)(json_t *map))
{
	static const char *const shard[3] = {"model-00001-of-00003.safetensors",
		"model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"};
	char *dir = tiny_config_dir(prefix);
	entries *all = malloc(sizeof *all), *part = malloc(sizeof *part);
	ck_assert(all && part);
	variant v = {1, 1, 0, ENG_ST_F32};
	variant_entries(all, m, &v);
	json_t *map = json_object();
	for (int k = 0; k < 3; k++) {
		memset(part, 0, sizeof *part);
		for (int i = 0; i < all->n; i++) {
			const eng_st_entry *e = &all->e[i];
			if ((i == all->n - 1 ? 2 : i % 3) != k)
				continue;
			add_entry(part, e->name, e->ndim, e->shape, e->data);
			json_object_set_new(map, e->name, json_string(shard[k]));
		}
		char *path = join(dir, shard[k]);
		eng_err err;
		if (k == 1 && mid_dtype != ENG_ST_F32)
			write_st_half(path, part, mid_dtype);
		else
			ck_assert_msg(eng_st_write(path, part->e, part->n, &err) == 0, "%s", err.msg);
		free(path);
	}
	if (edit)
		edit(map);
	json_t *index = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)0,
		"weight_map", map);
	char *text = json_dumps(index, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	char *ip = join(dir, "model.safetensors.index.json");
	write_all(ip, text, strlen(text));
	free(ip), free(text), json_decref(index);
	free(all->zeros), free(all), free(part);
	return dir;
}

/* The shards load to the single file's weights (the BF16 shard's rounded to bf16), and a
 * job from the all-F32 shards takes the single file's first step, bit for bit */
START_TEST(test_load_sharded)
{
	eng_model ref, got, want;
	eng_err err;
	tiny_model(&ref);
	char *ref_dir = t_data(TINY);
	float ref_loss = first_batch_loss(ref_dir);
	char *dir = sharded_dir("shard32", &ref, ENG_ST_F32, NULL);
	empty_model(&got, &ref.cfg);
	ck_assert_msg(eng_import_load(&got, dir, &err) == 0, "%s", err.msg);
	assert_same_weights(&ref, &got, "F32 shards");
	eng_model_free(&got);
	float loss = first_batch_loss(dir);
	ck_assert_msg(memcmp(&loss, &ref_loss, sizeof loss) == 0, "sharded: loss %.9g, want "
		"%.9g (same weights, same batch)", loss, ref_loss);
	free(dir);
	dir = sharded_dir("shardbf", &ref, ENG_ST_BF16, NULL);
	empty_model(&got, &ref.cfg);
	ck_assert_msg(eng_import_load(&got, dir, &err) == 0, "%s", err.msg);
	tiny_model(&want); /* the middle shard's tensors (every third, from the second) rounded */
	for (int i = 1; i < want.ntensors; i += 3)
		for (size_t k = 0; k < want.tensors[i].numel; k++) {
			float *x = want.params + want.tensors[i].offset + k;
			*x = eng_bf16_to_f32(bf16_ref(*x));
		}
	assert_same_weights(&want, &got, "F32 and BF16 shards");
	eng_model_free(&want), eng_model_free(&got), eng_model_free(&ref);
	free(dir), free(ref_dir);
}
END_TEST

static void edit_escape(json_t *map)
{
	json_object_set_new(map, "transformer.wpe.weight", json_string("../model.safetensors"));
}

static void edit_drop(json_t *map)
{
	json_object_del(map, "transformer.ln_f.bias");
}

static void edit_move(json_t *map) /* shard 1's first tensor said to be in shard 3 */
{
	json_object_set_new(map, "transformer.wte.weight",
		json_string("model-00003-of-00003.safetensors"));
}

static void edit_misplace(json_t *map) /* another tensor of shard 1 said to be in shard 2 */
{
	const char *name;
	json_t *v;
	int i = 0;
	json_object_foreach(map, name, v)
	{
		if (i++ == 3) {
			json_string_set(v, "model-00002-of-00003.safetensors");
			break;
		}
	}
}

static void edit_missing(json_t *map)
{
	json_object_set_new(map, "transformer.wte.weight",
		json_string("model-00004-of-00003.safetensors"));
}

/* A damaged sharded checkpoint is refused with the file and the tensor named */
START_TEST(test_load_sharded_refused)
{
	eng_model ref, got;
	eng_err err;
	tiny_model(&ref);
	static const struct {
		void (*edit)(json_t *map);
		const char *want;
	} cases[] = {
		{edit_escape, "is mapped to a path, not to a file name of its directory"},
		{edit_drop, "does not list"},
		{edit_move, "holds 10 tensors, the index lists 11 in it"},
		{edit_misplace, "which the index puts in another shard"},
		{edit_missing, "model-00004-of-00003.safetensors"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *dir = sharded_dir("shardbad", &ref, ENG_ST_F32, cases[i].edit);
		empty_model(&got, &ref.cfg);
		ck_assert_msg(eng_import_load(&got, dir, &err) < 0, "case %zu loaded", i);
		ck_assert_msg(strstr(err.msg, cases[i].want), "case %zu: '%s' lacks '%s'", i,
			err.msg, cases[i].want);
		eng_model_free(&got);
		free(dir);
	}
	/* not JSON; a shard replaced by a symbolic link to a good copy of itself */
	char *dir = sharded_dir("shardjson", &ref, ENG_ST_F32, NULL);
	char *ip = join(dir, "model.safetensors.index.json");
	write_all(ip, "{\"weight_map\": ", 15);
	empty_model(&got, &ref.cfg);
	ck_assert_int_lt(eng_import_load(&got, dir, &err), 0);
	ck_assert_msg(strstr(err.msg, "not JSON"), "%s", err.msg);
	eng_model_free(&got);
	free(ip), free(dir);
	eng_model_free(&ref);
}
END_TEST

/* Hugging Face's hub cache: a snapshot's files are symlinks to blobs elsewhere; a shard
 * read through one loads as the file itself */
START_TEST(test_load_sharded_hub_cache)
{
	eng_model ref, got;
	eng_err err;
	tiny_model(&ref);
	char *dir = sharded_dir("shardlink", &ref, ENG_ST_F32, NULL), *blobs = t_tmp_dir("blobs");
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int bfd = open(blobs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert(dfd >= 0 && bfd >= 0);
	char *target = join(blobs, "4b2e7c");
	ck_assert_int_eq(renameat(dfd, "model-00002-of-00003.safetensors", bfd, "4b2e7c"), 0);
	ck_assert_int_eq(symlinkat(target, dfd, "model-00002-of-00003.safetensors"), 0);
	close(dfd), close(bfd);
	empty_model(&got, &ref.cfg);
	ck_assert_msg(eng_import_load(&got, dir, &err) == 0, "%s", err.msg);
	assert_same_weights(&ref, &got, "a shard through a symlink");
	eng_model_free(&got), eng_model_free(&ref);
	free(target), free(blobs), free(dir);
}
END_TEST

/* ---- the start-time check: eng_import_check ------------------------------------------- */

/* eng_import_check refuses dir with a message holding needle and the damaged file's name
 * (never `secret`, bytes of the file, when given), and the load refuses it with the very
 * same message: one set of rules, the check's on the headers alone. */
static void expect_check_refused(const char *dir, const char *file, const char *needle,
	const char *secret)
{
	eng_config cfg;
	eng_model m;
	eng_err err, load_err;
	tiny_config(&cfg);
	ck_assert_msg(eng_import_check(dir, &cfg, &err) < 0, "%s: passed the check", file);
	ck_assert_msg(strstr(err.msg, file) && strstr(err.msg, needle), "%s: the check's '%s' "
		"lacks '%s' or the file", file, err.msg, needle);
	ck_assert_msg(!secret || !strstr(err.msg, secret), "'%s' quotes the file", err.msg);
	empty_model(&m, &cfg);
	ck_assert_msg(eng_import_load(&m, dir, &load_err) < 0, "%s: loaded", file);
	ck_assert_str_eq(err.msg, load_err.msg);
	eng_model_free(&m);
}

/* dir/name replaced by len bytes of the reference model.safetensors from its start, then
 * tail (tlen bytes) */
static void put_st(const char *dir, const char *name, size_t len, const char *tail,
	size_t tlen)
{
	size_t n;
	char *src = t_data(TINY "/model.safetensors"), *dst = join(dir, name);
	unsigned char *buf = read_all(src, &n);
	ck_assert_uint_le(len, n);
	buf = realloc(buf, len + tlen + 1);
	ck_assert_ptr_nonnull(buf);
	memcpy(buf + len, tail, tlen);
	unlink(dst);
	write_all(dst, buf, len + tlen);
	free(buf), free(dst), free(src);
}

START_TEST(test_import_check)
{
	eng_config cfg;
	eng_model ref;
	eng_err err;
	tiny_config(&cfg);
	tiny_model(&ref);
	size_t n;
	char *src = t_data(TINY "/model.safetensors");
	free(read_all(src, &n));
	/* good: the reference directory, F16, sharded, a shard through a link */
	char *ref_dir = t_data(TINY);
	ck_assert_msg(eng_import_check(ref_dir, &cfg, &err) == 0, "%s", err.msg);
	const variant half = {0, 1, 1, ENG_ST_F16};
	char *dir = variant_dir("checkf16", &ref, &half);
	ck_assert_msg(eng_import_check(dir, &cfg, &err) == 0, "%s", err.msg);
	free(dir);
	dir = sharded_dir("checkshard", &ref, ENG_ST_BF16, NULL);
	ck_assert_msg(eng_import_check(dir, &cfg, &err) == 0, "%s", err.msg);

	/* a shard cut short, and an index that is not JSON */
	char *shard = join(dir, "model-00002-of-00003.safetensors");
	size_t sn;
	unsigned char *sb = read_all(shard, &sn);
	write_all(shard, sb, sn - 10);
	expect_check_refused(dir, "model-00002-of-00003.safetensors", "past the end", NULL);
	write_all(shard, sb, sn);
	char *ip = join(dir, "model.safetensors.index.json");
	write_all(ip, "{\"weight_map\": notjson}", 23);
	expect_check_refused(dir, "model.safetensors.index.json", "line 1, column", "notjson");
	free(ip), free(sb), free(shard), free(dir);

	/* one file: cut in the data, cut in the header, shorter than the length, garbage */
	dir = tiny_config_dir("checkbad");
	put_st(dir, "model.safetensors", n - 100, "", 0);
	expect_check_refused(dir, "model.safetensors", "past the end of the data section", NULL);
	put_st(dir, "model.safetensors", 100, "", 0);
	expect_check_refused(dir, "model.safetensors", "past the end of the file", NULL);
	put_st(dir, "model.safetensors", 0, "\x07\0\0", 3);
	expect_check_refused(dir, "model.safetensors", "shorter than the 8-byte", NULL);
	put_st(dir, "model.safetensors", 0, "\x07\0\0\0\0\0\0\0notjson", 15);
	expect_check_refused(dir, "model.safetensors", "not valid JSON", "notjson");
	/* a dtype the engine does not read ("F32" -> "I32", the header otherwise intact) */
	unsigned char *buf = read_all(src, &n);
	char *at = memmem(buf, n, "\"F32\"", 5);
	ck_assert_ptr_nonnull(at);
	at[1] = 'I';
	char *p = join(dir, "model.safetensors");
	write_all(p, buf, n);
	expect_check_refused(dir, "model.safetensors", "unsupported dtype", NULL);
	free(buf);
	/* shapes against config.json: a file of another model's wpe */
	entries *es = malloc(sizeof *es);
	ck_assert_ptr_nonnull(es);
	const variant pre = {1, 0, 0, ENG_ST_F32};
	variant_entries(es, &ref, &pre);
	es->e[1].shape[0] = 32; /* wpe [32, C]: config.json says n_positions 64 */
	ck_assert_msg(eng_st_write(p, es->e, es->n, &err) == 0, "%s", err.msg);
	expect_check_refused(dir, "model.safetensors", "transformer.wpe.weight", NULL);
	free(es->zeros);
	/* a name that is not a plain one is not shown: it is the file's bytes */
	const variant bare = {0, 0, 0, ENG_ST_F32};
	variant_entries(es, &ref, &bare);
	add_entry(es, "secret words\n", 1, ref.tensors[2].shape, ref.w.h[0].ln1w);
	ck_assert_msg(eng_st_write(p, es->e, es->n, &err) == 0, "%s", err.msg);
	expect_check_refused(dir, "model.safetensors", "unexpected tensor '(a name not shown)'",
		"secret");
	free(es->zeros), free(es);
	/* a FIFO (refused without waiting for a writer), a dangling link, a link to a
	 * directory */
	unlink(p);
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	expect_check_refused(dir, "model.safetensors", "FIFO", NULL);
	unlink(p);
	ck_assert_int_eq(symlink("/nonexistent/model.safetensors", p), 0);
	expect_check_refused(dir, "model.safetensors", "No such file", NULL);
	unlink(p);
	ck_assert_int_eq(symlink(ref_dir, p), 0);
	expect_check_refused(dir, "model.safetensors", "directory", NULL);
	free(p), free(dir), free(ref_dir), free(src);
	eng_model_free(&ref);
}
END_TEST

/* init_from that is not there is named as the user gave it, never as its config.json */
START_TEST(test_import_init_from_missing)
{
	eng_config cfg;
	eng_err err;
	char *dir = t_tmp_dir("initmissing"), *gone = join(dir, "no-such-model");
	ck_assert_int_lt(eng_import_read_config(gone, &cfg, &err), 0);
	ck_assert_msg(strstr(err.msg, gone) && strstr(err.msg, "no such directory") &&
		!strstr(err.msg, "config.json"), "%s", err.msg);
	char *fifo = join(dir, "fifo");
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	ck_assert_int_lt(eng_import_read_config(fifo, &cfg, &err), 0);
	ck_assert_msg(strstr(err.msg, fifo) && strstr(err.msg, "FIFO") &&
		!strstr(err.msg, "config.json"), "%s", err.msg);
	/* config.json that is not JSON: where and what, never its bytes */
	char *cp = join(dir, "config.json");
	write_all(cp, "{\"n_embd\": notjson}", 19);
	ck_assert_int_lt(eng_hfconfig_read(cp, &cfg, &err), 0);
	ck_assert_msg(strstr(err.msg, "line 1, column") && !strstr(err.msg, "notjson"), "%s",
		err.msg);
	free(cp), free(fifo), free(gone), free(dir);
}
END_TEST

/* ---- init_from an llm.c file ----------------------------------------------------------- */

typedef struct first_step {
	float loss;
	size_t nfloats;
	float *params; /* after the step */
} first_step;

static void run_first_step(const char *init_from, first_step *r)
{
	eng_trainer tr;
	eng_step_stats st;
	eng_err err;
	char *data = t_data(TINY "/train.bin");
	t_trainer(&tr,
		  "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s\"},\"batch\":%d,"
		  "\"seq_len\":%d,\"steps\":1,\"threads\":2,\"optim\":{\"lr\":1e-3}}",
		  init_from, data, TINY_B, TINY_T);
	ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
	r->loss = st.loss;
	r->nfloats = tr.model.nfloats;
	r->params = malloc(r->nfloats * sizeof(float));
	ck_assert_ptr_nonnull(r->params);
	memcpy(r->params, tr.model.params, r->nfloats * sizeof(float));
	eng_trainer_free(&tr);
	free(data);
}

START_TEST(test_llmc_init_from_first_step)
{
	eng_model ref;
	tiny_model(&ref);
	char *bin = tmp_path("init_from_v3.bin"), *dir = t_data(TINY);
	save_llmc(&ref, bin, ENG_LLMC_F32);
	eng_model_free(&ref);
	first_step a, b;
	run_first_step(dir, &a);
	run_first_step(bin, &b);
	ck_assert_msg(memcmp(&a.loss, &b.loss, sizeof a.loss) == 0,
		      "first step loss %.9g from the .bin, %.9g from the directory", b.loss,
		      a.loss);
	ck_assert(a.nfloats == b.nfloats &&
		  memcmp(a.params, b.params, a.nfloats * sizeof(float)) == 0);

	/* a damaged .bin as init_from: the trainer refuses it, naming it */
	size_t len;
	unsigned char *buf = read_all(bin, &len);
	char *cut = tmp_path("init_from_cut.bin");
	write_all(cut, buf, len - 4);
	char text[8192];
	char *data = t_data(TINY "/train.bin");
	snprintf(text, sizeof text,
		 "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s\"},\"steps\":1}", cut,
		 data);
	eng_spec spec;
	eng_trainer tr;
	eng_err err;
	ck_assert_msg(eng_spec_parse(&spec, text, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(eng_trainer_init(&tr, &spec, &err), -1);
	ck_assert_msg(strstr(err.msg, cut) && strstr(err.msg, "truncated"), "%s", err.msg);
	/* resume needs a checkpoint, not weights */
	snprintf(text, sizeof text,
		 "{\"model\":{\"init_from\":\"%s\",\"resume\":true},\"data\":{\"train\":\"%s\"},"
		 "\"steps\":1}",
		 bin, data);
	ck_assert_msg(eng_spec_parse(&spec, text, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(eng_trainer_init(&tr, &spec, &err), -1);
	ck_assert_msg(strstr(err.msg, bin) != NULL, "%s", err.msg);

	free(data);
	free(cut);
	free(buf);
	free(b.params);
	free(a.params);
	free(dir);
	free(bin);
}
END_TEST

/* ---- remat-train --export-llmc --------------------------------------------------------- */

/* Runs remat-train with args (NULL-terminated, at most 8); returns the exit status. */
static int train(char **out, const char *const *args)
{
	const char *argv[10];
	int n = 0;
	argv[n++] = t_env("REMAT_TRAIN");
	for (int i = 0; args[i]; i++) {
		ck_assert(n < 9);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	return t_run((char *const *)argv, out);
}

/* The loss of step 1 as `remat-train --json` prints it, for a job from init_from. */
static double cli_first_loss(const char *name, const char *init_from)
{
	char text[8192], *data = t_data(TINY "/train.bin");
	snprintf(text, sizeof text,
		 "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s\"},\"batch\":%d,"
		 "\"seq_len\":%d,\"steps\":1,\"threads\":2}",
		 init_from, data, TINY_B, TINY_T);
	char *job = t_write_tmp(name, text), *out;
	const char *args[] = {"--json", job, NULL};
	int rc = train(&out, args);
	ck_assert_msg(rc == 0, "%s: exit status %d:\n%s", name, rc, out);
	json_error_t je;
	json_t *row = json_loadb(out, strcspn(out, "\n"), 0, &je);
	ck_assert_msg(row != NULL, "%s: first line not JSON (%s):\n%s", name, je.text, out);
	json_t *loss = json_object_get(row, "loss");
	ck_assert_msg(json_is_number(loss), "%s: no loss:\n%s", name, out);
	ck_assert_int_eq(json_integer_value(json_object_get(row, "step")), 1);
	double v = json_number_value(loss);
	json_decref(row);
	free(out);
	free(job);
	free(data);
	return v;
}

START_TEST(test_cli_export_llmc)
{
	char *dir = t_data(TINY), *bin = tmp_path("cli_v3.bin"), *bf = tmp_path("cli_v5.bin");
	char *direct = tmp_path("cli_direct.bin"), *out;
	eng_model ref;
	tiny_model(&ref);
	save_llmc(&ref, direct, ENG_LLMC_F32);
	eng_model_free(&ref);

	const char *a3[] = {"--export-llmc", dir, bin, NULL};
	int rc = train(&out, a3);
	ck_assert_msg(rc == 0 && strstr(out, bin), "export: %d\n%s", rc, out);
	free(out);
	size_t n1, n2;
	unsigned char *x = read_all(bin, &n1), *y = read_all(direct, &n2);
	ck_assert_msg(n1 == n2 && memcmp(x, y, n1) == 0, "the CLI's file differs from "
							 "eng_model_save_llmc's");
	free(y);
	free(x);
	const char *a5[] = {"--export-llmc", dir, bf, "--bf16", NULL};
	rc = train(&out, a5);
	ck_assert_msg(rc == 0, "export --bf16: %d\n%s", rc, out);
	free(out);
	x = read_all(bf, &n1);
	ck_assert_int_eq(get_i32(x), 20240326);
	ck_assert_int_eq(get_i32(x + 4), 5);
	ck_assert_uint_eq(n1, HEADER + (n2 - HEADER) / 2);
	free(x);

	/* usage errors: status 2 and the usage text */
	const char *const bad[][5] = {
	    {"--export-llmc", dir, NULL},
	    {"--bf16", NULL},
	    {"--export-llmc", dir, bin, "job.json", NULL},
	    {"--json", "--export-llmc", dir, bin, NULL},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		rc = train(&out, bad[i]);
		ck_assert_msg(rc == 2 && strstr(out, "--export-llmc CKPT_DIR OUT.bin"),
			      "usage case %zu: %d\n%s", i, rc, out);
		free(out);
	}
	/* a checkpoint that is not there: status 1, one line naming it, no file written */
	char *missing = tmp_path("no_such_ckpt"), *never = tmp_path("never.bin");
	const char *am[] = {"--export-llmc", missing, never, NULL};
	rc = train(&out, am);
	ck_assert_msg(rc == 1 && strncmp(out, "remat-train: ", 13) == 0 &&
			  strstr(out, "no_such_ckpt") && strchr(out, '\n') == out + strlen(out) - 1,
		      "missing checkpoint: %d\n%s", rc, out);
	ck_assert_int_ne(access(never, F_OK), 0);
	free(out);

	/* the exported file as a job's init_from: the same first step as the directory */
	double from_dir = cli_first_loss("cli_job_dir.json", dir);
	double from_bin = cli_first_loss("cli_job_bin.json", bin);
	ck_assert_msg(from_dir == from_bin, "first loss %.17g from the .bin, %.17g from the dir",
		      from_bin, from_dir);

	free(never);
	free(missing);
	free(direct);
	free(bf);
	free(bin);
	free(dir);
}
END_TEST

/* ---- the Llama family: config.json, Hugging Face's files, checkpoints ------------------ */

#define LLAMA      "reference/llama"      /* GQA 6/2 heads of 6, untied (GENERATED.md) */
#define LLAMA_TIED "reference/llama_tied" /* MQA 4/1, tied */

/* The model of a reference folder, by the importer (config.json, model.safetensors) */
static void llama_model(eng_model *m, const char *rel)
{
	eng_config cfg;
	eng_err err;
	char *dir = t_data(rel);
	ck_assert_msg(eng_import_read_config(dir, &cfg, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_model_init(m, &cfg, 2, 8, 0, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_import_load(m, dir, &err) == 0, "%s", err.msg);
	free(dir);
}

START_TEST(test_llama_config_read_write)
{
	eng_config c, d;
	eng_err err;
	char *p = t_data(LLAMA "/config.json");
	ck_assert_msg(eng_hfconfig_read(p, &c, &err) == 0, "%s", err.msg);
	ck_assert(c.arch == ENG_ARCH_LLAMA && c.n_layer == 2 && c.n_embd == 36 && c.n_head == 6 &&
		c.n_kv_head == 2 && c.intermediate_size == 53 && c.n_positions == 32 &&
		c.vocab_size == 211 && c.untied && c.rope_theta == 10000.0 &&
		c.rms_norm_eps == 1e-5);
	free(p);
	p = t_data(LLAMA_TIED "/config.json");
	ck_assert_msg(eng_hfconfig_read(p, &d, &err) == 0, "%s", err.msg);
	ck_assert(d.n_kv_head == 1 && !d.untied && d.rope_theta == 5e5 && d.rms_norm_eps == 1e-6);
	free(p);
	/* written twice: the same bytes, LlamaConfig's keys, read back to the same shape */
	char *o1 = tmp_path("llama_cfg1.json"), *o2 = tmp_path("llama_cfg2.json");
	ck_assert_msg(eng_hfconfig_write(o1, &c, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_hfconfig_write(o2, &c, &err) == 0, "%s", err.msg);
	size_t n1, n2;
	char *t1 = t_read_file(o1, &n1), *t2 = t_read_file(o2, &n2); /* NUL-terminated */
	ck_assert(n1 == n2 && memcmp(t1, t2, n1) == 0);
	static const char *const want[] = {"\"LlamaForCausalLM\"", "\"model_type\": \"llama\"",
		"\"num_key_value_heads\": 2", "\"intermediate_size\": 53", "\"head_dim\": 6",
		"\"tie_word_embeddings\": false", "\"hidden_act\": \"silu\"",
		"\"rope_scaling\": null", "\"rms_norm_eps\": 1e-5"};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		ck_assert_msg(strstr(t1, want[i]), "config.json lacks %s:\n%s", want[i], t1);
	ck_assert_msg(!strstr(t1, "remat") && !strstr(t1, "mm_bf16") && !strstr(t1, "policy"),
		"a run setting in config.json:\n%s", t1);
	ck_assert_msg(eng_hfconfig_read(o1, &d, &err) == 0, "%s", err.msg);
	ck_assert(memcmp(&c, &d, sizeof c) == 0);
	/* the SmolLM-135M preset is that model: 134,515,008 parameters */
	ck_assert(eng_config_preset("smollm-135m", &c, &err) == 0);
	ck_assert_uint_eq(eng_config_num_params(&c), 134515008u);
	ck_assert_msg(eng_hfconfig_write(o1, &c, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_hfconfig_read(o1, &d, &err) == 0, "%s", err.msg);
	ck_assert(memcmp(&c, &d, sizeof c) == 0);
	free(t1), free(t2), free(o1), free(o2);
}
END_TEST

/* LlamaConfigs the engine does not compute, each refused naming the key */
static const struct {
	const char *name, *edit, *needle;
} bad_llama[] = {
	{"act", "\"hidden_act\": \"gelu\"", "'hidden_act'"},
	{"scaling", "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}", "'rope_scaling'"},
	{"bias", "\"attention_bias\": true", "'attention_bias'"},
	{"mlp_bias", "\"mlp_bias\": true", "'mlp_bias'"},
	{"head_dim", "\"head_dim\": 8", "'head_dim'"},
	{"kv", "\"num_key_value_heads\": 4", "n_kv_head 4 must divide n_head 6"},
	{"theta", "\"rope_theta\": -1.0", "rope_theta"},
	{"eps", "\"rms_norm_eps\": \"1e-5\"", "'rms_norm_eps' is not a number"},
	{"type", "\"model_type\": \"mistral\"", "'model_type' must be"},
};

START_TEST(test_llama_config_refused)
{
	/* the reference config with one key replaced (or added before the others) */
	size_t len;
	char *src = t_data(LLAMA "/config.json"), name[64];
	char *text = (char *)read_all(src, &len);
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je), *edit;
	ck_assert_ptr_nonnull(root);
	char buf[256];
	snprintf(buf, sizeof buf, "{%s}", bad_llama[_i].edit);
	edit = json_loads(buf, 0, &je);
	ck_assert_ptr_nonnull(edit);
	json_object_update(root, edit);
	char *out = json_dumps(root, JSON_INDENT(2));
	snprintf(name, sizeof name, "llama_bad_%s.json", bad_llama[_i].name);
	char *path = tmp_path(name);
	write_all(path, out, strlen(out));
	eng_config c;
	eng_err err = {0};
	ck_assert_int_eq(eng_hfconfig_read(path, &c, &err), -1);
	ck_assert_msg(strstr(err.msg, bad_llama[_i].needle), "%s: %s", bad_llama[_i].name,
		err.msg);
	/* and (once) without intermediate_size */
	if (_i == 0) {
		json_object_del(root, "intermediate_size");
		json_object_del(root, "hidden_act");
		free(out);
		out = json_dumps(root, JSON_INDENT(2));
		write_all(path, out, strlen(out));
		ck_assert_int_eq(eng_hfconfig_read(path, &c, &err), -1);
		ck_assert_msg(strstr(err.msg, "missing key 'intermediate_size'"), "%s", err.msg);
	}
	free(path), free(out), json_decref(edit), json_decref(root), free(text), free(src);
}
END_TEST

/* A directory of the reference config.json and the tensors of es as shards: tensor i in
 * shard i % 3, every shard of dtype, and the index */
static char *llama_shards(const char *prefix, const entries *es, eng_st_dtype dtype)
{
	static const char *const shard[3] = {"model-00001-of-00003.safetensors",
		"model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"};
	char *dir = t_tmp_dir(prefix), *src = t_data(LLAMA "/config.json");
	char *dst = join(dir, "config.json");
	size_t len;
	unsigned char *cfg = read_all(src, &len);
	write_all(dst, cfg, len);
	free(cfg), free(dst), free(src);
	entries *part = malloc(sizeof *part);
	ck_assert_ptr_nonnull(part);
	json_t *map = json_object();
	for (int k = 0; k < 3; k++) {
		memset(part, 0, sizeof *part);
		for (int i = k; i < es->n; i += 3) {
			add_entry(part, es->e[i].name, es->e[i].ndim, es->e[i].shape, es->e[i].data);
			json_object_set_new(map, es->e[i].name, json_string(shard[k]));
		}
		char *path = join(dir, shard[k]);
		write_st_half(path, part, dtype);
		free(path);
	}
	json_t *index = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)0,
		"weight_map", map);
	char *text = json_dumps(index, JSON_INDENT(2)), *ip = join(dir, "model.safetensors.index.json");
	write_all(ip, text, strlen(text));
	free(ip), free(text), json_decref(index), free(part);
	return dir;
}

/* Hugging Face's Llama files: LlamaModel's names (no "model.") with the inv_freq buffers
 * older transformers saved, a tied model's lm_head.weight copy, sharded BF16 files, and a
 * file that mixes the two namings, refused */
START_TEST(test_llama_hf_variants)
{
	eng_model ref, got;
	eng_err err;
	llama_model(&ref, LLAMA);
	entries *es = malloc(sizeof *es);
	ck_assert_ptr_nonnull(es);
	memset(es, 0, sizeof *es);
	int64_t half = ref.cfg.n_embd / ref.cfg.n_head / 2;
	float *inv = calloc((size_t)half, sizeof(float));
	for (int i = 0; i < ref.ntensors; i++) {
		const eng_ptensor *t = &ref.tensors[i];
		int bare = strncmp(t->name, "model.", 6) == 0;
		add_entry(es, t->name + (bare ? 6 : 0), t->ndim, t->shape, ref.params + t->offset);
	}
	for (int l = 0; l < ref.cfg.n_layer; l++) {
		char name[ENG_NAME_MAX];
		snprintf(name, sizeof name, "layers.%d.self_attn.rotary_emb.inv_freq", l);
		add_entry(es, name, 1, &half, inv);
	}
	char *st = tmp_path("llama_bare.safetensors");
	ck_assert_msg(eng_st_write(st, es->e, es->n, &err) == 0, "%s", err.msg);
	eng_config cfg = ref.cfg;
	load_st_into(&got, &cfg, st);
	assert_same_weights(&ref, &got, "LlamaModel names");
	eng_model_free(&got);
	/* one "model." name among bare ones */
	snprintf(es->names[0], ENG_NAME_MAX, "model.embed_tokens.weight");
	ck_assert_msg(eng_st_write(st, es->e, es->n, &err) == 0, "%s", err.msg);
	empty_model(&got, &cfg);
	ck_assert_int_eq(eng_model_load_safetensors(&got, st, &err), -1);
	ck_assert_msg(strstr(err.msg, "mixes tensor names") && strstr(err.msg, "'model.'"), "%s",
		err.msg);
	eng_model_free(&got);
	/* sharded, every shard BF16, the names as LlamaForCausalLM saves them */
	memset(es, 0, sizeof *es);
	for (int i = 0; i < ref.ntensors; i++)
		add_entry(es, ref.tensors[i].name, ref.tensors[i].ndim, ref.tensors[i].shape,
			ref.params + ref.tensors[i].offset);
	char *dir = llama_shards("llama_bf16", es, ENG_ST_BF16);
	empty_model(&got, &cfg);
	ck_assert_msg(eng_import_load(&got, dir, &err) == 0, "%s", err.msg);
	for (size_t k = 0; k < ref.nfloats; k++)
		ref.params[k] = eng_bf16_to_f32(bf16_ref(ref.params[k]));
	assert_same_weights(&ref, &got, "BF16 shards");
	eng_model_free(&got), eng_model_free(&ref);
	/* tied: lm_head.weight, when a file has it, is embed_tokens' copy, checked only */
	llama_model(&ref, LLAMA_TIED);
	memset(es, 0, sizeof *es);
	for (int i = 0; i < ref.ntensors; i++)
		add_entry(es, ref.tensors[i].name, ref.tensors[i].ndim, ref.tensors[i].shape,
			ref.params + ref.tensors[i].offset);
	add_entry(es, "lm_head.weight", 2, ref.tensors[0].shape, ref.w.wte);
	ck_assert_msg(eng_st_write(st, es->e, es->n, &err) == 0, "%s", err.msg);
	cfg = ref.cfg;
	load_st_into(&got, &cfg, st);
	assert_same_weights(&ref, &got, "tied, with lm_head.weight");
	eng_model_free(&got), eng_model_free(&ref);
	free(dir), free(st), free(inv), free(es);
}
END_TEST

/* A Llama trained and saved by remat: config.json is the model's, model.safetensors holds
 * exactly Hugging Face's names, and the checkpoint, re-imported, gives the trained model's
 * loss bit for bit */
START_TEST(test_llama_checkpoint_round_trip)
{
	char *data = t_data(LLAMA), *root = t_tmp_dir("llama_ckpt"), path[ENG_PATH_LEN + 64];
	eng_trainer a, b;
	eng_step_stats st;
	eng_err err;
	t_trainer(&a, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":2,\"seq_len\":24,\"steps\":2,\"threads\":2,\"optim\":{\"lr\":3e-3},"
		"\"remat\":{\"default\":\"full\"},\"save\":{\"dir\":\"%s\"}}", data, data, root);
	for (int s = 0; s < 2; s++)
		ck_assert_msg(eng_trainer_step_as(&a, NULL, &st, &err) == 0, "%s", err.msg);
	t_save(&a, path, sizeof path);
	eng_config c;
	char *cp = join(path, "config.json");
	ck_assert_msg(eng_hfconfig_read(cp, &c, &err) == 0, "%s", err.msg);
	ck_assert(memcmp(&c, &a.model.cfg, sizeof c) == 0);
	char *mp = join(path, "model.safetensors");
	eng_st_file f;
	ck_assert_msg(eng_st_read(&f, mp, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(f.n, a.model.ntensors);
	for (int i = 0; i < a.model.ntensors; i++)
		ck_assert_msg(eng_st_find(&f, a.model.tensors[i].name), "no %s",
			a.model.tensors[i].name);
	ck_assert_ptr_nonnull(eng_st_find(&f, "lm_head.weight"));
	ck_assert_ptr_nonnull(eng_st_find(&f, "model.layers.1.self_attn.k_proj.weight"));
	eng_st_free(&f);
	t_trainer(&b, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":2,\"seq_len\":24,\"steps\":1,\"threads\":2}", path, data);
	float la, lb;
	t_next(&b.train, b.inp, b.tgt);
	ck_assert_msg(eng_model_loss(&a.model, b.inp, b.tgt, &la, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_model_loss(&b.model, b.inp, b.tgt, &lb, &err) == 0, "%s", err.msg);
	ck_assert_msg(memcmp(&la, &lb, sizeof la) == 0, "re-imported loss %.9g, trained %.9g", lb,
		la);
	ck_assert(memcmp(a.model.params, b.model.params, a.model.nfloats * 4) == 0);
	eng_trainer_free(&b), eng_trainer_free(&a);
	free(mp), free(cp), free(root), free(data);
}
END_TEST

Suite *suite_import(void)
{
	Suite *s = suite_create("import");
	TCase *tc = tcase_create("hf");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_load_safetensors_f32_variants);
	tcase_add_test(tc, test_load_safetensors_half_variants);
	tcase_add_test(tc, test_load_safetensors_refused);
	tcase_add_test(tc, test_load_sharded);
	tcase_add_test(tc, test_load_sharded_refused);
	tcase_add_test(tc, test_load_sharded_hub_cache);
	tcase_add_test(tc, test_import_check);
	tcase_add_test(tc, test_import_init_from_missing);
	suite_add_tcase(s, tc);
	tc = tcase_create("llmc");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_llmc_round_trip_f32);
	tcase_add_test(tc, test_llmc_round_trip_bf16);
	tcase_add_test(tc, test_llmc_hand_written_layout);
	tcase_add_test(tc, test_llmc_corrupt_refused);
	tcase_add_test(tc, test_llmc_save_errors);
	tcase_add_test(tc, test_llmc_init_from_first_step);
	tcase_add_test(tc, test_cli_export_llmc);
	suite_add_tcase(s, tc);
	tc = tcase_create("llama");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_llama_config_read_write);
	tcase_add_loop_test(tc, test_llama_config_refused, 0,
		(int)(sizeof bad_llama / sizeof bad_llama[0]));
	tcase_add_test(tc, test_llama_hf_variants);
	tcase_add_test(tc, test_llama_checkpoint_round_trip);
	suite_add_tcase(s, tc);
	return s;
}
