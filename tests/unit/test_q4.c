/* test_q4.c - 4-bit weights (kernels/cpu/kn_q4.c), suite "q4", against an independent
 * implementation: tests/data/gen_q4.py computed each case of tests/data/q4/cases.json in
 * plain Python (the published NF4 and FP4 levels, blockwise absmax, the nearest level by
 * exact distance, a tie to the lower level), and the kernels must give its codes, absmaxes
 * and dequantized values bit for bit:
 *
 *  - NF4 and FP4, blocks of 64 and 128, 1000 N(0, 0.02) weights;
 *  - an odd count with a last block of one, a block of zeros, -0.0 and tiny negatives,
 *    magnitudes from 1e-6 to 300;
 *  - weights on the exact midpoints between levels (the tie rule);
 *  - the same codes with 1 and 2 threads, and every dequantized value within half the
 *    widest gap between levels of its weight;
 *  - double quantization of the absmax values (the dynamic 8-bit map, its mean taken off,
 *    blocks of 256): the map, offset, codes, second absmaxes and the values back;
 *  - products with a 4-bit weight, a tile dequantized at a time: forward with a bias and
 *    the input gradient, within 1e-5 of the same products in double over the weight
 *    dequantized whole, and the same bits when run again.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn.h"
#include "t_kn.h"
#include "t_util.h"
#include "tests.h"

static float from_bits(const json_t *v)
{
	uint32_t u = (uint32_t)json_integer_value(v);
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static uint32_t to_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

/* The cases of tests/data/q4/cases.json (new reference). */
static json_t *cases(void)
{
	char *path = t_data("q4/cases.json");
	json_error_t je;
	json_t *o = json_load_file(path, 0, &je);
	ck_assert_msg(o != NULL, "%s: %s", path, je.text);
	free(path);
	json_t *c = json_incref(json_object_get(o, "cases"));
	json_decref(o);
	ck_assert_int_gt((int)json_array_size(c), 0);
	return c;
}

/* One case: quantized with `threads` threads, compared with the generator's. */
static void check_case(const json_t *c, int threads)
{
	const char *name = json_string_value(json_object_get(c, "name"));
	kn_q4_type t = strcmp(json_string_value(json_object_get(c, "type")), "nf4") == 0
		? KN_Q4_NF4 : KN_Q4_FP4;
	int block = (int)json_integer_value(json_object_get(c, "block"));
	size_t n = (size_t)json_integer_value(json_object_get(c, "n"));
	size_t nb = (n + (size_t)block - 1) / (size_t)block, nc = (n + 1) / 2;
	const char *hex = json_string_value(json_object_get(c, "codes"));
	float *w = malloc(n * sizeof *w), *back = malloc(n * sizeof *back);
	float *absmax = malloc(nb * sizeof *absmax);
	uint8_t *codes = malloc(nc);
	ck_assert(w && back && absmax && codes && hex && strlen(hex) == 2 * nc);
	for (size_t i = 0; i < n; i++)
		w[i] = from_bits(json_array_get(json_object_get(c, "w"), i));
	kn_set_threads(threads);
	kn_q4_quantize(w, n, block, t, codes, absmax);
	kn_q4_dequantize(codes, absmax, 0, n, block, t, back);
	for (size_t j = 0; j < nc; j++) {
		unsigned want;
		ck_assert(sscanf(hex + 2 * j, "%2x", &want) == 1);
		ck_assert_msg(codes[j] == want, "%s, %d threads: byte %zu is %02x, the generator's "
			"%02x (weights %a %a)", name, threads, j, codes[j], want, w[2 * j],
			2 * j + 1 < n ? w[2 * j + 1] : 0.0f);
	}
	for (size_t b = 0; b < nb; b++)
		ck_assert_msg(to_bits(absmax[b]) == (uint32_t)json_integer_value(json_array_get(
			json_object_get(c, "absmax"), b)), "%s: absmax of block %zu", name, b);
	for (size_t i = 0; i < n; i++) {
		float want = from_bits(json_array_get(json_object_get(c, "deq"), i));
		ck_assert_msg(to_bits(back[i]) == to_bits(want), "%s: element %zu dequantizes to "
			"%a, the generator's %a", name, i, back[i], want);
		/* the widest gap between levels: NF4's 1 - 0.72, FP4's 1 - 2/3; half of it */
		ck_assert(fabsf(back[i] - w[i]) <= absmax[i / (size_t)block] * 0.17f);
	}
	free(w);
	free(back);
	free(absmax);
	free(codes);
}

