/* fuzz_st.c - libFuzzer target for the safetensors reader, engine/io/eng_st.c.
 *
 * What it is: the input is a whole safetensors file, handed to eng_st_parse. A rejected one
 * must leave the struct zeroed and a message naming the file. An accepted one must hold
 * together: names unique and found by eng_st_find, each tensor's bytes match its shape and
 * dtype, the tensors tile the data section; every tensor converts with eng_st_get_f32 (F32
 * bit for bit, F16 and BF16 checked against an independent decoding) and a wrong shape is
 * refused. The converted tensors are then written with eng_st_write to a file under /tmp
 * (one per process, removed at exit) and read back with eng_st_read: same names, shapes
 * and bits, all F32, contiguous from 0 in the given order. Invariants that fail abort, so
 * libFuzzer reports them as crashes; leaks are reported by its LeakSanitizer. A custom
 * mutator mostly keeps the 8-byte header length in step with the mutated JSON.
 * What it is not: a test of the checkpoint code above eng_st. Built by the Makefile with
 * clang -fsanitize=fuzzer,address,undefined; `make test` runs it briefly, `make fuzz`
 * longer.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_st.h"

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_st: check failed at line %d: %s\n", __LINE__,        \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define NAME "fuzz.safetensors" /* the name eng_st_parse puts in its messages */
/* Larger tensors are not converted (none below 32 MiB of input: an element takes 2 bytes). */
#define MAX_NUMEL ((size_t)16 << 20)

static char tmp_path[64]; /* this process's scratch file, "" until the first write */

static void remove_tmp(void)
{
	if (tmp_path[0])
		unlink(tmp_path);
}

static const char *scratch(void)
{
	if (!tmp_path[0]) {
		snprintf(tmp_path, sizeof tmp_path, "/tmp/fuzz-st-%ld.safetensors", (long)getpid());
		atexit(remove_tmp);
	}
	return tmp_path;
}

static size_t item_size(eng_st_dtype d)
{
	return d == ENG_ST_F32 ? 4 : 2;
}

/* 2^e as a float, exactly, for -24 <= e <= 15; no libm. */
static float pow2(int e)
{
	float x = 1.0f;
	for (; e > 0; e--)
		x *= 2.0f;
	for (; e < 0; e++)
		x *= 0.5f;
	return x;
}

/* An F16 value decoded another way than eng_st does: by arithmetic, not by bits. */
static void check_half(uint16_t h, float got)
{
	uint32_t bits;
	memcpy(&bits, &got, sizeof bits);
	int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	CHECK((int)(bits >> 31) == sign);
	if (exp == 31 && mant != 0) {
		/* NaN: quiet or not, the payload moves to the top of the float's mantissa */
		CHECK((bits & 0x7f800000u) == 0x7f800000u);
		CHECK((bits & 0x7fffffu) == (uint32_t)mant << 13);
		return;
	}
	float want;
	if (exp == 31)
		want = INFINITY;
	else if (exp == 0)
		want = (float)mant * pow2(-24);
	else
		want = (float)(1024 + mant) * pow2(exp - 25);
	CHECK((sign ? -got : got) == want);
}

/* Converts tensor t of f to float32 into a malloc'd array, checking every value against the
 * file's bytes. NULL if the tensor is too large to convert here. */
static float *convert(const eng_st_file *f, const eng_st_tensor *t)
{
	eng_err err = {0};
	size_t n = eng_st_numel(t);
	if (n > MAX_NUMEL)
		return NULL;
	float *x = malloc(n ? n * sizeof *x : 1);
	CHECK(x != NULL);
	CHECK(eng_st_get_f32(f, t->name, t->ndim, t->shape, x, &err) == 0);
	const uint8_t *p = f->data + t->begin;
	for (size_t i = 0; i < n; i++) {
		uint32_t bits;
		memcpy(&bits, &x[i], sizeof bits);
		switch (t->dtype) {
		case ENG_ST_F32:
			CHECK(memcmp(&x[i], p + 4 * i, 4) == 0);
			break;
		case ENG_ST_F16:
			check_half((uint16_t)(p[2 * i] | p[2 * i + 1] << 8), x[i]);
			break;
		case ENG_ST_BF16:
			CHECK((bits & 0xffff) == 0);
			CHECK((bits >> 16) == (uint32_t)(p[2 * i] | p[2 * i + 1] << 8));
			break;
		}
	}

	/* a shape that differs in one dimension, or in the number of them, is refused */
	int64_t other[ENG_ST_MAX_NDIM] = {0};
	memcpy(other, t->shape, sizeof other);
	if (t->ndim > 0) {
		other[t->ndim - 1]++;
		CHECK(eng_st_get_f32(f, t->name, t->ndim, other, x, &err) == -1);
		CHECK(strstr(err.msg, t->name) && strstr(err.msg, NAME));
		other[t->ndim - 1]--;
	}
	if (t->ndim < ENG_ST_MAX_NDIM) {
		other[t->ndim] = 1;
		CHECK(eng_st_get_f32(f, t->name, t->ndim + 1, other, x, &err) == -1);
	}
	return x;
}

