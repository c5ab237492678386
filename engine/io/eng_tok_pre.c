/* eng_tok_pre.c - normalizing and pre-tokenizing a text: the steps of eng_tok_conf.c run
 * as the tokenizers library runs them.
 *
 * A pre-tokenizer turns a list of pieces into a finer one. Splitting follows the library's
 * two stages: the pattern's matches and the text between them, each marked match or not
 * (invert swaps the marks), then the behavior (Isolated, Removed, MergedWithPrevious,
 * MergedWithNext, Contiguous) joins or drops them; empty pieces are dropped. Text here is
 * valid UTF-8 (encode checks it once), so PCRE2 skips its own check.
 * Not here: the model (eng_tok_bpe.c), decoding (eng_tok_dec.c).
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "eng_tok_int.h"

/* A growing byte string. */
typedef struct tstr {
	char *p;
	size_t n, cap;
} tstr;

/* A part of a piece: bytes [s, e), a match of the pattern or not. */
typedef struct span {
	size_t s, e;
	int m;
} span;

typedef struct spans {
	span *v;
	size_t n, cap;
} spans;

static int str_put(tstr *t, const char *s, size_t n)
{
	if (t->n + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 64;
		while (cap < t->n + n + 1)
			cap *= 2;
		char *p = realloc(t->p, cap);
		if (!p)
			return -1;
		t->p = p;
		t->cap = cap;
	}
	if (n)
		memcpy(t->p + t->n, s, n);
	t->n += n;
	t->p[t->n] = '\0';
	return 0;
}

static int span_put(spans *v, size_t s, size_t e, int m)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		span *p = realloc(v->v, cap * sizeof *p);
		if (!p)
			return -1;
		v->v = p;
		v->cap = cap;
	}
	v->v[v->n++] = (span){ s, e, m };
	return 0;
}

/* The byte length of the UTF-8 character that starts with c. */
static size_t clen(unsigned char c)
{
	return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

static int32_t cp_at(const char *s, size_t n, size_t *cl)
{
	utf8proc_int32_t cp = -1;
	utf8proc_ssize_t r = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n,
		&cp);
	*cl = r > 0 ? (size_t)r : 1;
	return cp;
}

int tok_is_space(const char *s, size_t n, size_t *cl)
{
	int32_t c = cp_at(s, n, cl);
	if ((c >= 9 && c <= 13) || c == 0x85)
		return 1;
	utf8proc_category_t k = utf8proc_category(c);
	return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL ||
	       k == UTF8PROC_CATEGORY_ZP;
}

