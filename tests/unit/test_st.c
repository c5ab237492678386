/* test_st.c - safetensors files (eng_st) and Hugging Face config.json (eng_hfconfig).
 *
 * Reads the reference checkpoint under REMAT_TESTDATA, checks that the writer reproduces it
 * byte for byte, and feeds the reader every kind of damaged file: each must fail with a
 * message that names the file, never crash (run `make asan` to see the "never").
 * Scratch files go to REMAT_TMP, one name per test.
 */
#include "tests.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_hfconfig.h"
#include "eng_st.h"

#define TIMEOUT 60 /* seconds per test; each takes milliseconds */

#define TINY_ST	      "reference/tiny/model.safetensors"
#define TINY_CFG      "reference/tiny/config.json"
#define TINY_NTENSORS 28 /* wte, wpe, 12 per block x 2 blocks, ln_f weight and bias */

/* ---- helpers ---------------------------------------------------------------------------- */

static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

static char *data_path(const char *rel)
{
	return join(t_env("REMAT_TESTDATA"), rel);
}

static char *tmp_path(const char *name)
{
	return join(t_env("REMAT_TMP"), name);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	ck_assert_int_ge(n, 0);
	rewind(f);
	uint8_t *buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static char *spit(const char *name, const void *buf, size_t len)
{
	char *path = tmp_path(name);
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f != NULL, "cannot write %s: %s", path, strerror(errno));
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* A safetensors file: the 8-byte length field `hlen` (which may lie), the header text
 * unpadded, then data_len bytes of data (a byte pattern when data is NULL). */
static char *make_st_raw(const char *name, uint64_t hlen, const char *header, const void *data,
			 size_t data_len)
{
	size_t h = strlen(header);
	uint8_t *buf = malloc(8 + h + data_len + 1);
	ck_assert_ptr_nonnull(buf);
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(hlen >> (8 * i));
	memcpy(buf + 8, header, h);
	for (size_t i = 0; i < data_len; i++)
		buf[8 + h + i] = data ? ((const uint8_t *)data)[i] : (uint8_t)(i * 7 + 1);
	char *path = spit(name, buf, 8 + h + data_len);
	free(buf);
	return path;
}

static char *make_st(const char *name, const char *header, const void *data, size_t data_len)
{
	return make_st_raw(name, strlen(header), header, data, data_len);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* eng_st_read must fail, name the file, say `needle` (if given) and leave *f zeroed. */
static void expect_st_fail(const char *path, const char *needle)
{
	eng_st_file f;
	eng_err e = {0};
	memset(&f, 0xa5, sizeof f); /* the reader must not rely on a zeroed struct */
	ck_assert_int_eq(eng_st_read(&f, path, &e), -1);
	ck_assert_msg(strstr(e.msg, base_name(path)) != NULL, "message '%s' does not name '%s'",
		      e.msg, base_name(path));
	if (needle)
		ck_assert_msg(strstr(e.msg, needle) != NULL, "message '%s' does not say '%s'",
			      e.msg, needle);
	ck_assert_ptr_null(f.buf);
	ck_assert_ptr_null(f.t);
	ck_assert_ptr_null(f.path);
	ck_assert_int_eq(f.n, 0);
	eng_st_free(&f);
	eng_st_free(&f); /* twice: still harmless */
}

static void expect_st_ok(const char *path, eng_st_file *f)
{
	eng_err e = {0};
	ck_assert_msg(eng_st_read(f, path, &e) == 0, "eng_st_read failed: %s", e.msg);
}

/* The reference model as write entries; the floats are malloc'd, free with free_entries. */
static eng_st_entry *entries_of(const eng_st_file *f)
{
	eng_st_entry *e = calloc((size_t)f->n, sizeof *e);
	ck_assert_ptr_nonnull(e);
	for (int i = 0; i < f->n; i++) {
		const eng_st_tensor *t = &f->t[i];
		eng_err err = {0};
		float *x = malloc(eng_st_numel(t) * sizeof *x + 1);
		ck_assert_ptr_nonnull(x);
		ck_assert_msg(eng_st_get_f32(f, t->name, t->ndim, t->shape, x, &err) == 0, "%s",
			      err.msg);
		e[i].name = t->name;
		e[i].ndim = t->ndim;
		memcpy(e[i].shape, t->shape, sizeof e[i].shape);
		e[i].data = x;
	}
	return e;
}

static void free_entries(eng_st_entry *e, int n)
{
	for (int i = 0; i < n; i++)
		free((void *)e[i].data);
	free(e);
}

static void expect_same_file(const char *a, const char *b)
{
	size_t na, nb;
	uint8_t *ba = slurp(a, &na), *bb = slurp(b, &nb);
	ck_assert_uint_eq(na, nb);
	ck_assert_msg(memcmp(ba, bb, na) == 0, "%s and %s differ", a, b);
	free(ba);
	free(bb);
}

/* ---- reading the reference ----------------------------------------------------------- */

START_TEST(test_eng_st_read_reference)
{
	char *path = data_path(TINY_ST);
	eng_st_file f;
	expect_st_ok(path, &f);
	ck_assert_int_eq(f.n, TINY_NTENSORS);
	ck_assert_str_eq(f.path, path);
	ck_assert_ptr_eq(f.data + f.data_len, f.buf + f.buf_len);

	const eng_st_tensor *wte = eng_st_find(&f, "transformer.wte.weight");
	ck_assert_ptr_nonnull(wte);
	ck_assert_ptr_eq(wte, &f.t[0]); /* the header's order is kept */
	ck_assert_int_eq(wte->dtype, ENG_ST_F32);
	ck_assert_int_eq(wte->ndim, 2);
	ck_assert_int_eq(wte->shape[0], 1000);
	ck_assert_int_eq(wte->shape[1], 64);
	ck_assert_uint_eq(wte->begin, 0);
	ck_assert_uint_eq(wte->end, 1000 * 64 * 4);
	ck_assert_uint_eq(eng_st_numel(wte), 64000);
	ck_assert_ptr_null(eng_st_find(&f, "lm_head.weight")); /* tied, not stored */
	ck_assert_ptr_null(eng_st_find(&f, "__metadata__"));

	/* every name design.md §6 lists, with its shape */
	static const struct {
		const char *suffix;
		int ndim;
		int64_t d0, d1;
	} block[] = {
	    {"ln_1.weight", 1, 64, 0},		{"ln_1.bias", 1, 64, 0},
	    {"attn.c_attn.weight", 2, 64, 192}, {"attn.c_attn.bias", 1, 192, 0},
	    {"attn.c_proj.weight", 2, 64, 64},	{"attn.c_proj.bias", 1, 64, 0},
	    {"ln_2.weight", 1, 64, 0},		{"ln_2.bias", 1, 64, 0},
	    {"mlp.c_fc.weight", 2, 64, 256},	{"mlp.c_fc.bias", 1, 256, 0},
	    {"mlp.c_proj.weight", 2, 256, 64},	{"mlp.c_proj.bias", 1, 64, 0},
	};
	static float buf[256 * 64];
	eng_err e = {0};
	for (int l = 0; l < 2; l++) {
		for (size_t k = 0; k < sizeof block / sizeof block[0]; k++) {
			char name[128];
			snprintf(name, sizeof name, "transformer.h.%d.%s", l, block[k].suffix);
			int64_t shape[2] = {block[k].d0, block[k].d1};
			ck_assert_msg(eng_st_get_f32(&f, name, block[k].ndim, shape, buf, &e) == 0,
				      "%s", e.msg);
		}
	}
	int64_t wpe_shape[2] = {64, 64}, c_shape[1] = {64};
	ck_assert_msg(eng_st_get_f32(&f, "transformer.wpe.weight", 2, wpe_shape, buf, &e) == 0,
		      "%s", e.msg);
	ck_assert_msg(eng_st_get_f32(&f, "transformer.ln_f.weight", 1, c_shape, buf, &e) == 0, "%s",
		      e.msg);
	ck_assert_msg(eng_st_get_f32(&f, "transformer.ln_f.bias", 1, c_shape, buf, &e) == 0, "%s",
		      e.msg);

	/* values: finite, and not all zero (wte is a random init) */
	float *w = malloc(64000 * sizeof *w);
	ck_assert_ptr_nonnull(w);
	int64_t wte_shape[2] = {1000, 64};
	ck_assert_int_eq(eng_st_get_f32(&f, "transformer.wte.weight", 2, wte_shape, w, &e), 0);
	double ss = 0;
	for (int i = 0; i < 64000; i++) {
		ck_assert(isfinite(w[i]));
		ss += (double)w[i] * w[i];
	}
	ck_assert(ss > 0);
	float first;
	memcpy(&first, f.data, sizeof first);
	ck_assert(w[0] == first);
	free(w);
	eng_st_free(&f);
	ck_assert_ptr_null(f.buf);
	free(path);
}
END_TEST

START_TEST(test_eng_st_get_f32_shape_mismatch)
{
	char *path = data_path(TINY_ST);
	eng_st_file f;
	eng_err e = {0};
	float *buf = malloc(64000 * sizeof *buf);
	ck_assert_ptr_nonnull(buf);
	expect_st_ok(path, &f);

	int64_t swapped[2] = {64, 1000};
	ck_assert_int_eq(eng_st_get_f32(&f, "transformer.wte.weight", 2, swapped, buf, &e), -1);
	ck_assert_msg(strstr(e.msg, "model.safetensors") &&
			  strstr(e.msg, "transformer.wte.weight") && strstr(e.msg, "[64, 1000]") &&
			  strstr(e.msg, "[1000, 64]"),
		      "message '%s' lacks file, tensor, expected or found shape", e.msg);

	int64_t flat[1] = {64000};
	ck_assert_int_eq(eng_st_get_f32(&f, "transformer.wte.weight", 1, flat, buf, &e), -1);
	ck_assert_msg(strstr(e.msg, "[64000]") != NULL, "%s", e.msg);

	ck_assert_int_eq(eng_st_get_f32(&f, "lm_head.weight", 2, swapped, buf, &e), -1);
	ck_assert_msg(strstr(e.msg, "lm_head.weight") && strstr(e.msg, "model.safetensors") &&
			  strstr(e.msg, "not found"),
		      "%s", e.msg);
	eng_st_free(&f);
	free(buf);
	free(path);
}
END_TEST

/* ---- writing ----------------------------------------------------------------------------- */

START_TEST(test_eng_st_write_round_trip)
{
	char *ref = data_path(TINY_ST), *out = tmp_path("round_trip.safetensors");
	eng_st_file f, g;
	eng_err e = {0};
	expect_st_ok(ref, &f);
	eng_st_entry *ent = entries_of(&f);
	ck_assert_msg(eng_st_write(out, ent, f.n, &e) == 0, "%s", e.msg);

	/* the reference was written the way design.md §6 says, so the bytes must agree */
	expect_same_file(ref, out);

	expect_st_ok(out, &g);
	ck_assert_int_eq(g.n, f.n);
	for (int i = 0; i < f.n; i++) {
		ck_assert_str_eq(g.t[i].name, f.t[i].name);
		ck_assert_int_eq(g.t[i].ndim, f.t[i].ndim);
		for (int d = 0; d < f.t[i].ndim; d++)
			ck_assert_int_eq(g.t[i].shape[d], f.t[i].shape[d]);
		ck_assert_uint_eq(g.t[i].begin, f.t[i].begin);
		ck_assert_uint_eq(g.t[i].end, f.t[i].end);
		ck_assert(memcmp(g.data + g.t[i].begin, ent[i].data, g.t[i].end - g.t[i].begin) ==
			  0);
	}
	free_entries(ent, f.n);
	eng_st_free(&g);
	eng_st_free(&f);
	free(out);
	free(ref);
}
END_TEST

START_TEST(test_eng_st_write_deterministic)
{
	char *ref = data_path(TINY_ST);
	char *a = tmp_path("det_a.safetensors"), *b = tmp_path("det_b.safetensors");
	eng_st_file f;
	eng_err e = {0};
	expect_st_ok(ref, &f);
	eng_st_entry *e1 = entries_of(&f);
	ck_assert_msg(eng_st_write(a, e1, f.n, &e) == 0, "%s", e.msg);
	/* same values in other buffers, written again over an existing file */
	eng_st_entry *e2 = entries_of(&f);
	ck_assert_msg(eng_st_write(b, e2, f.n, &e) == 0, "%s", e.msg);
	ck_assert_msg(eng_st_write(b, e2, f.n, &e) == 0, "%s", e.msg);
	expect_same_file(a, b);
	free_entries(e1, f.n);
	free_entries(e2, f.n);
	eng_st_free(&f);
	free(a);
	free(b);
	free(ref);
}
END_TEST

START_TEST(test_eng_st_write_header)
{
	static const char prefix[] = "{\"__metadata__\":{\"format\":\"pt\"}";
	const float x[3] = {1.5f, -2.0f, 0.25f};
	/* names of every length mod 8, so each padding amount 0..7 occurs */
	for (int len = 1; len <= 8; len++) {
		char name[16], file[64];
		memset(name, 'n', (size_t)len);
		name[len] = 0;
		snprintf(file, sizeof file, "header_%d.safetensors", len);
		char *path = tmp_path(file);
		eng_st_entry ent = {.name = name, .ndim = 1, .shape = {3}, .data = x};
		eng_err e = {0};
		ck_assert_msg(eng_st_write(path, &ent, 1, &e) == 0, "%s", e.msg);

		size_t n;
		uint8_t *buf = slurp(path, &n);
		uint64_t hlen = 0;
		for (int i = 0; i < 8; i++)
			hlen |= (uint64_t)buf[i] << (8 * i);
		ck_assert_uint_eq(hlen % 8, 0);
		ck_assert_uint_eq(n, 8 + hlen + sizeof x);
		ck_assert(memcmp(buf + 8, prefix, sizeof prefix - 1) == 0);
		/* the JSON ends with '}', then only spaces up to the data */
		size_t end = 8 + (size_t)hlen;
		while (end > 8 && buf[end - 1] == ' ')
			end--;
		ck_assert_uint_eq(buf[end - 1], '}');
		ck_assert_uint_le(8 + hlen - end, 7);
		ck_assert(memcmp(buf + 8 + hlen, x, sizeof x) == 0);

		eng_st_file f;
		expect_st_ok(path, &f);
		ck_assert_int_eq(f.n, 1);
		ck_assert_str_eq(f.t[0].name, name);
		eng_st_free(&f);
		free(buf);
		free(path);
	}
}
END_TEST

START_TEST(test_eng_st_write_scalar_and_empty)
{
	char *path = tmp_path("scalar.safetensors");
	const float s = 3.25f, v[2] = {7.0f, 8.0f};
	eng_st_entry ent[3] = {
	    {.name = "scalar", .ndim = 0, .data = &s},
	    {.name = "empty", .ndim = 2, .shape = {0, 5}, .data = NULL},
	    {.name = "vec", .ndim = 1, .shape = {2}, .data = v},
	};
	eng_err e = {0};
	ck_assert_msg(eng_st_write(path, ent, 3, &e) == 0, "%s", e.msg);
	eng_st_file f;
	expect_st_ok(path, &f);
	ck_assert_int_eq(f.n, 3);
	float out[2] = {0, 0};
	ck_assert_int_eq(eng_st_get_f32(&f, "scalar", 0, NULL, out, &e), 0);
	ck_assert(out[0] == 3.25f);
	int64_t es[2] = {0, 5};
	ck_assert_int_eq(eng_st_get_f32(&f, "empty", 2, es, out, &e), 0);
	ck_assert_uint_eq(eng_st_find(&f, "empty")->begin, eng_st_find(&f, "empty")->end);
	int64_t vs[1] = {2};
	ck_assert_int_eq(eng_st_get_f32(&f, "vec", 1, vs, out, &e), 0);
	ck_assert(out[0] == 7.0f && out[1] == 8.0f);
	eng_st_free(&f);

	/* no tensors at all: a header and nothing else */
	ck_assert_msg(eng_st_write(path, NULL, 0, &e) == 0, "%s", e.msg);
	expect_st_ok(path, &f);
	ck_assert_int_eq(f.n, 0);
	ck_assert_uint_eq(f.data_len, 0);
	eng_st_free(&f);
	free(path);
}
END_TEST

/* eng_st_write must fail naming the file, and leave no file behind. */
static void expect_write_fail(const char *file, const eng_st_entry *ent, int n, const char *needle)
{
	char *path = tmp_path(file);
	eng_err e = {0};
	struct stat st;
	ck_assert_int_eq(eng_st_write(path, ent, n, &e), -1);
	ck_assert_msg(strstr(e.msg, file) != NULL, "message '%s' does not name %s", e.msg, file);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "message '%s' does not say '%s'", e.msg,
		      needle);
	ck_assert_int_ne(stat(path, &st), 0);
	free(path);
}

START_TEST(test_eng_st_write_bad)
{
	const float x[4] = {1, 2, 3, 4};
	eng_st_entry dup[2] = {{.name = "a", .ndim = 1, .shape = {4}, .data = x},
			       {.name = "a", .ndim = 1, .shape = {2}, .data = x}};
	expect_write_fail("w_dup.safetensors", dup, 2, "duplicate tensor name 'a'");
	eng_st_entry meta = {.name = "__metadata__", .ndim = 1, .shape = {4}, .data = x};
	expect_write_fail("w_meta.safetensors", &meta, 1, "duplicate tensor name");
	eng_st_entry nd5 = {.name = "a", .ndim = 5, .shape = {1, 1, 1, 1}, .data = x};
	expect_write_fail("w_nd5.safetensors", &nd5, 1, "5 dimensions");
	eng_st_entry neg = {.name = "a", .ndim = 2, .shape = {2, -2}, .data = x};
	expect_write_fail("w_neg.safetensors", &neg, 1, "[2, -2]");
	eng_st_entry huge = {.name = "a", .ndim = 2, .shape = {INT64_MAX, 4}, .data = x};
	expect_write_fail("w_huge.safetensors", &huge, 1, "too large");
	eng_st_entry nodata = {.name = "a", .ndim = 1, .shape = {4}, .data = NULL};
	expect_write_fail("w_nodata.safetensors", &nodata, 1, "no data");
	eng_st_entry noname = {.name = NULL, .ndim = 1, .shape = {4}, .data = x};
	expect_write_fail("w_noname.safetensors", &noname, 1, "no name");
	eng_st_entry badutf = {.name = "bad\xff", .ndim = 1, .shape = {4}, .data = x};
	expect_write_fail("w_utf8.safetensors", &badutf, 1, "UTF-8");
	eng_st_entry ok = {.name = "a", .ndim = 1, .shape = {4}, .data = x};
	expect_write_fail("no_such_dir/w.safetensors", &ok, 1, "No such file or directory");
}
END_TEST

/* ---- F16 and BF16 ------------------------------------------------------------------------ */

START_TEST(test_eng_st_get_f32_half)
{
	/* F16 [3,3]: 1, -2, 65504 (max), 2^-24 (min subnormal), 1023*2^-24 (max subnormal),
	 * -0, +inf, NaN, 0x3555 (0.333251953125); then BF16 [2,2]: 1, -3.140625, -inf,
	 * 0x0001 (2^-133, a float subnormal) */
	static const uint16_t h[9] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff,
				      0x8000, 0x7c00, 0x7e00, 0x3555};
	static const uint16_t b[4] = {0x3f80, 0xc049, 0xff80, 0x0001};
	uint8_t data[26];
	for (int i = 0; i < 9; i++) {
		data[2 * i] = (uint8_t)(h[i] & 0xff); /* little-endian, whatever the host */
		data[2 * i + 1] = (uint8_t)(h[i] >> 8);
	}
	for (int i = 0; i < 4; i++) {
		data[18 + 2 * i] = (uint8_t)(b[i] & 0xff);
		data[18 + 2 * i + 1] = (uint8_t)(b[i] >> 8);
	}
	char *path = make_st("half.safetensors",
			     "{\"h\":{\"dtype\":\"F16\",\"shape\":[3,3],\"data_offsets\":[0,18]},"
			     "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[18,26]}}",
			     data, sizeof data);
	eng_st_file f;
	eng_err e = {0};
	expect_st_ok(path, &f);
	ck_assert_int_eq(eng_st_find(&f, "h")->dtype, ENG_ST_F16);
	ck_assert_int_eq(eng_st_find(&f, "b")->dtype, ENG_ST_BF16);
	ck_assert_str_eq(eng_st_dtype_name(ENG_ST_BF16), "BF16");

	float x[9];
	int64_t hs[2] = {3, 3}, bs[2] = {2, 2};
	ck_assert_msg(eng_st_get_f32(&f, "h", 2, hs, x, &e) == 0, "%s", e.msg);
	ck_assert(x[0] == 1.0f);
	ck_assert(x[1] == -2.0f);
	ck_assert(x[2] == 65504.0f);
	ck_assert(x[3] == ldexpf(1.0f, -24));
	ck_assert(x[4] == ldexpf(1023.0f, -24));
	ck_assert(x[5] == 0.0f && signbit(x[5]));
	ck_assert(isinf(x[6]) && x[6] > 0);
	ck_assert(isnan(x[7]));
	ck_assert(x[8] == 0.333251953125f);

	ck_assert_msg(eng_st_get_f32(&f, "b", 2, bs, x, &e) == 0, "%s", e.msg);
	ck_assert(x[0] == 1.0f);
	ck_assert(x[1] == -3.140625f);
	ck_assert(isinf(x[2]) && x[2] < 0);
	ck_assert(x[3] == ldexpf(1.0f, -133));
	eng_st_free(&f);
	free(path);
}
END_TEST

