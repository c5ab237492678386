/* eng_tokfile.c - a text corpus into an llm.c token file (see eng_tokfile.h). */
#include "eng_tokfile.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_data.h"
#include "eng_fs.h"
#include "eng_tok.h"

#define TEXT_MAX (1ull << 30) /* largest text file, one document (bytes) */

/* One document: its text (owned), then its ids; where it came from, for messages. */
typedef struct doc {
	char *text;
	size_t len;
	uint32_t *ids;
	size_t n;
	int file;         /* index into the inputs */
	size_t line;      /* JSON Lines: its line, 1-based; 0 for a text file */
} doc;

/* The documents of one block. */
typedef struct block {
	doc *d;
	int n, cap;
	size_t bytes;
} block;

/* Where the corpus is read from. */
typedef struct reader {
	char *const *inputs;
	int n, at;        /* files, and the one being read */
	FILE *f;          /* JSON Lines: the open file */
	size_t line;
	char *buf;        /* getline's */
	size_t cap;
	const eng_tokfile_opts *o;
	uint64_t done;    /* input bytes read */
} reader;

/* One encoding thread: documents [from, to) of a block through its own tokenizer. */
typedef struct encoder {
	eng_tok *tok;
	block *b;
	int from, to;
	int failed;       /* the index of the document that failed, -1 none */
	eng_err err;
	pthread_t th;
} encoder;

static void *encode_range(void *p)
{
	encoder *e = p;
	e->failed = -1;
	for (int i = e->from; i < e->to && e->failed < 0; i++) {
		doc *d = &e->b->d[i];
		if (eng_tok_encode(e->tok, d->text, d->len, &d->ids, &d->n, &e->err) < 0)
			e->failed = i;
	}
	return NULL;
}

/* The whole text file at path as one document. */
static int read_text(reader *r, const char *path, doc *d, eng_err *err)
{
	if (!(d->text = eng_fs_read_all(path, "text file", TEXT_MAX, &d->len, err)))
		return -1;
	r->done += d->len;
	return 1;
}

/* The next JSON Lines document of the open file: 1, 0 at its end, -1. */
static int read_line(reader *r, doc *d, eng_err *err)
{
	const char *path = r->inputs[r->at];
	for (;;) {
		ssize_t len = getline(&r->buf, &r->cap, r->f);
		if (len < 0)
			return ferror(r->f) ? eng_errf(err, "cannot read '%s': %s", path,
				strerror(errno)) : 0;
		r->line++;
		r->done += (uint64_t)len;
		if (strspn(r->buf, " \t\r\n") == (size_t)len)
			continue; /* a blank line */
		json_t *o = json_loadb(r->buf, (size_t)len, 0, NULL);
		json_t *v = json_object_get(o, r->o->field);
		if (!json_is_string(v)) {
			json_decref(o);
			return eng_errf(err, "'%s' line %zu: not a JSON object with a string at "
					     "'%.64s'", path, r->line, r->o->field);
		}
		d->len = json_string_length(v);
		d->text = malloc(d->len + 1);
		if (d->text)
			memcpy(d->text, json_string_value(v), d->len + 1);
		json_decref(o);
		if (!d->text)
			return eng_err_nomem(err, "'%s' line %zu: out of memory", path, r->line);
		d->line = r->line;
		return 1;
	}
}

/* The corpus's next document into d: 1, 0 when there is none left, -1. */
static int next_doc(reader *r, doc *d, eng_err *err)
{
	memset(d, 0, sizeof *d);
	while (r->at < r->n) {
		d->file = r->at;
		if (!r->o->jsonl)
			return read_text(r, r->inputs[r->at++], d, err) < 0 ? -1 : 1;
		if (!r->f) {
			r->f = eng_fs_fopen_read(r->inputs[r->at], "corpus file", err);
			r->line = 0;
			if (!r->f)
				return -1;
		}
		int got = read_line(r, d, err);
		if (got != 0)
			return got;
		fclose(r->f);
		r->f = NULL;
		r->at++;
	}
	return 0;
}

static void block_clear(block *b)
{
	for (int i = 0; i < b->n; i++) {
		free(b->d[i].text);
		free(b->d[i].ids);
	}
	b->n = 0;
	b->bytes = 0;
}

