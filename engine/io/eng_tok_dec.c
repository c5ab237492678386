/* eng_tok_dec.c - ids back to text: the tokens through the decoders (eng_tok_int.h's
 * steps), as the tokenizers library's decode_chain runs them, and the small accessors.
 *
 * Each decoder maps a list of token strings to another; ByteLevel and Fuse leave one. With
 * no decoder at all the tokens are joined with spaces, as the library does. Bytes that do
 * not form UTF-8 become U+FFFD, one per maximal invalid part (Rust's from_utf8_lossy).
 * Not here: encoding (eng_tok_bpe.c).
 */
#include <stdlib.h>
#include <string.h>

#include "eng_tok_int.h"

/* A list of token strings, each malloc'd. */
typedef struct tlist {
	char **s;
	size_t *n;
	size_t cnt, cap;
} tlist;

static void tl_free(tlist *l)
{
	for (size_t i = 0; i < l->cnt; i++)
		free(l->s[i]);
	free(l->s);
	free(l->n);
	memset(l, 0, sizeof *l);
}

/* Appends a copy of s (n bytes), or takes s itself when own. */
static int tl_put(tlist *l, char *s, size_t n, int own)
{
	if (l->cnt == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		char **p = realloc(l->s, cap * sizeof *p);
		if (p)
			l->s = p;
		size_t *q = realloc(l->n, cap * sizeof *q);
		if (q)
			l->n = q;
		if (!p || !q)
			goto fail;
		l->cap = cap;
	}
	char *c = s;
	if (!own) {
		c = malloc(n + 1);
		if (!c)
			return -1;
		memcpy(c, s, n);
		c[n] = '\0';
	}
	l->s[l->cnt] = c;
	l->n[l->cnt++] = n;
	return 0;
fail:
	if (own)
		free(s);
	return -1;
}

/* The length of the valid UTF-8 character at s, or 0 with *bad the bytes of its maximal
 * invalid part (at least 1). */
static size_t utf8_char(const unsigned char *s, size_t n, size_t *bad)
{
	unsigned c = s[0];
	size_t need = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 :
		c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	*bad = 1;
	if (need == 0)
		return 0;
	for (size_t k = 1; k < need; k++) {
		unsigned lo = 0x80, hi = 0xbf;
		if (k == 1 && c == 0xe0)
			lo = 0xa0;
		if (k == 1 && c == 0xed)
			hi = 0x9f;
		if (k == 1 && c == 0xf0)
			lo = 0x90;
		if (k == 1 && c == 0xf4)
			hi = 0x8f;
		if (k >= n || s[k] < lo || s[k] > hi) {
			*bad = k;
			return 0;
		}
	}
	return need;
}

/* s as valid UTF-8 (U+FFFD for what is not), appended to out; own: s is freed. */
static int put_lossy(tlist *out, char *s, size_t n)
{
	size_t bad, cl, len = 0;
	char *o = malloc(3 * n + 1);
	if (!o) {
		free(s);
		return -1;
	}
	for (size_t i = 0; i < n; i += cl ? cl : bad) {
		cl = utf8_char((const unsigned char *)s + i, n - i, &bad);
		if (cl) {
			memcpy(o + len, s + i, cl);
			len += cl;
		} else {
			memcpy(o + len, "\xef\xbf\xbd", 3);
			len += 3;
		}
	}
	o[len] = '\0';
	free(s);
	return tl_put(out, o, len, 1);
}

/* ByteLevel: each token's characters back to bytes (a token with a character outside the
 * table keeps its own bytes), all joined, lossy. */
static int dec_bytelevel(const tlist *in, tlist *out)
{
	int16_t inv[324]; /* code point -> byte; the table's code points are all below 324 */
	size_t total = 0, len = 0;
	memset(inv, 0xff, sizeof inv);
	for (unsigned b = 0; b < 256; b++) {
		char u[2];
		unsigned cp = tok_byte_char(b, u) == 1 ? (unsigned char)u[0] :
			((unsigned char)u[0] & 0x1f) << 6 | ((unsigned char)u[1] & 0x3f);
		inv[cp] = (int16_t)b;
	}
	for (size_t i = 0; i < in->cnt; i++)
		total += in->n[i];
	char *o = malloc(total + 1);
	if (!o)
		return -1;
	for (size_t i = 0; i < in->cnt; i++) {
		const unsigned char *s = (const unsigned char *)in->s[i];
		size_t n = in->n[i], k = 0, start = len;
		while (k < n) {
			unsigned cp = s[k] < 0x80 ? s[k] : (s[k] & 0xe0) == 0xc0 && k + 1 < n ?
				(s[k] & 0x1fu) << 6 | (s[k + 1] & 0x3fu) : 1000;
			if (cp >= 324 || inv[cp] < 0)
				break;
			o[len++] = (char)inv[cp];
			k += s[k] < 0x80 ? 1 : 2;
		}
		if (k < n) { /* not all the table's: the token as it is */
			memcpy(o + start, s, n);
			len = start + n;
		}
	}
	return put_lossy(out, o, len);
}

/* ByteFallback: runs of <0xNN> tokens into the text they spell (U+FFFD per byte when it is
 * not UTF-8). */
