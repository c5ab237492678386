/* eng_tokcache.h - text corpora tokenized once: a cache of llm.c token files keyed by what
 * made them.
 *
 * A job whose data is text (data.format "text" or "jsonl") trains on the token file
 * eng_tokfile_write makes of it. That file is kept in a cache directory (the job's
 * data.cache, else save.dir's tokens/) under a name that is its key, with a record beside
 * it, and found there by any later job (a resume, a second run, another job given the
 * same data.cache) that asks for the same tokens:
 *
 *   DIR/KEY.bin    the token file (eng_data.h: uint16 or uint32 under llm.c's header)
 *   DIR/KEY.json   its record: corpus, tokenizer, format, field, counts, hashes, time
 *   DIR/KEY.lock   held while KEY.bin is being made (eng_fs_lock), so that two jobs
 *                  never make one file together: the second waits and takes the first's
 *
 * KEY is the first 32 hex digits of a SHA-256 over the identity of the tokens: the
 * corpus's bytes (SHA-256 of its content, not its name or times: a corpus edited in place
 * is a new key, one copied elsewhere is the same), the tokenizer's files (each one's
 * SHA-256: tokenizer.json, tokenizer_config.json, ...: eng_ckpt_tok), the format, the JSON
 * Lines field, and this cache's format version (ENG_TOKCACHE_VERSION). Hashing runs at
 * about 1.5 GB/s (SHA extensions): seconds for a corpus that takes minutes to tokenize.
 *
 * An entry is used when both files are there, regular, ours and no link of either kind
 * (eng_fs_entry), the record is this version's for this key, and the token file's header
 * and size agree with the record's count. Anything else is a miss, and the entry is made
 * anew over it (a file that is a link, or another user's, is refused instead). The record
 * is written after the token file: a crash between them leaves a miss, never a wrong hit.
 *
 * Everything is done through the cache directory's descriptor with *at() calls: files
 * are made O_EXCL|O_NOFOLLOW under a temporary name and renamed into place.
 */
#ifndef ENG_TOKCACHE_H
#define ENG_TOKCACHE_H

#include <stdint.h>

#include "eng_ckpt.h"
#include "eng_err.h"

#define ENG_TOKCACHE_VERSION 1  /* what the key and the record's "format_version" hold */
#define ENG_TOKCACHE_KEY 33     /* 32 hex digits and a NUL */
#define ENG_TOKCACHE_DIR "tokens" /* the cache inside save.dir when data.cache is not given */

typedef struct eng_tokcache_req {
	const char *corpus;       /* the text or JSON Lines file */
	int jsonl;                /* 1: JSON Lines, one document a line (eng_tokfile.h) */
	const char *field;        /* JSON Lines: the key of a document's text */
	const char *tokenizer;    /* eng_tok_load's path */
	const eng_ckpt_tok *files;/* the tokenizer's files (eng_ckpt_tok_read): its identity */
	const char *dir;          /* the cache directory (made, mkdir -p, when missing) */
	int threads;              /* encoding threads */
	/* input bytes tokenized of the total, after each block (may be NULL) */
	void (*progress)(void *ud, uint64_t done, uint64_t total);
	void *ud;
} eng_tokcache_req;

typedef struct eng_tokcache_entry {
	char path[ENG_PATH_LEN];  /* DIR/KEY.bin */
	char key[ENG_TOKCACHE_KEY];
	int hit;                  /* 1: found; 0: made by this call */
	uint64_t tokens, docs;    /* in the token file (a BOS or EOS before each document) */
	uint64_t bytes;           /* the corpus's */
	int width;                /* bytes a token: 2 or 4 */
	double seconds;           /* tokenizing took (0 on a hit) */
} eng_tokcache_entry;

/* The key of r's tokens (hashing the corpus) and whether its entry is in the cache, which
 * this never writes or makes: 1 with *e filled, 0 (e->key and e->path set, nothing
 * else), or -1 with a message (the corpus cannot be read, an entry is a link). */
int eng_tokcache_find(const eng_tokcache_req *r, eng_tokcache_entry *e, eng_err *err);

/* The entry of r's tokens: found, or made now by tokenizing the corpus (progress as it
 * goes), waiting first for another process that is making it. 0 with *e, or -1 with a
 * message (eng_tokfile_write's, or the cache's). */
int eng_tokcache_get(const eng_tokcache_req *r, eng_tokcache_entry *e, eng_err *err);

#endif
