/* kc_sdpa.cu - causal scaled-dot-product attention fused by cuDNN, through the cuDNN v9
 * backend graph API (cudnnBackend*), bf16 in and out, float32 inside.
 *
 * What it is: GPT-2's attention, out = softmax(q k^T / sqrt(hs) + causal mask) v, and its
 * backward, each written as one cuDNN operation graph that cuDNN's flash-attention engines
 * recognise and run fused (the T x T scores never reach memory). The plans are built once,
 * in kc_sdpa_create, and reused. What it is not: a kernel of its own, nor a fallback. When
 * cuDNN cannot serve a shape or a device, kc_sdpa_create returns -1 with the reason and the
 * caller runs kc's own attention kernels. C-style code (C linkage, no C++ features beyond
 * what nvcc's C++ needs), so the engine's C sees only the functions below.
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH; row-major.
 *   qkv   (B,T,3,NH,hs) bf16: the c_attn output (B,T,3C) as is, q | k | v column blocks
 *   out   (B,T,NH,hs) bf16 = (B,T,C), and dout the same
 *   stats (B,NH,T) float32: log-sum-exp of each row of the scaled, masked scores (the lse
 *         of kernels/cpu/kn_attention.c), saved by forward for backward
 *   dqkv  (B,T,3,NH,hs) bf16, overwritten (=, as every activation gradient)
 * cuDNN sees q, k, v as (B,NH,T,hs) views of qkv: element (b,h,t,d) of q at
 * b*T*3C + t*3C + h*hs + d, i.e. dims [B,NH,T,hs] with strides [T*3C, hs, 3C, 1]; k and v
 * the same from qkv + C and qkv + 2C. k enters the first matmul as k^T: dims [B,NH,hs,T],
 * strides [T*3C, hs, 1, 3C] (the same memory, the last two dims swapped).
 *
 * The graphs are the ones NVIDIA's cudnn-frontend 1.x builds for its SDPA nodes on cuDNN
 * 9.0 to 9.20 (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h, the
 * "composite" SDPA forward and backward, with softmax.h and diagonal_band_mask.h), written
 * out one descriptor at a time: same operations in the same order, same data types, same
 * shapes and strides of the virtual tensors. The engines match graphs by pattern, so the
 * small choices (integer indices for the mask, bf16 for the tensors that feed a matmul,
 * a multiply by 1 that makes the dO.O sum a non-virtual output) are theirs, kept on purpose.
 * One difference: by-value scalars are (1,1,1,1) here, as in NVIDIA's older samples, since
 * cuDNN 9.19 refuses a pointwise operation whose operands differ in rank (the frontend's
 * scalars are (1) in its own data structures).
 * kc_sdpa_check_offline (test support) runs cuDNN's engine support checks on both graphs
 * for a described device, no GPU needed; tests/cuda/test_sdpa.cu does so for sm90 and sm80.
 *
 * Forward (S virtual float (B,NH,T,T), R virtual float (B,NH,T,1)):
 *   S = q k^T; S *= scale; S = select(row >= col, S, -inf); M = max_row(S);
 *   E = exp(S - M); Z = sum_row(E); stats = M + log(Z); P = E / Z (bf16); out = P v.
 * Backward (softmax_sum and dq_acc live in the caller's workspace, after cuDNN's own):
 *   softmax_sum = sum_row(dout * out) * 1; S = q k^T * scale - stats; mask; P = exp(S);
 *   dv = P^T dout; dP = dout v^T; dS = (dP - softmax_sum) * P * scale;
 *   dk = dS^T q; dq_acc (float) = dS k; dq = identity(dq_acc).
 *
 * What cuDNN 9 requires, and so kc_sdpa_create checks: compute capability 8.0 or newer;
 * cuDNN 9.x but not 9.10.0 or 9.10.1 (NVIDIA's frontend refuses those for known bugs in
 * the bf16 SDPA engines); hs a multiple of 8 (rows of 16 bytes for the tensor-core loads;
 * this also puts k and v at 16-byte offsets 2C and 4C in each qkv row); hs at most 128
 * (cuDNN's limit for the backward on Ampere; Hopper serves 256, we keep one limit
 * everywhere); T at least 2 (the backward refuses s_q = s_kv = 1). T need not be a
 * multiple of 64 from cuDNN 9.0 on. Every pointer passed in must be 16-byte aligned (the
 * tensors are declared so); cudaMalloc's are.
 *
 * Errors: kc_sdpa_create writes its reason into err; forward and backward return -1 with
 * the message in kc_error() (kc.h), like every launcher of kernels/cuda. Every cuDNN status
 * is checked, and a message carries cuDNN's own explanation (cudnnGetLastErrorString).
 *
 * Threads: one cudnnHandle_t per device, created at the first kc_sdpa_create on that
 * device and destroyed with the last kc_sdpa of it. cuDNN handles are not for concurrent
 * use, so calls on kc_sdpa objects of one device must come from one thread at a time (the
 * training thread). cuDNN does not promise bitwise reproducible gradients for this graph
 * (its dq accumulation may use atomics), unlike the CPU backend.
 */
