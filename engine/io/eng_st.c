/* eng_st.c - safetensors read (see eng_st.h; writing: eng_st_write.c).
 *
 * The reader checks, in this order: the 8-byte length, the header length against the file,
 * the JSON (jansson, duplicates rejected), each entry (keys, dtype, shape, offsets, size),
 * then that the tensors tile the data section with no gap, overlap or trailing byte. Every
 * length is compared with the real file size before it is used, so a bogus length never
 * causes a large allocation; the only allocation sized by the file is the file itself.
 * eng_st_read and eng_st_parse (bytes already in memory: the fuzz target's way in) share
 * everything after the read: parse_owned.
 */
#include "eng_st.h"
#include "eng_st_int.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kn.h"

/* F32 data is memcpy'd between file and memory: the format is little-endian. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "eng_st assumes a little-endian host");
#endif
_Static_assert(sizeof(float) == 4, "eng_st assumes 4-byte IEEE floats");

/* The element count of a shape of n dimensions, all >= 0, into *numel: 1 when it does not
 * fit 64 bits, unless a dimension is 0 (then the count is 0, whatever the others). */
int eng_st__shape_numel(const int64_t *shape, int n, uint64_t *numel)
{
	int too_big = 0;
	*numel = 1;
	for (int i = 0; i < n; i++) {
		uint64_t di = (uint64_t)shape[i];
		if (di == 0) {
			*numel = 0;
			return 0;
		}
		/* keep going after an overflow only to spot a later zero dimension */
		if (*numel > UINT64_MAX / di)
			too_big = 1;
		else
			*numel *= di;
	}
	return too_big;
}

static size_t dtype_size(eng_st_dtype d)
{
	return d == ENG_ST_F32 ? 4 : 2;
}

const char *eng_st_dtype_name(eng_st_dtype d)
{
	switch (d) {
	case ENG_ST_F32:
		return "F32";
	case ENG_ST_F16:
		return "F16";
	case ENG_ST_BF16:
		return "BF16";
	}
	return "?";
}

size_t eng_st_numel(const eng_st_tensor *t)
{
	size_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	return n;
}

/* "[1000, 64]"; "[]" for a scalar. */
void eng_st__shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
	size_t len = 0;
	len += (size_t)snprintf(buf, cap, "[");
	for (int i = 0; i < ndim && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "",
					(long long)shape[i]);
	if (len < cap)
		snprintf(buf + len, cap - len, "]");
}

/* "invalid safetensors file '<path>': <problem>" into err; -1 */
#define bad(err, path, ...) eng_err_invalid(err, "safetensors file", path, __VA_ARGS__)

/* Reads exactly len bytes of fd at offset at into buf; path names the file in messages. */
static int read_at(int fd, uint8_t *buf, size_t len, off_t at, const char *path,
	eng_err *err)
{
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, at + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return eng_errf(err, "cannot read '%s': %s", path, strerror(errno));
		if (r == 0) /* someone truncated the file under us; the length we checked is
			     * stale */
			return eng_errf(err, "cannot read '%s': file shrank while being read",
				path);
		got += (size_t)r;
	}
	return 0;
}

/* Reads the whole regular file at path into a malloc'd buffer. */
static int read_whole(const char *path, uint8_t **out, size_t *out_len, eng_err *err)
{
	int fd = -1;
	uint8_t *buf = NULL;
	struct stat st;

	fd = eng_fs_open_read(path, NULL, &st, err);
	if (fd < 0)
		goto fail;
	if ((unsigned long long)st.st_size > SIZE_MAX) {
		eng_errf(err, "cannot read '%s': file too large", path);
		goto fail;
	}
	size_t len = (size_t)st.st_size;
	buf = malloc(len ? len : 1);
	if (!buf) {
		eng_errf(err, "cannot read '%s': out of memory (%zu bytes)", path, len);
		goto fail;
	}
	if (read_at(fd, buf, len, 0, path, err) < 0)
		goto fail;
	close(fd);
	*out = buf;
	*out_len = len;
	return 0;
fail:
	free(buf);
	if (fd >= 0)
		close(fd);
	return -1;
}

static int parse_dtype(const char *s, eng_st_dtype *d)
{
	if (strcmp(s, "F32") == 0)
		*d = ENG_ST_F32;
	else if (strcmp(s, "F16") == 0)
		*d = ENG_ST_F16;
	else if (strcmp(s, "BF16") == 0)
		*d = ENG_ST_BF16;
	else
		return -1;
	return 0;
}

