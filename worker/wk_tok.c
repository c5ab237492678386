/* wk_tok.c - remat-train --encode and --decode (wk_tok.h): the command line around
 * eng_tok. One tokenizer, one thread; a file is read whole (eng_fs's reader: no FIFO,
 * no device), at most WK_TOK_TEXT_MAX bytes.
 * Not here: the tokenizer (engine/io/eng_tok*.c).
 */
#include "wk_tok.h"
#include "wk_text.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_fs.h"
#include "eng_tok.h"
#include "eng_tokfile.h"

#define WK_TOK_TEXT_MAX (1ull << 30) /* largest text file --encode reads (bytes) */

static void usage(FILE *f)
{
	fprintf(f, "usage: remat-train --encode TOKENIZER FILE...\n"
		   "       remat-train --decode TOKENIZER < IDS\n"
		   "       remat-train --tokenize TOKENIZER OUT.bin [--jsonl] [--field KEY] "
		   "[--threads N] FILE...\n"
		   "TOKENIZER: a tokenizer.json, or a directory holding one (or vocab.json and "
		   "merges.txt)\n");
}

int wk_tok_wanted(int argc, char **argv)
{
	return argc >= 2 && (strcmp(argv[1], "--encode") == 0 || strcmp(argv[1], "--decode") == 0 ||
		strcmp(argv[1], "--tokenize") == 0);
}

/* --encode: each file's ids, one JSON array a line. */
static int encode_files(eng_tok *t, int n, char **files)
{
	eng_err err;
	for (int i = 0; i < n; i++) {
		size_t len = 0, k = 0;
		uint32_t *ids = NULL;
		char *text = eng_fs_read_all(files[i], "text file", WK_TOK_TEXT_MAX, &len, &err);
		if (!text || eng_tok_encode(t, text, len, &ids, &k, &err) < 0) {
			fprintf(stderr, "remat-train: %s%s%s\n", text ? files[i] : "",
				text ? ": " : "", err.msg);
			free(text);
			return 1;
		}
		putchar('[');
		for (size_t j = 0; j < k; j++)
			printf(j ? ",%u" : "%u", ids[j]);
		puts("]");
		free(ids);
		free(text);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

/* One line of --decode's input: a JSON array of ids into *ids (*n). */
static int parse_ids(const char *line, size_t len, uint32_t **ids, size_t *n)
{
	json_t *a = json_loadb(line, len, 0, NULL);
	int rc = -1;
	*ids = NULL;
	if (!json_is_array(a))
		goto out;
	*n = json_array_size(a);
	*ids = malloc(*n ? *n * sizeof **ids : 1);
	if (!*ids)
		goto out;
	for (size_t i = 0; i < *n; i++) {
		json_t *v = json_array_get(a, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > UINT32_MAX - 1)
			goto out;
		(*ids)[i] = (uint32_t)json_integer_value(v);
	}
	rc = 0;
out:
	json_decref(a);
	return rc;
}

/* --decode: each line's text as a JSON string a line. */
static int decode_lines(eng_tok *t)
{
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t len;
	int rc = 0;
	while (rc == 0 && (len = getline(&line, &cap, stdin)) >= 0) {
		uint32_t *ids = NULL;
		size_t n = 0, tl = 0;
		eng_err err;
		char *text = NULL, *js = NULL;
		json_t *s = NULL;
		lineno++;
		fflush(stdout); /* the lines before an error come before it */
		if (parse_ids(line, (size_t)len, &ids, &n) < 0) {
			fprintf(stderr, "remat-train: standard input line %zu: not a JSON array of "
				"token ids\n", lineno);
			rc = 1;
		} else if (!(text = eng_tok_decode(t, ids, n, &tl, &err))) {
			fprintf(stderr, "remat-train: standard input line %zu: %s\n", lineno,
				err.msg);
			rc = 1;
		} else if (!(s = json_stringn(text, tl)) ||
			   !(js = json_dumps(s, JSON_ENCODE_ANY))) {
			fprintf(stderr, "remat-train: out of memory\n");
			rc = 1;
		} else {
			puts(js);
		}
		free(js);
		json_decref(s);
		free(text);
		free(ids);
	}
	free(line);
	return rc == 0 && fflush(stdout) == 0 ? 0 : 1;
}

/* --tokenize's progress on a terminal: one line redrawn. */
static void progress(void *ud, uint64_t done, uint64_t total)
{
	(void)ud;
	wk_text_bar(stderr, "", done, total, 0);
}

/* --tokenize TOKENIZER OUT [--jsonl] [--field KEY] [--threads N] FILE...: an llm.c token
 * file of the corpus (eng_tokfile.h), and one line saying what it holds. */
static int tokenize_main(int argc, char **argv)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	eng_tokfile_opts o = {.field = "text", .threads = cpus > 0 ? (int)cpus : 1};
	eng_tokfile_stats st;
	eng_err err;
	int i = 4;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		char *end = NULL;
		if (strcmp(argv[i], "--jsonl") == 0)
			o.jsonl = 1;
		else if (strcmp(argv[i], "--field") == 0 && i + 1 < argc)
			o.field = argv[++i];
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc &&
			 (o.threads = (int)strtol(argv[++i], &end, 10)) >= 1 && !*end &&
			 o.threads <= ENG_TOKFILE_THREADS)
			continue;
		else
			break;
	}
	if (argc < 5 || i >= argc || strncmp(argv[i], "--", 2) == 0) {
		usage(stderr);
		return 2;
	}
	if (isatty(STDERR_FILENO))
		o.progress = progress;
	int rc = eng_tokfile_write(argv[2], argv + i, argc - i, argv[3], &o, &st, &err);
	if (o.progress)
		fputc('\n', stderr);
	if (rc < 0) {
		fprintf(stderr, "remat-train: %s\n", err.msg);
		return 1;
	}
	json_t *o2 = json_pack("{s:s,s:I,s:I,s:I,s:i}", "path", argv[3], "documents",
		(json_int_t)st.docs, "tokens", (json_int_t)st.tokens, "bytes",
		(json_int_t)st.bytes, "token_bytes", st.width);
	char *line = o2 ? json_dumps(o2, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	printf("%s\n", line ? line : "{}");
	free(line);
	json_decref(o2);
	return 0;
}

int wk_tok_main(int argc, char **argv)
{
	if (strcmp(argv[1], "--tokenize") == 0)
		return tokenize_main(argc, argv);
	int enc = strcmp(argv[1], "--encode") == 0;
	eng_err err;
	if (argc < 3 || (enc && argc < 4) || (!enc && argc != 3) ||
	    (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0))) {
		int help = argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"));
		usage(help ? stdout : stderr);
		return help ? 0 : 2;
	}
	eng_tok *t = eng_tok_load(argv[2], &err);
	if (!t) {
		fprintf(stderr, "remat-train: %s\n", err.msg);
		return 1;
	}
	int rc = enc ? encode_files(t, argc - 3, argv + 3) : decode_lines(t);
	eng_tok_free(t);
	return rc;
}