/* Fills b with the next documents, up to ENG_TOKFILE_BLOCK bytes (one at least): the
 * count, 0 at the corpus's end, -1. */
static int fill(reader *r, block *b, eng_err *err)
{
	while (b->bytes < ENG_TOKFILE_BLOCK) {
		if (b->n == b->cap) {
			int cap = b->cap ? 2 * b->cap : 1024;
			doc *d = realloc(b->d, (size_t)cap * sizeof *d);
			if (!d)
				return eng_err_nomem(err, "out of memory for a block of documents");
			b->d = d;
			b->cap = cap;
		}
		int got = next_doc(r, &b->d[b->n], err);
		if (got < 0)
			return -1;
		if (got == 0)
			break;
		b->bytes += b->d[b->n++].len + 1;
	}
	return b->n;
}

/* Encodes block b on the n encoders (the first on this thread): 0, or -1 naming the
 * first document that failed. */
static int encode_block(encoder *e, int n, block *b, char *const *inputs, eng_err *err)
{
	int started = 0, rc = 0;
	for (int t = 0; t < n; t++) {
		e[t].b = b;
		e[t].from = (int)((long long)b->n * t / n);
		e[t].to = (int)((long long)b->n * (t + 1) / n);
	}
	for (int t = 1; t < n; t++, started++)
		if (pthread_create(&e[t].th, NULL, encode_range, &e[t]) != 0)
			break;
	for (int t = started + 1; t < n; t++) /* threads that could not start: here */
		encode_range(&e[t]);
	encode_range(&e[0]);
	for (int t = 1; t <= started; t++)
		pthread_join(e[t].th, NULL);
	for (int t = 0; t < n && rc == 0; t++) {
		if (e[t].failed < 0)
			continue;
		const doc *d = &b->d[e[t].failed];
		if (d->line)
			rc = eng_errf(err, "'%s' line %zu: %s", inputs[d->file], d->line, e[t].err.msg);
		else
			rc = eng_errf(err, "'%s': %s", inputs[d->file], e[t].err.msg);
	}
	return rc;
}

/* The block's documents, each after the separator, to f as width-byte tokens. */
static int write_block(FILE *f, const block *b, uint32_t sep, int width,
	eng_tokfile_stats *st)
{
	for (int i = 0; i < b->n; i++) {
		const doc *d = &b->d[i];
		for (size_t j = 0; j <= d->n; j++) {
			uint32_t t = j ? d->ids[j - 1] : sep;
			unsigned char le[4] = {t & 0xff, t >> 8 & 0xff, t >> 16 & 0xff, t >> 24};
			if (fwrite(le, (size_t)width, 1, f) != 1)
				return -1;
		}
		st->tokens += d->n + 1;
		st->docs++;
		st->bytes += d->len;
	}
	return 0;
}