int tok_is_word(const char *s, size_t n, size_t *cl)
{
	int32_t c = cp_at(s, n, cl);
	utf8proc_category_t k = utf8proc_category(c);
	return c == '_' || (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
	       (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

/* Whether the character is numeric (Rust's char::is_numeric: Nd, Nl, No). */
static int is_numeric(const char *s, size_t n, size_t *cl)
{
	utf8proc_category_t k = utf8proc_category(cp_at(s, n, cl));
	return k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
}

int tok_byte_char(unsigned b, char u[2])
{
	unsigned cp;
	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
		cp = b;
	else if (b <= 32)
		cp = 256 + b;
	else if (b <= 160)
		cp = 256 + 33 + (b - 127);
	else
		cp = 256 + 67; /* 173 */
	if (cp < 0x80) {
		u[0] = (char)cp;
		return 1;
	}
	u[0] = (char)(0xc0 | (cp >> 6));
	u[1] = (char)(0x80 | (cp & 0x3f));
	return 2;
}

/* The matches of st's pattern in s (regex or string), and the text between, into v. */
static int find_matches(const tok_step *st, const char *s, size_t n, spans *v, eng_err *err)
{
	size_t prev = 0, at = 0;
	while (at <= n) {
		size_t ms, me;
		if (st->re) {
			int rc = pcre2_match(st->re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK,
				st->md, NULL);
			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0) {
				PCRE2_UCHAR why[160];
				pcre2_get_error_message(rc, why, sizeof why);
				return eng_errf(err, "tokenizer: PCRE2 cannot match: %s",
					(char *)why);
			}
			PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
			ms = ov[0];
			me = ov[1];
		} else {
			if (st->pat_len == 0 || n - at < st->pat_len)
				break;
			const char *f = memmem(s + at, n - at, st->pat, st->pat_len);
			if (!f)
				break;
			ms = (size_t)(f - s);
			me = ms + st->pat_len;
		}
		if ((prev != ms && span_put(v, prev, ms, 0) < 0) || span_put(v, ms, me, 1) < 0)
			return eng_err_nomem(err, "tokenizer: out of memory");
		prev = me;
		at = me > ms ? me : me + (me < n ? clen((unsigned char)s[me]) : 1);
	}
	if (prev < n && span_put(v, prev, n, 0) < 0)
		return eng_err_nomem(err, "tokenizer: out of memory");
	return 0;
}

/* Each character for which pred holds a match of its own, the runs between not. */
static int find_chars(const char *s, size_t n, int (*pred)(const char *, size_t, size_t *),
	spans *v)
{
	size_t prev = 0, cl;
	for (size_t i = 0; i < n; i += cl) {
		if (!pred(s + i, n - i, &cl))
			continue;
		if ((prev != i && span_put(v, prev, i, 0) < 0) || span_put(v, i, i + cl, 1) < 0)
			return -1;
		prev = i + cl;
	}
	return prev < n ? span_put(v, prev, n, 0) : 0;
}

/* The behavior applied to v in place (the tokenizers library's folds, unchanged). */
static void behave(spans *v, tok_split b)
{
	size_t k = 0;
	int prev_m = 0;
	if (b == TOK_MERGED_NEXT) {
		for (size_t i = v->n; i-- > 0;) {
			span x = v->v[i];
			if (x.m && !prev_m && k)
				v->v[v->n - k].s = x.s;
			else
				v->v[v->n - ++k] = (span){ x.s, x.e, 0 };
			prev_m = x.m;
		}
		memmove(v->v, v->v + v->n - k, k * sizeof *v->v);
		v->n = k;
		return;
	}
	for (size_t i = 0; i < v->n; i++) {
		span x = v->v[i];
		if (b == TOK_REMOVED) {
			if (!x.m)
				v->v[k++] = x;
			continue;
		}
		int join = b == TOK_MERGED_PREV ? x.m && !prev_m : b == TOK_CONTIGUOUS ?
			x.m == prev_m : 0;
		if (join && k)
			v->v[k - 1].e = x.e;
		else
			v->v[k++] = (span){ x.s, x.e, 0 };
		prev_m = x.m;
	}
	v->n = k;
}

static int pieces_put(tok_pieces *p, const char *s, size_t n, int first)
{
	if (n == 0)
		return 0;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		size_t *o = realloc(p->off, cap * sizeof *o);
		if (o)
			p->off = o;
		size_t *l = realloc(p->len, cap * sizeof *l);
		if (l)
			p->len = l;
		uint8_t *f = realloc(p->first, cap);
		if (f)
			p->first = f;
		if (!o || !l || !f)
			return -1;
		p->cap = cap;
	}
	tstr b = { p->buf, p->buf_len, p->buf_cap };
	if (str_put(&b, s, n) < 0)
		return -1;
	p->buf = b.p;
	p->buf_cap = b.cap;
	p->off[p->n] = p->buf_len;
	p->len[p->n] = n;
	p->first[p->n++] = (uint8_t)first;
	p->buf_len = b.n;
	return 0;
}

/* A piece with each byte as ByteLevel's character. */
static int put_bytelevel(tok_pieces *p, const char *s, size_t n, int first, tstr *tmp)
{
	tmp->n = 0;
	for (size_t i = 0; i < n; i++) {
		char u[2];
		if (str_put(tmp, u, (size_t)tok_byte_char((unsigned char)s[i], u)) < 0)
			return -1;
	}
	return pieces_put(p, tmp->p, tmp->n, first);
}

/* Metaspace on one piece: spaces replaced, the replacement prepended, split before each. */
static int metaspace(const tok_step *st, const char *s, size_t n, int first, tstr *t,
	spans *v)
{
	t->n = 0;
	int pre = st->scheme == TOK_ALWAYS || (st->scheme == TOK_FIRST && first);
	if (pre && !(n >= st->str_len && memcmp(s, st->str, st->str_len) == 0) &&
	    str_put(t, st->str, st->str_len) < 0)
		return -1;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && s[j] != ' ')
			j++;
		if (str_put(t, s + i, j - i) < 0 || (j < n && str_put(t, st->str, st->str_len) < 0))
			return -1;
		i = j + 1;
	}
	if (!st->flag)
		return span_put(v, 0, t->n, 0);
	size_t prev = 0;
	for (size_t i = 0; i + st->str_len <= t->n; i++) {
		if (memcmp(t->p + i, st->str, st->str_len) != 0)
			continue;
		if ((prev != i && span_put(v, prev, i, 0) < 0) ||
		    span_put(v, i, i + st->str_len, 1) < 0)
			return -1;
		prev = i + st->str_len;
		i = prev - 1;
	}
	if (prev < t->n && span_put(v, prev, t->n, 0) < 0)
		return -1;
	behave(v, TOK_MERGED_NEXT);
	return 0;
}

