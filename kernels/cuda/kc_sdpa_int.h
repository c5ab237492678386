/* kc_sdpa_int.h - what the two halves of the cuDNN attention share: the graph under
 * construction and its plan, the kc_sdpa object, and the graph builders. kc_sdpa.cu has
 * the handles, plans and the kc.h interface; kc_sdpa_graph.cu writes the two operation
 * graphs out, descriptor by descriptor. Not a public header. */
#ifndef KC_SDPA_INT_H
#define KC_SDPA_INT_H

#include <cuda_runtime.h>
#include <cudnn.h>

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc.h"


#define SDPA_HS_MAX      128  /* largest head size served (cuDNN 9's bf16 backward on sm80) */
#define SDPA_MAX_DEVICES 64   /* devices with a cached cuDNN handle */
#define SDPA_MAX_DESC    384  /* backend descriptors per graph, engine configs included */
#define SDPA_MAX_OPS     32   /* operations per graph (forward 14, backward 22) */
#define SDPA_MSG         512  /* longest error message kept */
#define SDPA_WS_ALIGN    256  /* alignment of the parts of the workspace */

/* Unique ids of the tensors the caller's memory backs; virtual ones count up from
 * SDPA_UID_VIRTUAL. */
enum {
	SDPA_UID_Q = 1,
	SDPA_UID_K,      /* k^T in the forward and the backward */
	SDPA_UID_V,      /* v in the forward, v^T in the backward */
	SDPA_UID_O,
	SDPA_UID_STATS,
	SDPA_UID_SCALE,  /* by value: 1/sqrt(hs) */
	SDPA_UID_NEGINF, /* by value: what masked scores become */
	SDPA_UID_ONE,    /* by value: 1.0f */
	SDPA_UID_DO,
	SDPA_UID_DQ,
	SDPA_UID_DK,
	SDPA_UID_DV,
	SDPA_UID_SUM,    /* workspace: softmax_sum (B,NH,T,1) float */
	SDPA_UID_DQACC,  /* workspace: dq accumulator (B,NH,T,hs) float */
	SDPA_UID_VIRTUAL = 100
};

/* One operation graph under construction, then its plan. Every descriptor made for it is
 * kept until kc_sdpa_destroy, in creation order (the plan may refer to any of them). The
 * first failing call is recorded and every later call does nothing, so a builder reads as
 * a straight list and is checked once at the end. */
typedef struct sdpa_graph {
	cudnnBackendDescriptor_t desc[SDPA_MAX_DESC]; /* everything created, destroyed in reverse */
	int ndesc;
	cudnnBackendDescriptor_t ops[SDPA_MAX_OPS]; /* the operations, in graph order */
	int nops;
	int64_t next_uid;                 /* next virtual tensor's id */
	cudnnBackendDescriptor_t plan;    /* the execution plan, NULL until built */
	int64_t workspace;                /* bytes cuDNN's plan needs */
	int64_t engine;                   /* global index of the engine chosen, -1 if unknown */
	const char *heur;                 /* "A" or "fallback": the heuristics that gave it */
	int failed;                       /* a call failed: msg says which */
	char msg[SDPA_MSG];               /* the first failure */
} sdpa_graph;

struct kc_sdpa {
	int B, NH, T, hs;        /* the shape served */
	int device;              /* the CUDA device the plans were built for */
	size_t version;          /* cudnnGetVersion() when created */
	cudnnHandle_t handle;    /* the device's shared handle (sdpa_handle_get) */
	float scale;             /* 1/sqrt(hs): by-value tensor, read by cudnnBackendExecute */
	float neg_inf;           /* the value of masked scores */
	float one;               /* 1.0f for the backward's softmax_sum */
	size_t off_sum;          /* workspace offset of softmax_sum, after cuDNN's part */
	size_t off_dqacc;        /* workspace offset of the dq accumulator */
	size_t ws_bytes;         /* kc_sdpa_workspace_bytes */
	sdpa_graph fwd, bwd;     /* the two graphs and their plans */
	char about[SDPA_MSG];    /* kc_sdpa_describe */
};


/* ---- messages (kc_sdpa.cu) ---- */

void sdpa_msg(char *dst, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* cuDNN's status name and its own last message, which says what a finalize refused. */
void sdpa_cudnn_why(char *dst, size_t len, cudnnStatus_t st);

/* ---- graph building (kc_sdpa_graph.cu): each helper does nothing once g->failed ---- */

void g_fail(sdpa_graph *g, const char *what, cudnnStatus_t st);
/* Every cuDNN call of the builders goes through here. */
#define G_CHECK(g, what, call)                                                                  \
	do {                                                                                    \
		if (!(g)->failed) {                                                             \
			cudnnStatus_t g_st_ = (call);                                           \
			if (g_st_ != CUDNN_STATUS_SUCCESS)                                      \
				g_fail((g), (what), g_st_);                                     \
		}                                                                               \
	} while (0)

cudnnBackendDescriptor_t g_new(sdpa_graph *g, cudnnBackendDescriptorType_t type,
	const char *what);
void g_set(sdpa_graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
	cudnnBackendAttributeType_t type, int64_t count, const void *values, const char *what);
void g_finalize(sdpa_graph *g, cudnnBackendDescriptor_t d, const char *what);

/* The same, naming what failed by the attribute or descriptor type itself; G_DESC sets
 * one descriptor-valued attribute. */
#define G_NEW(g, type) g_new((g), (type), #type)
#define G_SET(g, d, name, type, count, vals)                                                   \
	g_set((g), (d), (name), (type), (count), (vals), #name)
#define G_DESC(g, d, name, val) G_SET(g, d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &(val))
#define G_FINALIZE(g, d)        g_finalize((g), (d), "finalize " #d)


/* The forward and backward graphs of s's shape, into g (see kc_sdpa.cu's comment). */
void sdpa_build_forward(const kc_sdpa *s, sdpa_graph *g);
void sdpa_build_backward(const kc_sdpa *s, sdpa_graph *g);

#endif