#include "kc_sdpa_int.h"

/* Test support, not in kc.h: see the function below. */
extern "C" int kc_sdpa_check_offline(const char *device_json, int B, int NH, int T, int hs,
	int *n_fwd, int *n_bwd, char *err, size_t errlen);

/* ---- messages (sdpa_msg, sdpa_cudnn_why: kc_sdpa_graph.cu) ---- */

/* "MAJOR.MINOR.PATCH" of a cudnnGetVersion() number (9.19.0 is 91900 from 9.0 on). */
static void sdpa_version_str(char *dst, size_t len, size_t v)
{
	sdpa_msg(dst, len, "%zu.%zu.%zu", v / 10000, (v % 10000) / 100, v % 100);
}

/* ---- one handle per device ---- */

static pthread_mutex_t sdpa_handle_lock = PTHREAD_MUTEX_INITIALIZER;
static cudnnHandle_t sdpa_handles[SDPA_MAX_DEVICES]; /* NULL until first use */
static int sdpa_handle_refs[SDPA_MAX_DEVICES];       /* kc_sdpa objects using it */

/* The current device's handle, created on first use; 0, or -1 with a message. */
static int sdpa_handle_get(int device, cudnnHandle_t *h, char *err, size_t errlen)
{
	int rc = -1;
	char why[SDPA_MSG];

	pthread_mutex_lock(&sdpa_handle_lock);
	if (!sdpa_handles[device]) {
		cudnnStatus_t st = cudnnCreate(&sdpa_handles[device]);
		if (st != CUDNN_STATUS_SUCCESS) {
			sdpa_handles[device] = NULL;
			sdpa_cudnn_why(why, sizeof(why), st);
			sdpa_msg(err, errlen, "cudnnCreate on device %d: %s", device, why);
			goto done;
		}
	}
	sdpa_handle_refs[device]++;
	*h = sdpa_handles[device];
	rc = 0;
done:
	pthread_mutex_unlock(&sdpa_handle_lock);
	return rc;
}

/* Drops one use; the last one destroys the handle. */
static void sdpa_handle_put(int device)
{
	pthread_mutex_lock(&sdpa_handle_lock);
	if (sdpa_handle_refs[device] > 0 && --sdpa_handle_refs[device] == 0) {
		/* nothing to report to: a failing destroy leaves a handle behind, no more */
		(void)cudnnDestroy(sdpa_handles[device]);
		sdpa_handles[device] = NULL;
	}
	pthread_mutex_unlock(&sdpa_handle_lock);
}

/* ---- plans ---- */

/* The global index of the engine behind a finalized engine config, -1 when cuDNN does not
 * say (only reported, never relied on). */