/* One pre-tokenizer on one piece: its pieces appended to out. */
static int pre_piece(const tok_step *st, const char *s, size_t n, int first, tok_pieces *out,
	tstr *t, tstr *t2, spans *v, eng_err *err)
{
	const char *src = s;
	v->n = 0;
	if (st->kind == TOK_P_BYTELEVEL && st->flag && n && s[0] != ' ') {
		t->n = 0;
		if (str_put(t, " ", 1) < 0 || str_put(t, s, n) < 0)
			goto nomem;
		src = t->p;
		n = t->n;
	}
	if (st->kind == TOK_P_SPLIT || (st->kind == TOK_P_BYTELEVEL && st->re)) {
		if (find_matches(st, src, n, v, err) < 0)
			return -1;
		for (size_t i = 0; st->invert && i < v->n; i++)
			v->v[i].m = !v->v[i].m;
		behave(v, st->kind == TOK_P_SPLIT ? st->behavior : TOK_ISOLATED);
	} else if (st->kind == TOK_P_DIGITS) {
		if (find_chars(s, n, is_numeric, v) < 0)
			goto nomem;
		behave(v, st->flag ? TOK_ISOLATED : TOK_CONTIGUOUS);
	} else if (st->kind == TOK_P_METASPACE) {
		if (metaspace(st, s, n, first, t, v) < 0)
			goto nomem;
		src = t->p;
	} else if (span_put(v, 0, n, 0) < 0) {
		goto nomem;
	}
	for (size_t i = 0; i < v->n; i++) {
		const char *p = src + v->v[i].s;
		size_t len = v->v[i].e - v->v[i].s;
		int f = first && v->v[i].s == 0;
		if (st->kind == TOK_P_BYTELEVEL ? put_bytelevel(out, p, len, f, t2) < 0 :
						  pieces_put(out, p, len, f) < 0)
			goto nomem;
	}
	return 0;
nomem:
	return eng_err_nomem(err, "tokenizer: out of memory");
}

int tok_pretokenize(const tok_steps *st, const char *s, size_t n, int first, tok_pieces *out,
	tok_pieces *tmp, eng_err *err)
{
	tstr t = { 0 }, t2 = { 0 };
	spans v = { 0 };
	int rc = -1;
	tok_pieces *a = tmp, *b = out;
	a->n = a->buf_len = 0;
	if (pieces_put(a, s, n, first) < 0)
		goto nomem;
	for (int k = 0; k < st->n; k++) {
		b->n = b->buf_len = 0;
		for (size_t i = 0; i < a->n; i++)
			if (pre_piece(&st->v[k], a->buf + a->off[i], a->len[i], a->first[i], b, &t,
				&t2, &v, err) < 0)
				goto out;
		tok_pieces *c = a;
		a = b;
		b = c;
	}
	if (a != out) {
		tok_pieces c = *out;
		*out = *a;
		*a = c;
	}
	rc = 0;
	goto out;
nomem:
	eng_err_nomem(err, "tokenizer: out of memory");
out:
	free(t.p);
	free(t2.p);
	free(v.v);
	return rc;
}

