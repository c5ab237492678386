/* eng_tokfile.h - a text corpus into an llm.c token file through a Hugging Face tokenizer.
 *
 * Documents are joined as llm.c's dev/data scripts join them: each begun by the
 * tokenizer's BOS, else its EOS (GPT-2: <|endoftext|>, 50256; Llama 3:
 * <|begin_of_text|>, 128000), its text encoded without special tokens after it. A text
 * file is one document; a JSON Lines file is one document a line, the string under
 * `field` of its object (blank lines skipped). The tokens are uint16 under llm.c's GPT-2
 * header (magic 20240520, version 1) when every id fits, for a vocabulary of 65,536 or
 * fewer; uint32 under its Llama 3 header (20240801, 7) else (eng_data.h reads both).
 *
 * Documents are encoded a block at a time (up to ENG_TOKFILE_BLOCK bytes of them) on
 * `threads` threads, each with its own tokenizer, and written in their order: the file is
 * the same whatever the thread count. The output is written to OUT.tmp, made anew
 * (O_EXCL|O_NOFOLLOW, after a leftover of ours is removed) and renamed over OUT once
 * complete and flushed to disk: a failure leaves no partial OUT. A symbolic or hard link,
 * or another user's file, under either name is refused (eng_fs_entry), never removed,
 * replaced or written through. Memory: a block of text and its ids, whatever the corpus's
 * size.
 */
#ifndef ENG_TOKFILE_H
#define ENG_TOKFILE_H

#include <stddef.h>
#include <stdint.h>

#include "eng_err.h"

#define ENG_TOKFILE_BLOCK (16u << 20) /* bytes of documents encoded at a time */
#define ENG_TOKFILE_THREADS 256       /* most threads */

typedef struct eng_tokfile_opts {
	int jsonl;            /* 1: JSON Lines, one document a line; 0: a file a document */
	const char *field;    /* JSON Lines: the key of the document's text ("text") */
	int threads;          /* encoding threads, 1..ENG_TOKFILE_THREADS */
	/* called after each block (may be NULL): input bytes done of the total */
	void (*progress)(void *ud, uint64_t done, uint64_t total);
	void *ud;
} eng_tokfile_opts;

typedef struct eng_tokfile_stats {
	uint64_t docs, tokens, bytes; /* documents, tokens written (BOS/EOS included), input */
	int width;                    /* bytes a token in the file: 2 or 4 */
} eng_tokfile_stats;

struct eng_tok;
/* The token each document begins with: the tokenizer's BOS, else its EOS; ENG_TOK_NONE
 * when it has neither (then no corpus can be joined). */
uint32_t eng_tokfile_sep(const struct eng_tok *t);

/* Encodes the n files of inputs with the tokenizer at tokenizer (eng_tok_load's path)
 * into the llm.c token file out: 0 with *st, or -1 with a message naming the file (and
 * the line of a JSON Lines file) at fault: text that is not UTF-8, a line that is not an
 * object with a string at field, a file that cannot be read or written. */
int eng_tokfile_write(const char *tokenizer, char *const *inputs, int n, const char *out,
	const eng_tokfile_opts *o, eng_tokfile_stats *st, eng_err *err);

#endif