static int64_t sdpa_engine_index(cudnnBackendDescriptor_t cfg)
{
	int64_t n = 0, index = -1;
	cudnnBackendDescriptor_t engine = NULL;

	if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) !=
		CUDNN_STATUS_SUCCESS)
		return -1;
	if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
		    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) != CUDNN_STATUS_SUCCESS ||
		n != 1 ||
		cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64,
			1, &n, &index) != CUDNN_STATUS_SUCCESS ||
		n != 1)
		index = -1;
	(void)cudnnBackendDestroyDescriptor(engine);
	return index;
}

/* g's operations as one finalized operation graph; handle NULL when describing a device
 * instead (cuDNN 9.8 on). */
static cudnnBackendDescriptor_t sdpa_opgraph(sdpa_graph *g, cudnnHandle_t handle)
{
	cudnnBackendDescriptor_t og = G_NEW(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);

	G_SET(g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops);
	/* needed before cuDNN 9.8, accepted (if deprecated) after */
	if (handle)
		G_SET(g, og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
	G_FINALIZE(g, og);
	return og;
}

/* The engine configs that heuristics `mode` offers for the operation graph and that pass
 * cuDNN's support checks (run while it hands them out), at most 64, into cfgs: how many,
 * 0 with the reason in `last` when this mode has none, -1 with g->msg on failure. device:
 * a device description, or NULL for the handle's device. */
static int64_t sdpa_configs(sdpa_graph *g, cudnnBackendDescriptor_t opgraph,
	cudnnBackendHeurMode_t mode, cudnnBackendDescriptor_t device,
	cudnnBackendDescriptor_t *cfgs, char *last, size_t lastlen)
{
	cudnnBackendDescriptor_t heur = G_NEW(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
	const char *name = mode == CUDNN_HEUR_MODE_A ? "A" : "fallback";
	int64_t count = 0, got = 0;
	cudnnStatus_t st;
	char why[SDPA_MSG];

	G_DESC(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, opgraph);
	G_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
	if (device)
		G_DESC(g, heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, device);
	if (g->failed)
		return -1;
	/* a mode with nothing for this graph may refuse to finalize: not an error */
	st = cudnnBackendFinalize(heur);
	if (st != CUDNN_STATUS_SUCCESS) {
		sdpa_cudnn_why(why, sizeof(why), st);
		sdpa_msg(last, lastlen, "heuristics %s: %s", name, why);
		return 0;
	}
	G_CHECK(g, "heuristics result count",
		cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
			CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
	count = count > 64 ? 64 : count;
	count = count > SDPA_MAX_DESC - g->ndesc ? SDPA_MAX_DESC - g->ndesc : count;
	for (int64_t i = 0; i < count; i++)
		cfgs[i] = G_NEW(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
	if (count > 0)
		G_CHECK(g, "heuristics results",
			cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
				CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs));
	if (g->failed)
		return -1;
	if (got == 0)
		sdpa_msg(last, lastlen, "heuristics %s: no engine config passes the checks", name);
	return got;
}

/* Finalizes g's operations into an operation graph, asks the heuristics (mode A, then the
 * fallback list) for engine configs and keeps the first that makes an execution plan.
 * Refusals on the way are expected (not every engine serves every graph); the last one is
 * reported when none succeeds. */
static void sdpa_plan(sdpa_graph *g, cudnnHandle_t handle)
{
	static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A,
		CUDNN_HEUR_MODE_FALLBACK};
	cudnnBackendDescriptor_t opgraph = sdpa_opgraph(g, handle), cfgs[64];
	int64_t got[2] = {0, 0}, n = 0;
	char last[SDPA_MSG], why[SDPA_MSG];

	sdpa_msg(last, sizeof(last), "no engine config");
	for (int m = 0; m < 2 && !g->plan && !g->failed; m++) {
		got[m] = sdpa_configs(g, opgraph, modes[m], NULL, cfgs, last, sizeof(last));
		for (int64_t i = 0; i < got[m] && !g->plan; i++) {
			cudnnBackendDescriptor_t plan = NULL;
			cudnnStatus_t st;

			G_CHECK(g, "execution plan",
				cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
					&plan));
			if (g->failed)
				return;
			/* deprecated, and no longer set by cudnn-frontend (the operation graph
			 * has the handle); set as earlier frontends did, its refusal no failure */
			(void)cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
				CUDNN_TYPE_HANDLE, 1, &handle);
			st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
				CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
			if (st == CUDNN_STATUS_SUCCESS)
				st = cudnnBackendFinalize(plan);
			if (st != CUDNN_STATUS_SUCCESS) {
				sdpa_cudnn_why(why, sizeof(why), st);
				sdpa_msg(last, sizeof(last), "heuristics %s, config %lld: %s",
					m ? "fallback" : "A", (long long)i, why);
				(void)cudnnBackendDestroyDescriptor(plan);
				continue;
			}
			g->plan = plan;
			g->heur = m ? "fallback" : "A";
			g->engine = sdpa_engine_index(cfgs[i]);
		}
	}
	if (g->failed)
		return;
	if (!g->plan) {
		g->failed = 1;
		sdpa_msg(g->msg, sizeof(g->msg),
			"no cuDNN engine builds it (%lld configs from heuristics A, %lld from the "
			"fallback; last: %s)",
			(long long)got[0], (long long)got[1], last);
		return;
	}
	G_CHECK(g, "plan workspace size",
		cudnnBackendGetAttribute(g->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
			CUDNN_TYPE_INT64, 1, &n, &g->workspace));
	if (!g->failed && g->workspace < 0) {
		g->failed = 1;
		sdpa_msg(g->msg, sizeof(g->msg), "plan workspace size %lld",
			(long long)g->workspace);
	}
}

