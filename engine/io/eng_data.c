/* eng_data.c - token files read a batch at a time, and the llm.c-order batch cursor (see
 * eng_data.h). */
#include "eng_data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_fs.h"
#include "eng_mem.h"

/* llm.c's token files, by magic: the version each must have and its token width. */
static const struct {
	int32_t magic, version;
	int width;
} llmc_kinds[] = {
	{ENG_LLMC_MAGIC, 1, 2},     /* GPT-2's: uint16 tokens */
	{ENG_LLMC_MAGIC_U32, 7, 4}, /* Llama 3's: uint32 tokens */
};

/* n bytes at off of fd into buf, all of them: 0, or -1 (errno; 0 when the file ended). */
static int read_at(int fd, void *buf, size_t n, off_t off)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = pread(fd, (char *)buf + done, n - done, off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = 0;
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

/* The llmc header of a file of size bytes into *f (width, first, ntok): 0, or -1 naming
 * the file. The count is header[2] unsigned with header[3] its high word (llm.c writes 0
 * there), so that it says more than 2^31 tokens; it must agree with the size. */
static int llmc_header(int fd, const char *path, size_t size, eng_data_file *f, eng_err *err)
{
	int32_t hdr[ENG_LLMC_HEADER_INTS];
	if (size < sizeof hdr || read_at(fd, hdr, sizeof hdr, 0) < 0)
		return eng_errf(err, "data file '%s': shorter than the llmc header (%zu bytes)",
			path, sizeof hdr);
	size_t k = 0, nk = sizeof llmc_kinds / sizeof llmc_kinds[0];
	while (k < nk && llmc_kinds[k].magic != hdr[0])
		k++;
	/* a file that is not one is not echoed: its bytes are nobody's business here */
	if (k == nk)
		return eng_errf(err, "data file '%s': not an llmc token file (no header with magic "
				     "%d or %d); use \"format\": \"bytes\" for raw text", path,
			ENG_LLMC_MAGIC, ENG_LLMC_MAGIC_U32);
	if (hdr[1] != llmc_kinds[k].version)
		return eng_errf(err, "data file '%s': llmc token file of magic %d has version %d, "
				     "this engine reads version %d", path, hdr[0], hdr[1],
			llmc_kinds[k].version);
	f->width = llmc_kinds[k].width;
	f->first = sizeof hdr;
	f->ntok = (size_t)(uint32_t)hdr[2] | (size_t)(uint32_t)hdr[3] << 32;
	size_t body = size - sizeof hdr;
	if (f->ntok != body / (size_t)f->width || body % (size_t)f->width)
		return eng_errf(err, "data file '%s': header says %zu tokens but the file holds "
				     "%zu bytes of %d-byte tokens", path, f->ntok, body, f->width);
	return 0;
}

/* Opens path and reads its header into *f: the descriptor, or -1 naming the file on
 * anything but a regular file, a short or bad header, a count that disagrees with the
 * size, or fewer than B*T+1 tokens. */
static int data_header(const char *path, eng_data_format fmt, int B, int T, eng_data_file *f,
	eng_err *err)
{
	struct stat st;
	int fd = eng_fs_open_read(path, "data file", &st, err);
	if (fd < 0)
		return -1;
	memset(f, 0, sizeof *f);
	if (fmt == ENG_DATA_LLMC) {
		if (llmc_header(fd, path, (size_t)st.st_size, f, err) < 0)
			goto fail;
	} else {
		f->width = 1;
		f->ntok = (size_t)st.st_size;
	}
	if (f->ntok < (size_t)B * T + 1) {
		eng_errf(err, "data file '%s': %zu tokens, fewer than one batch needs (%d x %d + 1)",
			path, f->ntok, B, T);
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* Token i of raw (width bytes, little-endian). */
static uint32_t raw_token(const uint8_t *raw, int width, size_t i)
{
	const uint8_t *p = raw + i * (size_t)width;
	switch (width) {
	case 1:
		return p[0];
	case 2:
		return (uint32_t)(p[0] | p[1] << 8);
	default:
		return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			(uint32_t)p[3] << 24;
	}
}

/* Tokens first .. first+n-1 of path, raw, each checked against vocab and widened into tok
 * when not NULL; fails on the first one >= vocab, saying what the file was most likely
 * made for. */
static int take_tokens(const char *path, eng_data_format fmt, int width, const uint8_t *raw,
	size_t n, size_t first, int vocab, uint32_t *tok, eng_err *err)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t t = raw_token(raw, width, i);
		if (t < (uint32_t)vocab) {
			if (tok)
				tok[i] = t;
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

#define DATA_CHUNK (1u << 16) /* bytes a check reads at a time */

int eng_data_check(const char *path, eng_data_format fmt, int B, int T, int vocab,
	eng_data_file *f, eng_err *err)
{
	uint8_t buf[DATA_CHUNK];
	int rc = 0, fd = data_header(path, fmt, B, T, f, err);
	if (fd < 0)
		return -1;
	/* every token against the vocabulary, as reading a batch will: a file made for another
	 * model is refused when the job is checked, not when it meets the token */
	size_t nbytes = f->ntok * (size_t)f->width, chunk = DATA_CHUNK / 4 * 4, done = 0;
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	while (rc == 0 && done < nbytes) {
		size_t want = nbytes - done < chunk ? nbytes - done : chunk;
		if (read_at(fd, buf, want, (off_t)(f->first + done)) < 0) {
			rc = eng_errf(err, "data file '%s': read failed: %s", path,
				errno ? strerror(errno) : "file shrank");
			break;
		}
		rc = take_tokens(path, fmt, f->width, buf, want / (size_t)f->width,
			done / (size_t)f->width, vocab, NULL, err);
		done += want;
	}
	close(fd);
	return rc;
}

int eng_data_open(eng_data *d, const char *path, eng_data_format fmt, int vocab, int B, int T,
	eng_err *err)
{
	memset(d, 0, sizeof *d);
	d->fd = data_header(path, fmt, B, T, &d->file, err);
	if (d->fd < 0)
		return -1;
	d->open = 1;
	snprintf(d->path, sizeof d->path, "%s", path);
	d->fmt = fmt;
	d->vocab = vocab;
	d->ntok = d->file.ntok;
	d->B = B;
	d->T = T;
	d->nsamples = (d->ntok - 1) / ((size_t)B * T);
	d->ranks = 1;
	d->raw = eng_mem_alloc(ENG_MEM_DATA, ((size_t)B * T + 1) * (size_t)d->file.width);
	if (!d->raw) {
		eng_errf(err, "data file '%s': out of memory for a batch", path);
		eng_data_close(d);
		return -1;
	}
	posix_fadvise(d->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return 0;
}

int eng_data_opened(const eng_data *d)
{
	return d->open;
}

void eng_data_close(eng_data *d)
{
	if (d->open)
		close(d->fd);
	eng_mem_free(d->raw);
	eng_mem_free(d->perm);
	memset(d, 0, sizeof *d);
}

size_t eng_data_bytes(const eng_data_file *f, int B, int T, int shuffle)
{
	size_t n = ((size_t)B * T + 1) * (size_t)f->width;
	if (shuffle && f->ntok > 0)
		n += (f->ntok - 1) / ((size_t)B * T) * sizeof(uint32_t);
	return n;
}

/* Tokens first .. first+n-1 into d->raw as the file holds them (n at most B*T+1). */
static int read_raw(eng_data *d, size_t first, size_t n, eng_err *err)
{
	size_t w = (size_t)d->file.width;
	if (n > (size_t)d->B * d->T + 1 || first > d->ntok || n > d->ntok - first)
		return eng_errf(err, "data file '%s': tokens %zu..%zu are not in it", d->path,
			first, first + n);
	if (read_at(d->fd, d->raw, n * w, (off_t)(d->file.first + first * w)) < 0)
		return eng_errf(err, "data file '%s': read of tokens %zu..%zu failed: %s", d->path,
			first, first + n, errno ? strerror(errno) : "the file shrank");
	return 0;
}

int eng_data_read(eng_data *d, size_t first, size_t n, uint32_t *tok, eng_err *err)
{
	if (read_raw(d, first, n, err) < 0)
		return -1;
	return take_tokens(d->path, d->fmt, d->file.width, d->raw, n, first, d->vocab, tok, err);
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
	posix_fadvise(d->fd, 0, 0, POSIX_FADV_RANDOM); /* the next sample is asked for instead */
	memset(&d->pos, 0, sizeof d->pos);
	eng_mt_seed(&d->pos.rng, seed);
	draw_perm(d);
	return 0;
}

size_t eng_data_next_sample(const eng_data *d)
{
	return d->shuffle ? d->perm[d->pos.sample] : d->pos.sample;
}

/* Sample k's first token (this rank's micro-batch of it). */
static size_t sample_at(const eng_data *d, size_t k)
{
	size_t n = (size_t)d->B * d->T;
	return (k * (size_t)d->ranks + (size_t)d->rank) * n;
}

int eng_data_next(eng_data *d, uint32_t *inp, uint32_t *tgt, eng_err *err)
{
	size_t n = (size_t)d->B * d->T, at = sample_at(d, eng_data_next_sample(d));
	int w = d->file.width;
	uint32_t last = 0;
	/* B*T+1 tokens read at once, each checked and widened once: inputs the first B*T,
	 * targets the same shifted by one */
	if (read_raw(d, at, n + 1, err) < 0 ||
		take_tokens(d->path, d->fmt, w, d->raw, n, at, d->vocab, inp, err) < 0 ||
		take_tokens(d->path, d->fmt, w, d->raw + n * (size_t)w, 1, at + n, d->vocab, &last,
			err) < 0)
		return -1;
	memcpy(tgt, inp + 1, (n - 1) * sizeof *tgt);
	tgt[n - 1] = last;
	if (++d->pos.sample >= d->nsamples) {
		/* the epoch is over: the next one begins now, so that the next sample is known */
		d->pos.sample = 0;
		d->pos.epoch++;
		if (d->shuffle) {
			d->pos.rng = d->live;
			draw_perm(d);
		}
	}
	/* the next sample on its way into the page cache while this one trains (shuffled, it
	 * is anywhere in the file) */
	posix_fadvise(d->fd, (off_t)(d->file.first + sample_at(d, eng_data_next_sample(d)) *
		(size_t)w), (off_t)((n + 1) * (size_t)w), POSIX_FADV_WILLNEED);
	return 0;
}

void eng_data_seek(eng_data *d, const eng_data_pos *p)
{
	int redraw = d->shuffle && (p->epoch != d->pos.epoch ||
		memcmp(&p->rng, &d->pos.rng, sizeof p->rng) != 0);
	d->pos = *p;
	if (redraw)
		draw_perm(d);
}
