/* eng_ckpt_tok.c - the tokenizer's files a checkpoint carries, read once at a run's start
 * (see eng_ckpt.h's eng_ckpt_tok). */
#include "eng_ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_fs.h"
#include "eng_mem.h"

const char *const eng_ckpt_tok_names[ENG_CKPT_TOK_FILES] = {ENG_CKPT_TOK_NAMES};

/* The regular file fd (of st) whole into t's slot k: 0, or -1 naming what. */
static int read_whole(eng_ckpt_tok *t, int k, int fd, const struct stat *st,
	const char *what, eng_err *err)
{
	size_t n = (size_t)st->st_size, done = 0;
	if (n > ENG_CKPT_TOK_MAX)
		return eng_errf(err, "tokenizer file '%s': %zu bytes, more than %u MiB", what, n,
			ENG_CKPT_TOK_MAX >> 20);
	t->bytes[k] = eng_mem_alloc(ENG_MEM_DATA, n ? n : 1);
	if (!t->bytes[k])
		return eng_errf(err, "tokenizer file '%s': out of memory for %zu bytes", what, n);
	while (done < n) {
		ssize_t r = pread(fd, t->bytes[k] + done, n - done, (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return eng_errf(err, "tokenizer file '%s': read failed: %s", what,
				r ? strerror(errno) : "the file shrank");
		done += (size_t)r;
	}
	t->len[k] = n;
	return 0;
}

/* Slot k from d/name when it is there (absent: nothing, 0); -1 on anything else. As with
 * a model's files, a link at the name itself is followed: Hugging Face's hub cache keeps
 * its files as links to blobs (the worker reads as the job's owner). */
static int read_in(eng_ckpt_tok *t, int k, const eng_dir *d, const char *name, eng_err *err)
{
	struct stat st;
	char what[ENG_PATH_LEN + 64];
	snprintf(what, sizeof what, "%s/%s", d->path, name);
	int fd = eng_fs_open_read_in(d, name, "tokenizer file", &st, err);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	int rc = read_whole(t, k, fd, &st, what, err);
	close(fd);
	return rc;
}

int eng_ckpt_tok_read(eng_ckpt_tok *t, const char *path, eng_err *err)
{
	eng_dir d;
	char name[ENG_PATH_LEN];
	int rc = 0;
	memset(t, 0, sizeof *t);
	/* a directory holding the files, or a tokenizer.json by any name with the others
	 * beside it */
	if (eng_dir_open_file_or_dir(&d, path, name, sizeof name, err) < 0)
		return -1;
	if (name[0]) {
		rc = read_in(t, 0, &d, name, err);
		if (rc == 0 && !t->len[0])
			rc = eng_errf(err, "tokenizer '%s': %s", path, strerror(ENOENT));
	}
	for (int k = name[0] ? 1 : 0; rc == 0 && k < ENG_CKPT_TOK_FILES; k++)
		rc = read_in(t, k, &d, eng_ckpt_tok_names[k], err);
	if (rc == 0 && !t->len[0] && !(t->len[3] && t->len[4]))
		rc = eng_errf(err, "tokenizer '%s': no tokenizer.json, nor vocab.json and "
				   "merges.txt", path);
	eng_dir_close(&d);
	if (rc < 0)
		eng_ckpt_tok_free(t);
	return rc;
}

size_t eng_ckpt_tok_bytes(const eng_ckpt_tok *t)
{
	size_t n = 0;
	for (int k = 0; k < ENG_CKPT_TOK_FILES; k++)
		n += t->len[k];
	return n;
}

void eng_ckpt_tok_free(eng_ckpt_tok *t)
{
	for (int k = 0; k < ENG_CKPT_TOK_FILES; k++)
		eng_mem_free(t->bytes[k]);
	memset(t, 0, sizeof *t);
}