/* eng_st_open reads each tensor from the open file as eng_st_read gives it from memory: a
 * BF16 tensor longer than its read buffer, an F32 one, an F16 one; a file cut short after
 * the open is an error of the read that reaches past its end. */
START_TEST(test_eng_st_open_streams)
{
	enum { NB = 70001, NF = 37, NH = 5 };
	size_t len = 2 * NB + 4 * NF + 2 * NH;
	uint8_t *data = malloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	char header[512];
	snprintf(header, sizeof header, "{\"b\":{\"dtype\":\"BF16\",\"shape\":[%d],"
		"\"data_offsets\":[0,%d]},\"f\":{\"dtype\":\"F32\",\"shape\":[%d],"
		"\"data_offsets\":[%d,%d]},\"h\":{\"dtype\":\"F16\",\"shape\":[%d],"
		"\"data_offsets\":[%d,%zu]}}", NB, 2 * NB, NF, 2 * NB, 2 * NB + 4 * NF, NH,
		2 * NB + 4 * NF, len);
	char *path = make_st("stream.safetensors", header, data, len);
	eng_st_file whole, open;
	eng_err e = {0};
	expect_st_ok(path, &whole);
	ck_assert_msg(eng_st_open(&open, path, &e) == 0, "%s", e.msg);
	static const char *const names[] = {"b", "f", "h"};
	const int64_t n[] = {NB, NF, NH};
	float *a = malloc(NB * sizeof *a), *b = malloc(NB * sizeof *b);
	for (int k = 0; k < 3; k++) {
		ck_assert(eng_st_get_f32(&whole, names[k], 1, &n[k], a, &e) == 0);
		ck_assert_msg(eng_st_get_f32(&open, names[k], 1, &n[k], b, &e) == 0, "%s", e.msg);
		ck_assert_msg(memcmp(a, b, (size_t)n[k] * sizeof *a) == 0, "tensor %s", names[k]);
	}
	ck_assert(truncate(path, 8 + 100) == 0);
	ck_assert_int_eq(eng_st_get_f32(&open, "f", 1, &n[1], b, &e), -1);
	ck_assert_msg(strstr(e.msg, "shrank"), "%s", e.msg);
	eng_st_free(&open);
	eng_st_free(&whole);
	free(a);
	free(b);
	free(data);
	free(path);
}
END_TEST

