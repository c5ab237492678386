/* eng_tok_bpe.c - the BPE model and encode: the vocabulary and merge tables, the merging
 * of one word, the cache of words already seen, the added tokens found in the text.
 *
 * A word starts as its characters' ids (a character not in the vocabulary: its bytes'
 * <0xNN> tokens with byte_fallback, else unk_token, consecutive ones fused with fuse_unk,
 * else dropped), then the pair of neighbours with the lowest merge rank (the leftmost of
 * equals) is merged until none is left: a heap of candidate pairs, each checked when it
 * comes out (both symbols still there, still the same ids), so a word of n characters costs
 * O(n log n), never a rescan per merge. This is the tokenizers library's algorithm, so the
 * ids are its ids.
 * Tables are open addressing over powers of two, sized at load (half full at most).
 * Not here: reading the files (eng_tok_load.c), splitting the text (eng_tok_pre.c).
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "eng_tok_int.h"

/* One symbol of a word being merged: a doubly linked list in an array. */
typedef struct sym {
	uint32_t id;
	int32_t prev, next; /* -1 at the ends */
} sym;

/* A candidate merge of symbols pos and its next, ids l and r when it was pushed. */
typedef struct cand {
	uint32_t rank, pos, l, r;
} cand;

/* encode's working memory, kept between calls (the reason one thread uses a tokenizer) */
typedef struct scratch {
	sym *syms;
	cand *heap;
	size_t cap;          /* of syms and heap */
	tok_pieces pieces, tmp;
	uint32_t *ids;       /* the output being built */
	size_t n_ids, ids_cap;
} scratch;

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
		s += 8;
		n -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, s, n);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	return h | 1; /* 0 marks an empty cache slot */
}

static uint64_t hash_pair(uint64_t k)
{
	k = (k ^ (k >> 33)) * 0xff51afd7ed558ccdull;
	return k ^ (k >> 29);
}

static size_t pow2_for(size_t n)
{
	size_t c = 1024;
	while (c < 2 * n)
		c *= 2;
	return c;
}

int tok_tables_init(eng_tok *t, size_t n, size_t m)
{
	t->vcap = pow2_for(n);
	t->mcap = pow2_for(m);
	t->vslots = calloc(t->vcap, sizeof *t->vslots);
	t->mkey = malloc(t->mcap * sizeof *t->mkey);
	t->mrank = malloc(t->mcap * sizeof *t->mrank);
	t->mid = malloc(t->mcap * sizeof *t->mid);
	if (!t->vslots || !t->mkey || !t->mrank || !t->mid)
		return -1;
	memset(t->mkey, 0xff, t->mcap * sizeof *t->mkey);
	return 0;
}

uint32_t tok_vocab_get(const eng_tok *t, const char *text, size_t len)
{
	size_t mask = t->vcap - 1;
	for (size_t i = hash_bytes(text, len) & mask;; i = (i + 1) & mask) {
		uint32_t v = t->vslots[i];
		if (!v)
			return ENG_TOK_NONE;
		v--;
		if (t->len[v] == len && memcmp(t->text + t->off[v], text, len) == 0)
			return v;
	}
}

/* Room for ids up to id. */
static int grow_ids(eng_tok *t, uint32_t id)
{
	/* the arrays hold n_ids rounded up to 1024 (any more is unused and rewritten) */
	size_t have = t->off ? ((size_t)t->n_ids + 1023) / 1024 * 1024 : 0;
	if (id < have)
		return 0;
	size_t want = ((size_t)id + 1 + 1023) / 1024 * 1024;
	uint32_t *o = realloc(t->off, want * sizeof *o);
	if (o)
		t->off = o;
	uint32_t *l = realloc(t->len, want * sizeof *l);
	if (l)
		t->len = l;
	if (!o || !l)
		return -1;
	for (size_t i = have; i < want; i++) {
		t->off[i] = UINT32_MAX;
		t->len[i] = 0;
	}
	return 0;
}

