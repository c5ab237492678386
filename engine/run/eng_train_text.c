/* eng_train_text.c - a job's text data as token files (see eng_train_int.h): each corpus
 * (data.train, data.val) looked up in the token cache, or tokenized into it by rank 0, then
 * read by the run as llm.c token files. The cache: data.cache, else save.dir's tokens/
 * (eng_tokcache.h).
 */
#include "eng_train_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_dp.h"
#include "eng_fs.h"
#include "eng_tokcache.h"

/* The request for one corpus of s: 1; 0 when the spec names no place for the cache (rematd
 * gives a job without save.dir its own once the check has passed: the run needs one); -1. */
static int text_req(const eng_spec *s, const char *corpus, const char *tok_path,
	const eng_ckpt_tok *files, char dir[ENG_PATH_LEN], eng_tokcache_req *r, eng_err *err)
{
	if (!tok_path[0])
		return eng_errf(err, "'data.format' is \"%s\" but the job has no tokenizer: give "
				     "data.tokenizer (init_from '%s' holds none)",
			eng_data_format_names[s->data_format], s->init_from);
	if (!s->data_cache[0] && !s->save_dir[0])
		return 0;
	if (s->data_cache[0])
		snprintf(dir, ENG_PATH_LEN, "%s", s->data_cache);
	else if ((size_t)snprintf(dir, ENG_PATH_LEN, "%s/%s", s->save_dir, ENG_TOKCACHE_DIR) >=
		 ENG_PATH_LEN)
		return eng_errf(err, "'save.dir' is too long for its token cache");
	memset(r, 0, sizeof *r);
	r->corpus = corpus;
	r->jsonl = s->data_format == ENG_DATA_JSONL;
	r->field = s->data_field;
	r->tokenizer = tok_path;
	r->files = files;
	r->dir = dir;
	r->threads = s->threads;
	return 1;
}

/* What rank 0 found or made, for every rank. */
typedef struct text_result {
	int rc;
	eng_err err;
	char path[2][ENG_PATH_LEN]; /* train's, val's token files */
} text_result;

/* One corpus's progress, for the hooks. */
typedef struct text_prog {
	const eng_train_hooks *h;
	eng_text_note n;
} text_prog;

static void on_progress(void *ud, uint64_t done, uint64_t total)
{
	text_prog *p = ud;
	p->n.phase = ENG_TEXT_TOKENIZING;
	p->n.done = done;
	p->n.total = total;
	p->h->text(p->h->ud, &p->n);
}

/* Rank 0's part: each corpus found or tokenized, its token file's path into out. */
static int prepare_here(const eng_spec *s, const char *tok_path, const eng_ckpt_tok *files,
	const eng_train_hooks *h, text_result *out, eng_err *err)
{
	const char *corpus[2] = {s->train_path, s->val_path}, *which[2] = {"train", "val"};
	char dir[ENG_PATH_LEN];
	for (int i = 0; i < 2 && corpus[i][0]; i++) {
		eng_tokcache_req r;
		eng_tokcache_entry e;
		text_prog p = {h, {which[i], corpus[i], ENG_TEXT_HASHING, 0, 0, NULL}};
		int rc = text_req(s, corpus[i], tok_path, files, dir, &r, err);
		if (rc <= 0)
			return rc < 0 ? -1 : eng_errf(err, "'data.format' is \"%s\": the text "
				"is tokenized once into a cache, kept in save.dir's %s/ or in "
				"data.cache: give one of them",
				eng_data_format_names[s->data_format], ENG_TOKCACHE_DIR);
		if (h && h->text) {
			h->text(h->ud, &p.n);
			r.progress = on_progress;
			r.ud = &p;
		}
		if (eng_tokcache_get(&r, &e, err) < 0)
			return -1;
		snprintf(out->path[i], sizeof out->path[i], "%s", e.path);
		p.n.phase = ENG_TEXT_DONE;
		p.n.entry = &e;
		if (h && h->text)
			h->text(h->ud, &p.n);
	}
	return 0;
}

int eng_train_text_prepare(eng_spec *s, const char *tok_path, const eng_ckpt_tok *files,
	const eng_train_hooks *h, eng_err *err)
{
	if (!ENG_DATA_IS_TEXT(s->data_format))
		return 0;
	text_result *out = calloc(1, sizeof *out);
	if (!out)
		return eng_err_nomem(err, "out of memory");
	if (eng_dp_rank() == 0)
		out->rc = prepare_here(s, tok_path, files, h, out, &out->err);
	/* the other ranks wait for rank 0's tokens, and take its answer, failure included */
	int rc = eng_dp_size() > 1 ? eng_dp_bcast(out, sizeof *out, err) : 0;
	if (rc == 0 && out->rc < 0) {
		*err = out->err;
		rc = -1;
	}
	if (rc == 0) {
		snprintf(s->train_path, sizeof s->train_path, "%s", out->path[0]);
		if (s->val_path[0])
			snprintf(s->val_path, sizeof s->val_path, "%s", out->path[1]);
		s->data_format = ENG_DATA_LLMC;
	}
	free(out);
	return rc;
}

/* The size of a corpus that can be read (0), or -1. */
static int corpus_bytes(const char *path, uint64_t *bytes, eng_err *err)
{
	struct stat st;
	int fd = eng_fs_open_read(path, "corpus file", &st, err);
	if (fd < 0)
		return -1;
	close(fd);
	*bytes = (uint64_t)st.st_size;
	return 0;
}

int eng_train_text_find(eng_spec *s, const char *tok_path, const eng_ckpt_tok *files,
	uint64_t *pending, int pending_which[2], eng_err *err)
{
	char *corpus[2] = {s->train_path, s->val_path}, dir[ENG_PATH_LEN];
	*pending = 0;
	pending_which[0] = pending_which[1] = 0;
	if (!ENG_DATA_IS_TEXT(s->data_format))
		return 0;
	for (int i = 0; i < 2 && corpus[i][0]; i++) {
		eng_tokcache_req r;
		eng_tokcache_entry e;
		int hit = text_req(s, corpus[i], tok_path, files, dir, &r, err);
		if (hit > 0)
			hit = eng_tokcache_find(&r, &e, err);
		else if (hit == 0) /* nowhere to look yet: the corpus, readable, to tokenize */
			hit = corpus_bytes(corpus[i], &e.bytes, err);
		if (hit < 0)
			return -1;
		if (hit) {
			snprintf(corpus[i], ENG_PATH_LEN, "%s", e.path);
		} else {
			*pending += e.bytes;
			pending_which[i] = 1;
		}
	}
	s->data_format = ENG_DATA_LLMC;
	return 0;
}
