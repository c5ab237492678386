/* kn_q4.c - 4-bit weights: blockwise absmax quantization to QLoRA's NormalFloat (NF4) or
 * bitsandbytes' FP4, and back (see kn.h).
 *
 * Legend: n elements, row-major as the weight is stored; block consecutive elements share
 * one absmax (64 in QLoRA). The nearest level is found against the midpoints between
 * neighbouring levels, compared in double: exact, so the code of an element depends on
 * nothing but its value and its block's absmax, whatever the thread count.
 */
#include "kn.h"

#include <math.h>
#include <stdlib.h>

/* The NormalFloat levels of the QLoRA paper (Dettmers et al., 2023, appendix E), as
 * bitsandbytes publishes them: the quantiles of N(0, 1) scaled to [-1, 1], 0 exact. */
static const float nf4[16] = {
	-1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
	-0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
	0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
	0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};

/* FP4's magnitudes by their 3 code bits (bitsandbytes' table: e2m1 with a bias of 3, over
 * 12), and the same codes in ascending magnitude. */
static const float fp4[16] = {0.0f, 5.208333333e-03f, 0.66666667f, 1.0f, 0.33333333f, 0.5f,
	0.16666667f, 0.25f, -0.0f, -5.208333333e-03f, -0.66666667f, -1.0f, -0.33333333f, -0.5f,
	-0.16666667f, -0.25f};
static const uint8_t fp4_up[8] = {0, 1, 6, 7, 4, 5, 2, 3};

float kn_q4_level(kn_q4_type t, int code)
{
	return (t == KN_Q4_NF4 ? nf4 : fp4)[code & 15];
}

/* The index among n ascending levels nearest to x: the midpoints below x counted (x on a
 * midpoint goes to the lower level). */
static int nearest(double x, const float *lv, const uint8_t *order, int n)
{
	int k = 0;
	for (int i = 0; i + 1 < n; i++) {
		double lo = lv[order ? order[i] : i], hi = lv[order ? order[i + 1] : i + 1];
		k += x > 0.5 * (lo + hi);
	}
	return k;
}

/* One element's code: x = w/absmax (absmax > 0), or 0 for a block of zeros. */
static uint8_t code_of(float x, kn_q4_type t)
{
	if (t == KN_Q4_NF4)
		return (uint8_t)nearest(x, nf4, NULL, 16);
	uint8_t sign = x < 0.0f ? 8 : 0;
	return (uint8_t)(sign | fp4_up[nearest(fabs((double)x), fp4, fp4_up, 8)]);
}

void kn_q4_quantize(const float *w, size_t n, int block, kn_q4_type t, uint8_t *codes,
	float *absmax)
{
	size_t nb = (n + (size_t)block - 1) / (size_t)block;
	/* blocks are even: no byte is shared by two of them, so each thread writes its own */
#pragma omp parallel for schedule(static)
	for (size_t b = 0; b < nb; b++) {
		size_t i0 = b * (size_t)block, i1 = i0 + (size_t)block < n ? i0 + (size_t)block : n;
		float m = 0.0f;
		for (size_t i = i0; i < i1; i++)
			m = fmaxf(m, fabsf(w[i]));
		absmax[b] = m;
		for (size_t i = i0; i < i1; i += 2) {
			uint8_t hi = code_of(m > 0.0f ? w[i] / m : 0.0f, t);
			uint8_t lo = i + 1 < i1 ? code_of(m > 0.0f ? w[i + 1] / m : 0.0f, t) : 0;
			codes[i / 2] = (uint8_t)(hi << 4 | lo);
		}
	}
}

/* Elements [first, first + n) of a quantized array into w; am[b - b0] the absmax of block
 * b, b0 = first / block: block by block, its absmax read once, the levels a table (the
 * products' hot path). */
static void dequant_span(const uint8_t *codes, const float *am, size_t first, size_t n,
	int block, kn_q4_type t, float *w)
{
	const float *lv = t == KN_Q4_NF4 ? nf4 : fp4;
	size_t bs = (size_t)block, b0 = first / bs, b1 = (first + n + bs - 1) / bs;
#pragma omp parallel for schedule(static)
	for (size_t b = b0; b < b1; b++) {
		size_t lo = b * bs > first ? b * bs : first, hi = (b + 1) * bs;
		float a = am[b - b0];
		if (hi > first + n)
			hi = first + n;
		for (size_t i = lo; i < hi; i++) {
			unsigned byte = codes[i >> 1];
			w[i - first] = lv[i & 1 ? byte & 15 : byte >> 4] * a;
		}
	}
}

