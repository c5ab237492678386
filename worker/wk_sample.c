/* wk_sample.c - samples during a run and from a checkpoint (see wk_sample.h). */
#include "wk_sample.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_fs.h"
#include "eng_import.h"
#include "eng_tok.h"
#include "kn.h"

/* Bytes of the UTF-8 sequence at s (n left), 0 when it is not a valid one. */
static int utf8_len(const unsigned char *s, int n)
{
	int k = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
		: (s[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (k == 0 || k > n || (k == 2 && s[0] < 0xc2))
		return 0;
	for (int i = 1; i < k; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return k;
}

/* Text made safe to show: valid UTF-8 and tabs and newlines kept, any other byte shown as
 * '?' (no control character reaches a terminal or a log); malloc'd. */
static char *clean_text(const unsigned char *b, size_t n)
{
	char *buf = malloc(n + 1);
	size_t o = 0;
	for (size_t i = 0; buf && i < n;) {
		int k = utf8_len(b + i, n - i > 4 ? 4 : (int)(n - i));
		if (k == 1 && ((b[i] < 0x20 && b[i] != '\n' && b[i] != '\t') || b[i] == 0x7f))
			k = 0;
		if (k == 0) {
			buf[o++] = '?';
			i++;
			continue;
		}
		memcpy(buf + o, b + i, (size_t)k);
		o += (size_t)k;
		i += (size_t)k;
	}
	if (buf)
		buf[o] = '\0';
	return buf;
}

/* n ids as text, malloc'd: through the run's tokenizer (tok), or a byte model's bytes (a
 * token past 255 shown as '?'); NULL when neither (the ids are shown instead) or on a
 * failure (said on stderr). */
static char *sample_text(eng_tok *tok, int bytes, const uint32_t *ids, int n)
{
	eng_err err;
	size_t len;
	char *raw = NULL, *text = NULL;
	if (tok) {
		raw = eng_tok_decode(tok, ids, (size_t)n, &len, &err);
		if (!raw)
			fprintf(stderr, "remat-train: sample: %s\n", err.msg);
	} else if (bytes && (raw = malloc((size_t)n + 1))) {
		for (int i = 0; i < n; i++)
			raw[i] = (char)(ids[i] < 256 ? ids[i] : 0x01); /* past a byte: '?' */
		len = (size_t)n;
	}
	if (raw)
		text = clean_text((const unsigned char *)raw, len);
	free(raw);
	return text;
}

static json_t *ids_json(const uint32_t *tok, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(tok[i]));
	return a;
}

void wk_sample_run(eng_trainer *tr, wk_ctl *c, wk_metrics *mx, int json)
{
	const eng_spec *s = &tr->spec;
	eng_sample_opts o = {s->sample_tokens, s->sample_temperature, s->sample_top_k,
		s->sample_seed + (uint32_t)tr->step};
	uint32_t *out = malloc((size_t)o.tokens * sizeof *out);
	char *text = NULL;
	eng_err err;
	if (!out) {
		fprintf(stderr, "remat-train: sample: out of memory\n");
		goto out;
	}
	if (eng_sample(&tr->model, s->sample_prompt, s->sample_n, &o, tr->inp, tr->tgt, out,
		    &err) < 0) {
		fprintf(stderr, "remat-train: sample after step %d: %s\n", tr->step, err.msg);
		goto out;
	}
	json_t *row = json_pack("{s:i,s:o,s:o}", "step", tr->step, "prompt",
		ids_json(s->sample_prompt, s->sample_n), "tokens", ids_json(out, o.tokens));
	text = sample_text(tr->tok, s->data_format == ENG_DATA_BYTES, out, o.tokens);
	if (text)
		json_object_set_new(row, "text", json_string(text));
	if (json) {
		char *line = json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER);
		printf("%s\n", line ? line : "{}");
		free(line);
	} else if (text) {
		printf("sample after step %d:\n%s\n", tr->step, text);
	} else {
		printf("sample after step %d:", tr->step);
		for (int i = 0; i < o.tokens; i++)
			printf(" %u", out[i]);
		printf("\n");
	}
	wk_metrics_change(mx, PROTO_EV_SAMPLE, row); /* rematctl logs shows it */
	wk_ctl_event(c, PROTO_EV_SAMPLE, row);
out:
	free(out);
	free(text);
}

/* Whether ckpt's trainer_state.json says its data was bytes: 1, 0 (llmc), -1 (none). */
static int ckpt_bytes(const char *ckpt)
{
	char p[ENG_PATH_LEN + 32];
	eng_err e;
	snprintf(p, sizeof p, "%s/trainer_state.json", ckpt);
	FILE *f = access(p, F_OK) == 0 ? eng_fs_fopen_read(p, "checkpoint file", &e) : NULL;
	if (!f)
		return -1;
	json_t *o = json_loadf(f, 0, NULL);
	fclose(f);
	const char *fmt = json_string_value(json_object_get(json_object_get(o, "data"), "format"));
	int r = fmt ? strcmp(fmt, "bytes") == 0 : -1;
	json_decref(o);
	return r;
}

/* The prompt as tokens: bytes of text, or ids separated by commas or blanks; each under
 * the vocabulary (the kernels trust their input). */
static int parse_prompt(const char *text, int bytes, int vocab, uint32_t *tok, int *n)
{
	*n = 0;
	if (bytes) {
		for (const char *c = text; *c && *n < ENG_MAX_PROMPT; c++) {
			if ((unsigned char)*c >= vocab)
				return -1;
			tok[(*n)++] = (unsigned char)*c;
		}
		return *n > 0 && !text[*n] ? 0 : -1;
	}
	for (const char *c = text; *c;) {
		char *end;
		if (*c == ',' || *c == ' ') {
			c++;
			continue;
		}
		errno = 0;
		long v = strtol(c, &end, 10);
		if (errno || end == c || v < 0 || v >= vocab || *n == ENG_MAX_PROMPT)
			return -1;
		tok[(*n)++] = (uint32_t)v;
		c = end;
	}
	return *n > 0 ? 0 : -1;
}

/* The continuation printed: the prompt and it as text (a tokenizer's, or a byte model's),
 * or the new ids. */
static void print_sample(const wk_sample_args *a, eng_tok *tok, const uint32_t *prompt,
	int n, const uint32_t *out, int bytes)
{
	int k = a->o.tokens;
	uint32_t *all = malloc((size_t)(n + k) * sizeof *all);
	char *text = NULL;
	if (all) {
		memcpy(all, prompt, (size_t)n * sizeof *all);
		memcpy(all + n, out, (size_t)k * sizeof *all);
		text = sample_text(tok, bytes, all, n + k);
	}
	free(all);
	if (a->json) {
		json_t *o = json_pack("{s:o,s:o}", "prompt", ids_json(prompt, n), "tokens",
			ids_json(out, k));
		if (text)
			json_object_set_new(o, "text", json_string(text));
		char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		printf("%s\n", line ? line : "{}");
		free(line);
		json_decref(o);
	} else if (text) {
		printf("%s\n", text);
	} else {
		for (int i = 0; i < k; i++)
			printf("%s%u", i ? " " : "", out[i]);
		printf("\n");
	}
	free(text);
}

/* The prompt through ckpt's tokenizer: text (NULL: its BOS, else its EOS, else id 0),
 * encoded, each id under vocab: 0, or -1 said. */
static int prompt_of(eng_tok *tok, const char *text, int vocab, uint32_t *ids, int *n)
{
	uint32_t *enc = NULL, first = eng_tok_bos(tok) != ENG_TOK_NONE ? eng_tok_bos(tok)
								    : eng_tok_eos(tok);
	size_t m = 0;
	eng_err err;
	*n = 0;
	if (!text) {
		ids[(*n)++] = first != ENG_TOK_NONE ? first : 0;
		return 0;
	}
	if (eng_tok_encode(tok, text, strlen(text), &enc, &m, &err) < 0) {
		fprintf(stderr, "remat-train: --prompt: %s\n", err.msg);
		return -1;
	}
	for (size_t i = 0; i < m && *n < ENG_MAX_PROMPT; i++)
		if (enc[i] < (uint32_t)vocab)
			ids[(*n)++] = enc[i];
	free(enc);
	if (*n == (int)m && m > 0)
		return 0;
	fprintf(stderr, "remat-train: --prompt: %s\n", m == 0 ? "empty" : *n == ENG_MAX_PROMPT ?
		"more than 1024 tokens" : "a token past the model's vocab_size");
	return -1;
}

/* ckpt's tokenizer when it carries one (*tok NULL when not): 0, or -1 said (one there
 * that does not load). */
static int ckpt_tokenizer(const char *ckpt, eng_tok **tok)
{
	eng_err err;
	*tok = NULL;
	if (!eng_tok_present(ckpt))
		return 0;
	if ((*tok = eng_tok_load(ckpt, &err)))
		return 0;
	fprintf(stderr, "remat-train: --sample: %s\n", err.msg);
	return -1;
}

int wk_sample_cli(const wk_sample_args *a)
{
	eng_config cfg;
	eng_model m = {0};
	eng_policy p;
	eng_err err;
	uint32_t prompt[ENG_MAX_PROMPT], *inp = NULL, *tgt = NULL, *out = NULL;
	eng_tok *tok = NULL;
	int n, rc = 1;
	if (eng_import_read_config(a->ckpt, &cfg, &err) < 0)
		goto fail;
	if (ckpt_tokenizer(a->ckpt, &tok) < 0)
		return 1;
	int st = ckpt_bytes(a->ckpt), bytes = !tok && (st >= 0 ? st : cfg.vocab_size == 256);
	const char *text = a->prompt ? a->prompt : bytes ? "\n" : cfg.vocab_size > 50256 ? "50256"
											 : "0";
	if (tok && prompt_of(tok, a->prompt, cfg.vocab_size, prompt, &n) < 0) {
		rc = 2;
		goto out;
	}
	if (!tok && parse_prompt(text, bytes, cfg.vocab_size, prompt, &n) < 0) {
		fprintf(stderr, "remat-train: --prompt: %s\n", bytes
			? "text of 1 to 1024 bytes, each under the model's vocab_size (a byte model)"
			: "token ids under the model's vocab_size, separated by commas or blanks");
		rc = 2;
		goto out;
	}
	int T = n + a->o.tokens < cfg.n_positions ? n + a->o.tokens : cfg.n_positions;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	kn_set_threads(a->threads > 0 ? a->threads : cpus > 0 ? (int)cpus : 1);
	if (eng_model_init(&m, &cfg, 1, T, 0, &err) < 0 || eng_import_load(&m, a->ckpt, &err) < 0)
		goto fail;
	eng_policy_init(&p, cfg.n_layer);
	inp = malloc((size_t)T * sizeof *inp);
	tgt = malloc((size_t)T * sizeof *tgt);
	out = malloc((size_t)a->o.tokens * sizeof *out);
	if (!inp || !tgt || !out) {
		eng_errf(&err, "out of memory");
		goto fail;
	}
	if (eng_model_set_policy(&m, &p, &err) < 0 ||
		eng_sample(&m, prompt, n, &a->o, inp, tgt, out, &err) < 0)
		goto fail;
	print_sample(a, tok, prompt, n, out, bytes);
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "remat-train: --sample: %s\n", err.msg);
out:
	free(inp);
	free(tgt);
	free(out);
	eng_model_free(&m);
	eng_tok_free(tok);
	return rc;
}