int tok_vocab_add(eng_tok *t, const char *text, size_t len, uint32_t id, const char **what)
{
	*what = "memory";
	if (grow_ids(t, id) < 0)
		return -1;
	if (id < t->n_ids && t->off[id] != UINT32_MAX) {
		*what = "id";
		return -1;
	}
	if (tok_vocab_get(t, text, len) != ENG_TOK_NONE) {
		*what = "token";
		return -1;
	}
	if (t->text_len + len > UINT32_MAX - 1)
		return -1;
	if (t->text_len + len + 1 > t->text_cap) {
		size_t cap = t->text_cap ? t->text_cap : 1 << 16;
		while (cap < t->text_len + len + 1)
			cap *= 2;
		char *p = realloc(t->text, cap);
		if (!p)
			return -1;
		t->text = p;
		t->text_cap = cap;
	}
	memcpy(t->text + t->text_len, text, len);
	t->off[id] = (uint32_t)t->text_len;
	t->len[id] = (uint32_t)len;
	t->text_len += len;
	if (id >= t->n_ids)
		t->n_ids = id + 1;
	size_t mask = t->vcap - 1, i = hash_bytes(text, len) & mask;
	while (t->vslots[i])
		i = (i + 1) & mask;
	t->vslots[i] = id + 1;
	return 0;
}

int tok_merge_add(eng_tok *t, const char *a, size_t alen, const char *b, size_t blen,
	uint32_t rank, int *which)
{
	char buf[512], *ab = alen + blen <= sizeof buf ? buf : malloc(alen + blen);
	uint32_t ia = tok_vocab_get(t, a, alen), ib = tok_vocab_get(t, b, blen), iab;
	*which = ia == ENG_TOK_NONE ? 0 : ib == ENG_TOK_NONE ? 1 : 2;
	if (!ab || *which < 2) {
		if (ab != buf)
			free(ab);
		return -1;
	}
	memcpy(ab, a, alen);
	memcpy(ab + alen, b, blen);
	iab = tok_vocab_get(t, ab, alen + blen);
	if (ab != buf)
		free(ab);
	if (iab == ENG_TOK_NONE)
		return -1;
	uint64_t k = (uint64_t)ia << 32 | ib;
	size_t mask = t->mcap - 1, i = hash_pair(k) & mask;
	while (t->mkey[i] != UINT64_MAX && t->mkey[i] != k)
		i = (i + 1) & mask;
	t->mkey[i] = k; /* a pair given twice keeps its last rank, as the library's map does */
	t->mrank[i] = rank;
	t->mid[i] = iab;
	return 0;
}

/* The merge of (l, r): its rank and id, or 0 when there is none. */
static int merge_get(const eng_tok *t, uint32_t l, uint32_t r, uint32_t *rank, uint32_t *id)
{
	uint64_t k = (uint64_t)l << 32 | r;
	size_t mask = t->mcap - 1;
	for (size_t i = hash_pair(k) & mask;; i = (i + 1) & mask) {
		if (t->mkey[i] == UINT64_MAX)
			return 0;
		if (t->mkey[i] == k) {
			*rank = t->mrank[i];
			*id = t->mid[i];
			return 1;
		}
	}
}

static int added_cmp(const void *a, const void *b)
{
	const tok_added *x = a, *y = b;
	return x->len != y->len ? (x->len < y->len ? 1 : -1) : memcmp(x->text, y->text, x->len);
}

int tok_model_finish(eng_tok *t, eng_err *err)
{
	for (unsigned b = 0; b < 256; b++) {
		char name[8];
		snprintf(name, sizeof name, "<0x%02X>", b);
		t->bytes[b] = tok_vocab_get(t, name, 6);
	}
	if (t->n_added)
		qsort(t->added, t->n_added, sizeof *t->added, added_cmp);
	for (size_t i = 0; i < t->n_added; i++)
		t->added_first[(unsigned char)t->added[i].text[0]] = 1;
	t->scratch = calloc(1, sizeof(scratch));
	t->cache.slots = calloc(TOK_CACHE_SLOTS, sizeof *t->cache.slots);
	if (!t->scratch || !t->cache.slots)
		return eng_err_nomem(err, "tokenizer: out of memory");
	return 0;
}

