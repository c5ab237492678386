/* eng_data.c - token files and the llm.c-order batch cursor (see eng_data.h). */
#include "eng_data.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_fs.h"
#include "eng_mem.h"

/* Opens path and reads its header: leaves f just past it, with the file's token count in
 * *ntok and the bytes of tokens in *nbytes. Fails naming the file on anything but a
 * regular file, a short or bad header, a count that disagrees with the size, or fewer
 * than B*T+1 tokens. */
static int data_header(const char *path, eng_data_format fmt, int B, int T, FILE **fp,
	size_t *ntok, size_t *nbytes, eng_err *err)
{
	struct stat st;
	*fp = NULL;
	int fd = eng_fs_open_read(path, "data file", &st, err);
	FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
	if (!f) {
		if (fd >= 0) {
			eng_errf(err, "cannot read data file '%s': %s", path, strerror(errno));
			close(fd);
		}
		return -1;
	}
	size_t size = (size_t)st.st_size, skip = 0;
	if (fmt == ENG_DATA_LLMC) {
		int32_t hdr[ENG_LLMC_HEADER_INTS];
		if (size < sizeof hdr || fread(hdr, sizeof hdr, 1, f) != 1) {
			eng_errf(err, "data file '%s': shorter than the llmc header (%zu bytes)", path,
				sizeof hdr);
			goto fail;
		}
		/* a file that is not one is not echoed: its bytes are nobody's business here */
		if (hdr[0] != ENG_LLMC_MAGIC) {
			eng_errf(err, "data file '%s': not an llmc token file (no header with magic "
				      "%d); use \"format\": \"bytes\" for raw text", path,
				ENG_LLMC_MAGIC);
			goto fail;
		}
		if (hdr[1] != 1) {
			eng_errf(err, "data file '%s': llmc token file version %d, this engine reads "
				      "version 1", path, hdr[1]);
			goto fail;
		}
		skip = sizeof hdr;
		if (hdr[2] < 0 || (size_t)hdr[2] != (size - skip) / 2 || (size - skip) % 2) {
			eng_errf(err, "data file '%s': header says %d tokens but the file holds %zu "
				      "bytes of tokens", path, hdr[2], size - skip);
			goto fail;
		}
		*ntok = (size_t)hdr[2];
	} else {
		*ntok = size;
	}
	if (*ntok < (size_t)B * T + 1) {
		eng_errf(err, "data file '%s': %zu tokens, fewer than one batch needs (%d x %d + 1)",
			path, *ntok, B, T);
		goto fail;
	}
	*nbytes = size - skip;
	*fp = f;
	return 0;
fail:
	fclose(f);
	return -1;
}

#define DATA_CHUNK (1u << 16) /* bytes a check reads at a time */

/* Tokens first .. first+n-1 of path, raw (2 little-endian bytes each for llmc, one byte
 * for bytes), into tok when not NULL; fails on the first one >= vocab, saying what the
 * file was most likely made for. */
static int take_tokens(const char *path, eng_data_format fmt, const uint8_t *raw, size_t n,
	size_t first, int vocab, uint32_t *tok, eng_err *err)
{
	for (size_t i = 0; i < n; i++) {
		unsigned t = fmt == ENG_DATA_LLMC ? (unsigned)(raw[2 * i] | raw[2 * i + 1] << 8)
						  : raw[i];
		if (t < (unsigned)vocab) {
			if (tok)
				tok[i] = (uint32_t)t;
			continue;
		}
		const char *why = fmt == ENG_DATA_BYTES
			? "\"format\": \"bytes\" reads a token a byte (0-255), which needs vocab_size "
			  "256 or more"
			: t == 50256 ? "50256 is GPT-2's <|endoftext|>: the file is tokenized with "
				       "GPT-2's tokenizer, which needs vocab_size 50257 or more (the "
				       "gpt2 presets)"
				     : "the file was tokenized for a larger vocabulary than the model's";
		return eng_errf(err, "data file '%s': token %zu is %u, out of range for vocab_size "
				     "%d; %s", path, first + i, t, vocab, why);
	}
	return 0;
}

int eng_data_check(const char *path, eng_data_format fmt, int B, int T, int vocab,
	size_t *ntok, eng_err *err)
{
	FILE *f;
	size_t nbytes, per = fmt == ENG_DATA_LLMC ? 2 : 1, done = 0;
	uint8_t buf[DATA_CHUNK];
	int rc = 0;
	if (data_header(path, fmt, B, T, &f, ntok, &nbytes, err) < 0)
		return -1;
	/* every token against the vocabulary, as the start will: a file made for another
	 * model is refused when the job is checked, not when it starts */
	while (rc == 0 && done < nbytes) {
		size_t want = nbytes - done < DATA_CHUNK ? nbytes - done : DATA_CHUNK;
		if (fread(buf, 1, want, f) != want) {
			rc = eng_errf(err, "data file '%s': read failed: %s", path,
				ferror(f) ? strerror(errno) : "file shrank");
			break;
		}
		rc = take_tokens(path, fmt, buf, want / per, done / per, vocab, NULL, err);
		done += want;
	}
	fclose(f);
	return rc;
}

