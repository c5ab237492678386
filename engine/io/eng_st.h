/* eng_st.h - safetensors files: a strict reader and a deterministic float32 writer.
 *
 * The format (https://github.com/huggingface/safetensors): 8 bytes, the header length N as
 * a little-endian uint64; N bytes of JSON, an object mapping tensor names to
 * {"dtype", "shape", "data_offsets": [begin, end]} plus an optional "__metadata__" object of
 * strings; then the data section, which the tensors tile exactly (offsets relative to it).
 *
 * What this module is: the reader of checkpoints and reference data (design.md §6), which
 * trusts nothing in the file and reports every inconsistency as an error naming the file,
 * and the writer of model.safetensors / optimizer.safetensors, whose output depends only on
 * the tensors given (same input, same bytes).
 * What it is not: a general safetensors library. It reads F32, F16 and BF16 and converts
 * them to float32; it writes F32 only; it keeps the whole file in memory (read(2), no mmap),
 * which is fine for the GPT-2 sizes this engine trains.
 *
 * Byte order: the format is little-endian. The header length and F16/BF16 values are
 * decoded byte by byte; F32 data is copied as is, so this module assumes a little-endian
 * host (checked at compile time where the compiler says).
 */
#ifndef ENG_ST_H
#define ENG_ST_H

#include <stddef.h>
#include <stdint.h>

#include "eng_err.h"
#include "eng_fs.h"

#define ENG_ST_MAX_NDIM	  4		      /* most dimensions a tensor may have here */
/* Longest JSON header accepted. GPT-2 124M's is about 15 KB; jansson builds the whole tree
 * before any check, and a pathological 100 MiB header took 2 GB to refuse, so 16 MiB. */
#define ENG_ST_MAX_HEADER ((size_t)16 << 20)

typedef enum { ENG_ST_F32, ENG_ST_F16, ENG_ST_BF16 } eng_st_dtype;

typedef struct eng_st_tensor {
	char *name;			/* malloc'd, owned by the eng_st_file */
	eng_st_dtype dtype;		/* element type in the file */
	int ndim;			/* 0..ENG_ST_MAX_NDIM; 0 is a scalar (one element) */
	int64_t shape[ENG_ST_MAX_NDIM]; /* the first ndim entries are used, each >= 0 */
	size_t begin, end;		/* byte offsets into the data section, end - begin
					 * == numel * item size (checked) */
} eng_st_tensor;

typedef struct eng_st_file {
	char *path;	     /* malloc'd copy, used in messages */
	eng_st_tensor *t;    /* n tensors, in the header's order; "__metadata__" excluded */
	int n;		     /* number of tensors */
	uint8_t *buf;	     /* the whole file, malloc'd */
	size_t buf_len;	     /* its length in bytes */
	const uint8_t *data; /* the data section inside buf (not aligned in general) */
	size_t data_len;     /* its length; the tensors tile it exactly */
	int streamed;        /* 1 (eng_st_open): data NULL, each tensor read from fd */
	int fd;
} eng_st_file;

/* Reads and validates the safetensors file at path into *f, which it initialises (f need not
 * be zeroed before). Returns 0, or -1 with a message naming the file and the problem; on
 * failure *f is left zeroed, so eng_st_free is harmless. Free with eng_st_free. */
int eng_st_read(eng_st_file *f, const char *path, eng_err *err);

/* The same checks on a file already in memory: the len bytes at buf (borrowed; may be NULL
 * when len is 0) as the contents of a safetensors file called name, which messages use and
 * f->path keeps. eng_st_parse copies the bytes into f->buf, so buf may be freed or reused as
 * soon as it returns (eng_st_read hands its buffer over without a copy). Same results and
 * messages as eng_st_read on a file with those bytes; on failure *f is left zeroed. Free
 * with eng_st_free. Used by the fuzz target, tests/fuzz/fuzz_st.c. */
int eng_st_parse(eng_st_file *f, const char *name, const uint8_t *buf, size_t len, eng_err *err);