void tok_model_free(eng_tok *t)
{
	scratch *sc = t->scratch;
	if (sc) {
		free(sc->syms);
		free(sc->heap);
		free(sc->ids);
		tok_pieces_free(&sc->pieces);
		tok_pieces_free(&sc->tmp);
		free(sc);
	}
	free(t->cache.slots);
	free(t->cache.keys);
	free(t->cache.ids);
	free(t->vslots);
	free(t->mkey);
	free(t->mrank);
	free(t->mid);
	free(t->text);
	free(t->off);
	free(t->len);
	for (size_t i = 0; i < t->n_added; i++)
		free(t->added[i].text);
	free(t->added);
}

static int ids_put(scratch *sc, uint32_t id)
{
	if (sc->n_ids == sc->ids_cap) {
		size_t cap = sc->ids_cap ? sc->ids_cap * 2 : 256;
		uint32_t *p = realloc(sc->ids, cap * sizeof *p);
		if (!p)
			return -1;
		sc->ids = p;
		sc->ids_cap = cap;
	}
	sc->ids[sc->n_ids++] = id;
	return 0;
}

/* ---- the cache ---- */

static tok_centry *cache_find(tok_cache *c, const char *w, size_t n, uint64_t h)
{
	for (size_t i = h & (TOK_CACHE_SLOTS - 1);; i = (i + 1) & (TOK_CACHE_SLOTS - 1)) {
		tok_centry *e = &c->slots[i];
		if (!e->hash || (e->hash == h && e->key_len == n &&
				 memcmp(c->keys + e->key_off, w, n) == 0))
			return e;
	}
}

static void *grow(void *p, size_t *cap, size_t need, size_t unit)
{
	if (need <= *cap)
		return p;
	size_t c = *cap ? *cap : 4096;
	while (c < need)
		c *= 2;
	void *q = realloc(p, c * unit);
	if (q)
		*cap = c;
	return q;
}

/* Keeps word w's ids; a full cache is emptied first. Failing to keep is no error. */
static void cache_put(tok_cache *c, const char *w, size_t n, uint64_t h, const uint32_t *ids,
	size_t k)
{
	if (c->used >= TOK_CACHE_SLOTS / 2) {
		memset(c->slots, 0, TOK_CACHE_SLOTS * sizeof *c->slots);
		c->used = 0;
		c->keys_len = c->ids_len = 0;
	}
	char *keys = grow(c->keys, &c->keys_cap, c->keys_len + n, 1);
	if (!keys)
		return;
	c->keys = keys;
	uint32_t *ids2 = grow(c->ids, &c->ids_cap, c->ids_len + k, sizeof *ids2);
	if (!ids2)
		return;
	c->ids = ids2;
	tok_centry *e = cache_find(c, w, n, h);
	memcpy(c->keys + c->keys_len, w, n);
	memcpy(c->ids + c->ids_len, ids, k * sizeof *ids);
	*e = (tok_centry){ h, (uint32_t)c->keys_len, (uint32_t)n, (uint32_t)c->ids_len,
		(uint32_t)k };
	c->keys_len += n;
	c->ids_len += k;
	c->used++;
}

/* ---- one word ---- */

