/* eng_tokcache.c - text corpora tokenized once, kept by key (see eng_tokcache.h). */
#include "eng_tokcache.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "eng_data.h"
#include "eng_fs.h"
#include "eng_sha256.h"
#include "eng_tokfile.h"
#include "eng_util.h"

#define LOCK_POLL_US 200000 /* how often a waiting job looks at another's lock */
#define RECORD_MAX (1u << 20) /* largest record read */

/* The identity of r's tokens as text (one line a part), its corpus hashed; *st the
 * corpus's stat as hashed. */
static int identity(const eng_tokcache_req *r, char *out, size_t len, struct stat *st,
	eng_err *err)
{
	char corpus[ENG_SHA256_HEX], h[ENG_SHA256_HEX];
	int fd = eng_fs_open_read(r->corpus, "corpus file", st, err);
	if (fd < 0)
		return -1;
	int rc = eng_sha256_fd(fd, r->corpus, corpus, err);
	close(fd);
	if (rc < 0)
		return -1;
	size_t used = (size_t)snprintf(out, len, "remat-tokcache %d\ncorpus %s\nformat %s\n",
		ENG_TOKCACHE_VERSION, corpus, r->jsonl ? "jsonl" : "text");
	if (r->jsonl)
		used += (size_t)snprintf(out + used, len - used, "field %zu:%s\n", strlen(r->field),
			r->field);
	for (int k = 0; k < ENG_CKPT_TOK_FILES && used < len; k++) {
		if (!r->files->len[k])
			continue;
		if (eng_sha256_buf(r->files->bytes[k], r->files->len[k], h, err) < 0)
			return -1;
		used += (size_t)snprintf(out + used, len - used, "%s %s\n", eng_ckpt_tok_names[k],
			h);
	}
	return used < len ? 0 : eng_errf(err, "the token cache's key does not fit");
}

/* e->key and e->path from r's identity. */
static int entry_key(const eng_tokcache_req *r, eng_tokcache_entry *e, struct stat *st,
	eng_err *err)
{
	char id[1024], hex[ENG_SHA256_HEX];
	memset(e, 0, sizeof *e);
	if (identity(r, id, sizeof id, st, err) < 0 || eng_sha256_buf(id, strlen(id), hex, err) < 0)
		return -1;
	memcpy(e->key, hex, ENG_TOKCACHE_KEY - 1);
	e->key[ENG_TOKCACHE_KEY - 1] = '\0';
	if ((size_t)snprintf(e->path, sizeof e->path, "%s/%s.bin", r->dir, e->key) >=
		sizeof e->path)
		return eng_errf(err, "data.cache '%s': path too long", r->dir);
	e->bytes = (uint64_t)st->st_size;
	return 0;
}

/* The record KEY.json in d, when it is this version's for this key: 1 with its counts in
 * *e, 0 when absent or not one of ours to use, -1 when the entry is refused. */
static int read_record(const eng_dir *d, eng_tokcache_entry *e, eng_err *err)
{
	char name[ENG_TOKCACHE_KEY + 8];
	snprintf(name, sizeof name, "%s.json", e->key);
	int kind = eng_fs_entry(d, name, 0, "use", err);
	if (kind <= 0)
		return kind;
	size_t len;
	eng_err quiet;
	char *text = eng_fs_read_all_in(d, name, "token cache record", RECORD_MAX, &len, &quiet);
	json_t *o = text ? json_loadb(text, len, 0, NULL) : NULL;
	free(text);
	json_t *tok = json_object_get(o, "tokens"), *docs = json_object_get(o, "documents");
	json_t *w = json_object_get(o, "width");
	int ok = json_integer_value(json_object_get(o, "format_version")) == ENG_TOKCACHE_VERSION
		&& json_is_string(json_object_get(o, "key")) &&
		!strcmp(json_string_value(json_object_get(o, "key")), e->key) &&
		json_integer_value(tok) > 0 && json_integer_value(docs) > 0 &&
		(json_integer_value(w) == 2 || json_integer_value(w) == 4);
	if (ok) {
		e->tokens = (uint64_t)json_integer_value(tok);
		e->docs = (uint64_t)json_integer_value(docs);
		e->width = (int)json_integer_value(w);
	}
	json_decref(o);
	return ok;
}

/* KEY.bin in d against the record's count and width: 1 when they agree, 0 when absent or
 * not, -1 when the entry is refused. */
static int check_tokens(const eng_dir *d, const eng_tokcache_entry *e, eng_err *err)
{
	char name[ENG_TOKCACHE_KEY + 8];
	snprintf(name, sizeof name, "%s.bin", e->key);
	int kind = eng_fs_entry(d, name, 0, "use", err);
	if (kind <= 0)
		return kind;
	struct stat st;
	eng_err quiet;
	int32_t h[ENG_LLMC_HEADER_INTS];
	int fd = eng_fs_open_read_at(d, name, "token file", &st, &quiet);
	if (fd < 0)
		return 0;
	int ok = pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h;
	close(fd);
	uint64_t n = (uint64_t)(uint32_t)h[2] | (uint64_t)(uint32_t)h[3] << 32;
	return ok && h[0] == (e->width == 2 ? ENG_LLMC_MAGIC : ENG_LLMC_MAGIC_U32) &&
	       n == e->tokens && (uint64_t)st.st_size == sizeof h + n * (uint64_t)e->width;
}