/* The data section need not be aligned: a header whose length is not a multiple of 8. */
START_TEST(test_eng_st_read_unpadded)
{
	const float x[3] = {0.5f, -1.25f, 1e-30f};
	char *path = make_st("unpadded.safetensors",
			     "{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", x,
			     sizeof x);
	eng_st_file f;
	eng_err e = {0};
	float y[3];
	int64_t s[1] = {3};
	expect_st_ok(path, &f);
	ck_assert_int_eq(eng_st_get_f32(&f, "x", 1, s, y, &e), 0);
	ck_assert(memcmp(x, y, sizeof x) == 0);
	eng_st_free(&f);
	free(path);
}
END_TEST

/* Only __metadata__, no tensors, empty data section: valid. So is a zero-size tensor whose
 * other dimension is huge (no overflow when a dimension is 0). */
START_TEST(test_eng_st_read_edge_valid)
{
	char *p1 =
	    make_st("meta_only.safetensors", "{\"__metadata__\":{\"format\":\"pt\"}}", NULL, 0);
	char *p2 = make_st("zero_dim.safetensors",
			   "{\"z\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,0],"
			   "\"data_offsets\":[0,0]},"
			   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}  ",
			   NULL, 4);
	eng_st_file f;
	expect_st_ok(p1, &f);
	ck_assert_int_eq(f.n, 0);
	eng_st_free(&f);
	expect_st_ok(p2, &f);
	ck_assert_int_eq(f.n, 2);
	ck_assert_uint_eq(eng_st_numel(&f.t[0]), 0);
	eng_st_free(&f);
	free(p1);
	free(p2);
}
END_TEST

