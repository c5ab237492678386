/* eng_tok_int.h - the tokenizer's insides, shared by its files (never included elsewhere).
 *
 *   eng_tok_load.c  the files: tokenizer.json, vocab.json + merges.txt, tokenizer_config
 *   eng_tok_conf.c  normalizer, pre_tokenizer and decoder objects into step lists
 *   eng_tok_pre.c   normalizing and pre-tokenizing a text (running the steps)
 *   eng_tok_bpe.c   the vocabulary, the merges, BPE with its cache, added tokens, encode
 *   eng_tok_dec.c   decoders, decode, the accessors
 * Calls go load -> conf, bpe -> pre, dec -> nothing: no file calls back.
 */
#ifndef ENG_TOK_INT_H
#define ENG_TOK_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_err.h"
#include "eng_tok.h"

#define TOK_CACHE_SLOTS (1u << 16) /* the word cache's table; cleared when half full */
#define TOK_CACHE_WORD 256         /* longer words are not cached (Hugging Face's limit) */
#define TOK_STEPS_MAX 64           /* most steps in one Sequence, nested ones counted */

/* What one step does. Normalizers (N), pre-tokenizers (P), decoders (D). */
typedef enum tok_kind {
	TOK_N_NFC, TOK_N_NFD, TOK_N_NFKC, TOK_N_NFKD, TOK_N_PREPEND, TOK_N_REPLACE,
	TOK_N_LOWER,
	TOK_P_BYTELEVEL, TOK_P_SPLIT, TOK_P_DIGITS, TOK_P_METASPACE,
	TOK_D_BYTELEVEL, TOK_D_BYTEFALLBACK, TOK_D_METASPACE, TOK_D_FUSE, TOK_D_STRIP,
	TOK_D_REPLACE,
} tok_kind;

/* Split's behaviors: what becomes of a match of the pattern. */
typedef enum tok_split {
	TOK_ISOLATED, TOK_REMOVED, TOK_MERGED_PREV, TOK_MERGED_NEXT, TOK_CONTIGUOUS,
} tok_split;

/* Metaspace's prepend_scheme. */
typedef enum tok_scheme { TOK_ALWAYS, TOK_FIRST, TOK_NEVER } tok_scheme;

/* One normalizer, pre-tokenizer or decoder; which fields mean something depends on kind. */
typedef struct tok_step {
	tok_kind kind;
	char *str;      /* Prepend's text, Replace's content, Metaspace's replacement (UTF-8 of
			 * one character), Strip's content (one character) */
	size_t str_len;
	char *pat;      /* Replace's and Split's String pattern; NULL for a Regex one */
	size_t pat_len;
	pcre2_code *re; /* Replace's and Split's Regex, ByteLevel's GPT-2 pattern; or NULL */
	pcre2_match_data *md; /* re's match data (why a tokenizer is one thread's) */
	tok_split behavior;   /* Split */
	int invert;           /* Split */
	int flag;       /* ByteLevel: add_prefix_space; Digits: individual_digits;
			 * Metaspace: split */
	tok_scheme scheme; /* Metaspace */
	int start, stop;   /* Strip: how many content characters may go from each end */
} tok_step;

/* A list of steps, a Sequence flattened. */
typedef struct tok_steps {
	tok_step *v;
	int n;
} tok_steps;

/* An added token: matched in the text before the model sees it. */
typedef struct tok_added {
	char *text;
	size_t len;
	uint32_t id;
	int single_word, lstrip, rstrip, special;
} tok_added;

/* A cached word: its ids, in the cache's arena. */
typedef struct tok_centry {
	uint64_t hash;     /* 0: empty slot */
	uint32_t key_off, key_len; /* the word in arena */
	uint32_t ids_off, n_ids;   /* its ids in ids (uint32_t units) */
} tok_centry;

/* Words already encoded by the model: cleared whole when half full. */
typedef struct tok_cache {
	tok_centry *slots; /* TOK_CACHE_SLOTS */
	uint32_t used;
	char *keys;        /* the words, back to back */
	size_t keys_len, keys_cap;
	uint32_t *ids;
	size_t ids_len, ids_cap;
} tok_cache;

