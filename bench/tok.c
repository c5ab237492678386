/* bench/tok.c - the tokenizer's encode speed, one thread: MB/s and tokens/s.
 *
 *   bench-tok TOKENIZER TEXT [ROUNDS]
 *
 * Loads the tokenizer once (its load time printed apart), then encodes the whole TEXT file
 * ROUNDS times (default 3) and prints the best round, as one JSON line: {"mb_s", "tok_s",
 * "tokens", "bytes", "load_ms", "encode_ms"}. The first round also fills the word cache, as
 * a long run would; bench/tok.sh runs it beside Hugging Face's JavaScript tokenizers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "eng_tok.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	eng_err err;
	if (argc < 3) {
		fprintf(stderr, "usage: bench-tok TOKENIZER TEXT [ROUNDS]\n");
		return 2;
	}
	int rounds = argc > 3 ? atoi(argv[3]) : 3;
	FILE *f = fopen(argv[2], "rb");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	char *text = malloc((size_t)len + 1);
	if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "bench-tok: cannot read %s\n", argv[2]);
		return 1;
	}
	fclose(f);
	double t0 = now_ms();
	eng_tok *t = eng_tok_load(argv[1], &err);
	double load = now_ms() - t0, best = 1e30;
	if (!t) {
		fprintf(stderr, "bench-tok: %s\n", err.msg);
		return 1;
	}
	size_t n = 0;
	for (int r = 0; r < (rounds > 0 ? rounds : 1); r++) {
		uint32_t *ids;
		t0 = now_ms();
		if (eng_tok_encode(t, text, (size_t)len, &ids, &n, &err) < 0) {
			fprintf(stderr, "bench-tok: %s\n", err.msg);
			return 1;
		}
		double ms = now_ms() - t0;
		best = ms < best ? ms : best;
		free(ids);
	}
	printf("{\"mb_s\": %.2f, \"tok_s\": %.0f, \"tokens\": %zu, \"bytes\": %ld, "
	       "\"load_ms\": %.0f, \"encode_ms\": %.1f}\n", len / 1e6 / (best / 1e3),
		n / (best / 1e3), n, len, load, best);
	eng_tok_free(t);
	free(text);
	return 0;
}
