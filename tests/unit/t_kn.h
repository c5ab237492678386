/* t_kn.h - helpers of the kernel tests (t_kn.c). */
#ifndef T_KN_H
#define T_KN_H

#include <stddef.h>
#include <stdint.h>

/* Finite differences. With FD_H = 1e-2 the measured relative L2 errors are: layernorm dinp
 * 2.0e-5, dw 1.7e-6, db 3.6e-7; linear dinp 5.1e-6, dw 4.4e-6, db 5.2e-7; attention dq
 * 1.7e-5, dk 2.9e-5, dv 2.7e-6; gelu 1.0e-5; cross-entropy 3.1e-5; encoder dwte 6.1e-7, dwpe
 * 5.0e-7; rmsnorm dinp 1.2e-5, dw 1.6e-6; swiglu d gate 9.2e-6, d up 2.6e-6; grouped-query
 * attention dq 2.2e-5, dk 3.9e-5, dv 2.6e-6. They are float rounding of the loss divided by
 * the step (FD_H = 1e-3 gives 3e-4 on cross-entropy), not truncation, hence the large step. Backwards broken on purpose
 * (a term dropped, a factor or transpose wrong, `=` for `+=`) measured 2.2e-2 (gelu' with
 * 0.044715 for 3 * 0.044715) to 2.2 (attention without the softmax's rowsum term), so
 * FD_TOL sits between the two: 30x above the worst correct error, 20x below the subtlest
 * broken one. */
#define FD_H 1e-2f
#define FD_TOL 1e-3


#define GARBAGE 12345.0f /* prefill of `=` outputs: a kernel that accumulates shows */

void rng_seed(uint64_t s);
uint64_t rng_next(void);                   /* splitmix64 */
float rng_uniform(float lo, float hi);     /* uniform in [lo, hi) */
void fill(float *x, size_t n, float lo, float hi);
void fill_const(float *x, size_t n, float v);
void fill_tokens(uint32_t *tok, size_t n, int V);
/* n zeroed floats, 64-byte aligned as the kernels' determinism promise assumes; free() */
float *fnew(size_t n);
float *fdup(const float *x, size_t n);
double dotd(const float *a, const float *b, size_t n); /* sum a*b in double */
/* ||a - b|| / ||b|| over a rows x cols block of row stride ld, in double (0 when equal) */
double rel_l2_block(const float *a, const float *b, size_t rows, size_t cols, size_t ld);
double rel_l2(const float *a, const float *b, size_t n);
/* Fails unless the analytic gradient got is within FD_TOL of the numeric one want. */
void expect_grad(const char *kernel, const char *tensor, const float *got, const float *want,
	size_t n);
/* Fails unless a and b hold the same bits; names the first difference. */
void expect_bitwise(const char *kernel, const char *tensor, const char *when, const float *a,
	const float *b, size_t n);
/* Fails unless bf(n) is x(n) rounded to bf16 (kn_bf16_from_f32): a kernel's trailing bf */
void expect_rounded(const char *kernel, const char *tensor, const uint16_t *bf,
	const float *x, size_t n);
/* A scalar loss of the inputs a finite-difference check perturbs. */
typedef double (*fd_loss)(void *ctx);
/* g(n) = central differences of loss over x(n), each x[i] moved by FD_H in place and
 * restored, divided by the step the floats actually took. */
void fd_grad(float *g, float *x, size_t n, fd_loss loss, void *ctx);

#endif
