/* eng_st_write.c - safetensors written (see eng_st.h; reading: eng_st.c): the header built
 * as compact JSON, padded, the tensors' float32 data after it, durably through eng_fs.
 */
#include "eng_st.h"
#include "eng_st_int.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Builds {"dtype":"F32","shape":[...],"data_offsets":[begin,end]} (a new reference).
 * The arrays are attached first and filled through borrowed pointers, so that on failure
 * one decref of the entry frees everything. */
static json_t *entry_json(const eng_st_entry *e, size_t begin, size_t end)
{
	json_t *ent = json_object();
	json_t *shp, *offs;

	/* set_new steals its value even when it fails (a NULL value only fails), so the
	 * values created inline here never leak */
	if (!ent || json_object_set_new(ent, "dtype", json_string("F32")) != 0 ||
	    json_object_set_new(ent, "shape", json_array()) != 0 ||
	    json_object_set_new(ent, "data_offsets", json_array()) != 0)
		goto fail;
	shp = json_object_get(ent, "shape");	     /* borrowed */
	offs = json_object_get(ent, "data_offsets"); /* borrowed */
	for (int i = 0; i < e->ndim; i++) {
		if (json_array_append_new(shp, json_integer((json_int_t)e->shape[i])) != 0)
			goto fail;
	}
	if (json_array_append_new(offs, json_integer((json_int_t)begin)) != 0 ||
	    json_array_append_new(offs, json_integer((json_int_t)end)) != 0)
		goto fail;
	return ent;
fail:
	json_decref(ent);
	return NULL;
}

/* What st_fill writes: the header built by st_header, then the tensors' data. */
typedef struct st_out {
	const eng_st_entry *e;
	int n;
	char *hdr;      /* the compact JSON header (malloc'd) */
	size_t hlen;    /* its length, before the padding */
} st_out;

/* Adds tensor i of a file being written (t) to its header root, its data at *off, which
 * moves past it: its name, dimensions, shape, size and data checked first. 0, or -1 with a
 * message naming path and the tensor. */
static int st_header_add(json_t *root, const char *path, const eng_st_entry *t, int i,
			 size_t *off, eng_err *err)
{
	char shp[SHAPE_STR_LEN];
	if (!t->name)
		return eng_errf(err, "cannot write '%s': tensor %d has no name", path, i);
	if (t->ndim < 0 || t->ndim > ENG_ST_MAX_NDIM)
		return eng_errf(err, "cannot write '%s': tensor '%s' has %d dimensions (0..%d)",
				path, t->name, t->ndim, ENG_ST_MAX_NDIM);
	eng_st__shape_str(shp, sizeof shp, t->ndim, t->shape);
	uint64_t numel;
	for (int d = 0; d < t->ndim; d++) {
		if (t->shape[d] < 0)
			return eng_errf(err, "cannot write '%s': tensor '%s' has shape %s", path,
					t->name, shp);
	}
	int too_big = eng_st__shape_numel(t->shape, t->ndim, &numel);
	if (too_big || numel > (uint64_t)(LLONG_MAX - *off) / sizeof(float))
		return eng_errf(err, "cannot write '%s': tensor '%s' shape %s is too large", path,
				t->name, shp);
	size_t bytes = numel * sizeof(float);
	if (bytes && !t->data)
		return eng_errf(err, "cannot write '%s': tensor '%s' has no data", path, t->name);
	/* json_object_set_new would silently replace an earlier tensor of that name */
	if (json_object_get(root, t->name))
		return eng_errf(err, "cannot write '%s': duplicate tensor name '%s'", path,
				t->name);
	json_t *ent = entry_json(t, *off, *off + bytes);
	if (!ent || json_object_set_new(root, t->name, ent) != 0)
		return eng_errf(err,
				"cannot write '%s': cannot add tensor '%s' to the header "
				"(name not valid UTF-8, or out of memory)",
				path, t->name);
	*off += bytes;
	return 0;
}

/* Builds the header of the n tensors e[0..n) into o; path names the file in messages. */
static int st_header(st_out *o, const char *path, const eng_st_entry *e, int n, eng_err *err)
{
	json_t *root = NULL;
	char *hdr = NULL;
	size_t off = 0;

	if (n < 0 || (n > 0 && !e)) {
		eng_errf(err, "cannot write '%s': bad tensor list", path);
		goto fail;
	}
	root = json_object();
	/* set_new steals the pack's result (also on failure); a NULL value makes it fail */
	if (!root ||
	    json_object_set_new(root, "__metadata__", json_pack("{s:s}", "format", "pt")) != 0) {
		eng_errf(err, "cannot write '%s': out of memory", path);
		goto fail;
	}
	for (int i = 0; i < n; i++)
		if (st_header_add(root, path, &e[i], i, &off, err) < 0)
			goto fail;
	/* insertion order: __metadata__ first, then the tensors as given */
	hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!hdr) {
		eng_errf(err, "cannot write '%s': cannot encode the header", path);
		goto fail;
	}
	o->e = e;
	o->n = n;
	o->hdr = hdr;
	o->hlen = strlen(hdr);
	json_decref(root);
	return 0;
fail:
	free(hdr);
	json_decref(root);
	return -1;
}

/* eng_fs_fill_fn: the 8-byte length, the header padded with spaces to a multiple of 8,
 * then every tensor's floats. Write errors are found by the caller's flush. */
static int st_fill(FILE *f, void *ud, eng_err *err)
{
	static const char spaces[8] = "        ";
	const st_out *o = ud;
	size_t padded = (o->hlen + 7) & ~(size_t)7;
	uint8_t lenb[8];
	(void)err;
	for (int i = 0; i < 8; i++)
		lenb[i] = (uint8_t)((uint64_t)padded >> (8 * i));
	if (fwrite(lenb, 1, 8, f) != 8 || fwrite(o->hdr, 1, o->hlen, f) != o->hlen ||
	    fwrite(spaces, 1, padded - o->hlen, f) != padded - o->hlen)
		return 0; /* the stream's error is reported by the flush */
	for (int i = 0; i < o->n; i++) {
		size_t numel = 1;
		for (int d = 0; d < o->e[i].ndim; d++)
			numel *= (size_t)o->e[i].shape[d];
		if (numel && fwrite(o->e[i].data, sizeof(float), numel, f) != numel)
			return 0;
	}
	return 0;
}

int eng_st_write_at(const eng_dir *d, const char *name, const eng_st_entry *e, int n,
	eng_err *err)
{
	st_out o;
	if (st_header(&o, name, e, n, err) < 0)
		return -1;
	int rc = eng_fs_write_at(d, name, st_fill, &o, err);
	free(o.hdr);
	return rc;
}

int eng_st_write(const char *path, const eng_st_entry *e, int n, eng_err *err)
{
	st_out o;
	if (st_header(&o, path, e, n, err) < 0)
		return -1;
	int rc = eng_fs_write(path, st_fill, &o, err);
	free(o.hdr);
	return rc;
}
