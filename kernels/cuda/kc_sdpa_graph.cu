/* kc_sdpa_graph.cu - the two cuDNN operation graphs of the fused attention, written out
 * one descriptor at a time (the graphs and why they are so: kc_sdpa.cu's comment). */
#include "kc_sdpa_int.h"

#include <stdarg.h>
#include <stdio.h>

/* ---- messages (kc_sdpa.cu reports through these too) ---- */

void sdpa_msg(char *dst, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!dst || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(dst, len, fmt, ap);
	va_end(ap);
}

/* cuDNN's status name and its own last message, which says what a finalize refused. */
void sdpa_cudnn_why(char *dst, size_t len, cudnnStatus_t st)
{
	char last[256];

	last[0] = '\0';
	cudnnGetLastErrorString(last, sizeof(last));
	if (last[0])
		sdpa_msg(dst, len, "%s (%s)", cudnnGetErrorString(st), last);
	else
		sdpa_msg(dst, len, "%s", cudnnGetErrorString(st));
}

/* ---- graph building: each helper does nothing once g->failed ---- */

void g_fail(sdpa_graph *g, const char *what, cudnnStatus_t st)
{
	char why[SDPA_MSG];

	if (g->failed)
		return;
	g->failed = 1;
	sdpa_cudnn_why(why, sizeof(why), st);
	sdpa_msg(g->msg, sizeof(g->msg), "%s: %s", what, why);
}

cudnnBackendDescriptor_t g_new(sdpa_graph *g, cudnnBackendDescriptorType_t type,
	const char *what)
{
	cudnnBackendDescriptor_t d = NULL;

	if (g->failed)
		return NULL;
	if (g->ndesc == SDPA_MAX_DESC) {
		g->failed = 1;
		sdpa_msg(g->msg, sizeof(g->msg), "%s: more than %d cuDNN descriptors", what,
			SDPA_MAX_DESC);
		return NULL;
	}
	G_CHECK(g, what, cudnnBackendCreateDescriptor(type, &d));
	if (g->failed)
		return NULL;
	g->desc[g->ndesc++] = d;
	return d;
}

void g_set(sdpa_graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
	cudnnBackendAttributeType_t type, int64_t count, const void *values, const char *what)
{
	G_CHECK(g, what, cudnnBackendSetAttribute(d, name, type, count, values));
}

void g_finalize(sdpa_graph *g, cudnnBackendDescriptor_t d, const char *what)
{
	G_CHECK(g, what, cudnnBackendFinalize(d));
}

/* Dimensions and strides of a tensor, outermost first. */
typedef struct sdpa_dims {
	int nd;
	int64_t dim[4];
	int64_t stride[4];
} sdpa_dims;

static sdpa_dims dims4(int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t s0, int64_t s1,
	int64_t s2, int64_t s3)
{
	sdpa_dims r;

	r.nd = 4;
	r.dim[0] = d0, r.dim[1] = d1, r.dim[2] = d2, r.dim[3] = d3;
	r.stride[0] = s0, r.stride[1] = s1, r.stride[2] = s2, r.stride[3] = s3;
	return r;
}