/* llm.c's header for st's tokens at the start of fd. */
static int write_header(int fd, const eng_tokfile_stats *st)
{
	int32_t hdr[ENG_LLMC_HEADER_INTS] = {0};
	hdr[0] = st->width == 2 ? ENG_LLMC_MAGIC : ENG_LLMC_MAGIC_U32;
	hdr[1] = st->width == 2 ? 1 : 7;
	hdr[2] = (int32_t)(uint32_t)st->tokens;
	hdr[3] = (int32_t)(uint32_t)(st->tokens >> 32);
	return pwrite(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr ? 0 : -1;
}

uint32_t eng_tokfile_sep(const eng_tok *t)
{
	return eng_tok_bos(t) != ENG_TOK_NONE ? eng_tok_bos(t) : eng_tok_eos(t);
}

/* Loads n tokenizers, one an encoder: 0, or -1. */
static int load_encoders(encoder *e, int n, const char *tokenizer, eng_err *err)
{
	for (int t = 0; t < n; t++)
		if (!(e[t].tok = eng_tok_load(tokenizer, err)))
			return -1;
	return 0;
}

/* The total bytes of the inputs, for the progress figure (each as its reader will open
 * it; one that cannot be opened counts 0 and fails when its turn comes). */
static uint64_t total_bytes(char *const *inputs, int n)
{
	uint64_t total = 0;
	struct stat st;
	eng_err quiet;
	for (int i = 0; i < n; i++) {
		int fd = eng_fs_open_read(inputs[i], "corpus file", &st, &quiet);
		if (fd >= 0) {
			total += (uint64_t)st.st_size;
			close(fd);
		}
	}
	return total;
}

/* Streams the corpus through the encoders into f (its descriptor fd). */
static int stream(reader *r, encoder *e, int n, FILE *f, eng_tokfile_stats *st,
	eng_err *err)
{
	block b = {0};
	uint64_t total = total_bytes(r->inputs, r->n);
	uint32_t sep = eng_tokfile_sep(e[0].tok);
	int rc = -1, got;
	if (sep == ENG_TOK_NONE) {
		eng_errf(err, "the tokenizer has no BOS or EOS token to begin each document with");
		return -1;
	}
	if (fseeko(f, ENG_LLMC_HEADER_INTS * 4, SEEK_SET) < 0) {
		eng_errf(err, "cannot write the token file: %s", strerror(errno));
		return -1;
	}
	while ((got = fill(r, &b, err)) > 0) {
		if (encode_block(e, n, &b, r->inputs, err) < 0)
			goto out;
		if (write_block(f, &b, sep, st->width, st) < 0) {
			eng_errf(err, "cannot write the token file: %s", strerror(errno));
			goto out;
		}
		block_clear(&b);
		if (r->o->progress)
			r->o->progress(r->o->ud, r->done, total);
	}
	rc = got;
out:
	block_clear(&b);
	free(b.d);
	return rc;
}

int eng_tokfile_write(const char *tokenizer, char *const *inputs, int n, const char *out,
	const eng_tokfile_opts *o, eng_tokfile_stats *st, eng_err *err)
{
	int threads = o->threads < 1 ? 1 : o->threads > ENG_TOKFILE_THREADS
		? ENG_TOKFILE_THREADS : o->threads;
	encoder *e = calloc((size_t)threads, sizeof *e);
	reader r = {.inputs = inputs, .n = n, .o = o};
	eng_dir d = {.fd = -1};
	char name[ENG_PATH_LEN], tmp[ENG_PATH_LEN + 8];
	FILE *f = NULL;
	int rc = -1;
	memset(st, 0, sizeof *st);
	if (!e) {
		eng_err_nomem(err, "out of memory for %d encoders", threads);
		goto out;
	}
	if (load_encoders(e, threads, tokenizer, err) < 0)
		goto out;
	st->width = eng_tok_vocab_size(e[0].tok) <= 65536 ? 2 : 4;
	/* everything in OUT's directory through its descriptor: the file made anew under
	 * NAME.tmp (what had that name, a link of either kind, removed first, so nothing is
	 * written through it), then renamed over NAME */
	if (eng_dir_open_file_or_dir(&d, out, name, sizeof name, err) < 0)
		goto out;
	if (!name[0]) {
		eng_errf(err, "'%s' is a directory, not a token file's name", out);
		goto out;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp", name);
	/* a leftover NAME.tmp of ours is removed; a link of either kind there, or under NAME
	 * (which the rename replaces), or another user's file, is refused (eng_fs_entry) */
	if (eng_fs_entry(&d, name, 0, "replace", err) < 0 ||
		eng_fs_remove_file(&d, tmp, err) < 0)
		goto out;
	int fd = openat(d.fd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w+b"))) {
		eng_errf(err, "cannot write '%s.tmp': %s", out, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	if (stream(&r, e, threads, f, st, err) < 0)
		goto out;
	if (fflush(f) != 0 || write_header(fileno(f), st) < 0 || fsync(fileno(f)) < 0) {
		eng_errf(err, "cannot write '%s.tmp': %s", out, strerror(errno));
		goto out;
	}
	if (eng_fs_entry(&d, name, 0, "replace", err) < 0)
		goto out;
	if (renameat(d.fd, tmp, d.fd, name) < 0) {
		eng_errf(err, "cannot rename '%s.tmp' to '%s': %s", out, out, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (f)
		fclose(f);
	if (rc < 0 && f)
		unlinkat(d.fd, tmp, 0);
	if (d.fd >= 0)
		eng_dir_close(&d);
	if (r.f)
		fclose(r.f);
	free(r.buf);
	for (int t = 0; e && t < threads; t++)
		eng_tok_free(e[t].tok);
	free(e);
	return rc;
}