START_TEST(test_q4_against_generator)
{
	json_t *all = cases();
	size_t i;
	json_t *c;
	json_array_foreach(all, i, c)
		for (int threads = 1; threads <= 2; threads++)
			check_case(c, threads);
	json_decref(all);
	kn_set_threads(1);
}
END_TEST

/* The bit patterns of o[key] (an array of n) equal those of got. */
static void same_bits(const json_t *o, const char *key, const float *got, size_t n,
	const char *name)
{
	const json_t *a = json_object_get(o, key);
	ck_assert_int_eq((int)json_array_size(a), (int)n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(to_bits(got[i]) == (uint32_t)json_integer_value(json_array_get(a, i)),
			"%s: %s[%zu] is %a, the generator's %a", name, key, i, got[i],
			from_bits(json_array_get(a, i)));
}

START_TEST(test_q4_double_quant)
{
	char *path = t_data("q4/cases.json");
	json_t *o = json_load_file(path, 0, NULL), *c;
	ck_assert_msg(o != NULL, "%s", path);
	free(path);
	size_t k;
	json_array_foreach(json_object_get(o, "double"), k, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		size_t nb = json_array_size(json_object_get(c, "absmax"));
		size_t n2 = (nb + KN_Q4_DQ_BLOCK - 1) / KN_Q4_DQ_BLOCK;
		float map[256], *a = malloc(nb * sizeof *a), *back = malloc(nb * sizeof *back);
		float *a2 = malloc(n2 * sizeof *a2), off;
		uint8_t *q = malloc(nb);
		ck_assert(a && back && a2 && q);
		for (int i = 0; i < 256; i++)
			map[i] = kn_q4_dq_value(i);
		same_bits(c, "map", map, 256, name);
		for (size_t i = 0; i < nb; i++)
			a[i] = from_bits(json_array_get(json_object_get(c, "absmax"), i));
		kn_q4_dq_quantize(a, nb, q, a2, &off);
		kn_q4_dq_dequantize(q, a2, off, 0, nb, back);
		same_bits(c, "absmax2", a2, n2, name);
		same_bits(c, "back", back, nb, name);
		json_t *want_off = json_object_get(c, "offset");
		ck_assert(to_bits(off) == (uint32_t)json_integer_value(want_off));
		const char *hex = json_string_value(json_object_get(c, "q"));
		for (size_t i = 0; i < nb; i++) {
			unsigned want;
			ck_assert(sscanf(hex + 2 * i, "%2x", &want) == 1);
			ck_assert_msg(q[i] == want, "%s: code %zu is %u, the generator's %u", name,
				i, q[i], want);
		}
		free(a);
		free(back);
		free(a2);
		free(q);
	}
	json_decref(o);
}
END_TEST

/* y(N, OC) = x W^T and dx(N, IC) = dy W in double, W given whole (wd) */
static void products_in_double(const float *x, const float *dy, const float *wd, int N, int OC,
	int IC, double *y, double *dx)
{
	for (int n = 0; n < N; n++)
		for (int o = 0; o < OC; o++) {
			double acc = 0;
			for (int i = 0; i < IC; i++)
				acc += (double)x[n * IC + i] * wd[o * IC + i];
			y[n * OC + o] = acc;
		}
	for (int n = 0; n < N; n++)
		for (int i = 0; i < IC; i++) {
			double acc = 0;
			for (int o = 0; o < OC; o++)
				acc += (double)dy[n * OC + o] * wd[o * IC + i];
			dx[n * IC + i] = acc;
		}
}

/* y (N rows of ld, the product's OC columns from at, GARBAGE beside them) and dx (N, IC)
 * against yd and dxd in double, within 1e-5; what names the case in messages */
static void check_products(const float *y, const float *dx, const double *yd,
	const double *dxd, int N, int OC, int IC, int ld, int at, const char *what)
{
	for (int n = 0; n < N; n++) {
		for (int o = 0; o < ld; o++) {
			float v = y[n * ld + o];
			if (o < at || o >= at + OC) {
				ck_assert(v == GARBAGE);
				continue;
			}
			double acc = yd[n * OC + o - at];
			ck_assert_msg(fabs(v - acc) <= 1e-5 * (1 + fabs(acc)),
				"%s: y[%d,%d] = %g, in double %g", what, n, o, v, acc);
		}
		for (int i = 0; i < IC; i++) {
			double acc = dxd[n * IC + i];
			ck_assert_msg(fabs(dx[n * IC + i] - acc) <= 1e-5 * (1 + fabs(acc)),
				"%s: dx[%d,%d] = %g, in double %g", what, n, i, dx[n * IC + i],
				acc);
		}
	}
}

/* dx2 (N * IC) holds 0.5 + the input gradient in double dxd, within 1e-5: accumulated */
static void check_accumulated(const float *dx2, const double *dxd, int n, const char *what)
{
	for (int k = 0; k < n; k++)
		ck_assert_msg(fabs(dx2[k] - (0.5 + dxd[k])) <= 1e-5 * (1 + fabs(dxd[k])),
			"%s: accumulated dx[%d] = %g, want 0.5 + %g", what, k, dx2[k], dxd[k]);
}

/* A product with a 4-bit weight (three tiles, the last shorter) against the same product in
 * double over the weight dequantized whole, its absmax values as they are and
 * double-quantized: forward into columns of a wider output (the garbage beside them kept),
 * the input gradient written and then accumulated; run twice, the same bits. */
START_TEST(test_q4_linear)
{
	enum { OC = 520, IC = 128, N = 7, LD = OC + 9, AT = 5 }; /* tiles of 174, 174, 172 */
	enum { NB = OC * IC / 64 };
	static float w[OC * IC], wd[OC * IC], x[N * IC], dy[N * OC], y[N * LD], dx[N * IC];
	static float y2[N * LD], dx2[N * IC], absmax[NB], am[NB], a2[1 + NB / 256];
	static double yd[N * OC], dxd[N * IC];
	static uint8_t codes[OC * IC / 2], qabs[NB];
	float *scratch = malloc(kn_q4_scratch_floats(IC, 64) * sizeof *scratch), off;
	rng_seed(7);
	fill(w, OC * IC, -0.05f, 0.05f);
	fill(x, N * IC, -1.0f, 1.0f);
	fill(dy, N * OC, -1.0f, 1.0f);
	kn_q4_quantize(w, OC * IC, 64, KN_Q4_NF4, codes, absmax);
	kn_q4_dq_quantize(absmax, NB, qabs, a2, &off);
	for (int dq = 0; dq < 2; dq++) {
		kn_q4_weight q = {codes, absmax, NULL, NULL, 0.0f, OC, IC, 64, KN_Q4_NF4};
		if (dq) {
			q = (kn_q4_weight){codes, NULL, qabs, a2, off, OC, IC, 64, KN_Q4_NF4};
			kn_q4_dq_dequantize(qabs, a2, off, 0, NB, am);
		}
		kn_q4_dequantize(codes, dq ? am : absmax, 0, OC * IC, 64, KN_Q4_NF4, wd);
		products_in_double(x, dy, wd, N, OC, IC, yd, dxd);
		fill_const(y, N * LD, GARBAGE); /* `=` outputs, beside and under */
		fill_const(dx, N * IC, GARBAGE);
		kn_q4_linear_forward(y + AT, LD, x, &q, N, scratch);
		kn_q4_linear_backward(dx, dy, OC, &q, N, 0, scratch);
		check_products(y, dx, yd, dxd, N, OC, IC, LD, AT,
			dq ? "double-quantized" : "absmax");
		memcpy(y2, y, sizeof y);
		kn_q4_linear_forward(y2 + AT, LD, x, &q, N, scratch);
		ck_assert(memcmp(y, y2, sizeof y) == 0);
		fill_const(dx2, N * IC, 0.5f);
		kn_q4_linear_backward(dx2, dy, OC, &q, N, 1, scratch);
		check_accumulated(dx2, dxd, N * IC, dq ? "double-quantized" : "absmax");
	}
	free(scratch);
}
END_TEST

/* The bf16 products (compute bf16): against the products in double of the operands rounded
 * to bf16 (oneDNN accumulates in float32), into columns of a wider output, the input
 * gradient written and accumulated, three tiles of two heights; the same bits twice. */
START_TEST(test_q4_linear_bf16)
{
	enum { OC = 520, IC = 128, N = 7, LD = OC + 9, AT = 5 };
	static float w[OC * IC], wd[OC * IC], x[N * IC], dy[N * OC], y[N * LD], dx[N * IC];
	static float y2[N * LD], dx2[N * IC], absmax[OC * IC / 64], xr[N * IC], dyr[N * OC];
	static double yd[N * OC], dxd[N * IC];
	static uint16_t xb[N * IC], dyb[N * LD];
	static uint8_t codes[OC * IC / 2];
	if (!t_bf16_here("q4"))
		return;
	float *scratch = malloc(kn_q4_scratch_floats(IC, 64) * sizeof *scratch);
	rng_seed(9);
	fill(w, OC * IC, -0.05f, 0.05f);
	fill(x, N * IC, -1.0f, 1.0f);
	fill(dy, N * OC, -1.0f, 1.0f);
	kn_q4_quantize(w, OC * IC, 64, KN_Q4_FP4, codes, absmax);
	kn_q4_dequantize(codes, absmax, 0, OC * IC, 64, KN_Q4_FP4, wd);
	kn_q4_weight q = {codes, absmax, NULL, NULL, 0.0f, OC, IC, 64, KN_Q4_FP4};
	uint16_t *wb = malloc(sizeof(uint16_t) * OC * IC);
	kn_to_bf16(wb, wd, OC * IC);
	kn_to_bf16(xb, x, N * IC);
	for (int n = 0; n < N; n++) /* dy in a wider array (ldd LD), as a joined layer's */
		kn_to_bf16(dyb + n * LD, dy + n * OC, OC);
	for (int k = 0; k < OC * IC; k++)
		wd[k] = eng_bf16_to_f32(wb[k]);
	for (int k = 0; k < N * IC; k++)
		xr[k] = eng_bf16_to_f32(xb[k]);
	for (int n = 0; n < N; n++)
		for (int o = 0; o < OC; o++)
			dyr[n * OC + o] = eng_bf16_to_f32(dyb[n * LD + o]);
	products_in_double(xr, dyr, wd, N, OC, IC, yd, dxd);
	size_t ws_bytes;
	ck_assert_msg(kn_q4_bf16_sizes(&q, N, LD, &ws_bytes) == 0, "%s", kn_bf16_error());
	void *ws = malloc(ws_bytes + 1);
	fill_const(y, N * LD, GARBAGE);
	fill_const(dx, N * IC, GARBAGE);
	ck_assert_msg(kn_q4_linear_forward_bf16(y + AT, LD, xb, &q, N, scratch, ws, ws_bytes) == 0,
		"%s", kn_bf16_error());
	ck_assert(kn_q4_linear_backward_bf16(dx, dyb, LD, &q, N, 0, scratch, ws, ws_bytes) == 0);
	check_products(y, dx, yd, dxd, N, OC, IC, LD, AT, "bf16");
	memcpy(y2, y, sizeof y);
	ck_assert(kn_q4_linear_forward_bf16(y2 + AT, LD, xb, &q, N, scratch, ws, ws_bytes) == 0);
	ck_assert(memcmp(y, y2, sizeof y) == 0);
	fill_const(dx2, N * IC, 0.5f);
	ck_assert(kn_q4_linear_backward_bf16(dx2, dyb, LD, &q, N, 1, scratch, ws, ws_bytes) == 0);
	check_accumulated(dx2, dxd, N * IC, "bf16");
	memcpy(dx2, dx, sizeof dx);
	ck_assert(kn_q4_linear_backward_bf16(dx, dyb, LD, &q, N, 0, scratch, ws, ws_bytes) == 0);
	ck_assert(memcmp(dx, dx2, sizeof dx) == 0);
	free(ws);
	free(wb);
	free(scratch);
}
END_TEST

START_TEST(test_q4_levels)
{
	/* NF4 ascends from -1 to 1 through an exact 0; FP4's code 8 + k is code k negated */
	for (int k = 0; k < 15; k++)
		ck_assert(kn_q4_level(KN_Q4_NF4, k) < kn_q4_level(KN_Q4_NF4, k + 1));
	ck_assert(kn_q4_level(KN_Q4_NF4, 0) == -1.0f && kn_q4_level(KN_Q4_NF4, 15) == 1.0f);
	ck_assert(kn_q4_level(KN_Q4_NF4, 7) == 0.0f);
	for (int k = 0; k < 8; k++)
		ck_assert(kn_q4_level(KN_Q4_FP4, 8 + k) == -kn_q4_level(KN_Q4_FP4, k));
	ck_assert(kn_q4_level(KN_Q4_FP4, 3) == 1.0f && kn_q4_level(KN_Q4_FP4, 0) == 0.0f);
}
END_TEST

Suite *suite_q4(void)
{
	Suite *s = suite_create("q4");
	TCase *tc = tcase_create("q4");
	tcase_add_test(tc, test_q4_against_generator);
	tcase_add_test(tc, test_q4_double_quant);
	tcase_add_test(tc, test_q4_linear);
	tcase_add_test(tc, test_q4_linear_bf16);
	tcase_add_test(tc, test_q4_levels);
	suite_add_tcase(s, tc);
	return s;
}