/* Checks one header entry {"dtype", "shape", "data_offsets"} and fills *t (not its name).
 * v is borrowed from the header object. */
static int parse_entry(const char *path, const char *name, json_t *v, size_t data_len,
		       eng_st_tensor *t, eng_err *err)
{
	const char *key, *dt;
	json_t *val, *shape, *offs;
	json_error_t jerr;

	name = eng_err_plain(name); /* the header's: shown only when a plain name */
	if (!json_is_object(v))
		return bad(err, path, "tensor '%s': entry is not a JSON object", name);
	json_object_foreach(v, key, val)
	{
		if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 &&
		    strcmp(key, "data_offsets") != 0)
			return bad(err, path,
				   "tensor '%s': unknown key '%s' (expected dtype, shape, "
				   "data_offsets)",
				   name, eng_err_plain(key));
	}
	/* strict: all three present with the right JSON types (s: a string, o: borrowed) */
	if (json_unpack_ex(v, &jerr, JSON_STRICT, "{s:s, s:o, s:o}", "dtype", &dt, "shape", &shape,
			   "data_offsets", &offs) != 0)
		return bad(err, path, "tensor '%s': %s", name, jerr.text);
	if (parse_dtype(dt, &t->dtype) != 0)
		return bad(err, path, "tensor '%s': unsupported dtype '%s' (F32, F16 or BF16)",
			   name, eng_err_plain(dt));

	if (!json_is_array(shape))
		return bad(err, path, "tensor '%s': shape is not an array", name);
	size_t nd = json_array_size(shape);
	if (nd > ENG_ST_MAX_NDIM)
		return bad(err, path, "tensor '%s': shape has %zu dimensions, at most %d supported",
			   name, nd, ENG_ST_MAX_NDIM);
	t->ndim = (int)nd;
	uint64_t numel;
	for (size_t i = 0; i < nd; i++) {
		json_t *d = json_array_get(shape, i);
		if (!json_is_integer(d) || json_integer_value(d) < 0)
			return bad(err, path,
				   "tensor '%s': shape[%zu] is not a non-negative integer", name,
				   i);
		t->shape[i] = (int64_t)json_integer_value(d);
	}
	int too_big = eng_st__shape_numel(t->shape, (int)nd, &numel);
	size_t item = dtype_size(t->dtype);
	char shp[SHAPE_STR_LEN];
	eng_st__shape_str(shp, sizeof shp, t->ndim, t->shape);
	if (too_big || numel > SIZE_MAX / item)
		return bad(err, path, "tensor '%s': shape %s is too large", name, shp);
	size_t bytes = (size_t)numel * item;

	if (!json_is_array(offs) || json_array_size(offs) != 2 ||
	    !json_is_integer(json_array_get(offs, 0)) || !json_is_integer(json_array_get(offs, 1)))
		return bad(err, path, "tensor '%s': data_offsets is not two integers", name);
	json_int_t b = json_integer_value(json_array_get(offs, 0));
	json_int_t e = json_integer_value(json_array_get(offs, 1));
	if (b < 0 || e < b)
		return bad(err, path,
			   "tensor '%s': data_offsets [%lld, %lld] are not 0 <= begin "
			   "<= end",
			   name, (long long)b, (long long)e);
	if ((unsigned long long)e > data_len)
		return bad(err, path,
			   "tensor '%s': data_offsets [%lld, %lld] run past the end of the data "
			   "section (%zu bytes)",
			   name, (long long)b, (long long)e, data_len);
	t->begin = (size_t)b;
	t->end = (size_t)e;
	if (t->end - t->begin != bytes)
		return bad(err, path,
			   "tensor '%s': data_offsets [%zu, %zu] hold %zu bytes, but shape %s of "
			   "%s needs %zu",
			   name, t->begin, t->end, t->end - t->begin, shp, dt, bytes);
	return 0;
}

/* The optional "__metadata__": an object whose values are all strings. */
static int check_metadata(const char *path, json_t *meta, eng_err *err)
{
	const char *key;
	json_t *val;

	if (!json_is_object(meta))
		return bad(err, path, "__metadata__ is not a JSON object");
	json_object_foreach(meta, key, val)
	{
		if (!json_is_string(val))
			return bad(err, path, "__metadata__ '%s' is not a string",
				   eng_err_plain(key));
	}
	return 0;
}

/* qsort order for the tiling check: by begin, then end (empty tensors first). */
static int cmp_offsets(const void *pa, const void *pb)
{
	const eng_st_tensor *a = *(const eng_st_tensor *const *)pa;
	const eng_st_tensor *b = *(const eng_st_tensor *const *)pb;
	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	if (a->end != b->end)
		return a->end < b->end ? -1 : 1;
	return 0;
}