static void sdpa_graph_init(sdpa_graph *g)
{
	memset(g, 0, sizeof(*g));
	g->next_uid = SDPA_UID_VIRTUAL;
	g->engine = -1;
	g->heur = "";
}

/* Destroys the plan, then everything else, newest first. */
static void sdpa_graph_free(sdpa_graph *g)
{
	if (g->plan)
		(void)cudnnBackendDestroyDescriptor(g->plan);
	for (int i = g->ndesc - 1; i >= 0; i--)
		(void)cudnnBackendDestroyDescriptor(g->desc[i]);
	g->plan = NULL;
	g->ndesc = 0;
	g->nops = 0;
}

static size_t sdpa_align(size_t n)
{
	return (n + SDPA_WS_ALIGN - 1) / SDPA_WS_ALIGN * SDPA_WS_ALIGN;
}

/* ---- the interface ---- */

/* What kc_sdpa_create refuses before building anything: the shape, the cuDNN version,
 * the device. 0 with *device and *prop, or -1 with the reason in err. */
static int sdpa_servable(int B, int NH, int T, int hs, size_t version, int *device,
	struct cudaDeviceProp *prop, char *err, size_t errlen)
{
	char ver[32], cver[32];
	const char *bad = NULL;
	/* the shape first: these refusals need no device */
	if (B < 1 || NH < 1 || T < 1 || hs < 1)
		bad = "bad shape";
	else if (hs % 8 != 0 || hs > SDPA_HS_MAX)
		bad = "the head size is not a multiple of 8 up to 128";
	else if (T < 2)
		bad = "T=1 (cuDNN's backward needs T >= 2)";
	if (bad) {
		sdpa_msg(err, errlen, "cuDNN attention B=%d NH=%d T=%d hs=%d: %s", B, NH, T, hs,
			bad);
		return -1;
	}
	sdpa_version_str(ver, sizeof(ver), version);
	sdpa_version_str(cver, sizeof(cver), CUDNN_VERSION);
	if (version < 90000 || version == 91000 || version == 91001) {
		sdpa_msg(err, errlen,
			"cuDNN attention: cuDNN %s at run time (built with %s) is not served: "
			"needs 9.x, not 9.10.0 or 9.10.1",
			ver, cver);
		return -1;
	}
	cudaError_t ce = cudaGetDevice(device);
	if (ce == cudaSuccess)
		ce = cudaGetDeviceProperties(prop, *device);
	if (ce != cudaSuccess) {
		sdpa_msg(err, errlen, "cuDNN attention: no CUDA device: %s",
			cudaGetErrorString(ce));
		return -1;
	}
	if (*device < 0 || *device >= SDPA_MAX_DEVICES) {
		sdpa_msg(err, errlen, "cuDNN attention: device %d beyond the %d served", *device,
			SDPA_MAX_DEVICES);
		return -1;
	}
	if (prop->major < 8) {
		sdpa_msg(err, errlen,
			"cuDNN attention: %s has compute capability %d.%d, cuDNN's fused "
			"attention needs 8.0 or newer",
			prop->name, prop->major, prop->minor);
		return -1;
	}
	return 0;
}

