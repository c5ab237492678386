/* eng_llmc.c - llm.c model files in and out (see eng_llmc.h).
 *
 * The parameters follow the header as one stream, tensor group by tensor group and, inside
 * a per-layer group, layer 0 first (shapes as llm.c writes them):
 *   wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C),
 *   attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C),
 *   fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C).
 * llm.c's linear weights are nn.Linear's (out, in); this engine's are Conv1D's (in, out)
 * (eng_model.h), so every linear weight goes through a transpose, here and nowhere else.
 *
 * Files are read and written through stdio in tensor-sized pieces: nothing is sized by the
 * file before the header has been checked against the file's length, and a gpt2-size model
 * never needs a second copy of itself in memory (one linear weight of scratch at most).
 */
#include "eng_llmc.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_fs.h"
#include "eng_st.h"

/* Header fields and parameters are decoded byte by byte, but float32 data is read and
 * written as is: the format is little-endian. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "eng_llmc assumes a little-endian host");
#endif
_Static_assert(sizeof(float) == 4, "eng_llmc assumes 4-byte IEEE floats");
/* The largest shape eng_config_validate lets through has ~1e11 parameters: sizes are size_t
 * products that need 64 bits, never int ones. */
_Static_assert(sizeof(size_t) >= 8, "eng_llmc needs a 64-bit size_t");

#define HEADER_BYTES (4 * ENG_LLMC_MODEL_HEADER_INTS)
#define CHUNK	     4096 /* parameters converted per stdio call for bfloat16 */
#define TILE	     32	  /* transpose block: two 32x32 float tiles stay in L1 */

/* The per-layer groups in file order. Shapes in multiples of C: a linear weight is
 * (out, in) in the file and (in, out) in the engine; a vector (out 0) has in*C entries. */
static const struct llmc_group {
	size_t off;  /* of the float * in eng_layer_w */
	int out, in; /* shape in the file, in multiples of C */
} groups[] = {
	{offsetof(eng_layer_w, ln1w), 0, 1}, /* (L, C) */
	{offsetof(eng_layer_w, ln1b), 0, 1}, /* (L, C) */
	{offsetof(eng_layer_w, qkvw), 3, 1}, /* (L, 3C, C) */
	{offsetof(eng_layer_w, qkvb), 0, 3}, /* (L, 3C) */
	{offsetof(eng_layer_w, attprojw), 1, 1}, /* (L, C, C) */
	{offsetof(eng_layer_w, attprojb), 0, 1}, /* (L, C) */
	{offsetof(eng_layer_w, ln2w), 0, 1}, /* (L, C) */
	{offsetof(eng_layer_w, ln2b), 0, 1}, /* (L, C) */
	{offsetof(eng_layer_w, fcw), 4, 1}, /* (L, 4C, C) */
	{offsetof(eng_layer_w, fcb), 0, 4}, /* (L, 4C) */
	{offsetof(eng_layer_w, fcprojw), 1, 4}, /* (L, C, 4C) */
	{offsetof(eng_layer_w, fcprojb), 0, 1}, /* (L, C) */
};
#define NGROUPS (int)(sizeof groups / sizeof groups[0])

/* One tensor of the stream after wte, as the engine holds it. */
typedef struct llmc_part {
	float *p;	/* the engine's tensor */
	size_t out, in; /* a linear weight: (out, in) in the file; out 0: a vector */
	size_t n;	/* elements */
} llmc_part;

/* What the header says. */
typedef struct llmc_header {
	int version;	/* ENG_LLMC_F32 or ENG_LLMC_BF16 */
	eng_config cfg; /* vocab_size is the real V */
	int vp;		/* rows of wte in the file, >= V */
	size_t elem;	/* bytes per parameter: 4 or 2 */
} llmc_header;

/* Parts after wte: wpe, NGROUPS * L per-layer tensors, lnfw, lnfb. */
static int nparts(const eng_config *c)
{
	return 3 + NGROUPS * c->n_layer;
}