/* The same checks as eng_st_read on the header alone: the 8-byte length and the JSON header
 * are read, the data section is not (its length is the file's less the header's, against
 * which every tensor's offsets and the tiling are checked). The file is opened as
 * eng_st_read opens it (eng_fs_open_read: a FIFO or a device refused before anything
 * waits on it). f->data is NULL: eng_st_get_f32 must not be called on f, eng_st_find and
 * eng_st_check_shape may. For checks before a run (remat-train --check) that must not read
 * gigabytes of weights. Same messages as eng_st_read; free with eng_st_free. */
int eng_st_read_header(eng_st_file *f, const char *path, eng_err *err);

/* eng_st_read_header, the file kept open: eng_st_get_f32 then reads each tensor from it
 * as it is asked for, so that loading a model never holds its whole file (a 4-bit base
 * quantized tensor by tensor holds one tensor's floats at a time). A file cut short under
 * it is an error of that read. Free with eng_st_free (which closes it). */
int eng_st_open(eng_st_file *f, const char *path, eng_err *err);

/* Frees what eng_st_read or eng_st_parse allocated and zeroes *f. Safe on a zeroed or
 * failed struct. */
void eng_st_free(eng_st_file *f);

/* The tensor called name, or NULL. Borrowed: lives as long as *f. Linear search. */
const eng_st_tensor *eng_st_find(const eng_st_file *f, const char *name);

/* Number of elements of t (1 for a scalar, 0 if any dimension is 0). Fits in size_t for
 * every tensor eng_st_read or eng_st_parse accepted. */
size_t eng_st_numel(const eng_st_tensor *t);

/* bfloat16 bits (the top half of a float32) to float32: exact. */
float eng_bf16_to_f32(uint16_t b);
/* float32 to bfloat16 bits, round to nearest, ties to even; a NaN stays a (quiet) NaN
 * rather than rounding into an infinity. */
uint16_t eng_bf16_from_f32(float x);

/* "F32", "F16" or "BF16". */
const char *eng_st_dtype_name(eng_st_dtype dtype);

/* Tensor name exists in f and its shape is (ndim, shape) exactly: 0, or -1 with
 * eng_st_get_f32's message (the file, the tensor, the expected and the found shape). */
int eng_st_check_shape(const eng_st_file *f, const char *name, int ndim, const int64_t *shape,
		       eng_err *err);

/* Copies tensor name into out (numel floats, caller's storage) as float32, converting
 * F16/BF16 exactly. The tensor must exist and its shape must equal (ndim, shape) exactly;
 * the message names the file, the tensor, the expected and the found shape. 0 or -1. */
int eng_st_get_f32(const eng_st_file *f, const char *name, int ndim, const int64_t *shape,
		   float *out, eng_err *err);
/* The same for elements [from, from + n) of the tensor (in row-major order) alone. */
int eng_st_get_f32_part(const eng_st_file *f, const char *name, int ndim,
	const int64_t *shape, size_t from, size_t n, float *out, eng_err *err);

/* One float32 tensor to write. Borrowed pointers: nothing is copied or freed. */
typedef struct eng_st_entry {
	const char *name;		/* unique, valid UTF-8, not "__metadata__" */
	int ndim;			/* 0..ENG_ST_MAX_NDIM */
	int64_t shape[ENG_ST_MAX_NDIM]; /* each >= 0 */
	const float *data;		/* numel floats; may be NULL when numel is 0 */
} eng_st_entry;

/* Writes the n tensors e[0..n) as F32 to path, durably (eng_fs_write: a temporary name,
 * fsynced, renamed over path, the directory fsynced). The header is compact JSON:
 * "__metadata__":{"format":"pt"} first, then the tensors in the given order with
 * contiguous offsets from 0; it is padded with spaces to a multiple of 8 bytes so the data
 * starts 8-aligned. The bytes depend only on the entries. Returns 0, or -1 with a message;
 * on failure nothing is left behind and an existing file of that name is untouched. */
int eng_st_write(const char *path, const eng_st_entry *e, int n, eng_err *err);
/* The same as d/name, relative to a directory descriptor (eng_fs_write_at). */
int eng_st_write_at(const eng_dir *d, const char *name, const eng_st_entry *e, int n,
	eng_err *err);

#endif