static int dec_bytefallback(const tlist *in, tlist *out)
{
	char *run = malloc(in->cnt + 1);
	size_t nrun = 0, bad;
	int rc = -1;
	if (!run)
		return -1;
	for (size_t i = 0; i <= in->cnt; i++) {
		const char *s = i < in->cnt ? in->s[i] : NULL;
		unsigned v;
		char tail;
		if (s && in->n[i] == 6 && sscanf(s, "<0x%2X%c", &v, &tail) == 2 && tail == '>' &&
		    strspn(s + 3, "0123456789ABCDEFabcdef") == 2) {
			run[nrun++] = (char)v;
			continue;
		}
		if (nrun) {
			int ok = 1;
			for (size_t k = 0, cl; k < nrun && ok; k += cl)
				ok = (cl = utf8_char((unsigned char *)run + k, nrun - k,
					&bad)) != 0;
			for (size_t k = 0; k < (ok ? 1 : nrun); k++)
				if (tl_put(out, ok ? run : "\xef\xbf\xbd", ok ? nrun : 3, 0) < 0)
					goto out;
			nrun = 0;
		}
		if (s && tl_put(out, in->s[i], in->n[i], 0) < 0)
			goto out;
	}
	rc = 0;
out:
	free(run);
	return rc;
}

/* Strip: up to start copies of the content character from each token's front, stop from
 * its back. */
static int dec_strip(const tok_step *st, const tlist *in, tlist *out)
{
	size_t c = st->str_len;
	for (size_t i = 0; i < in->cnt; i++) {
		const char *s = in->s[i];
		size_t a = 0, b = in->n[i];
		for (int k = 0; k < st->start && b - a >= c && memcmp(s + a, st->str, c) == 0; k++)
			a += c;
		for (int k = 0; k < st->stop && b - a >= c && memcmp(s + b - c, st->str, c) == 0;
		     k++)
			b -= c;
		if (tl_put(out, (char *)s + a, b - a, 0) < 0)
			return -1;
	}
	return 0;
}

/* Metaspace: the replacement character as a space, dropped from the first token unless
 * prepend_scheme is never. */
static int dec_metaspace(const tok_step *st, const tlist *in, tlist *out)
{
	size_t c = st->str_len;
	for (size_t i = 0; i < in->cnt; i++) {
		char *o = malloc(in->n[i] + 1);
		size_t len = 0;
		if (!o)
			return -1;
		for (size_t k = 0; k < in->n[i];) {
			if (in->n[i] - k >= c && memcmp(in->s[i] + k, st->str, c) == 0) {
				if (i != 0 || st->scheme == TOK_NEVER)
					o[len++] = ' ';
				k += c;
			} else {
				o[len++] = in->s[i][k++];
			}
		}
		o[len] = '\0';
		if (tl_put(out, o, len, 1) < 0)
			return -1;
	}
	return 0;
}

/* All of in joined into one token (sep between). */
static int dec_join(const tlist *in, tlist *out, const char *sep)
{
	size_t total = 0, len = 0, sl = strlen(sep);
	for (size_t i = 0; i < in->cnt; i++)
		total += in->n[i] + sl;
	char *o = malloc(total + 1);
	if (!o)
		return -1;
	for (size_t i = 0; i < in->cnt; i++) {
		if (i) {
			memcpy(o + len, sep, sl);
			len += sl;
		}
		memcpy(o + len, in->s[i], in->n[i]);
		len += in->n[i];
	}
	o[len] = '\0';
	return tl_put(out, o, len, 1);
}

static int dec_step(const tok_step *st, const tlist *in, tlist *out, eng_err *err)
{
	switch (st->kind) {
	case TOK_D_BYTELEVEL:
		return dec_bytelevel(in, out);
	case TOK_D_BYTEFALLBACK:
		return dec_bytefallback(in, out);
	case TOK_D_FUSE:
		return dec_join(in, out, "");
	case TOK_D_STRIP:
		return dec_strip(st, in, out);
	case TOK_D_METASPACE:
		return dec_metaspace(st, in, out);
	case TOK_D_REPLACE:
		for (size_t i = 0; i < in->cnt; i++) {
			char *r;
			size_t n;
			if (tok_replace(st, in->s[i], in->n[i], &r, &n, err) < 0 ||
			    tl_put(out, r, n, 1) < 0)
				return -1;
		}
		return 0;
	default:
		return -1;
	}
}

char *eng_tok_decode(eng_tok *t, const uint32_t *ids, size_t n, size_t *len, eng_err *err)
{
	tlist a = { 0 }, b = { 0 };
	char *res = NULL;
	if (err)
		err->msg[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (ids[i] >= t->n_ids || t->off[ids[i]] == UINT32_MAX) {
			eng_errf(err, "token id %u is not in the tokenizer (%u ids)", ids[i],
				t->n_ids);
			goto out;
		}
		if (tl_put(&a, t->text + t->off[ids[i]], t->len[ids[i]], 0) < 0)
			goto nomem;
	}
	for (int k = 0; k < t->dec.n; k++) {
		if (dec_step(&t->dec.v[k], &a, &b, err) < 0)
			goto fail;
		tl_free(&a);
		a = b;
		memset(&b, 0, sizeof b);
	}
	if (dec_join(&a, &b, t->dec.n ? "" : " ") < 0)
		goto nomem;
	res = b.s[0];
	if (len)
		*len = b.n[0];
	b.cnt = 0;
	goto out;
fail:
	if (err && err->msg[0])
		goto out;
nomem:
	eng_err_nomem(err, "tokenizer: out of memory");
out:
	tl_free(&a);
	tl_free(&b);
	return res;
}

uint32_t eng_tok_vocab_size(const eng_tok *t)
{
	return t->n_ids;
}

uint32_t eng_tok_bos(const eng_tok *t)
{
	return t->bos;
}

uint32_t eng_tok_eos(const eng_tok *t)
{
	return t->eos;
}

uint32_t eng_tok_id(const eng_tok *t, const char *token)
{
	return tok_vocab_get(t, token, strlen(token));
}