void tok_pieces_free(tok_pieces *p)
{
	free(p->buf);
	free(p->off);
	free(p->len);
	free(p->first);
	memset(p, 0, sizeof *p);
}

/* Replace: every match of st's pattern in s by st->str, into out. */
int tok_replace(const tok_step *st, const char *s, size_t n, char **out, size_t *out_len,
	eng_err *err)
{
	spans v = { 0 };
	tstr t = { 0 };
	int rc = -1;
	if (find_matches(st, s, n, &v, err) < 0)
		goto out;
	if (str_put(&t, "", 0) < 0)
		goto nomem;
	for (size_t i = 0; i < v.n; i++)
		if (str_put(&t, v.v[i].m ? st->str : s + v.v[i].s,
			v.v[i].m ? st->str_len : v.v[i].e - v.v[i].s) < 0)
			goto nomem;
	*out = t.p;
	*out_len = t.n;
	t.p = NULL;
	rc = 0;
	goto out;
nomem:
	eng_err_nomem(err, "tokenizer: out of memory");
out:
	free(v.v);
	free(t.p);
	return rc;
}

/* One normalizer on s: the result, malloc'd, into *out. */
static int norm_one(const tok_step *st, const char *s, size_t n, char **out, size_t *out_len,
	eng_err *err)
{
	static const utf8proc_option_t nf[] = {
		UTF8PROC_STABLE | UTF8PROC_COMPOSE, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,
		UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
		UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,
	};
	tstr t = { 0 };
	if (st->kind == TOK_N_REPLACE)
		return tok_replace(st, s, n, out, out_len, err);
	if (st->kind <= TOK_N_NFKD) {
		utf8proc_uint8_t *d = NULL;
		utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n,
			&d, nf[st->kind - TOK_N_NFC]);
		if (r < 0)
			return eng_errf(err, "tokenizer: cannot normalize: %s", utf8proc_errmsg(r));
		*out = (char *)d;
		*out_len = (size_t)r;
		return 0;
	}
	if (str_put(&t, "", 0) < 0 ||
	    (st->kind == TOK_N_PREPEND && n && str_put(&t, st->str, st->str_len) < 0))
		goto nomem;
	for (size_t i = 0, cl; i < n; i += cl) {
		if (st->kind != TOK_N_LOWER) {
			cl = n - i;
			if (str_put(&t, s + i, cl) < 0)
				goto nomem;
			continue;
		}
		utf8proc_uint8_t u[4];
		int32_t low = utf8proc_tolower(cp_at(s + i, n - i, &cl));
		utf8proc_ssize_t k = utf8proc_encode_char(low, u);
		if (str_put(&t, (const char *)u, (size_t)k) < 0)
			goto nomem;
	}
	*out = t.p;
	*out_len = t.n;
	return 0;
nomem:
	free(t.p);
	return eng_err_nomem(err, "tokenizer: out of memory");
}

int tok_normalize(const tok_steps *st, const char *s, size_t n, char **out, size_t *out_len,
	eng_err *err)
{
	char *cur = malloc(n + 1);
	if (!cur)
		return eng_err_nomem(err, "tokenizer: out of memory");
	memcpy(cur, s, n);
	cur[n] = '\0';
	for (int k = 0; k < st->n; k++) {
		char *next;
		size_t len;
		if (norm_one(&st->v[k], cur, n, &next, &len, err) < 0) {
			free(cur);
			return -1;
		}
		free(cur);
		cur = next;
		n = len;
	}
	*out = cur;
	*out_len = n;
	return 0;
}