int eng_data_open(eng_data *d, const char *path, eng_data_format fmt, int vocab, int B, int T,
	eng_err *err)
{
	memset(d, 0, sizeof *d);
	int rc = -1;
	uint8_t *raw = NULL;
	FILE *f = NULL;
	size_t ntok, nbytes;
	if (data_header(path, fmt, B, T, &f, &ntok, &nbytes, err) < 0)
		goto out;
	raw = malloc(nbytes);
	d->tok = eng_mem_alloc(ENG_MEM_DATA, ntok * sizeof(uint32_t));
	if (!raw || !d->tok) {
		eng_errf(err, "data file '%s': out of memory for %zu tokens", path, ntok);
		goto out;
	}
	if (fread(raw, 1, nbytes, f) != nbytes) {
		eng_errf(err, "data file '%s': read failed: %s", path,
			ferror(f) ? strerror(errno) : "file shrank");
		goto out;
	}
	if (take_tokens(path, fmt, raw, ntok, 0, vocab, d->tok, err) < 0)
		goto out;
	d->ntok = ntok;
	d->B = B;
	d->T = T;
	d->nsamples = (ntok - 1) / ((size_t)B * T);
	d->ranks = 1;
	rc = 0;
out:
	free(raw);
	if (f)
		fclose(f);
	if (rc < 0)
		eng_data_close(d);
	return rc;
}

void eng_data_close(eng_data *d)
{
	eng_mem_free(d->tok);
	eng_mem_free(d->perm);
	memset(d, 0, sizeof *d);
}

size_t eng_data_bytes(size_t ntok, int B, int T, int shuffle)
{
	size_t n = ntok * sizeof(uint32_t);
	if (shuffle && ntok > 0)
		n += (ntok - 1) / ((size_t)B * T) * sizeof(uint32_t);
	return n;
}

/* ---- MT19937 (Matsumoto and Nishimura 1998) ---- */

#define MT_M 397
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu
#define MT_MATRIX 0x9908b0dfu

void eng_mt_seed(eng_mt *g, uint32_t seed)
{
	g->s[0] = seed;
	for (int j = 1; j < ENG_MT_N; j++)
		g->s[j] = 1812433253u * (g->s[j - 1] ^ (g->s[j - 1] >> 30)) + (uint32_t)j;
	g->i = ENG_MT_N;
}

/* The next ENG_MT_N words, all at once. */
static void mt_twist(eng_mt *g)
{
	for (int k = 0; k < ENG_MT_N; k++) {
		uint32_t y = (g->s[k] & MT_UPPER) | (g->s[(k + 1) % ENG_MT_N] & MT_LOWER);
		g->s[k] = g->s[(k + MT_M) % ENG_MT_N] ^ (y >> 1) ^ (y & 1u ? MT_MATRIX : 0u);
	}
	g->i = 0;
}

uint32_t eng_mt_next(eng_mt *g)
{
	if (g->i >= ENG_MT_N)
		mt_twist(g);
	uint32_t y = g->s[g->i++];
	y ^= y >> 11;
	y ^= (y << 7) & 0x9d2c5680u;
	y ^= (y << 15) & 0xefc60000u;
	y ^= y >> 18;
	return y;
}

/* ---- the order of samples ---- */

/* This epoch's permutation, drawn from pos.rng into perm (live: the generator after it).
 * perm[0 .. n) = identity, then for i = n-1 .. 1: j = draw % (i+1), swap perm[i], perm[j]. */
static void draw_perm(eng_data *d)
{
	size_t n = d->nsamples;
	d->live = d->pos.rng;
	for (size_t i = 0; i < n; i++)
		d->perm[i] = (uint32_t)i;
	for (size_t i = n - 1; i >= 1 && n > 1; i--) {
		size_t j = eng_mt_next(&d->live) % (i + 1);
		uint32_t t = d->perm[i];
		d->perm[i] = d->perm[j];
		d->perm[j] = t;
	}
}

int eng_data_set_ranks(eng_data *d, int ranks, int rank, eng_err *err)
{
	size_t per = (size_t)ranks * d->B * d->T;
	if (d->ntok < per + 1)
		return eng_errf(err, "%zu tokens, fewer than one step of %d ranks needs (%d x %d x %d "
				     "+ 1)", d->ntok, ranks, ranks, d->B, d->T);
	d->ranks = ranks;
	d->rank = rank;
	d->nsamples = (d->ntok - 1) / per;
	return 0;
}

int eng_data_shuffle(eng_data *d, uint32_t seed, eng_err *err)
{
	if (d->nsamples > UINT32_MAX)
		return eng_errf(err, "%zu samples are more than a shuffle can number", d->nsamples);
	d->perm = eng_mem_alloc(ENG_MEM_DATA, d->nsamples * sizeof(uint32_t));
	if (!d->perm)
		return eng_errf(err, "out of memory for the shuffle of %zu samples", d->nsamples);
	d->shuffle = 1;
	memset(&d->pos, 0, sizeof d->pos);
	eng_mt_seed(&d->pos.rng, seed);
	draw_perm(d);
	return 0;
}

size_t eng_data_next_sample(const eng_data *d)
{
	return d->shuffle ? d->perm[d->pos.sample] : d->pos.sample;
}

void eng_data_next(eng_data *d, uint32_t *inp, uint32_t *tgt)
{
	size_t n = (size_t)d->B * d->T;
	size_t at = (eng_data_next_sample(d) * (size_t)d->ranks + (size_t)d->rank) * n;
	memcpy(inp, d->tok + at, n * sizeof(uint32_t));
	memcpy(tgt, d->tok + at + 1, n * sizeof(uint32_t));
	if (++d->pos.sample < d->nsamples)
		return;
	/* the epoch is over: the next one begins now, so that the next sample is known */
	d->pos.sample = 0;
	d->pos.epoch++;
	if (d->shuffle) {
		d->pos.rng = d->live;
		draw_perm(d);
	}
}

void eng_data_seek(eng_data *d, const eng_data_pos *p)
{
	int redraw = d->shuffle && (p->epoch != d->pos.epoch ||
		memcmp(&p->rng, &d->pos.rng, sizeof p->rng) != 0);
	d->pos = *p;
	if (redraw)
		draw_perm(d);
}