/* Sorted by offsets, the tensors must follow each other from 0 to the end of the data. */
static int check_tiling(const eng_st_file *f, eng_err *err)
{
	const eng_st_tensor **order = NULL;
	size_t pos = 0;

	if (f->n > 0) {
		order = malloc((size_t)f->n * sizeof *order);
		if (!order) {
			eng_errf(err, "cannot read '%s': out of memory", f->path);
			goto fail;
		}
	}
	for (int i = 0; i < f->n; i++)
		order[i] = &f->t[i];
	if (f->n > 1)
		qsort(order, (size_t)f->n, sizeof *order, cmp_offsets);
	for (int i = 0; i < f->n; i++) {
		const eng_st_tensor *t = order[i];
		if (t->begin < pos) {
			/* pos > 0 means i > 0: the previous tensor ends after t begins */
			bad(err, f->path, "tensors '%s' [%zu, %zu] and '%s' [%zu, %zu] overlap",
			    eng_err_plain(order[i - 1]->name), order[i - 1]->begin, order[i - 1]->end,
			    eng_err_plain(t->name), t->begin, t->end);
			goto fail;
		}
		if (t->begin > pos) {
			bad(err, f->path,
			    "gap of %zu bytes in the data section before tensor '%s' "
			    "at offset %zu",
			    t->begin - pos, eng_err_plain(t->name), t->begin);
			goto fail;
		}
		pos = t->end;
	}
	if (pos != f->data_len) {
		bad(err, f->path,
		    "%zu trailing bytes after the last tensor (data section %zu "
		    "bytes, tensors end at %zu)",
		    f->data_len - pos, f->data_len, pos);
		goto fail;
	}
	free(order);
	return 0;
fail:
	free(order);
	return -1;
}

/* The header length that the first 8 bytes (b) of a file of file_len bytes give, into
 * *hlen: checked against the limit and the file's length. */
static int header_len(const char *path, const uint8_t *b, size_t file_len, uint64_t *hlen,
		      eng_err *err)
{
	if (file_len < 8)
		return bad(err, path, "file is %zu bytes, shorter than the 8-byte header length",
			   file_len);
	*hlen = 0;
	for (int i = 0; i < 8; i++)
		*hlen |= (uint64_t)b[i] << (8 * i);
	if (*hlen == 0)
		return bad(err, path, "header length is 0");
	if (*hlen > ENG_ST_MAX_HEADER)
		return bad(err, path, "header length %llu exceeds the limit of %zu bytes",
			   (unsigned long long)*hlen, ENG_ST_MAX_HEADER);
	if (*hlen > file_len - 8)
		return bad(err, path, "header length %llu runs past the end of the file (%zu bytes)",
			   (unsigned long long)*hlen, file_len);
	return 0;
}

/* Validates the hlen bytes of JSON at f->buf + 8 as the header of a data section of
 * f->data_len bytes (set by the caller) and fills f's tensors. On failure the caller frees
 * f. */
static int parse_header(eng_st_file *f, const char *path, uint64_t hlen, eng_err *err)
{
	json_t *root = NULL;
	json_error_t jerr;
	const char *key;
	json_t *val;

	root = json_loadb((const char *)f->buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		char why[96];
		bad(err, path, "header is not valid JSON: %s (at byte %d of the header)",
		    eng_err_json(&jerr, why, sizeof why), jerr.position);
		goto fail;
	}
	if (!json_is_object(root)) {
		bad(err, path, "header is not a JSON object");
		goto fail;
	}

	/* the header bounds the entry count: at most ENG_ST_MAX_HEADER / 2 keys */
	size_t cap = json_object_size(root);
	f->t = calloc(cap ? cap : 1, sizeof *f->t);
	if (!f->t) {
		eng_errf(err, "cannot read '%s': out of memory", path);
		goto fail;
	}
	/* jansson iterates objects in the order of the text (it keeps insertion order) */
	json_object_foreach(root, key, val)
	{
		if (strcmp(key, "__metadata__") == 0) {
			if (check_metadata(path, val, err) != 0)
				goto fail;
			continue;
		}
		eng_st_tensor *t = &f->t[f->n];
		if (parse_entry(path, key, val, f->data_len, t, err) != 0)
			goto fail;
		t->name = strdup(key);
		if (!t->name) {
			eng_errf(err, "cannot read '%s': out of memory", path);
			goto fail;
		}
		f->n++;
	}
	if (check_tiling(f, err) != 0)
		goto fail;
	json_decref(root);
	return 0;
fail:
	json_decref(root);
	return -1;
}