/* The workspace: the forward's plan alone, or the backward's plan followed by
 * softmax_sum (B,NH,T) and the dq accumulator (B,NH,T,hs), both float; and about. */
static void sdpa_workspace(kc_sdpa *s, const struct cudaDeviceProp *prop)
{
	char ver[32], cver[32];
	size_t rows = (size_t)s->B * s->NH * s->T;
	s->off_sum = sdpa_align((size_t)s->bwd.workspace);
	s->off_dqacc = s->off_sum + sdpa_align(rows * sizeof(float));
	size_t bwd_bytes = s->off_dqacc + rows * s->hs * sizeof(float);
	s->ws_bytes = (size_t)s->fwd.workspace > bwd_bytes ? (size_t)s->fwd.workspace : bwd_bytes;
	sdpa_version_str(ver, sizeof(ver), s->version);
	sdpa_version_str(cver, sizeof(cver), CUDNN_VERSION);
	sdpa_msg(s->about, sizeof(s->about),
		"cuDNN %s (built with %s) on %s: forward engine %lld (heuristics %s), backward "
		"engine %lld (heuristics %s), workspace %zu bytes",
		ver, cver, prop->name, (long long)s->fwd.engine, s->fwd.heur,
		(long long)s->bwd.engine, s->bwd.heur, s->ws_bytes);
}

extern "C" int kc_sdpa_create(kc_sdpa **out, int B, int NH, int T, int hs, char *err,
	size_t errlen)
{
	kc_sdpa *s = NULL;
	struct cudaDeviceProp prop;
	char ver[32];
	int device = -1, have_handle = 0;
	size_t version = cudnnGetVersion();

	if (err && errlen)
		err[0] = '\0';
	if (!out) {
		sdpa_msg(err, errlen, "kc_sdpa_create: no place for the result");
		return -1;
	}
	*out = NULL;
	if (sdpa_servable(B, NH, T, hs, version, &device, &prop, err, errlen) < 0)
		return -1;
	s = (kc_sdpa *)calloc(1, sizeof(*s));
	if (!s) {
		sdpa_msg(err, errlen, "cuDNN attention: out of memory");
		return -1;
	}
	s->B = B, s->NH = NH, s->T = T, s->hs = hs;
	s->device = device;
	s->version = version;
	s->scale = 1.0f / sqrtf((float)hs);
	/* the frontend's choice: -inf from cuDNN 9.10 on, the lowest float before */
	s->neg_inf = version >= 91000 ? -INFINITY : -3.402823466e+38f;
	s->one = 1.0f;
	sdpa_graph_init(&s->fwd);
	sdpa_graph_init(&s->bwd);
	if (sdpa_handle_get(device, &s->handle, err, errlen) != 0)
		goto fail;
	have_handle = 1;

	sdpa_build_forward(s, &s->fwd);
	sdpa_plan(&s->fwd, s->handle);
	if (!s->fwd.failed) {
		sdpa_build_backward(s, &s->bwd);
		sdpa_plan(&s->bwd, s->handle);
	}
	if (s->fwd.failed || s->bwd.failed) {
		sdpa_version_str(ver, sizeof(ver), version);
		sdpa_msg(err, errlen,
			"cuDNN %s cannot serve causal attention B=%d NH=%d T=%d hs=%d on %s (%s): %s",
			ver, B, NH, T, hs, prop.name, s->fwd.failed ? "forward" : "backward",
			s->fwd.failed ? s->fwd.msg : s->bwd.msg);
		goto fail;
	}
	sdpa_workspace(s, &prop);
	*out = s;
	return 0;

fail:
	sdpa_graph_free(&s->bwd);
	sdpa_graph_free(&s->fwd);
	if (have_handle)
		sdpa_handle_put(device);
	free(s);
	return -1;
}