void kn_q4_dequantize(const uint8_t *codes, const float *absmax, size_t first, size_t n,
	int block, kn_q4_type t, float *w)
{
	dequant_span(codes, absmax + first / (size_t)block, first, n, block, t, w);
}

/* ---- products with a 4-bit weight ---- */

/* Floats before the bf16 tile in the scratch: the float tile, its absmax values */
static size_t bf16_at(int IC, int block)
{
	size_t tile = (size_t)KN_Q4_TILE * (size_t)IC;
	return tile + tile / (size_t)block + 2;
}

size_t kn_q4_scratch_floats(int IC, int block)
{
	return bf16_at(IC, block) + ((size_t)KN_Q4_TILE * (size_t)IC + 1) / 2;
}

/* Rows [r0, r0 + rows) of W, dequantized into tile(rows, IC); a double-quantized weight's
 * absmax values of those rows first, into the scratch after the tile. */
static void tile_of(const kn_q4_weight *w, int r0, int rows, float *tile)
{
	size_t first = (size_t)r0 * (size_t)w->IC, n = (size_t)rows * (size_t)w->IC;
	size_t bs = (size_t)w->block, b0 = first / bs, nb = (first + n + bs - 1) / bs - b0;
	const float *am = w->absmax ? w->absmax + b0 : tile + n;
	if (!w->absmax)
		kn_q4_dq_dequantize(w->qabs, w->absmax2, w->offset, b0, nb, tile + n);
	dequant_span(w->codes, am, first, n, w->block, w->type, tile);
}

/* Rows a tile: W's OC rows in as few tiles of at most KN_Q4_TILE as there can be, of equal
 * height (a short last tile makes a narrow, slow product). */
static int tile_rows(int OC)
{
	int tiles = (OC + KN_Q4_TILE - 1) / KN_Q4_TILE;
	return tiles ? (OC + tiles - 1) / tiles : 1;
}

void kn_q4_linear_forward(float *out, int ldo, const float *inp, const kn_q4_weight *w, int N,
	float *scratch)
{
	int h = tile_rows(w->OC);
	for (int r0 = 0; r0 < w->OC; r0 += h) {
		int rows = w->OC - r0 < h ? w->OC - r0 : h;
		tile_of(w, r0, rows, scratch);
		/* out(N, r0:r0+rows) = inp(N,IC) tile(rows,IC)^T */
		kn_sgemm(0, 1, N, rows, w->IC, 1.0f, inp, w->IC, scratch, w->IC, 0.0f, out + r0,
			ldo);
	}
}

void kn_q4_linear_backward(float *dinp, const float *dout, int ldd, const kn_q4_weight *w,
	int N, int accumulate, float *scratch)
{
	int h = tile_rows(w->OC);
	for (int r0 = 0; r0 < w->OC; r0 += h) {
		int rows = w->OC - r0 < h ? w->OC - r0 : h;
		tile_of(w, r0, rows, scratch);
		/* dinp(N,IC) (+)= dout(N, r0:r0+rows) tile(rows,IC) */
		kn_sgemm(0, 0, N, w->IC, rows, 1.0f, dout + r0, ldd, scratch, w->IC,
			r0 || accumulate ? 1.0f : 0.0f, dinp, w->IC);
	}
}

/* ---- the same in bf16 ---- */

/* Rows [r0, r0 + rows) of W dequantized, then rounded into the scratch's bf16 tile */
static uint16_t *tile_bf16(const kn_q4_weight *w, int r0, int rows, float *scratch)
{
	uint16_t *tb = (uint16_t *)(scratch + bf16_at(w->IC, w->block));
	tile_of(w, r0, rows, scratch);
	kn_to_bf16(tb, scratch, (size_t)rows * (size_t)w->IC);
	return tb;
}

/* The products of a tile of `rows`: forward out(N,rows) = inp(N,IC) tile^T; backward
 * dinp(N,IC) (+)= dout(N,rows) tile */
static kn_mm fwd_mm(const kn_q4_weight *w, int N, int rows, int ldo)
{
	return (kn_mm){1, 0, 1, N, rows, w->IC, w->IC, w->IC, ldo, 0, 0};
}

static kn_mm bwd_mm(const kn_q4_weight *w, int N, int rows, int ldd, int beta)
{
	return (kn_mm){1, 0, 0, N, w->IC, rows, ldd, w->IC, w->IC, beta, 0};
}