/* Validates the len bytes at buf as the safetensors file called path and fills *f. Takes
 * ownership of buf (malloc'd), also on failure: it becomes f->buf, freed by eng_st_free. */
static int parse_owned(eng_st_file *f, const char *path, uint8_t *buf, size_t len, eng_err *err)
{
	uint64_t hlen;
	memset(f, 0, sizeof *f);
	f->buf = buf;
	f->buf_len = len;
	f->path = strdup(path);
	if (!f->path) {
		eng_errf(err, "cannot read '%s': out of memory", path);
		goto fail;
	}
	if (header_len(path, f->buf, f->buf_len, &hlen, err) < 0)
		goto fail;
	f->data = f->buf + 8 + hlen;
	f->data_len = f->buf_len - 8 - (size_t)hlen;
	if (parse_header(f, path, hlen, err) < 0)
		goto fail;
	return 0;
fail:
	eng_st_free(f);
	return -1;
}

static int header_of(eng_st_file *f, const char *path, int keep, eng_err *err);

int eng_st_read_header(eng_st_file *f, const char *path, eng_err *err)
{
	return header_of(f, path, 0, err);
}

int eng_st_open(eng_st_file *f, const char *path, eng_err *err)
{
	return header_of(f, path, 1, err);
}

/* The header of the file at path into f, the file kept open in f (keep) or closed */
static int header_of(eng_st_file *f, const char *path, int keep, eng_err *err)
{
	struct stat st;
	uint8_t len8[8];
	uint64_t hlen;
	memset(f, 0, sizeof *f);
	int fd = eng_fs_open_read(path, NULL, &st, err);
	if (fd < 0)
		return -1;
	/* the file's length bounds the header and the data section, as in eng_st_read */
	size_t flen = (unsigned long long)st.st_size > SIZE_MAX ? SIZE_MAX : (size_t)st.st_size;
	if (!(f->path = strdup(path))) {
		eng_errf(err, "cannot read '%s': out of memory", path);
		goto fail;
	}
	if ((flen >= 8 && read_at(fd, len8, 8, 0, path, err) < 0) ||
	    header_len(path, len8, flen, &hlen, err) < 0)
		goto fail;
	if (!(f->buf = malloc(8 + (size_t)hlen))) {
		eng_errf(err, "cannot read '%s': out of memory", path);
		goto fail;
	}
	memcpy(f->buf, len8, 8);
	f->buf_len = 8 + (size_t)hlen;
	f->data_len = flen - f->buf_len; /* f->data stays NULL: nothing of it is read */
	if (read_at(fd, f->buf + 8, (size_t)hlen, 8, path, err) < 0 ||
	    parse_header(f, path, hlen, err) < 0)
		goto fail;
	if (keep) {
		f->streamed = 1;
		f->fd = fd;
	} else {
		close(fd);
	}
	return 0;
fail:
	close(fd);
	eng_st_free(f);
	return -1;
}

int eng_st_parse(eng_st_file *f, const char *name, const uint8_t *buf, size_t len, eng_err *err)
{
	memset(f, 0, sizeof *f);
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		return eng_errf(err, "cannot read '%s': out of memory (%zu bytes)", name, len);
	if (len)
		memcpy(copy, buf, len);
	return parse_owned(f, name, copy, len, err);
}

int eng_st_read(eng_st_file *f, const char *path, eng_err *err)
{
	uint8_t *buf = NULL;
	size_t len = 0;

	memset(f, 0, sizeof *f);
	if (read_whole(path, &buf, &len, err) != 0)
		return -1;
	return parse_owned(f, path, buf, len, err); /* no copy: the file may be large */
}

void eng_st_free(eng_st_file *f)
{
	if (!f)
		return;
	if (f->t) {
		for (int i = 0; i < f->n; i++)
			free(f->t[i].name);
	}
	free(f->t);
	free(f->buf);
	free(f->path);
	if (f->streamed)
		close(f->fd);
	memset(f, 0, sizeof *f);
}

const eng_st_tensor *eng_st_find(const eng_st_file *f, const char *name)
{
	for (int i = 0; i < f->n; i++) {
		if (strcmp(f->t[i].name, name) == 0)
			return &f->t[i];
	}
	return NULL;
}