/* Whether e's entry is in d, sound: 1, 0, -1 (refused). */
static int lookup(const eng_dir *d, eng_tokcache_entry *e, eng_err *err)
{
	int rc = read_record(d, e, err);
	if (rc > 0)
		rc = check_tokens(d, e, err);
	e->hit = rc > 0;
	return rc;
}

int eng_tokcache_find(const eng_tokcache_req *r, eng_tokcache_entry *e, eng_err *err)
{
	struct stat st;
	eng_dir d;
	if (entry_key(r, e, &st, err) < 0)
		return -1;
	if (eng_dir_open(&d, r->dir, err) < 0)
		return errno == ENOENT ? 0 : -1;
	int rc = lookup(&d, e, err);
	eng_dir_close(&d);
	return rc;
}

/* The record of e made from r, as d/KEY.json. */
static int write_record(const eng_dir *d, const eng_tokcache_req *r,
	const eng_tokcache_entry *e, eng_err *err)
{
	char name[ENG_TOKCACHE_KEY + 8], when[32];
	time_t t = time(NULL);
	struct tm tm;
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	snprintf(name, sizeof name, "%s.json", e->key);
	json_t *o = json_pack("{s:i,s:s,s:s,s:s,s:s?,s:s,s:I,s:I,s:I,s:i,s:f,s:s}",
		"format_version", ENG_TOKCACHE_VERSION, "key", e->key, "corpus", r->corpus,
		"format", r->jsonl ? "jsonl" : "text", "field", r->jsonl ? r->field : NULL,
		"tokenizer", r->tokenizer, "corpus_bytes", (json_int_t)e->bytes, "documents",
		(json_int_t)e->docs, "tokens", (json_int_t)e->tokens, "width", e->width,
		"seconds", e->seconds, "created", when);
	if (!o)
		return eng_err_nomem(err, "out of memory for the token cache's record");
	int rc = eng_fs_write_json(d, name, 0644, o, err);
	json_decref(o);
	return rc;
}

/* The lock on e's entry in d, waiting while another process holds it. */
static int lock_entry(const eng_dir *d, const eng_tokcache_entry *e, eng_err *err)
{
	char name[ENG_TOKCACHE_KEY + 8];
	snprintf(name, sizeof name, "%s.lock", e->key);
	for (;;) {
		int fd = eng_fs_lock(d, name, "token cache entry", err);
		if (fd >= 0 || err->kind != ENG_ERR_BUSY)
			return fd;
		usleep(LOCK_POLL_US);
	}
}

/* Tokenizes r's corpus into e's entry in d (locked). */
static int make_entry(const eng_dir *d, const eng_tokcache_req *r, eng_tokcache_entry *e,
	const struct stat *hashed, eng_err *err)
{
	eng_tokfile_opts o = {r->jsonl, r->field, r->threads, r->progress, r->ud};
	eng_tokfile_stats ts;
	char *corpus = (char *)r->corpus;
	struct stat after;
	double t0 = eng_now_ms();
	if (eng_tokfile_write(r->tokenizer, &corpus, 1, e->path, &o, &ts, err) < 0)
		return -1;
	e->seconds = (eng_now_ms() - t0) / 1000.0;
	int fd = eng_fs_open_read(r->corpus, "corpus file", &after, err);
	if (fd < 0)
		return -1;
	close(fd);
	if (after.st_size != hashed->st_size || after.st_mtim.tv_sec != hashed->st_mtim.tv_sec ||
		after.st_mtim.tv_nsec != hashed->st_mtim.tv_nsec || after.st_ino != hashed->st_ino)
		return eng_errf(err, "corpus file '%s' changed while it was tokenized: start again "
				     "once it is written", r->corpus);
	if (ts.tokens == 0 || ts.docs == 0)
		return eng_errf(err, "corpus file '%s' holds no document", r->corpus);
	e->tokens = ts.tokens;
	e->docs = ts.docs;
	e->width = ts.width;
	return write_record(d, r, e, err);
}

int eng_tokcache_get(const eng_tokcache_req *r, eng_tokcache_entry *e, eng_err *err)
{
	struct stat st;
	eng_dir d;
	int lock = -1, rc;
	if (entry_key(r, e, &st, err) < 0 || eng_dir_make(&d, r->dir, err) < 0)
		return -1;
	/* looked for, then again under the lock: another job may have just made it */
	if ((rc = lookup(&d, e, err)) == 0 && (lock = lock_entry(&d, e, err)) < 0)
		rc = -1;
	if (rc == 0 && (rc = lookup(&d, e, err)) == 0)
		rc = make_entry(&d, r, e, &st, err) < 0 ? -1 : 0;
	if (lock >= 0)
		close(lock);
	eng_dir_close(&d);
	return rc < 0 ? -1 : 0;
}