/* ---- damaged files ----------------------------------------------------------------------- */

START_TEST(test_eng_st_read_missing_file)
{
	char *path = tmp_path("does_not_exist.safetensors");
	expect_st_fail(path, "No such file or directory");
	free(path);
}
END_TEST

START_TEST(test_eng_st_read_directory)
{
	expect_st_fail(t_env("REMAT_TMP"), "not a regular file");
}
END_TEST

START_TEST(test_eng_st_read_too_short)
{
	char *p0 = spit("empty.safetensors", "", 0);
	char *p4 = spit("short.safetensors", "\x10\0\0\0", 4);
	expect_st_fail(p0, "shorter than");
	expect_st_fail(p4, "shorter than");
	free(p0);
	free(p4);
}
END_TEST

/* The reference, cut short in the data section, or with bytes added at the end. */
START_TEST(test_eng_st_read_truncated)
{
	char *ref = data_path(TINY_ST);
	size_t n;
	uint8_t *buf = slurp(ref, &n);
	char *half = spit("truncated.safetensors", buf, n / 2);
	expect_st_fail(half, "past the end of the data section");
	char *less = spit("truncated1.safetensors", buf, n - 1);
	expect_st_fail(less, "past the end of the data section");
	char *hdr = spit("truncated_hdr.safetensors", buf, 100);
	expect_st_fail(hdr, "past the end of the file");
	free(half);
	free(less);
	free(hdr);
	free(buf);
	free(ref);
}
END_TEST