/* ---- checking the graphs without a GPU (test support) ---- */

/* Test support, for machines without a GPU: builds the forward and backward graphs of
 * shape (B,NH,T,hs) and asks cuDNN whether any engine would run them on the device that
 * device_json describes (cuDNN's CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, cuDNN 9.8 and
 * later). cuDNN's support checks need libcuda loaded (the driver, or the toolkit's stub):
 * the caller sees to that. 0: both graphs have engines (counts in n_fwd, n_bwd); 1: cannot
 * tell here (the reason in err); -1: a graph is refused (the reason in err). Stops short of
 * building plans, which loads kernels into a device. */
extern "C" int kc_sdpa_check_offline(const char *device_json, int B, int NH, int T, int hs,
	int *n_fwd, int *n_bwd, char *err, size_t errlen)
{
	cudnnBackendDescriptor_t device = NULL, cfgs[64];
	kc_sdpa *s = NULL;
	cudnnStatus_t st;
	char why[SDPA_MSG];
	int64_t nf = -1, nb = -1;
	int rc = 1;

	*n_fwd = *n_bwd = 0;
	if (cudnnGetVersion() < 90800) {
		sdpa_msg(err, errlen, "cuDNN %zu describes no device without one (needs 9.8)",
			cudnnGetVersion());
		return 1;
	}
	st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &device);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendSetAttribute(device, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
			CUDNN_TYPE_CHAR, (int64_t)strlen(device_json), device_json);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendFinalize(device);
	if (st != CUDNN_STATUS_SUCCESS) {
		/* an unknown schema is this cuDNN's business, not a fault of the graphs */
		sdpa_cudnn_why(why, sizeof(why), st);
		sdpa_msg(err, errlen, "cuDNN does not take the device description: %s", why);
		goto done;
	}
	s = (kc_sdpa *)calloc(1, sizeof(*s));
	if (!s) {
		sdpa_msg(err, errlen, "out of memory");
		rc = -1;
		goto done;
	}
	s->B = B, s->NH = NH, s->T = T, s->hs = hs;
	sdpa_graph_init(&s->fwd);
	sdpa_graph_init(&s->bwd);
	sdpa_build_forward(s, &s->fwd);
	nf = sdpa_configs(&s->fwd, sdpa_opgraph(&s->fwd, NULL), CUDNN_HEUR_MODE_A, device, cfgs,
		why, sizeof(why));
	if (nf > 0) {
		sdpa_build_backward(s, &s->bwd);
		nb = sdpa_configs(&s->bwd, sdpa_opgraph(&s->bwd, NULL), CUDNN_HEUR_MODE_A,
			device, cfgs, why, sizeof(why));
	}
	*n_fwd = nf > 0 ? (int)nf : 0, *n_bwd = nb > 0 ? (int)nb : 0;
	rc = nf > 0 && nb > 0 ? 0 : -1;
	if (rc != 0)
		sdpa_msg(err, errlen, "%s graph: %s", nf <= 0 ? "forward" : "backward",
			nf < 0 ? s->fwd.msg : nf > 0 && nb < 0 ? s->bwd.msg : why);
