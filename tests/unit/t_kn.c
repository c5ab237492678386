/* t_kn.c - helpers of the kernel tests (test_kernels.c, test_llama_kernels.c): a seeded
 * generator, aligned buffers, errors in double, finite differences, bitwise checks. */
#include "t_kn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn.h"
#include "tests.h"

static uint64_t rng_state;

void rng_seed(uint64_t s)
{
	rng_state = s;
}

/* splitmix64 */
uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
float rng_uniform(float lo, float hi)
{
	return lo + (hi - lo) * (float)((double)(rng_next() >> 40) / 16777216.0);
}

void fill(float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = rng_uniform(lo, hi);
}

void fill_const(float *x, size_t n, float v)
{
	for (size_t i = 0; i < n; i++)
		x[i] = v;
}

void fill_tokens(uint32_t *tok, size_t n, int V)
{
	for (size_t i = 0; i < n; i++)
		tok[i] = (uint32_t)(rng_next() % (uint64_t)V);
}

/* n zeroed floats, 64-byte aligned as the kernels' determinism promise assumes; freed with
 * free() */
float *fnew(size_t n)
{
	size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
	float *p = aligned_alloc(64, bytes ? bytes : 64);
	ck_assert_ptr_nonnull(p);
	memset(p, 0, bytes);
	return p;
}

float *fdup(const float *x, size_t n)
{
	float *p = fnew(n);
	memcpy(p, x, n * sizeof(float));
	return p;
}

double dotd(const float *a, const float *b, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* ||a - b|| / ||b|| over a rows x cols block of two matrices of row stride ld, in double */
double rel_l2_block(const float *a, const float *b, size_t rows, size_t cols, size_t ld)
{
	double num = 0.0, den = 0.0;
	for (size_t i = 0; i < rows; i++)
		for (size_t j = 0; j < cols; j++) {
			double d = (double)a[i * ld + j] - b[i * ld + j];
			num += d * d;
			den += (double)b[i * ld + j] * b[i * ld + j];
		}
	if (num == 0.0)
		return 0.0;
	return sqrt(num / den); /* inf when b is all zero: the check then fails */
}

double rel_l2(const float *a, const float *b, size_t n)
{
	return rel_l2_block(a, b, 1, n, n);
}

/* Fails unless the analytic gradient got is within FD_TOL of the numeric one want. */
void expect_grad(const char *kernel, const char *tensor, const float *got,
	const float *want, size_t n)
{
	double err = rel_l2(got, want, n);
	ck_assert_msg(err < FD_TOL,
		"%s: %s off the finite differences by relative L2 error %.3e (limit %.0e)",
		kernel, tensor, err, FD_TOL);
}

/* Fails unless a and b hold the same bits; names the first difference. */
void expect_bitwise(const char *kernel, const char *tensor, const char *when,
	const float *a, const float *b, size_t n)
{
	size_t i = 0;
	while (i < n && memcmp(&a[i], &b[i], sizeof(float)) == 0)
		i++;
	ck_assert_msg(i == n, "%s: %s not bitwise identical %s: first difference at [%zu], "
		"%.9g vs %.9g", kernel, tensor, when, i, i < n ? a[i] : 0.0f,
		i < n ? b[i] : 0.0f);
}

void expect_rounded(const char *kernel, const char *tensor, const uint16_t *bf,
	const float *x, size_t n)
{
	size_t i = 0;
	while (i < n && bf[i] == kn_bf16_from_f32(x[i]))
		i++;
	ck_assert_msg(i == n, "%s: %s's bf16 copy is not its rounding: first difference at "
		"[%zu], 0x%04x for %.9g (0x%04x)", kernel, tensor, i, i < n ? bf[i] : 0,
		i < n ? x[i] : 0.0f, i < n ? kn_bf16_from_f32(x[i]) : 0);
}

/* g(n) = central differences of loss over x(n), each x[i] moved in place and restored.
 * Divides by the step the floats actually took, not by 2 FD_H. */
void fd_grad(float *g, float *x, size_t n, fd_loss loss, void *ctx)
{
	for (size_t i = 0; i < n; i++) {
		float x0 = x[i], xp = x0 + FD_H, xm = x0 - FD_H;
		x[i] = xp;
		double lp = loss(ctx);
		x[i] = xm;
		double lm = loss(ctx);
		x[i] = x0;
		g[i] = (float)((lp - lm) / ((double)xp - xm));
	}
}