/* Part k of the stream after wte, k < nparts. */
static llmc_part part_at(const eng_model *m, int k)
{
	size_t C = (size_t)m->cfg.n_embd, L = (size_t)m->cfg.n_layer;
	llmc_part pt = {.p = NULL, .out = 0, .in = 0, .n = C}; /* lnfw, lnfb: C */
	if (k == 0) {
		pt.p = m->w.wpe;
		pt.n = (size_t)m->cfg.n_positions * C;
	} else if ((size_t)k <= NGROUPS * L) {
		const struct llmc_group *g = &groups[(size_t)(k - 1) / L];
		const eng_layer_w *h = &m->w.h[(size_t)(k - 1) % L];
		pt.p = *(float *const *)((const char *)h + g->off);
		pt.out = (size_t)g->out * C;
		pt.in = (size_t)g->in * C;
		pt.n = pt.out ? pt.out * pt.in : pt.in;
	} else {
		pt.p = (size_t)k == NGROUPS * L + 1 ? m->w.lnfw : m->w.lnfb;
	}
	return pt;
}

/* dst (cols, rows) = the transpose of src (rows, cols), tile by tile. */
static void transpose(float *dst, const float *src, size_t rows, size_t cols)
{
	for (size_t r0 = 0; r0 < rows; r0 += TILE)
		for (size_t c0 = 0; c0 < cols; c0 += TILE)
			for (size_t r = r0; r < r0 + TILE && r < rows; r++)
				for (size_t c = c0; c < c0 + TILE && c < cols; c++)
					dst[c * rows + r] = src[r * cols + c];
}

static int32_t get_i32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

static void put_i32(uint8_t *p, int32_t v)
{
	for (int k = 0; k < 4; k++)
		p[k] = (uint8_t)((uint32_t)v >> (8 * k));
}

/* "invalid llm.c model file '<path>': <problem>" into err; -1 */
#define bad(err, path, ...) eng_err_invalid(err, "llm.c model file", path, __VA_ARGS__)

static int read_exact(FILE *f, const char *path, void *buf, size_t n, eng_err *err)
{
	if (n == 0 || fread(buf, 1, n, f) == n)
		return 0;
	if (ferror(f))
		return eng_errf(err, "cannot read '%s': %s", path, strerror(errno));
	/* the length was checked against the header: someone truncated the file under us */
	return eng_errf(err, "cannot read '%s': file shrank while being read", path);
}

static int write_exact(FILE *f, const char *path, const void *buf, size_t n, eng_err *err)
{
	if (n == 0 || fwrite(buf, 1, n, f) == n)
		return 0;
	return eng_errf(err, "cannot write '%s': %s", path, strerror(errno));
}

/* n parameters of the file into dst as float32. */
static int read_floats(FILE *f, const char *path, const llmc_header *h, float *dst, size_t n,
		       eng_err *err)
{
	uint8_t buf[2 * CHUNK];
	if (h->version == ENG_LLMC_F32)
		return read_exact(f, path, dst, n * sizeof *dst, err);
	for (size_t done = 0; done < n;) {
		size_t k = n - done < CHUNK ? n - done : CHUNK;
		if (read_exact(f, path, buf, 2 * k, err) < 0)
			return -1;
		for (size_t i = 0; i < k; i++)
			dst[done + i] =
				eng_bf16_to_f32((uint16_t)(buf[2 * i] | (uint32_t)buf[2 * i + 1] << 8));
		done += k;
	}
	return 0;
}

/* n float32 from src into the file in the version's type. */
static int write_floats(FILE *f, const char *path, int version, const float *src, size_t n,
			eng_err *err)
{
	uint8_t buf[2 * CHUNK];
	if (version == ENG_LLMC_F32)
		return write_exact(f, path, src, n * sizeof *src, err);
	for (size_t done = 0; done < n;) {
		size_t k = n - done < CHUNK ? n - done : CHUNK;
		for (size_t i = 0; i < k; i++) {
			uint16_t v = eng_bf16_from_f32(src[done + i]);
			buf[2 * i] = (uint8_t)(v & 0xff);
			buf[2 * i + 1] = (uint8_t)(v >> 8);
		}
		if (write_exact(f, path, buf, 2 * k, err) < 0)
			return -1;
		done += k;
	}
	return 0;
}