struct eng_tok {
	/* the vocabulary: id -> token (text, len; off UINT32_MAX where no token has that id) */
	char *text;           /* every token's bytes back to back */
	size_t text_len, text_cap;
	uint32_t *off, *len;  /* [n_ids] */
	uint32_t n_ids;       /* one past the largest id */
	uint32_t *vslots;     /* token -> id: open addressing, id + 1, 0 empty */
	size_t vcap;          /* a power of two */
	/* merges: (left id, right id) -> rank and merged id */
	uint64_t *mkey;       /* left << 32 | right, UINT64_MAX empty */
	uint32_t *mrank, *mid;
	size_t mcap;          /* a power of two */
	/* the model's options */
	uint32_t unk;         /* unk_token's id or ENG_TOK_NONE */
	int fuse_unk, byte_fallback, ignore_merges;
	uint32_t bytes[256];  /* byte_fallback's <0xNN> ids (ENG_TOK_NONE where absent) */
	tok_added *added;     /* sorted longest first */
	size_t n_added;
	uint8_t added_first[256]; /* 1 where an added token starts with that byte */
	tok_steps norm, pre, dec;
	uint32_t bos, eos;
	tok_cache cache;
	/* scratch reused by encode */
	void *scratch;
};

/* ---- eng_tok_conf.c ---- */

/* The normalizer (or pre_tokenizer, decoder) object j (null: none) into s; where names the
 * key in messages ("normalizer"); label is "invalid tokenizer 'path'". */
/* "<label>: <fmt...>" into err; -1 (eng_tok_conf.c). */
int tok_bad(eng_err *err, const char *label, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int tok_conf_norm(json_t *j, tok_steps *s, const char *label, eng_err *err);
int tok_conf_pre(json_t *j, tok_steps *s, const char *label, eng_err *err);
int tok_conf_dec(json_t *j, tok_steps *s, const char *label, eng_err *err);
/* A step list for GPT-2's files: ByteLevel pre-tokenizer (pre=1) or decoder (pre=0). */
int tok_conf_bytelevel(tok_steps *s, int pre, eng_err *err);
void tok_steps_free(tok_steps *s);

/* ---- eng_tok_bpe.c ---- */

/* Adds token text (len bytes) with id to the vocabulary; -1 when the text or the id is
 * there already (what says which; messages are the caller's). */
int tok_vocab_add(eng_tok *t, const char *text, size_t len, uint32_t id, const char **what);
/* The id of text, or ENG_TOK_NONE. */
uint32_t tok_vocab_get(const eng_tok *t, const char *text, size_t len);
/* Sizes the tables for n tokens and m merges. */
int tok_tables_init(eng_tok *t, size_t n, size_t m);
/* Adds the merge (a, b) at rank: -1 when a, b or a+b is no token (*which: 0, 1, 2). */
int tok_merge_add(eng_tok *t, const char *a, size_t alen, const char *b, size_t blen,
	uint32_t rank, int *which);
/* After the vocabulary and the added tokens: the <0xNN> table, the added tokens' order. */
int tok_model_finish(eng_tok *t, eng_err *err);
void tok_model_free(eng_tok *t);

/* ---- eng_tok_pre.c ---- */

/* A list of pieces: text back to back in buf, piece i at off[i], len[i]; first[i] when it
 * starts the whole text (Metaspace's prepend_scheme "first"). */
typedef struct tok_pieces {
	char *buf;
	size_t buf_len, buf_cap;
	size_t *off, *len;
	uint8_t *first;
	size_t n, cap;
} tok_pieces;

/* Runs the normalizers over s (n bytes): the result, malloc'd and NUL-terminated, in *out
 * (*out_len). Returns 0 or -1 (no memory, or PCRE2 failing: a message). */
int tok_normalize(const tok_steps *st, const char *s, size_t n, char **out, size_t *out_len,
	eng_err *err);
/* Replace (a normalizer's or a decoder's): every match of st's pattern in s by st->str;
 * the result malloc'd and NUL-terminated in *out (*out_len). */
int tok_replace(const tok_step *st, const char *s, size_t n, char **out, size_t *out_len,
	eng_err *err);
/* Runs the pre-tokenizers over s: the pieces into out (emptied first), using tmp. */
int tok_pretokenize(const tok_steps *st, const char *s, size_t n, int first, tok_pieces *out,
	tok_pieces *tmp, eng_err *err);
void tok_pieces_free(tok_pieces *p);
/* ByteLevel's byte -> character table: the UTF-8 of byte b's character into u (2 bytes
 * at most); its length. */
int tok_byte_char(unsigned b, char u[2]);
/* Whether the UTF-8 character at s is Unicode White_Space; its length in *cl. */
int tok_is_space(const char *s, size_t n, size_t *cl);
/* Whether it is a letter, a number or '_' (single_word's word characters). */
int tok_is_word(const char *s, size_t n, size_t *cl);

/* ---- eng_tok_dec.c ---- */

/* Runs the decoders over the n tokens (ptr, len): the text, malloc'd (*len). */
char *tok_decode_steps(const tok_steps *st, const char *const *tok, const size_t *tlen,
	size_t n, size_t *len, eng_err *err);

#endif
