/* t_util.c - helpers shared by the engine tests (see t_util.h). */
#include "t_util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_train_ckpt.h"
#include "kn.h"
#include "tests.h"

/* The writer thread's outcome for t_save. */
typedef struct t_saved {
	int ok;
	char path[ENG_PATH_LEN + 64], msg[ENG_ERR_LEN];
} t_saved;

static void t_on_saved(void *ud, int ok, const eng_ckpt_result *res, const char *msg)
{
	t_saved *s = ud;
	s->ok = ok;
	snprintf(s->path, sizeof s->path, "%s", ok ? res->path : "");
	snprintf(s->msg, sizeof s->msg, "%s", ok ? "" : msg);
}

void t_save(eng_trainer *tr, char *path, size_t len)
{
	eng_ckpt_snap snap;
	eng_err err;
	t_saved out = {0};
	eng_ckpt_writer *w = eng_ckpt_writer_start();
	ck_assert_ptr_nonnull(w);
	ck_assert_msg(eng_trainer_sync_host(tr, &err) == 0 &&
		eng_trainer_snap_take(&snap, tr, &err) == 0, "save: %s", err.msg);
	ck_assert_int_eq(eng_ckpt_writer_submit(w, &snap, tr->spec.save_dir, NULL,
		tr->spec.save_keep, t_on_saved, &out), 0);
	eng_ckpt_writer_stop(w); /* waits for the save */
	ck_assert_msg(out.ok, "save: %s", out.msg);
	snprintf(path, len, "%s", out.path);
}

void t_steps_saving(eng_trainer *tr, int steps, int save_at, float *loss, char *path,
	size_t len)
{
	eng_step_stats st;
	eng_err err;
	for (int s = 1; s <= steps; s++) {
		ck_assert_msg(eng_trainer_step_as(tr, NULL, &st, &err) == 0, "%s", err.msg);
		loss[s] = st.loss;
		if (s == save_at)
			t_save(tr, path, len);
	}
}

void t_resumed_steps(eng_trainer *tr, int from, int to, const float *loss)
{
	eng_step_stats st;
	eng_err err;
	for (int s = from; s <= to; s++) {
		ck_assert_msg(eng_trainer_step_as(tr, NULL, &st, &err) == 0, "%s", err.msg);
		ck_assert_msg(st.loss == loss[s], "step %d: resumed loss %.9g, uninterrupted %.9g", s,
			st.loss, loss[s]);
	}
}

void t_trainer(eng_trainer *tr, const char *fmt, ...)
{
	char text[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	eng_spec spec;
	eng_err err;
	ck_assert_msg(eng_spec_parse(&spec, text, &err) == 0, "spec: %s\n%s", err.msg, text);
	ck_assert_msg(eng_trainer_init(tr, &spec, &err) == 0, "trainer: %s", err.msg);
}

int t_bf16_here(const char *suite)
{
	char why[320];
	if (kn_bf16_available(why, sizeof why))
		return 1;
	fprintf(stderr, "%s: bf16 skipped: %s\n", suite, why);
	return 0;
}

double t_rel_l2(const float *a, const float *b, size_t n)
{
	double num = 0.0, den = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)a[i] - b[i];
		num += d * d;
		den += (double)b[i] * b[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

char *t_tmp_dir(const char *prefix)
{
	const char *dir = t_env("REMAT_TMP");
	size_t n = strlen(dir) + strlen(prefix) + 9;
	char *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	snprintf(p, n, "%s/%sXXXXXX", dir, prefix);
	ck_assert_msg(mkdtemp(p) != NULL, "mkdtemp %s: %s", p, strerror(errno));
	return p;
}

char *t_data(const char *rel)
{
	const char *dir = t_env("REMAT_TESTDATA");
	size_t n = strlen(dir) + strlen(rel) + 2;
	char *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	snprintf(p, n, "%s/%s", dir, rel);
	return p;
}

char *t_protocol_md(void)
{
	char path[700];
	size_t n;
	snprintf(path, sizeof path, "%s/../../docs/protocol.md", t_env("REMAT_TESTDATA"));
	return t_read_file(path, &n);
}

const char *t_doc_row(const char *doc, const char *name, size_t *len)
{
	char head[128];
	snprintf(head, sizeof head, "\n| `%s` |", name);
	const char *at = strstr(doc, head);
	if (!at)
		return NULL;
	at++;
	const char *end = strchr(at, '\n');
	*len = end ? (size_t)(end - at) : strlen(at);
	return at;
}

void t_doc_cell(const char *row, size_t len, int k, char *out, size_t cap)
{
	size_t start = 0;
	int bars = 0;
	out[0] = '\0';
	for (size_t i = 0; i < len; i++) {
		if (row[i] != '|' || (i > 0 && row[i - 1] == '\\'))
			continue;
		if (bars == k + 1) {
			snprintf(out, cap, "%.*s", (int)(i - start), row + start);
			return;
		}
		bars++;
		start = i + 1;
	}
}

char *t_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	ck_assert_ptr_nonnull(buf);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
			ck_assert_ptr_nonnull(buf);
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		if (r == 0)
			break;
		n += r;
	}
	ck_assert(!ferror(f));
	fclose(f);
	buf[n] = '\0'; /* for strstr on text files */
	*len = n;
	return buf;
}