/* Reads and checks the header of the open file f; leaves f just past it. */
static int read_header(FILE *f, const char *path, llmc_header *h, eng_err *err)
{
	uint8_t raw[HEADER_BYTES];
	struct stat st;
	memset(h, 0, sizeof *h);
	if (fstat(fileno(f), &st) != 0)
		return eng_errf(err, "cannot stat '%s': %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return eng_errf(err, "cannot read '%s': not a regular file", path);
	unsigned long long len = (unsigned long long)st.st_size;
	if (len < HEADER_BYTES)
		return bad(err, path, "%llu bytes, shorter than the %d-byte header", len,
			   HEADER_BYTES);
	if (read_exact(f, path, raw, sizeof raw, err) < 0)
		return -1;
	int32_t magic = get_i32(raw), version = get_i32(raw + 4);
	/* the first bytes of a file that is not an llm.c model are not echoed: they could be
	 * anyone's secret, named by a job that could not read the file itself */
	if (magic != ENG_LLMC_MODEL_MAGIC)
		return bad(err, path, "no llm.c model header (its first 4 bytes are not the "
				      "magic %d)", ENG_LLMC_MODEL_MAGIC);
	if (version != ENG_LLMC_F32 && version != ENG_LLMC_BF16)
		return bad(err, path, "version %d not supported (3: float32, 5: bfloat16)",
			   version);
	h->version = version;
	h->elem = version == ENG_LLMC_F32 ? 4 : 2;
	h->cfg.n_positions = get_i32(raw + 8);
	h->cfg.vocab_size = get_i32(raw + 12);
	h->cfg.n_layer = get_i32(raw + 16);
	h->cfg.n_head = get_i32(raw + 20);
	h->cfg.n_embd = get_i32(raw + 24);
	h->vp = get_i32(raw + 28);
	char what[ENG_ERR_LEN];
	snprintf(what, sizeof what, "invalid llm.c model file '%s'", path);
	if (eng_config_validate(&h->cfg, what, err) < 0)
		return -1;
	if (h->vp < h->cfg.vocab_size || h->vp > ENG_MAX_VOCAB)
		return bad(err, path, "padded vocab %d out of range %d..%d (at least vocab_size)",
			   h->vp, h->cfg.vocab_size, ENG_MAX_VOCAB);
	/* Every factor is bounded now (eng_config.h): the product fits in 64 bits. */
	eng_config padded = h->cfg;
	padded.vocab_size = h->vp;
	unsigned long long need =
	    HEADER_BYTES + (unsigned long long)eng_config_num_params(&padded) * h->elem;
	if (len < need)
		return bad(err, path, "truncated: %llu bytes, the header's shape needs %llu", len,
			   need);
	if (len > need)
		return bad(err, path, "%llu bytes past the last parameter", len - need);
	return 0;
}

int eng_llmc_read_config(const char *path, eng_config *cfg, eng_err *err)
{
	llmc_header h;
	FILE *f = eng_fs_fopen_read(path, "llm.c model file", err);
	if (!f)
		return -1;
	int rc = read_header(f, path, &h, err);
	fclose(f);
	if (rc == 0)
		*cfg = h.cfg;
	return rc;
}

int eng_model_load_llmc(eng_model *m, const char *path, eng_err *err)
{
	const eng_config *c = &m->cfg;
	float *scratch = NULL;
	llmc_header h;
	int rc = -1;
	if (c->quant) /* its weights come grouped by kind, not tensor by tensor */
		return eng_errf(err, "model.quantize takes a Hugging Face model (safetensors); "
				     "'%s' is an llm.c file: a checkpoint of a run from it is one",
			path);
	FILE *f = eng_fs_fopen_read(path, "llm.c model file", err);
	if (!f)
		goto out;
	if (read_header(f, path, &h, err) < 0)
		goto out;
	if (h.cfg.n_layer != c->n_layer || h.cfg.n_embd != c->n_embd ||
	    h.cfg.n_head != c->n_head || h.cfg.n_positions != c->n_positions ||
	    h.cfg.vocab_size != c->vocab_size) {
		eng_errf(err,
			 "llm.c model file '%s' holds L %d, C %d, NH %d, maxT %d, V %d; the "
			 "model is L %d, C %d, NH %d, n_positions %d, V %d",
			 path, h.cfg.n_layer, h.cfg.n_embd, h.cfg.n_head, h.cfg.n_positions,
			 h.cfg.vocab_size, c->n_layer, c->n_embd, c->n_head, c->n_positions,
			 c->vocab_size);
		goto out;
	}
	size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size;
	scratch = malloc(4 * C * C * sizeof *scratch); /* the largest linear weight */
	if (!scratch) {
		eng_errf(err, "cannot read '%s': out of memory", path);
		goto out;
	}
	if (read_floats(f, path, &h, m->w.wte, V * C, err) < 0)
		goto out;
	/* wte's padding rows: llm.c never uses their logits; this engine has no such rows */
	if (fseeko(f, (off_t)(((size_t)h.vp - V) * C * h.elem), SEEK_CUR) != 0) {
		eng_errf(err, "cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	for (int k = 0; k < nparts(c); k++) {
		llmc_part pt = part_at(m, k);
		if (read_floats(f, path, &h, pt.out ? scratch : pt.p, pt.n, err) < 0)
			goto out;
		if (pt.out)
			transpose(pt.p, scratch, pt.out, pt.in); /* (out, in) -> (in, out) */
	}
	eng_model_params_changed(m);
	rc = 0;
out:
	free(scratch);
	if (f)
		fclose(f);
	return rc;
}

/* What llmc_fill writes: the model in an llm.c version, through a 4C*C scratch buffer. */
typedef struct llmc_out {
	const eng_model *m;
	const char *path;   /* for messages */
	int version;
	float *scratch;     /* 4*C*C floats */
} llmc_out;

/* eng_fs_fill_fn: the 256-int header, wte with its padding rows, then every part. */
static int llmc_fill(FILE *f, void *ud, eng_err *err)
{
	const llmc_out *o = ud;
	const eng_model *m = o->m;
	const eng_config *c = &m->cfg;
	size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size;
	int vp = (c->vocab_size + ENG_LLMC_VOCAB_ALIGN - 1) / ENG_LLMC_VOCAB_ALIGN *
		 ENG_LLMC_VOCAB_ALIGN;
	uint8_t raw[HEADER_BYTES];
	memset(raw, 0, sizeof raw);
	const int32_t head[] = {ENG_LLMC_MODEL_MAGIC, o->version, c->n_positions, c->vocab_size,
				c->n_layer,	      c->n_head,  c->n_embd,	  vp};
	for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
		put_i32(raw + 4 * i, head[i]);
	if (write_exact(f, o->path, raw, sizeof raw, err) < 0 ||
	    write_floats(f, o->path, o->version, m->w.wte, V * C, err) < 0)
		return -1;
	/* padding rows of wte: zeros in either type; scratch holds at least 4C*C >= C floats */
	memset(o->scratch, 0, C * sizeof *o->scratch);
	for (int r = c->vocab_size; r < vp; r++)
		if (write_floats(f, o->path, o->version, o->scratch, C, err) < 0)
			return -1;
	for (int k = 0; k < nparts(c); k++) {
		llmc_part pt = part_at(m, k);
		if (pt.out)
			transpose(o->scratch, pt.p, pt.in, pt.out); /* (in, out) -> (out, in) */
		if (write_floats(f, o->path, o->version, pt.out ? o->scratch : pt.p, pt.n, err) < 0)
			return -1;
	}
	return 0;
}

int eng_model_save_llmc(const eng_model *m, const char *path, int version, eng_err *err)
{
	size_t C = (size_t)m->cfg.n_embd;
	if (m->cfg.arch != ENG_ARCH_GPT2)
		return eng_errf(err, "cannot write '%s': llm.c's model files hold GPT-2 models only",
			path);
	if (m->cfg.lora_r)
		return eng_errf(err, "cannot write '%s': llm.c's files have no LoRA adapters "
				     "(remat-train --merge-lora folds them into the base first)", path);
	if (version != ENG_LLMC_F32 && version != ENG_LLMC_BF16)
		return eng_errf(err,
				"cannot write '%s': llm.c version %d (3: float32, "
				"5: bfloat16)",
				path, version);
	llmc_out o = {m, path, version, malloc(4 * C * C * sizeof(float))};
	if (!o.scratch)
		return eng_errf(err, "cannot write '%s': out of memory", path);
	/* durable, and never a half-written model file under the name asked for */
	int rc = eng_fs_write(path, llmc_fill, &o, err);
	free(o.scratch);
	return rc;
}