done:
	if (s) {
		sdpa_graph_free(&s->bwd);
		sdpa_graph_free(&s->fwd);
		free(s);
	}
	if (device)
		(void)cudnnBackendDestroyDescriptor(device);
	return rc;
}

extern "C" size_t kc_sdpa_workspace_bytes(const kc_sdpa *s)
{
	return s ? s->ws_bytes : 0;
}

/* "cuDNN 9.19.0 (built with 9.19.0) on <GPU>: forward engine <n> (heuristics A), backward
 * engine <n> (heuristics A), workspace <n> bytes" */
extern "C" const char *kc_sdpa_describe(const kc_sdpa *s)
{
	return s ? s->about : "no kc_sdpa";
}

static int sdpa_aligned(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/* Runs one plan with the given tensors; 0, or -1 with the message in kc_error(). */
static int sdpa_execute(kc_sdpa *s, const sdpa_graph *g, cudaStream_t st, const char *which,
	int n, const int64_t *uids, void *const *ptrs, void *workspace)
{
	cudnnBackendDescriptor_t pack = NULL;
	cudnnStatus_t cs = CUDNN_STATUS_SUCCESS;
	cudaError_t ce;
	const char *what = "";
	char why[SDPA_MSG];
	int device = -1;

	for (int i = 0; i < n; i++)
		if (!ptrs[i] || !sdpa_aligned(ptrs[i]))
			return kc_seterr("cuDNN attention %s: tensor %lld is %s", which,
				(long long)uids[i], ptrs[i] ? "not 16-byte aligned" : "NULL");
	if (!workspace || !sdpa_aligned(workspace))
		return kc_seterr("cuDNN attention %s: workspace is %s", which,
			workspace ? "not 16-byte aligned" : "NULL");
	ce = cudaGetDevice(&device);
	if (ce != cudaSuccess)
		return kc_seterr("cuDNN attention %s: cudaGetDevice: %s", which,
			cudaGetErrorString(ce));
	if (device != s->device)
		return kc_seterr("cuDNN attention %s: current device %d, plans built for device %d",
			which, device, s->device);

	/* each step runs only while the ones before succeeded; `what` names the failed one */
#define SDPA_TRY(name, call)                                                                    \
	do {                                                                                    \
		if (cs == CUDNN_STATUS_SUCCESS) {                                               \
			what = (name);                                                          \
			cs = (call);                                                            \
		}                                                                               \
	} while (0)
	SDPA_TRY("cudnnSetStream", cudnnSetStream(s->handle, st));
	SDPA_TRY("variant pack", cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
		&pack));
	SDPA_TRY("variant pack ids", cudnnBackendSetAttribute(pack,
		CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids));
	SDPA_TRY("variant pack pointers", cudnnBackendSetAttribute(pack,
		CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs));
	SDPA_TRY("variant pack workspace", cudnnBackendSetAttribute(pack,
		CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
	SDPA_TRY("variant pack finalize", cudnnBackendFinalize(pack));
	SDPA_TRY("cudnnBackendExecute", cudnnBackendExecute(s->handle, g->plan, pack));
#undef SDPA_TRY
	if (cs != CUDNN_STATUS_SUCCESS) {
		sdpa_cudnn_why(why, sizeof(why), cs);
		kc_seterr("cuDNN attention %s: %s: %s", which, what, why);
	}
	if (pack)
		(void)cudnnBackendDestroyDescriptor(pack);
	return cs == CUDNN_STATUS_SUCCESS ? 0 : -1;
}

/* out (B,T,C) bf16 = causal softmax(q k^T / sqrt(hs)) v; stats (B,NH,T) float = the
 * log-sum-exp of each row of scaled scores; qkv (B,T,3C) bf16 */
extern "C" int kc_sdpa_forward(kc_sdpa *s, cudaStream_t st, const void *qkv, void *out,
	float *stats, void *workspace)
{
	size_t C = (size_t)s->NH * s->hs;
	const char *q = (const char *)qkv; /* bf16: 2 bytes an element */
	int64_t uids[7] = {SDPA_UID_Q, SDPA_UID_K, SDPA_UID_V, SDPA_UID_O, SDPA_UID_STATS,
		SDPA_UID_SCALE, SDPA_UID_NEGINF};
	void *ptrs[7];

	if (!qkv)
		return kc_seterr("cuDNN attention forward: qkv is NULL");
	ptrs[0] = (void *)q;
	ptrs[1] = (void *)(q + 2 * C);
	ptrs[2] = (void *)(q + 4 * C);
	ptrs[3] = out;
	ptrs[4] = stats;
	ptrs[5] = &s->scale;
	ptrs[6] = &s->neg_inf;
	return sdpa_execute(s, &s->fwd, st, "forward", 7, uids, ptrs, workspace);
}

/* dqkv (B,T,3C) bf16 = the gradient of the forward's out through dout (B,T,C) bf16, from
 * the forward's qkv, out and stats; overwritten, not accumulated */
extern "C" int kc_sdpa_backward(kc_sdpa *s, cudaStream_t st, const void *qkv, const void *out,
	const void *dout, const float *stats, void *dqkv, void *workspace)
{
	size_t C = (size_t)s->NH * s->hs;
	const char *q = (const char *)qkv, *dq = (const char *)dqkv; /* bf16 */
	char *ws = (char *)workspace;
	int64_t uids[14] = {SDPA_UID_Q, SDPA_UID_K, SDPA_UID_V, SDPA_UID_O, SDPA_UID_DO,
		SDPA_UID_STATS, SDPA_UID_SCALE, SDPA_UID_NEGINF, SDPA_UID_ONE, SDPA_UID_DQ,
		SDPA_UID_DK, SDPA_UID_DV, SDPA_UID_SUM, SDPA_UID_DQACC};
	void *ptrs[14];

	if (!qkv || !dqkv || !workspace)
		return kc_seterr("cuDNN attention backward: %s is NULL",
			!qkv ? "qkv" : !dqkv ? "dqkv" : "workspace");
	ptrs[0] = (void *)q;
	ptrs[1] = (void *)(q + 2 * C);
	ptrs[2] = (void *)(q + 4 * C);
	ptrs[3] = (void *)out;
	ptrs[4] = (void *)dout;
	ptrs[5] = (void *)stats;
	ptrs[6] = &s->scale;
	ptrs[7] = &s->neg_inf;
	ptrs[8] = &s->one;
	ptrs[9] = (void *)dq;
	ptrs[10] = (void *)(dq + 2 * C);
	ptrs[11] = (void *)(dq + 4 * C);
	ptrs[12] = ws + s->off_sum;
	ptrs[13] = ws + s->off_dqacc;
	/* before cuDNN 9.6 the frontend zeroed the accumulator; later cuDNN does it itself */
	if (s->version < 90600) {
		cudaError_t ce = cudaMemsetAsync(ptrs[13], 0,
			(size_t)s->B * s->NH * s->T * s->hs * sizeof(float), st);
		if (ce != cudaSuccess)
			return kc_seterr("cuDNN attention backward: zeroing the dq accumulator: %s",
				cudaGetErrorString(ce));
	}
	return sdpa_execute(s, &s->bwd, st, "backward", 14, uids, ptrs, workspace);
}

extern "C" void kc_sdpa_destroy(kc_sdpa *s)
{
	if (!s)
		return;
	sdpa_graph_free(&s->bwd);
	sdpa_graph_free(&s->fwd);
	sdpa_handle_put(s->device);
	free(s);
}