int kn_q4_linear_forward_bf16(float *out, int ldo, const uint16_t *inp, const kn_q4_weight *w,
	int N, float *scratch, void *ws, size_t ws_bytes)
{
	int h = tile_rows(w->OC);
	for (int r0 = 0; r0 < w->OC; r0 += h) {
		int rows = w->OC - r0 < h ? w->OC - r0 : h;
		const uint16_t *tb = tile_bf16(w, r0, rows, scratch);
		kn_mm q = fwd_mm(w, N, rows, ldo);
		if (kn_dnnl_gemm(&q, inp, tb, out + r0, ws, ws_bytes) < 0)
			return -1;
	}
	return 0;
}

int kn_q4_linear_backward_bf16(float *dinp, const uint16_t *dout, int ldd,
	const kn_q4_weight *w, int N, int accumulate, float *scratch, void *ws, size_t ws_bytes)
{
	int h = tile_rows(w->OC);
	for (int r0 = 0; r0 < w->OC; r0 += h) {
		int rows = w->OC - r0 < h ? w->OC - r0 : h;
		const uint16_t *tb = tile_bf16(w, r0, rows, scratch);
		kn_mm q = bwd_mm(w, N, rows, ldd, r0 || accumulate);
		if (kn_dnnl_gemm(&q, dout + r0, tb, dinp, ws, ws_bytes) < 0)
			return -1;
	}
	return 0;
}

int kn_q4_bf16_sizes(const kn_q4_weight *w, int N, int ld, size_t *bytes)
{
	int h = tile_rows(w->OC), last = w->OC - (w->OC - 1) / h * h;
	*bytes = 0;
	for (int k = 0; k < 6; k++) { /* both tile heights: forward, backward = and += */
		int rows = k % 2 ? last : h;
		kn_mm q = k < 2 ? fwd_mm(w, N, rows, ld) : bwd_mm(w, N, rows, ld, k >= 4);
		size_t sc;
		if (kn_dnnl_sizes(&q, &sc, NULL) < 0)
			return -1;
		*bytes = sc > *bytes ? sc : *bytes;
	}
	return 0;
}

/* ---- double quantization of the absmax values ---- */

/* The dynamic map, ascending. Its value for exponent e and point j is
 * (2^(e+1) + 18 j + 9) / (20 2^e 10^(6-e)): numerator and denominator are exact doubles,
 * the quotient is correctly rounded, then rounded to float32. */
static float dq_map[256];
static int dq_ready;

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static void dq_build(void)
{
	int n = 0;
	for (int e = 0; e < 7; e++)
		for (int j = 0; j < 1 << e; j++) {
			double num = (double)(2 << e) + 18.0 * j + 9.0;
			double den = 20.0 * (1 << e) * pow(10.0, 6 - e);
			dq_map[n++] = (float)(num / den);
			dq_map[n++] = -(float)(num / den);
		}
	dq_map[n++] = 0.0f;
	dq_map[n++] = 1.0f;
	qsort(dq_map, 256, sizeof dq_map[0], cmp_float);
}

float kn_q4_dq_value(int k)
{
#pragma omp critical(kn_q4_dq)
	if (!dq_ready) {
		dq_build();
		dq_ready = 1;
	}
	return dq_map[k & 255];
}

void kn_q4_dq_quantize(const float *absmax, size_t nb, uint8_t *q, float *absmax2,
	float *offset)
{
	double sum = 0.0;
	kn_q4_dq_value(0); /* the map, built */
	for (size_t i = 0; i < nb; i++)
		sum += absmax[i];
	float off = nb ? (float)(sum / (double)nb) : 0.0f;
	*offset = off;
	size_t nblk = (nb + KN_Q4_DQ_BLOCK - 1) / KN_Q4_DQ_BLOCK;
#pragma omp parallel for schedule(static)
	for (size_t b = 0; b < nblk; b++) {
		size_t i0 = b * KN_Q4_DQ_BLOCK, i1 = i0 + KN_Q4_DQ_BLOCK;
		float m = 0.0f;
		if (i1 > nb)
			i1 = nb;
		for (size_t i = i0; i < i1; i++)
			m = fmaxf(m, fabsf(absmax[i] - off));
		absmax2[b] = m;
		for (size_t i = i0; i < i1; i++) {
			float x = m > 0.0f ? (absmax[i] - off) / m : 0.0f;
			q[i] = (uint8_t)nearest(x, dq_map, NULL, 256);
		}
	}
}

void kn_q4_dq_dequantize(const uint8_t *q, const float *absmax2, float offset, size_t first,
	size_t nb, float *absmax)
{
	kn_q4_dq_value(0);
	for (size_t i = first; i < first + nb; i++) {
		/* two roundings, as the reference: no fused multiply-add */
		volatile float v = dq_map[q[i]] * absmax2[i / KN_Q4_DQ_BLOCK];
		absmax[i - first] = v + offset;
	}
}