START_TEST(test_eng_st_read_trailing_bytes)
{
	char *ref = data_path(TINY_ST);
	size_t n;
	uint8_t *buf = slurp(ref, &n);
	uint8_t *more = calloc(n + 4, 1);
	ck_assert_ptr_nonnull(more);
	memcpy(more, buf, n);
	char *path = spit("trailing.safetensors", more, n + 4);
	expect_st_fail(path, "4 trailing bytes");
	char *small =
	    make_st("trailing_small.safetensors",
		    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", NULL, 12);
	expect_st_fail(small, "trailing");
	free(small);
	free(path);
	free(more);
	free(buf);
	free(ref);
}
END_TEST

/* Every bit of every byte of the length field flipped in turn: never accepted. */
START_TEST(test_eng_st_read_header_len_flipped)
{
	char *ref = data_path(TINY_ST);
	size_t n;
	uint8_t *buf = slurp(ref, &n);
	for (int byte = 0; byte < 8; byte++) {
		for (int bit = 0; bit < 8; bit++) {
			char name[64];
			snprintf(name, sizeof name, "flip_%d_%d.safetensors", byte, bit);
			buf[byte] ^= (uint8_t)(1u << bit);
			char *path = spit(name, buf, n);
			buf[byte] ^= (uint8_t)(1u << bit);
			expect_st_fail(path, NULL);
			free(path);
		}
	}
	buf[7] ^= 0xff;
	char *path = spit("flip_top.safetensors", buf, n);
	expect_st_fail(path, "exceeds the limit");
	free(path);
	free(buf);
	free(ref);
}
END_TEST

static const char one_tensor[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";

START_TEST(test_eng_st_read_header_len_zero)
{
	char *path = make_st_raw("hlen0.safetensors", 0, one_tensor, NULL, 8);
	expect_st_fail(path, "header length is 0");
	free(path);
}
END_TEST

START_TEST(test_eng_st_read_header_len_past_end)
{
	size_t h = strlen(one_tensor);
	char *p1 = make_st_raw("hlen_past.safetensors", h + 8 + 1, one_tensor, NULL, 8);
	expect_st_fail(p1, "past the end of the file");
	char *p2 = make_st_raw("hlen_max.safetensors", UINT64_MAX, one_tensor, NULL, 8);
	expect_st_fail(p2, "exceeds the limit");
	/* a length short of the JSON's end cuts the object */
	char *p3 = make_st_raw("hlen_short.safetensors", h - 1, one_tensor, NULL, 8);
	expect_st_fail(p3, "not valid JSON");
	free(p1);
	free(p2);
	free(p3);
}
END_TEST

/* A damaged header, given as text, must fail and say `needle`. */
#define ST_BAD(name, header, data_len, needle)                                                     \
	START_TEST(test_eng_st_read_##name)                                                        \
	{                                                                                          \
		char *path = make_st(#name ".safetensors", header, NULL, data_len);                \
		expect_st_fail(path, needle);                                                      \
		free(path);                                                                        \
	}                                                                                          \
	END_TEST

#define ENTRY(n, dt, shape, b, e)                                                                  \
	"\"" n "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

ST_BAD(overlap, "{" ENTRY("a", "F32", "[2]", 0, 8) "," ENTRY("b", "F32", "[2]", 4, 12) "}", 12,
       "overlap")
ST_BAD(gap, "{" ENTRY("a", "F32", "[2]", 0, 8) "," ENTRY("b", "F32", "[2]", 12, 20) "}", 20,
       "gap of 4 bytes")
ST_BAD(dtype_i64, "{" ENTRY("a", "I64", "[2]", 0, 16) "}", 16, "unsupported dtype 'I64'")
ST_BAD(size_mismatch, "{" ENTRY("a", "F32", "[3]", 0, 8) "}", 8, "needs 12")
ST_BAD(duplicate_name, "{" ENTRY("a", "F32", "[2]", 0, 8) "," ENTRY("a", "F32", "[2]", 8, 16) "}",
       16, "duplicate")
ST_BAD(unknown_key, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"foo\":1}}", 8,
       "unknown key 'foo'")
ST_BAD(header_array, "[1,2]", 8, "not a JSON object")

/* More damaged headers, one process per row (a loop test). */
static const struct {
	const char *name, *header;
	size_t data_len;
	const char *needle;
} bad_headers[] = {
    {"overlap_same", "{" ENTRY("a", "F32", "[2]", 0, 8) "," ENTRY("b", "F32", "[2]", 0, 8) "}", 8,
     "overlap"},
    {"gap_at_start", "{" ENTRY("a", "F32", "[2]", 4, 12) "}", 12, "gap of 4 bytes"},
    {"dtype_not_string", "{\"a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     "tensor 'a'"},
    {"size_mismatch_half", "{" ENTRY("a", "F16", "[2,2]", 0, 16) "}", 16, "needs 8"},
    {"missing_key", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "data_offsets"},
    {"entry_not_object", "{\"a\":[0,8]}", 8, "not a JSON object"},
    {"header_string", "\"x\"", 8, "not valid JSON"},
    {"header_garbage", "{\"a\":", 8, "not valid JSON"},
    {"header_trailing_garbage", "{}x", 0, "not valid JSON"},
    {"metadata_not_object", "{\"__metadata__\":[\"pt\"]}", 0, "__metadata__ is not"},
    {"metadata_not_string", "{\"__metadata__\":{\"format\":1}}", 0, "not a string"},
    {"too_many_dims", "{" ENTRY("a", "F32", "[1,1,1,1,1]", 0, 4) "}", 4, "5 dimensions"},
    {"negative_dim", "{" ENTRY("a", "F32", "[-2]", 0, 8) "}", 8, "shape[0]"},
    {"float_dim", "{" ENTRY("a", "F32", "[2.0]", 0, 8) "}", 8, "shape[0]"},
    {"shape_not_array", "{" ENTRY("a", "F32", "2", 0, 8) "}", 8, "shape is not an array"},
    {"shape_overflow", "{" ENTRY("a", "F32", "[4611686018427387904,4]", 0, 8) "}", 8, "too large"},
    {"shape_overflow_bytes", "{" ENTRY("a", "F32", "[4611686018427387904]", 0, 8) "}", 8,
     "too large"},
    {"offsets_reversed", "{" ENTRY("a", "F32", "[0]", 8, 0) "}", 8, "begin"},
    {"offsets_negative", "{" ENTRY("a", "F32", "[2]", -8, 0) "}", 8, "begin"},
    {"offsets_past_end", "{" ENTRY("a", "F32", "[2]", 0, 8) "}", 4, "past the end"},
    {"offsets_huge", "{" ENTRY("a", "F32", "[2]", 9223372036854775800, 9223372036854775807) "}", 4,
     "past the end"},
    {"offsets_three", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8,
     "two integers"},
    {"offsets_float", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8.0]}}", 8,
     "two integers"},
};

START_TEST(test_eng_st_read_bad_header)
{
	char file[96];
	snprintf(file, sizeof file, "%s.safetensors", bad_headers[_i].name);
	char *path = make_st(file, bad_headers[_i].header, NULL, bad_headers[_i].data_len);
	expect_st_fail(path, bad_headers[_i].needle);
	free(path);
}
END_TEST

/* Random byte changes anywhere in the reference: each read succeeds or fails cleanly
 * (under ASan this is the crash test). A changed byte inside the data stays valid. */
START_TEST(test_eng_st_read_random_damage)
{
	char *ref = data_path(TINY_ST);
	size_t n;
	uint8_t *buf = slurp(ref, &n);
	uint64_t hlen = 0;
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)buf[i] << (8 * i);
	uint32_t rng = 12345;
	int failed = 0;
	for (int k = 0; k < 300; k++) {
		rng = rng * 1664525u + 1013904223u;
		size_t pos = (rng >> 8) % (8 + (size_t)hlen); /* length field or header */
		rng = rng * 1664525u + 1013904223u;
		uint8_t val = (uint8_t)(rng >> 24);
		uint8_t old = buf[pos];
		buf[pos] = val;
		char *path = spit("damage.safetensors", buf, n);
		buf[pos] = old;
		eng_st_file f;
		eng_err e = {0};
		if (eng_st_read(&f, path, &e) != 0) {
			failed++;
			ck_assert_msg(strstr(e.msg, "damage.safetensors") != NULL, "%s", e.msg);
		}
		eng_st_free(&f);
		free(path);
	}
	ck_assert_int_gt(failed, 100); /* most changes must be caught */
	free(buf);
	free(ref);
}
END_TEST

/* ---- config.json ------------------------------------------------------------------------- */

START_TEST(test_eng_hfconfig_read_reference)
{
	char *path = data_path(TINY_CFG);
	eng_config c;
	eng_err e = {0};
	ck_assert_msg(eng_hfconfig_read(path, &c, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(c.n_layer, 2);
	ck_assert_int_eq(c.n_embd, 64);
	ck_assert_int_eq(c.n_head, 4);
	ck_assert_int_eq(c.n_positions, 64);
	ck_assert_int_eq(c.vocab_size, 1000);
	free(path);
}
END_TEST

START_TEST(test_eng_hfconfig_write_round_trip)
{
	char *ref = data_path(TINY_CFG), *out = tmp_path("config_rt.json");
	eng_config c, d;
	eng_err e = {0};
	ck_assert_msg(eng_hfconfig_read(ref, &c, &e) == 0, "%s", e.msg);
	ck_assert_msg(eng_hfconfig_write(out, &c, &e) == 0, "%s", e.msg);
	ck_assert_msg(eng_hfconfig_read(out, &d, &e) == 0, "%s", e.msg);
	ck_assert(memcmp(&c, &d, sizeof c) == 0);

	/* the same keys in the same order with the same values as the reference, which
	 * transformers wrote (only number spelling may differ: jansson prints 1e-5) */
	size_t nr, no;
	char *r = (char *)slurp(ref, &nr), *o = (char *)slurp(out, &no);
	ck_assert_int_eq(o[no - 1], '\n');
	json_t *jr = json_loads(r, 0, NULL), *jo = json_loads(o, 0, NULL);
	ck_assert_ptr_nonnull(jr);
	ck_assert_ptr_nonnull(jo);
	ck_assert_msg(json_equal(jr, jo), "written config differs from %s:\n%s", ref, o);
	void *ir = json_object_iter(jr), *io = json_object_iter(jo);
	for (; ir && io; ir = json_object_iter_next(jr, ir), io = json_object_iter_next(jo, io))
		ck_assert_str_eq(json_object_iter_key(ir), json_object_iter_key(io));
	ck_assert(ir == NULL && io == NULL);
	json_decref(jr);
	json_decref(jo);
	/* architecture only: nothing of a run's transient settings */
	static const char *const banned[] = {"remat",  "recompute", "checkpoint", "thread",
					     "device", "policy",    "section"};
	for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
		ck_assert_msg(strstr(o, banned[i]) == NULL, "config.json mentions '%s'", banned[i]);

	/* another shape, written twice: same bytes */
	eng_config odd = {
	    .n_layer = 3, .n_embd = 48, .n_head = 3, .n_positions = 40, .vocab_size = 517};
	char *o1 = tmp_path("config_odd1.json"), *o2 = tmp_path("config_odd2.json");
	ck_assert_msg(eng_hfconfig_write(o1, &odd, &e) == 0, "%s", e.msg);
	ck_assert_msg(eng_hfconfig_write(o2, &odd, &e) == 0, "%s", e.msg);
	expect_same_file(o1, o2);
	ck_assert_msg(eng_hfconfig_read(o1, &d, &e) == 0, "%s", e.msg);
	ck_assert(memcmp(&odd, &d, sizeof d) == 0);
	size_t n1;
	char *t1 = (char *)slurp(o1, &n1);
	ck_assert_ptr_nonnull(strstr(t1, "\"bos_token_id\": 516"));
	ck_assert_ptr_nonnull(strstr(t1, "\"n_inner\": null"));
	free(t1);
	free(o1);
	free(o2);
	free(r);
	free(o);
	free(out);
	free(ref);
}
END_TEST

START_TEST(test_eng_hfconfig_write_bad)
{
	eng_config c = {
	    .n_layer = 2, .n_embd = 64, .n_head = 5, .n_positions = 64, .vocab_size = 1000};
	eng_err e = {0};
	struct stat st;
	char *path = tmp_path("config_bad_write.json");
	ck_assert_int_eq(eng_hfconfig_write(path, &c, &e), -1);
	ck_assert_msg(strstr(e.msg, "config_bad_write.json") && strstr(e.msg, "n_head"), "%s",
		      e.msg);
	ck_assert_int_ne(stat(path, &st), 0);
	c.n_head = 4;
	char *nodir = tmp_path("no_such_dir/config.json");
	ck_assert_int_eq(eng_hfconfig_write(nodir, &c, &e), -1);
	ck_assert_msg(strstr(e.msg, "No such file or directory"), "%s", e.msg);
	free(nodir);
	free(path);
}
END_TEST

/* A config.json from text: a read must fail naming the file and saying `needle`. */
static void expect_cfg_fail(const char *file, const char *text, const char *needle)
{
	char *path = t_write_tmp(file, text);
	eng_config c = {0};
	eng_err e = {0};
	ck_assert_int_eq(eng_hfconfig_read(path, &c, &e), -1);
	ck_assert_msg(strstr(e.msg, file) != NULL, "'%s' does not name %s", e.msg, file);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "'%s' does not say '%s'", e.msg, needle);
	ck_assert_int_eq(c.n_layer, 0); /* untouched on failure */
	free(path);
}

#define CFG_BAD(name, text, needle)                                                                \
	START_TEST(test_eng_hfconfig_read_##name)                                                  \
	{                                                                                          \
		expect_cfg_fail(#name ".json", text, needle);                                      \
	}                                                                                          \
	END_TEST

#define CFG_SHAPE "\"n_layer\":2,\"n_head\":4,\"n_positions\":64,\"vocab_size\":1000"

/* the good case of the same form, so the bad ones differ in one thing only */
START_TEST(test_eng_hfconfig_read_minimal)
{
	char *p1 = t_write_tmp("minimal.json", "{\"n_embd\":64," CFG_SHAPE "}");
	char *p2 =
	    t_write_tmp("n_ctx.json", "{\"n_embd\":64,\"n_layer\":2,\"n_head\":4,\"n_ctx\":32,"
				      "\"vocab_size\":1000,\"model_type\":\"gpt2\",\"n_inner\":256,"
				      "\"activation_function\":\"gelu_pytorch_tanh\","
				      "\"layer_norm_epsilon\":1e-5,\"tie_word_embeddings\":true,"
				      "\"scale_attn_weights\":true,\"use_cache\":true}");
	eng_config c;
	eng_err e = {0};
	ck_assert_msg(eng_hfconfig_read(p1, &c, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(c.n_positions, 64);
	ck_assert_msg(eng_hfconfig_read(p2, &c, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(c.n_positions, 32);
	free(p1);
	free(p2);
}
END_TEST

CFG_BAD(missing_n_embd, "{" CFG_SHAPE "}", "missing key 'n_embd'")
CFG_BAD(n_embd_not_multiple,
	"{\"n_embd\":64,\"n_layer\":2,\"n_head\":5,\"n_positions\":64,\"vocab_size\":1000}",
	"not a multiple of n_head")
CFG_BAD(wrong_activation, "{\"n_embd\":64,\"activation_function\":\"relu\"," CFG_SHAPE "}",
	"activation_function")
CFG_BAD(n_inner_wrong, "{\"n_embd\":64,\"n_inner\":128," CFG_SHAPE "}", "n_inner")
CFG_BAD(not_json, "n_embd = 64\n", "not valid JSON")

/* More bad configs, one process per row (a loop test). */
static const struct {
	const char *name, *text, *needle;
} bad_configs[] = {
    {"missing_positions", "{\"n_embd\":64,\"n_layer\":2,\"n_head\":4,\"vocab_size\":1000}",
     "n_positions"},
    {"n_embd_string", "{\"n_embd\":\"64\"," CFG_SHAPE "}", "'n_embd' is not an integer"},
    {"n_embd_float", "{\"n_embd\":64.0," CFG_SHAPE "}", "'n_embd' is not an integer"},
    {"n_embd_huge", "{\"n_embd\":100000000000," CFG_SHAPE "}", "n_embd"},
    {"n_layer_zero",
     "{\"n_embd\":64,\"n_layer\":0,\"n_head\":4,\"n_positions\":64,\"vocab_size\":1000}",
     "n_layer"},
    {"exact_gelu", "{\"n_embd\":64,\"activation_function\":\"gelu\"," CFG_SHAPE "}",
     "activation_function"},
    {"layer_norm_eps", "{\"n_embd\":64,\"layer_norm_epsilon\":1e-6," CFG_SHAPE "}",
     "layer_norm_epsilon"},
    {"untied", "{\"n_embd\":64,\"tie_word_embeddings\":false," CFG_SHAPE "}",
     "tie_word_embeddings"},
    {"inverse_layer_scaling",
     "{\"n_embd\":64,\"scale_attn_by_inverse_layer_idx\":true," CFG_SHAPE "}",
     "scale_attn_by_inverse_layer_idx"},
    {"model_type_other", "{\"n_embd\":64,\"model_type\":\"mistral\"," CFG_SHAPE "}",
     "'model_type' must be"},
    {"llama_keys_missing", "{\"n_embd\":64,\"model_type\":\"llama\"," CFG_SHAPE "}",
     "missing key 'num_hidden_layers'"},
    {"duplicate_key", "{\"n_embd\":64,\"n_embd\":32," CFG_SHAPE "}", "duplicate"},
    {"not_object", "[64]", "not a JSON object"},
};

START_TEST(test_eng_hfconfig_read_bad)
{
	char file[96];
	snprintf(file, sizeof file, "%s.json", bad_configs[_i].name);
	expect_cfg_fail(file, bad_configs[_i].text, bad_configs[_i].needle);
}
END_TEST

START_TEST(test_eng_hfconfig_read_missing_file)
{
	char *path = tmp_path("no_config.json");
	eng_config c;
	eng_err e = {0};
	ck_assert_int_eq(eng_hfconfig_read(path, &c, &e), -1);
	ck_assert_msg(strstr(e.msg, "cannot open") && strstr(e.msg, "no_config.json") &&
			  strstr(e.msg, "No such file or directory"),
		      "%s", e.msg);
	free(path);
}
END_TEST

/* ---- suite ------------------------------------------------------------------------------- */

/* A new test case of s, with the timeout and the tests of list (NULL-terminated). */
static TCase *add_tcase(Suite *s, const char *name, const TTest *const *list)
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, TIMEOUT);
	for (; *list; list++)
		tcase_add_test(tc, *list);
	suite_add_tcase(s, tc);
	return tc;
}

Suite *suite_st(void)
{
	Suite *s = suite_create("st");
	const TTest *tc_read[] = {test_eng_st_read_reference,  test_eng_st_read_unpadded,
				  test_eng_st_read_edge_valid, test_eng_st_get_f32_shape_mismatch,
				  test_eng_st_get_f32_half,    test_eng_st_open_streams, NULL};
	const TTest *tc_write[] = {test_eng_st_write_round_trip, test_eng_st_write_deterministic,
				   test_eng_st_write_header,	 test_eng_st_write_scalar_and_empty,
				   test_eng_st_write_bad,	 NULL};
	const TTest *tc_damaged[] = {test_eng_st_read_missing_file,
				     test_eng_st_read_directory,
				     test_eng_st_read_too_short,
				     test_eng_st_read_truncated,
				     test_eng_st_read_trailing_bytes,
				     test_eng_st_read_header_len_flipped,
				     test_eng_st_read_header_len_zero,
				     test_eng_st_read_header_len_past_end,
				     test_eng_st_read_overlap,
				     test_eng_st_read_gap,
				     test_eng_st_read_dtype_i64,
				     test_eng_st_read_size_mismatch,
				     test_eng_st_read_duplicate_name,
				     test_eng_st_read_unknown_key,
				     test_eng_st_read_header_array,
				     test_eng_st_read_random_damage,
				     NULL};
	const TTest *tc_hfconfig[] = {test_eng_hfconfig_read_reference,
				      test_eng_hfconfig_read_minimal,
				      test_eng_hfconfig_write_round_trip,
				      test_eng_hfconfig_write_bad,
				      test_eng_hfconfig_read_missing_file,
				      test_eng_hfconfig_read_missing_n_embd,
				      test_eng_hfconfig_read_n_embd_not_multiple,
				      test_eng_hfconfig_read_wrong_activation,
				      test_eng_hfconfig_read_n_inner_wrong,
				      test_eng_hfconfig_read_not_json,
				      NULL};
	add_tcase(s, "read", tc_read);
	add_tcase(s, "write", tc_write);
	TCase *tc = add_tcase(s, "damaged", tc_damaged);
	tcase_add_loop_test(tc, test_eng_st_read_bad_header, 0,
			    (int)(sizeof bad_headers / sizeof bad_headers[0]));
	tc = add_tcase(s, "hfconfig", tc_hfconfig);
	tcase_add_loop_test(tc, test_eng_hfconfig_read_bad, 0,
			    (int)(sizeof bad_configs / sizeof bad_configs[0]));
	return s;
}