void t_write_file(const char *path, const void *buf, size_t len)
{
	/* never through a link planted where a test writes */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "cannot write %s: %s", path, strerror(errno));
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, (const char *)buf + off, len - off);
		ck_assert_msg(w > 0, "cannot write %s: %s", path, strerror(errno));
		off += (size_t)w;
	}
	ck_assert_int_eq(close(fd), 0);
}

int t_train_run(char **out, int stderr_only, const char *const *args)
{
	const char *argv[T_TRAIN_MAX_ARGS + 5];
	int n = 0;
	if (stderr_only) {
		argv[n++] = "/bin/sh";
		argv[n++] = "-c";
		argv[n++] = "exec \"$0\" \"$@\" >/dev/null";
	}
	argv[n++] = t_env("REMAT_TRAIN");
	for (int i = 0; args[i]; i++) {
		ck_assert(i < T_TRAIN_MAX_ARGS);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	return t_run((char *const *)argv, out);
}


int t_asan_skips(const char *test)
{
#ifdef __SANITIZE_ADDRESS__
	fprintf(stderr, "%s: skipped under AddressSanitizer: the process's memory is its shadow "
		"and quarantine's as much as the run's\n", test);
	return 1;
#else
	(void)test;
	return 0;
#endif
}

void t_next(eng_data *d, uint32_t *inp, uint32_t *tgt)
{
	eng_err err;
	ck_assert_msg(eng_data_next(d, inp, tgt, &err) == 0, "%s", err.msg);
}

/* GPT-2's byte symbols (bytes_to_unicode): printable Latin-1 bytes stand for themselves,
 * the other 68 for U+0100 on, in byte order. */
static unsigned byte_symbol(int b)
{
	static unsigned map[256];
	if (!map['!']) {
		unsigned next = 256;
		for (int c = 0; c < 256; c++)
			map[c] = (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || c >= 0xae
				? (unsigned)c : next++;
	}
	return map[b];
}

void t_byte_tokenizer(const char *dir, int extra, int eot)
{
	char path[1024];
	json_t *vocab = json_object();
	for (int b = 0; b < 256 + extra; b++) {
		char sym[8];
		unsigned u = b < 256 ? byte_symbol(b) : 0x4e00 + (unsigned)b; /* CJK, one each */
		if (u < 0x80)
			snprintf(sym, sizeof sym, "%c", (char)u);
		else if (u < 0x800)
			snprintf(sym, sizeof sym, "%c%c", (char)(0xc0 | u >> 6),
				(char)(0x80 | (u & 63)));
		else
			snprintf(sym, sizeof sym, "%c%c%c", (char)(0xe0 | u >> 12),
				(char)(0x80 | (u >> 6 & 63)), (char)(0x80 | (u & 63)));
		json_object_set_new(vocab, b == 256 && eot ? "<|endoftext|>" : sym,
			json_integer(b));
	}
	json_t *doc = json_pack("{s:{s:s,s:o,s:[]},s:{s:s,s:b,s:b},s:{s:s}}", "model", "type",
		"BPE", "vocab", vocab, "merges", "pre_tokenizer", "type", "ByteLevel",
		"add_prefix_space", 0, "use_regex", 1, "decoder", "type", "ByteLevel");
	snprintf(path, sizeof path, "%s/tokenizer.json", dir);
	ck_assert_int_eq(json_dump_file(doc, path, JSON_COMPACT), 0);
	json_decref(doc);
	snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
	const char *conf = eot ? "{\"eos_token\": \"<|endoftext|>\"}"
		: "{\"model_max_length\": 64, \"tokenizer_class\": \"GPT2Tokenizer\"}";
	t_write_file(path, conf, strlen(conf));
}