/* IEEE binary16 to binary32, exact (every half is a float), subnormals and NaN kept. */
float eng_bf16_to_f32(uint16_t b)
{
	uint32_t bits = (uint32_t)b << 16;
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

uint16_t eng_bf16_from_f32(float x)
{
	return kn_bf16_from_f32(x);
}

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t mant = h & 0x3ff;
	uint32_t bits;

	if (exp == 0 && mant == 0) {
		bits = sign;
	} else if (exp == 0) {
		/* subnormal half: normalise, it becomes a normal float */
		int e = 127 - 15 + 1;
		while (!(mant & 0x400)) {
			mant <<= 1;
			e--;
		}
		bits = sign | ((uint32_t)e << 23) | ((mant & 0x3ff) << 13);
	} else if (exp == 31) {
		bits = sign | 0x7f800000u | (mant << 13);
	} else {
		bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
	}
	float x;
	memcpy(&x, &bits, sizeof x);
	return x;
}

int eng_st_check_shape(const eng_st_file *f, const char *name, int ndim, const int64_t *shape,
		       eng_err *err)
{
	const eng_st_tensor *t = eng_st_find(f, name);
	char want[SHAPE_STR_LEN], got[SHAPE_STR_LEN];

	if (!t)
		return eng_errf(err, "tensor '%s' not found in '%s'", name, f->path);
	if (ndim < 0 || ndim > ENG_ST_MAX_NDIM)
		return eng_errf(err, "tensor '%s' in '%s': asked for %d dimensions", name, f->path,
				ndim);
	int same = t->ndim == ndim;
	for (int i = 0; same && i < ndim; i++)
		same = t->shape[i] == shape[i];
	if (!same) {
		eng_st__shape_str(want, sizeof want, ndim, shape);
		eng_st__shape_str(got, sizeof got, t->ndim, t->shape);
		return eng_errf(err, "tensor '%s' in '%s' has shape %s, expected %s", name, f->path,
				got, want);
	}
	return 0;
}

/* out(n) = the n elements of dtype at p, as float32 */
static void convert(const uint8_t *p, int dtype, size_t n, float *out)
{
	switch (dtype) {
	case ENG_ST_F32:
		if (n)
			memcpy(out, p, n * sizeof *out);
		break;
	case ENG_ST_F16:
		for (size_t i = 0; i < n; i++)
			out[i] = half_to_float((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
		break;
	case ENG_ST_BF16:
		for (size_t i = 0; i < n; i++)
			out[i] = eng_bf16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
		break;
	}
}

/* Elements [from, from + n) of tensor t of an open file into out: float32 read straight
 * into it, 16-bit types through a buffer of at most STREAM_CHUNK elements */
#define STREAM_CHUNK 65536
static int get_streamed(const eng_st_file *f, const eng_st_tensor *t, size_t from, size_t n,
	float *out, eng_err *err)
{
	size_t es = t->dtype == ENG_ST_F32 ? 4 : 2;
	off_t at = (off_t)(f->buf_len + t->begin + from * es);
	if (t->dtype == ENG_ST_F32)
		return read_at(f->fd, (uint8_t *)out, 4 * n, at, f->path, err);
	uint8_t buf[2 * STREAM_CHUNK];
	for (size_t i = 0; i < n; i += STREAM_CHUNK) {
		size_t k = n - i < STREAM_CHUNK ? n - i : STREAM_CHUNK;
		if (read_at(f->fd, buf, 2 * k, at + (off_t)(2 * i), f->path, err) < 0)
			return -1;
		convert(buf, t->dtype, k, out + i);
	}
	return 0;
}

int eng_st_get_f32_part(const eng_st_file *f, const char *name, int ndim,
	const int64_t *shape, size_t from, size_t n, float *out, eng_err *err)
{
	if (eng_st_check_shape(f, name, ndim, shape, err) < 0)
		return -1;
	const eng_st_tensor *t = eng_st_find(f, name);
	if (from > eng_st_numel(t) || n > eng_st_numel(t) - from)
		return eng_errf(err, "%s: '%s' has %zu elements, not [%zu, %zu)", f->path, name,
			eng_st_numel(t), from, from + n);
	if (f->streamed)
		return get_streamed(f, t, from, n, out, err);
	convert(f->data + t->begin + from * (t->dtype == ENG_ST_F32 ? 4 : 2), t->dtype, n, out);
	return 0;
}

int eng_st_get_f32(const eng_st_file *f, const char *name, int ndim, const int64_t *shape,
		   float *out, eng_err *err)
{
	const eng_st_tensor *t = eng_st_find(f, name); /* none: the part's check says so */
	return eng_st_get_f32_part(f, name, ndim, shape, 0, t ? eng_st_numel(t) : 0, out, err);
}
