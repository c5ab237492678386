/* fuzz_tok.c - libFuzzer target for the tokenizer's reader and encoder, engine/io/eng_tok*.c.
 *
 * What it is: the input is a whole tokenizer.json, handed to eng_tok_parse. A rejected one
 * must come back NULL with a message naming the file. An accepted one must hold together:
 * it encodes a fixed text and the input itself (when the input is UTF-8), every id it
 * gives is below eng_tok_vocab_size, and those ids decode. Invariants that fail abort, so
 * libFuzzer reports them as crashes; leaks are reported by its LeakSanitizer.
 * What it is not: a check of the ids against Hugging Face's (tests/unit/test_tok.c does
 * that). Built by the Makefile with clang -fsanitize=fuzzer,address,undefined; `make test`
 * runs it briefly, `make fuzz` longer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_tok.h"

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz_tok: check failed at line %d: %s\n", __LINE__, \
				#cond);                                                    \
			abort();                                                           \
		}                                                                          \
	} while (0)

#define NAME "fuzz.json" /* the name eng_tok_parse puts in its messages */

/* Encodes text, checks the ids and decodes them. */
static void encode(eng_tok *t, const char *text, size_t len)
{
	uint32_t *ids = NULL;
	size_t n = 0, dl = 0;
	eng_err err;
	if (eng_tok_encode(t, text, len, &ids, &n, &err) < 0) {
		CHECK(ids == NULL && err.msg[0]);
		return;
	}
	for (size_t i = 0; i < n; i++)
		CHECK(ids[i] < eng_tok_vocab_size(t));
	char *back = eng_tok_decode(t, ids, n, &dl, &err);
	CHECK(back != NULL && strlen(back) <= dl);
	free(back);
	free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char fixed[] = "Hello world  12345 <s> <|endoftext|> h\xc3\xa9llo\r\n\t\xf0\x9f\x91\x8d";
	eng_err err = { 0 };
	eng_tok *t = eng_tok_parse((const char *)data, size, NAME, &err);
	if (!t) {
		CHECK(strncmp(err.msg, "invalid tokenizer '" NAME "': ", 30) == 0 ||
		      strstr(err.msg, "out of memory"));
		return 0;
	}
	encode(t, fixed, sizeof fixed - 1);
	encode(t, (const char *)data, size);
	eng_tok_free(t);
	return 0;
}