static cudnnBackendDescriptor_t g_tensor(sdpa_graph *g, int64_t uid, cudnnDataType_t type,
	const sdpa_dims *d, bool is_virtual, bool by_value)
{
	int64_t align = 16; /* bytes; every pointer is checked against it before execution */
	cudnnBackendDescriptor_t t = G_NEW(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);

	G_SET(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
	G_SET(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, d->nd, d->dim);
	G_SET(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, d->nd, d->stride);
	G_SET(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
	G_SET(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
	if (is_virtual)
		G_SET(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
	if (by_value)
		G_SET(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
	G_FINALIZE(g, t);
	return t;
}

/* A tensor in the caller's memory. */
static cudnnBackendDescriptor_t g_real(sdpa_graph *g, int64_t uid, cudnnDataType_t type,
	const sdpa_dims *d)
{
	return g_tensor(g, uid, type, d, false, false);
}

/* A float passed by value, with as many dimensions (all 1) as the tensors it meets:
 * cuDNN's pointwise operations refuse operands of different ranks. */
static cudnnBackendDescriptor_t g_scalar(sdpa_graph *g, int64_t uid)
{
	sdpa_dims d = dims4(1, 1, 1, 1, 1, 1, 1, 1);

	return g_tensor(g, uid, CUDNN_DATA_FLOAT, &d, false, true);
}

/* An intermediate that lives only inside the fused kernel. */
static cudnnBackendDescriptor_t g_virt(sdpa_graph *g, cudnnDataType_t type, const sdpa_dims *d)
{
	return g_tensor(g, g->next_uid++, type, d, true, false);
}

static void g_add_op(sdpa_graph *g, cudnnBackendDescriptor_t op)
{
	if (g->failed)
		return;
	if (g->nops == SDPA_MAX_OPS) {
		g->failed = 1;
		sdpa_msg(g->msg, sizeof(g->msg), "more than %d operations", SDPA_MAX_OPS);
		return;
	}
	g->ops[g->nops++] = op;
}

/* y = mode(x[, b[, t]]) computed in prec; axis >= 0 only for GEN_INDEX. Inputs as the
 * backend names them: x, then b, then t (BINARY_SELECT: y = t ? x : b). */
static void g_pw(sdpa_graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
	cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
	cudnnBackendDescriptor_t y, int64_t axis)
{
	float alpha = 1.0f;
	cudnnBackendDescriptor_t pw = G_NEW(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
	cudnnBackendDescriptor_t op;

	G_SET(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
	G_SET(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	if (axis >= 0)
		G_SET(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
	G_FINALIZE(g, pw);

	op = G_NEW(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
	if (b)
		G_DESC(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
	if (t)
		G_DESC(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
	G_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &alpha);
	G_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha);
	G_FINALIZE(g, op);
	g_add_op(g, op);
}

/* c = a b over the last two dimensions, batched over the first two; float accumulation. */
static void g_matmul(sdpa_graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
	cudnnBackendDescriptor_t c)
{
	cudnnDataType_t comp = CUDNN_DATA_FLOAT;
	cudnnBackendDescriptor_t mm = G_NEW(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
	cudnnBackendDescriptor_t op;

	G_SET(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
	G_FINALIZE(g, mm);

	op = G_NEW(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
	G_FINALIZE(g, op);
	g_add_op(g, op);
}

/* y = reduce(x) over the dimensions where y has extent 1; float. */
static void g_reduce(sdpa_graph *g, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
	cudnnBackendDescriptor_t y)
{
	cudnnDataType_t comp = CUDNN_DATA_FLOAT;
	cudnnBackendDescriptor_t red = G_NEW(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
	cudnnBackendDescriptor_t op;

	G_SET(g, red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how);
	G_SET(g, red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
	G_FINALIZE(g, red);

	op = G_NEW(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
	G_FINALIZE(g, op);
	g_add_op(g, op);
}

/* y = x seen with y's dims and strides (a transpose here: no data moves). */
static void g_reshape(sdpa_graph *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
	cudnnBackendDescriptor_t op = G_NEW(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);

	G_DESC(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
	G_DESC(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
	G_FINALIZE(g, op);
	g_add_op(g, op);
}

/* The causal mask on scores x (B,NH,T,T): y = row >= col ? x : neg_inf. The frontend's
 * top-left diagonal band with right bound 0: int32 row and column indices, a boolean
 * comparison, a float select. */
static cudnnBackendDescriptor_t g_causal(sdpa_graph *g, cudnnBackendDescriptor_t x,
	const sdpa_dims *sd, cudnnBackendDescriptor_t neg_inf)
{
	cudnnBackendDescriptor_t row = g_virt(g, CUDNN_DATA_INT32, sd);
	cudnnBackendDescriptor_t col = g_virt(g, CUDNN_DATA_INT32, sd);
	cudnnBackendDescriptor_t keep = g_virt(g, CUDNN_DATA_BOOLEAN, sd);
	cudnnBackendDescriptor_t y = g_virt(g, CUDNN_DATA_FLOAT, sd);

	g_pw(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, NULL, NULL, row, 2);
	g_pw(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, NULL, NULL, col, 3);
	g_pw(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep, -1);
	g_pw(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, neg_inf, keep, y, -1);
	return y;
}

/* The shapes both graphs use. */
typedef struct sdpa_shapes {
	sdpa_dims q;   /* q, v, and dq, dk, dv: (B,NH,T,hs) views of qkv / dqkv */
	sdpa_dims kt;  /* k^T and v^T: (B,NH,hs,T) views of qkv */
	sdpa_dims o;   /* out and dout: (B,NH,T,hs) views of (B,T,C) */
	sdpa_dims s;   /* scores and probabilities (B,NH,T,T), virtual */
	sdpa_dims st;  /* the same transposed (B,NH,T_k,T_q), virtual */
	sdpa_dims row; /* one value per query row (B,NH,T,1): stats, softmax_sum */
} sdpa_shapes;

static sdpa_shapes sdpa_shapes_of(const kc_sdpa *s)
{
	int64_t B = s->B, H = s->NH, T = s->T, D = s->hs, C = H * D, C3 = 3 * C;
	sdpa_shapes r;

	r.q = dims4(B, H, T, D, T * C3, D, C3, 1);
	r.kt = dims4(B, H, D, T, T * C3, D, 1, C3);
	r.o = dims4(B, H, T, D, T * C, D, C, 1);
	r.s = dims4(B, H, T, T, H * T * T, T * T, T, 1);
	r.st = dims4(B, H, T, T, H * T * T, T * T, 1, T);
	r.row = dims4(B, H, T, 1, H * T, T, 1, 1);
	return r;
}

/* A new float virtual tensor of dims d = mode(x[, b]), computed in float. */
static cudnnBackendDescriptor_t g_op(sdpa_graph *g, cudnnPointwiseMode_t mode,
	cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, const sdpa_dims *d)
{
	cudnnBackendDescriptor_t y = g_virt(g, CUDNN_DATA_FLOAT, d);

	g_pw(g, mode, CUDNN_DATA_FLOAT, x, b, NULL, y, -1);
	return y;
}

/* A new float virtual tensor of dims d = a b. */
static cudnnBackendDescriptor_t g_mm(sdpa_graph *g, cudnnBackendDescriptor_t a,
	cudnnBackendDescriptor_t b, const sdpa_dims *d)
{
	cudnnBackendDescriptor_t c = g_virt(g, CUDNN_DATA_FLOAT, d);

	g_matmul(g, a, b, c);
	return c;
}

/* A new float virtual tensor of dims d = a reduction of x. */
static cudnnBackendDescriptor_t g_red(sdpa_graph *g, cudnnReduceTensorOp_t how,
	cudnnBackendDescriptor_t x, const sdpa_dims *d)
{
	cudnnBackendDescriptor_t y = g_virt(g, CUDNN_DATA_FLOAT, d);

	g_reduce(g, how, x, y);
	return y;
}

#define BF16 CUDNN_DATA_BFLOAT16

void sdpa_build_forward(const kc_sdpa *s, sdpa_graph *g)
{
	sdpa_shapes sh = sdpa_shapes_of(s);
	cudnnBackendDescriptor_t q, kt, v, o, stats, scale, neg_inf, sc, mx, e, z, p;

	q = g_real(g, SDPA_UID_Q, BF16, &sh.q);
	kt = g_real(g, SDPA_UID_K, BF16, &sh.kt);
	v = g_real(g, SDPA_UID_V, BF16, &sh.q);
	o = g_real(g, SDPA_UID_O, BF16, &sh.o);
	stats = g_real(g, SDPA_UID_STATS, CUDNN_DATA_FLOAT, &sh.row);
	scale = g_scalar(g, SDPA_UID_SCALE);
	neg_inf = g_scalar(g, SDPA_UID_NEGINF);

	/* S = mask(q k^T * scale) */
	sc = g_op(g, CUDNN_POINTWISE_MUL, g_mm(g, q, kt, &sh.s), scale, &sh.s);
	sc = g_causal(g, sc, &sh.s, neg_inf);
	/* softmax with its statistics: M = max_row S, E = exp(S - M), Z = sum_row E,
	 * stats = M + log Z, P = E / Z */
	mx = g_red(g, CUDNN_REDUCE_TENSOR_MAX, sc, &sh.row);
	e = g_op(g, CUDNN_POINTWISE_EXP, g_op(g, CUDNN_POINTWISE_SUB, sc, mx, &sh.s), NULL,
		&sh.s);
	z = g_red(g, CUDNN_REDUCE_TENSOR_ADD, e, &sh.row);
	g_pw(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx,
		g_op(g, CUDNN_POINTWISE_LOG, z, NULL, &sh.row), NULL, stats, -1);
	/* P feeds the second matmul: bf16, as the engines require of a matmul input */
	p = g_virt(g, BF16, &sh.s);
	g_pw(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, z, NULL, p, -1);
	/* out = P v */
	g_matmul(g, p, v, o);
}

void sdpa_build_backward(const kc_sdpa *s, sdpa_graph *g)
{
	int64_t B = s->B, H = s->NH, T = s->T, D = s->hs;
	sdpa_shapes sh = sdpa_shapes_of(s);
	/* dout * out before its row sum: the frontend's (virtual) strides, kept as they are */
	sdpa_dims dot = dims4(B, H, T, D, H * T * D, T * D, H * D, 1);
	sdpa_dims acc = dims4(B, H, T, D, H * T * D, T * D, D, 1); /* packed (B,NH,T,hs) */
	cudnnBackendDescriptor_t q, kt, vt, o, d_o, stats, scale, neg_inf, one, dq, dk, dv;
	cudnnBackendDescriptor_t sum, dq_acc, sc, p, pt, ds, dst, k;

	q = g_real(g, SDPA_UID_Q, BF16, &sh.q);
	kt = g_real(g, SDPA_UID_K, BF16, &sh.kt);
	vt = g_real(g, SDPA_UID_V, BF16, &sh.kt);
	o = g_real(g, SDPA_UID_O, BF16, &sh.o);
	d_o = g_real(g, SDPA_UID_DO, BF16, &sh.o);
	stats = g_real(g, SDPA_UID_STATS, CUDNN_DATA_FLOAT, &sh.row);
	scale = g_scalar(g, SDPA_UID_SCALE);
	neg_inf = g_scalar(g, SDPA_UID_NEGINF);
	one = g_scalar(g, SDPA_UID_ONE);
	dq = g_real(g, SDPA_UID_DQ, BF16, &sh.q);
	dk = g_real(g, SDPA_UID_DK, BF16, &sh.q);
	dv = g_real(g, SDPA_UID_DV, BF16, &sh.q);
	sum = g_real(g, SDPA_UID_SUM, CUDNN_DATA_FLOAT, &sh.row);
	dq_acc = g_real(g, SDPA_UID_DQACC, CUDNN_DATA_FLOAT, &acc);

	/* softmax_sum = rowsum(dout * out) * 1 (= rowsum(P * dP), as out = P v) */
	g_pw(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT,
		g_red(g, CUDNN_REDUCE_TENSOR_ADD, g_op(g, CUDNN_POINTWISE_MUL, d_o, o, &dot),
			&sh.row),
		one, NULL, sum, -1);
	/* P = exp(mask(q k^T * scale - stats)), recomputed from the saved statistics */
	sc = g_op(g, CUDNN_POINTWISE_MUL, g_mm(g, q, kt, &sh.s), scale, &sh.s);
	sc = g_causal(g, g_op(g, CUDNN_POINTWISE_SUB, sc, stats, &sh.s), &sh.s, neg_inf);
	p = g_op(g, CUDNN_POINTWISE_EXP, sc, NULL, &sh.s);
	/* dv = P^T dout */
	pt = g_virt(g, BF16, &sh.st);
	g_reshape(g, p, pt);
	g_matmul(g, pt, d_o, dv);
	/* dS = (dout v^T - softmax_sum) * P * scale */
	ds = g_op(g, CUDNN_POINTWISE_SUB, g_mm(g, d_o, vt, &sh.s), sum, &sh.s);
	ds = g_op(g, CUDNN_POINTWISE_MUL, g_op(g, CUDNN_POINTWISE_MUL, ds, p, &sh.s), scale,
		&sh.s);
	/* dk = dS^T q */
	dst = g_virt(g, BF16, &sh.st);
	g_reshape(g, ds, dst);
	g_matmul(g, dst, q, dk);
	/* dq = dS k, accumulated in float in the workspace, then converted */
	k = g_virt(g, BF16, &sh.q); /* k itself, back from k^T */
	g_reshape(g, kt, k);
	g_matmul(g, ds, k, dq_acc);
	g_pw(g, CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dq_acc, NULL, NULL, dq, -1);
}

#undef BF16