static int cand_less(const cand *a, const cand *b)
{
	return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(cand *h, size_t *n, cand c)
{
	size_t i = (*n)++;
	while (i && cand_less(&c, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = c;
}

static cand heap_pop(cand *h, size_t *n)
{
	cand top = h[0], last = h[--*n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && cand_less(&h[c + 1], &h[c]))
			c++;
		if (!cand_less(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = last;
	return top;
}

/* Pushes the merge of symbol i with its next, when there is one. */
static void cand_try(const eng_tok *t, scratch *sc, size_t *nh, int32_t i)
{
	uint32_t rank, id;
	if (i < 0 || sc->syms[i].next < 0)
		return;
	uint32_t l = sc->syms[i].id, r = sc->syms[sc->syms[i].next].id;
	if (merge_get(t, l, r, &rank, &id))
		heap_push(sc->heap, nh, (cand){ rank, (uint32_t)i, l, r });
}

/* The word's characters as symbols (byte_fallback, unk and fuse_unk as the library does:
 * a pending unk is added after byte-fallback tokens that follow it). */
static size_t word_syms(const eng_tok *t, scratch *sc, const char *w, size_t n)
{
	size_t k = 0, cl;
	int unk = 0;
	for (size_t i = 0; i < n; i += cl) {
		unsigned char c = (unsigned char)w[i];
		cl = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
		uint32_t id = tok_vocab_get(t, w + i, cl);
		if (id != ENG_TOK_NONE) {
			if (unk)
				sc->syms[k++].id = t->unk;
			unk = 0;
			sc->syms[k++].id = id;
			continue;
		}
		size_t b = 0;
		while (t->byte_fallback && b < cl &&
		       t->bytes[(unsigned char)w[i + b]] != ENG_TOK_NONE)
			b++;
		if (t->byte_fallback && b == cl) {
			for (b = 0; b < cl; b++)
				sc->syms[k++].id = t->bytes[(unsigned char)w[i + b]];
			continue;
		}
		if (t->unk == ENG_TOK_NONE)
			continue;
		if (unk && !t->fuse_unk)
			sc->syms[k++].id = t->unk;
		unk = 1;
	}
	if (unk)
		sc->syms[k++].id = t->unk;
	return k;
}

/* Encodes one pre-token w (n bytes) onto sc->ids. */
static int bpe_word(eng_tok *t, scratch *sc, const char *w, size_t n)
{
	uint64_t h = 0;
	size_t start = sc->n_ids, nh = 0;
	if (n < TOK_CACHE_WORD) {
		h = hash_bytes(w, n);
		tok_centry *e = cache_find(&t->cache, w, n, h);
		if (e->hash) {
			for (uint32_t i = 0; i < e->n_ids; i++)
				if (ids_put(sc, t->cache.ids[e->ids_off + i]) < 0)
					return -1;
			return 0;
		}
	}
	uint32_t whole = t->ignore_merges ? tok_vocab_get(t, w, n) : ENG_TOK_NONE;
	if (whole != ENG_TOK_NONE)
		return ids_put(sc, whole);
	/* at most n symbols (bytes); the heap holds at most (k - 1) first pairs plus one per
	 * merge (two pushed, one popped), under 2n */
	if (n > sc->cap) {
		sym *s = realloc(sc->syms, n * sizeof *s);
		if (s)
			sc->syms = s;
		cand *c = realloc(sc->heap, n * 2 * sizeof *c);
		if (c)
			sc->heap = c;
		if (!s || !c)
			return -1;
		sc->cap = n;
	}
	size_t k = word_syms(t, sc, w, n);
	for (size_t i = 0; i < k; i++) {
		sc->syms[i].prev = (int32_t)i - 1;
		sc->syms[i].next = i + 1 < k ? (int32_t)i + 1 : -1;
	}
	for (size_t i = 0; i + 1 < k; i++)
		cand_try(t, sc, &nh, (int32_t)i);
	while (nh) {
		cand c = heap_pop(sc->heap, &nh);
		sym *a = &sc->syms[c.pos];
		if (a->id != c.l || a->next < 0 || sc->syms[a->next].id != c.r)
			continue; /* stale: one side merged since */
		uint32_t rank, id = ENG_TOK_NONE;
		merge_get(t, c.l, c.r, &rank, &id);
		sym *b = &sc->syms[a->next];
		a->id = id;
		a->next = b->next;
		if (b->next >= 0)
			sc->syms[b->next].prev = (int32_t)c.pos;
		b->id = ENG_TOK_NONE;
		cand_try(t, sc, &nh, a->prev);
		cand_try(t, sc, &nh, (int32_t)c.pos);
	}
	for (int32_t i = k ? 0 : -1; i >= 0; i = sc->syms[i].next)
		if (ids_put(sc, sc->syms[i].id) < 0)
			return -1;
	if (n < TOK_CACHE_WORD)
		cache_put(&t->cache, w, n, h, sc->ids + start, sc->n_ids - start);
	return 0;
}

/* ---- added tokens, encode ---- */

/* The first added token in s[from, n): its extent (lstrip and rstrip's whitespace in) and
 * id; 0 when there is none. Longest first at the leftmost position; a match refused for
 * single_word is passed over whole, as the library's matcher does. */
static int find_added(const eng_tok *t, const char *s, size_t n, size_t from, size_t *ms,
	size_t *me, uint32_t *id)
{
	for (size_t i = from; i < n; i++) {
		if (!t->added_first[(unsigned char)s[i]])
			continue;
		const tok_added *a = NULL;
		for (size_t k = 0; k < t->n_added && !a; k++)
			if (t->added[k].len <= n - i && t->added[k].text[0] == s[i] &&
			    memcmp(t->added[k].text, s + i, t->added[k].len) == 0)
				a = &t->added[k];
		if (!a)
			continue;
		size_t s0 = i, e0 = i + a->len, cl;
		if (a->single_word) {
			size_t b = i ? i - 1 : 0;
			while (b > 0 && ((unsigned char)s[b] & 0xc0) == 0x80)
				b--;
			int before = i > 0 && tok_is_word(s + b, i - b, &cl);
			int after = e0 < n && tok_is_word(s + e0, n - e0, &cl);
			if (before || after) {
				i = e0 - 1;
				continue;
			}
		}
		while (a->lstrip && s0 > from) {
			size_t b = s0 - 1;
			while (b > from && ((unsigned char)s[b] & 0xc0) == 0x80)
				b--;
			if (!tok_is_space(s + b, s0 - b, &cl))
				break;
			s0 = b;
		}
		while (a->rstrip && e0 < n && tok_is_space(s + e0, n - e0, &cl))
			e0 += cl;
		*ms = s0;
		*me = e0;
		*id = a->id;
		return 1;
	}
	return 0;
}

/* One stretch of text between added tokens: normalized, pre-tokenized, each piece through
 * the model. first: it starts the text. */
static int encode_segment(eng_tok *t, scratch *sc, const char *s, size_t n, int first,
	eng_err *err)
{
	char *norm = NULL;
	size_t len = n;
	int rc = -1;
	if (t->norm.n) {
		if (tok_normalize(&t->norm, s, n, &norm, &len, err) < 0)
			goto out;
		s = norm;
	}
	if (len == 0) {
		rc = 0;
		goto out;
	}
	if (t->pre.n) {
		if (tok_pretokenize(&t->pre, s, len, first, &sc->pieces, &sc->tmp, err) < 0)
			goto out;
		for (size_t i = 0; i < sc->pieces.n; i++)
			if (bpe_word(t, sc, sc->pieces.buf + sc->pieces.off[i],
				sc->pieces.len[i]) < 0)
				goto nomem;
	} else if (bpe_word(t, sc, s, len) < 0) {
		goto nomem;
	}
	rc = 0;
	goto out;
nomem:
	eng_err_nomem(err, "tokenizer: out of memory");
out:
	free(norm);
	return rc;
}

/* The offset of the first byte of s that does not start valid UTF-8, or n. */
static size_t utf8_bad(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		if ((unsigned char)s[i] < 0x80) {
			i++;
			continue;
		}
		utf8proc_int32_t cp;
		utf8proc_ssize_t r = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
			(utf8proc_ssize_t)(n - i), &cp);
		if (r <= 0)
			return i;
		i += (size_t)r;
	}
	return n;
}

int eng_tok_encode(eng_tok *t, const char *text, size_t len, uint32_t **ids, size_t *n,
	eng_err *err)
{
	scratch *sc = t->scratch;
	size_t pos = 0, ms, me, bad = utf8_bad(text, len);
	uint32_t id;
	*ids = NULL;
	*n = 0;
	if (bad < len)
		return eng_errf(err, "text is not valid UTF-8 at byte %zu", bad);
	sc->n_ids = 0;
	for (;;) {
		int found = find_added(t, text, len, pos, &ms, &me, &id);
		if (!found)
			ms = me = len;
		if (ms > pos && encode_segment(t, sc, text + pos, ms - pos, pos == 0, err) < 0)
			return -1;
		if (!found)
			break;
		if (ids_put(sc, id) < 0)
			return eng_err_nomem(err, "tokenizer: out of memory");
		pos = me;
	}
	*ids = malloc(sc->n_ids ? sc->n_ids * sizeof **ids : 1);
	if (!*ids)
		return eng_err_nomem(err, "tokenizer: out of memory");
	if (sc->n_ids) /* an empty text on a tokenizer that has encoded nothing: no ids yet */
		memcpy(*ids, sc->ids, sc->n_ids * sizeof **ids);
	*n = sc->n_ids;
	return 0;
}