/* Writes the converted tensors (those skipped as too large left out) and reads them back. */
static void round_trip(const eng_st_file *f, float **vals)
{
	eng_err err = {0};
	eng_st_entry *e = calloc(f->n ? (size_t)f->n : 1, sizeof *e);
	CHECK(e != NULL);
	int m = 0;
	for (int i = 0; i < f->n; i++) {
		if (!vals[i])
			continue;
		e[m].name = f->t[i].name;
		e[m].ndim = f->t[i].ndim;
		memcpy(e[m].shape, f->t[i].shape, sizeof e[m].shape);
		e[m].data = vals[i];
		m++;
	}
	const char *path = scratch();
	if (eng_st_write(path, e, m, &err) != 0) {
		/* the names came out of a JSON header and are unique: nothing to refuse */
		fprintf(stderr, "fuzz_st: eng_st_write failed: %s\n", err.msg);
		abort();
	}

	eng_st_file g;
	if (eng_st_read(&g, path, &err) != 0) {
		fprintf(stderr, "fuzz_st: cannot read back what eng_st_write wrote: %s\n", err.msg);
		abort();
	}
	CHECK(g.n == m);
	size_t pos = 0;
	for (int i = 0; i < m; i++) {
		const eng_st_tensor *t = &g.t[i];
		CHECK(strcmp(t->name, e[i].name) == 0);
		CHECK(t->dtype == ENG_ST_F32 && t->ndim == e[i].ndim);
		CHECK(memcmp(t->shape, e[i].shape, (size_t)t->ndim * sizeof t->shape[0]) == 0);
		CHECK(t->begin == pos);
		size_t bytes = t->end - t->begin;
		CHECK(bytes == eng_st_numel(t) * sizeof(float));
		CHECK(bytes == 0 || memcmp(g.data + t->begin, e[i].data, bytes) == 0);
		pos = t->end;
	}
	CHECK(pos == g.data_len);
	CHECK((uintptr_t)(g.data - g.buf) % 8 == 0); /* the header is padded to 8 bytes */
	eng_st_free(&g);
	free(e);
}

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

/* libFuzzer's mutations, then, three times in four, the header length rewritten so that the
 * data section keeps its length: most mutations land in the JSON and would otherwise only
 * meet the length check. The fourth time the length is left as mutated, to test that check. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	uint64_t hlen = 0;
	for (int i = 0; size >= 8 && i < 8; i++)
		hlen |= (uint64_t)data[i] << (8 * i);
	int fix = size >= 8 && hlen > 0 && hlen <= size - 8 && seed % 4 != 0;
	size_t tail = fix ? size - 8 - (size_t)hlen : 0;

	size = LLVMFuzzerMutate(data, size, max_size);
	if (fix && size > 8 + tail) {
		hlen = size - 8 - tail;
		for (int i = 0; i < 8; i++)
			data[i] = (uint8_t)(hlen >> (8 * i));
	}
	return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	eng_st_file f;
	eng_err err = {0};

	memset(&f, 0xa5, sizeof f); /* the parser must not rely on a zeroed struct */
	if (eng_st_parse(&f, NAME, data, size, &err) != 0) {
		CHECK(f.buf == NULL && f.t == NULL && f.path == NULL && f.n == 0);
		CHECK(strstr(err.msg, NAME) != NULL);
		eng_st_free(&f);
		return 0;
	}
	CHECK(strcmp(f.path, NAME) == 0);
	CHECK(f.buf_len == size && f.buf != data && memcmp(f.buf, data, size) == 0);
	CHECK(f.data >= f.buf + 8 && f.data + f.data_len == f.buf + f.buf_len);
	CHECK(f.n >= 0 && (f.n == 0 || f.t != NULL));
	CHECK(eng_st_find(&f, "__metadata__") == NULL);

	float **vals = calloc(f.n ? (size_t)f.n : 1, sizeof *vals);
	uint8_t *cover = calloc(f.data_len ? f.data_len : 1, 1); /* tensors on each byte */
	CHECK(vals != NULL && cover != NULL);
	for (int i = 0; i < f.n; i++) {
		const eng_st_tensor *t = &f.t[i];
		CHECK(t->name != NULL && eng_st_find(&f, t->name) == t); /* unique names */
		CHECK(t->ndim >= 0 && t->ndim <= ENG_ST_MAX_NDIM);
		for (int d = 0; d < t->ndim; d++)
			CHECK(t->shape[d] >= 0);
		CHECK(t->begin <= t->end && t->end <= f.data_len);
		CHECK(t->end - t->begin == eng_st_numel(t) * item_size(t->dtype));
		CHECK(strlen(eng_st_dtype_name(t->dtype)) >= 3);
		for (size_t b = t->begin; b < t->end; b++)
			CHECK(cover[b]++ == 0);
		vals[i] = convert(&f, t);
	}
	for (size_t b = 0; b < f.data_len; b++)
		CHECK(cover[b] == 1); /* the tensors tile the data section */
	free(cover);
	float dummy;
	CHECK(eng_st_get_f32(&f, "__metadata__", 0, NULL, &dummy, &err) == -1);
	CHECK(f.n == 0 || eng_st_get_f32(&f, f.t[0].name, ENG_ST_MAX_NDIM + 1, f.t[0].shape, &dummy,
					 &err) == -1);
	round_trip(&f, vals);

	for (int i = 0; i < f.n; i++)
		free(vals[i]);
	free(vals);
	eng_st_free(&f);
	CHECK(f.buf == NULL && f.t == NULL && f.n == 0);
	return 0;
}
