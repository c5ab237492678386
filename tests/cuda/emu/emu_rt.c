/* emu_rt.c - the CUDA runtime calls of remat, answered on the CPU: the CUDA emulation's
 * stand-in for libcudart (tests/cuda/emu/run-on-cpu.sh links it in its place).
 *
 * The device is this process's memory; "device" buffers come from cudaMalloc, 256-byte
 * aligned as CUDA's, and are registered so that every copy, set and free is checked as a GPU
 * would check it, and more strictly:
 * - cudaMemcpy's kind must say where each side lives: a HostToDevice copy whose destination
 *   is not inside a live device buffer, or a DeviceToHost copy whose source is not, is
 *   cudaErrorInvalidValue (on a GPU it would fault or copy garbage);
 * - a copy or set that runs past the end of its device buffer is cudaErrorInvalidValue;
 * - cudaFree of a pointer that is not the start of a live buffer is cudaErrorInvalidValue.
 * Streams are synchronous: every copy, set and kernel (kc_emu.h) is done when its call
 * returns, which is one of the orders a GPU may choose; races between streams do not show.
 * Events record the host's clock. cudaMemGetInfo says the live buffers' bytes are in use of
 * REMAT_EMU_DEVICE_MIB (default 16384), so the engine's accounting meets an exact figure.
 * The first error is sticky for cudaGetLastError, as the runtime's last error is.
 * The device is named "CPU emulation (HIP-CPU)", compute capability 9.0.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EMU_ALIGN 256
#define EMU_CC_MAJOR 9
#define EMU_CC_MINOR 0
#define EMU_VERSION 13000 /* answered for the runtime and the driver: CUDA 13.0 */

typedef struct emu_buf {
	char *p;
	size_t bytes;
} emu_buf;

static pthread_mutex_t emu_mu = PTHREAD_MUTEX_INITIALIZER;
static emu_buf *bufs; /* the live device buffers, unordered */
static size_t nbufs, capbufs;
static size_t used;   /* their bytes */
static __thread cudaError_t last_error;

struct CUstream_st {
	unsigned flags;
};
struct CUevent_st {
	double ms; /* when recorded, CLOCK_MONOTONIC */
	unsigned flags;
};

static cudaError_t fail(cudaError_t e)
{
	if (last_error == cudaSuccess)
		last_error = e;
	return e;
}

void kc_emu_launch_failed(cudaError_t e, const char *what)
{
	fprintf(stderr, "cuda emulation: launch of %s: %s\n", what, cudaGetErrorString(e));
	fail(e);
}

static pthread_once_t total_once = PTHREAD_ONCE_INIT;
static size_t total_bytes; /* the device's size, read once */

static void total_read(void)
{
	const char *s = getenv("REMAT_EMU_DEVICE_MIB");
	long long mib = s ? atoll(s) : 0;
	total_bytes = (size_t)(mib > 0 ? mib : 16384) << 20;
}

static size_t device_total(void)
{
	pthread_once(&total_once, total_read);
	return total_bytes;
}

/* the live buffer holding [p, p + n), or NULL; emu_mu held */
static emu_buf *buf_holding(const void *p, size_t n)
{
	const char *c = p;
	for (size_t i = 0; i < nbufs; i++)
		if (c >= bufs[i].p && c <= bufs[i].p + bufs[i].bytes &&
			n <= (size_t)(bufs[i].p + bufs[i].bytes - c))
			return &bufs[i];
	return NULL;
}

static int on_device(const void *p, size_t n)
{
	pthread_mutex_lock(&emu_mu);
	int r = buf_holding(p, n) != NULL;
	pthread_mutex_unlock(&emu_mu);
	return r;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	cudaError_t rc = cudaSuccess;
	char *b = NULL;
	*p = NULL;
	pthread_mutex_lock(&emu_mu);
	size_t round = (bytes + EMU_ALIGN - 1) / EMU_ALIGN * EMU_ALIGN;
	if (used + round > device_total() || round < bytes) {
		rc = cudaErrorMemoryAllocation;
		goto out;
	}
	if (nbufs == capbufs) {
		size_t cap = capbufs ? 2 * capbufs : 64;
		emu_buf *nb = realloc(bufs, cap * sizeof *nb);
		if (!nb) {
			rc = cudaErrorMemoryAllocation;
			goto out;
		}
		bufs = nb;
		capbufs = cap;
	}
	b = aligned_alloc(EMU_ALIGN, round ? round : EMU_ALIGN);
	if (!b) {
		rc = cudaErrorMemoryAllocation;
		goto out;
	}
	bufs[nbufs++] = (emu_buf){b, bytes};
	used += round;
	*p = b;
out:
	pthread_mutex_unlock(&emu_mu);
	return rc == cudaSuccess ? rc : fail(rc);
}

cudaError_t cudaFree(void *p)
{
	cudaError_t rc = cudaErrorInvalidValue;
	if (!p)
		return cudaSuccess;
	pthread_mutex_lock(&emu_mu);
	for (size_t i = 0; i < nbufs; i++)
		if (bufs[i].p == p) {
			used -= (bufs[i].bytes + EMU_ALIGN - 1) / EMU_ALIGN * EMU_ALIGN;
			bufs[i] = bufs[--nbufs];
			free(p);
			rc = cudaSuccess;
			break;
		}
	pthread_mutex_unlock(&emu_mu);
	return rc == cudaSuccess ? rc : fail(rc);
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
	(void)flags;
	*p = aligned_alloc(EMU_ALIGN, (bytes + EMU_ALIGN - 1) / EMU_ALIGN * EMU_ALIGN + EMU_ALIGN);
	return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *fr, size_t *total)
{
	pthread_mutex_lock(&emu_mu);
	*total = device_total();
	*fr = *total - used;
	pthread_mutex_unlock(&emu_mu);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	int dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
	int src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
	if (kind != cudaMemcpyHostToHost && kind != cudaMemcpyDefault &&
		((dst_dev && !on_device(dst, n)) || (src_dev && !on_device(src, n)) ||
			(!dst_dev && on_device(dst, 1)) || (!src_dev && on_device(src, 1)))) {
		fprintf(stderr, "cuda emulation: cudaMemcpy kind %d of %zu bytes, %p <- %p: a side "
				"is not where the kind says\n", (int)kind, n, dst, src);
		return fail(cudaErrorInvalidValue);
	}
	if (n)
		memmove(dst, src, n);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
	cudaStream_t st)
{
	(void)st;
	return cudaMemcpy(dst, src, n, kind);
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
	if (!on_device(p, n)) {
		fprintf(stderr, "cuda emulation: cudaMemset of %zu bytes at %p: not inside a "
				"device buffer\n", n, p);
		return fail(cudaErrorInvalidValue);
	}
	memset(p, v, n);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st)
{
	(void)st;
	return cudaMemset(p, v, n);
}

/* ---- streams and events ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned int flags)
{
	*st = calloc(1, sizeof **st);
	if (!*st)
		return fail(cudaErrorMemoryAllocation);
	(*st)->flags = flags;
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *st)
{
	return cudaStreamCreateWithFlags(st, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t st)
{
	free(st);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
	(void)st;
	return last_error;
}

cudaError_t cudaDeviceSynchronize(void)
{
	return last_error;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
	*ev = calloc(1, sizeof **ev);
	if (!*ev)
		return fail(cudaErrorMemoryAllocation);
	(*ev)->flags = flags;
	(*ev)->ms = -1;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
	return cudaEventCreateWithFlags(ev, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
	free(ev);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
	struct timespec ts;
	(void)st;
	if (!ev)
		return fail(cudaErrorInvalidResourceHandle);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ev->ms = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	if (!a || !b || (a->flags | b->flags) & cudaEventDisableTiming)
		return fail(cudaErrorInvalidResourceHandle);
	if (a->ms < 0 || b->ms < 0)
		return fail(cudaErrorInvalidResourceHandle);
	*ms = (float)(b->ms - a->ms);
	return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned int flags)
{
	(void)st;
	(void)flags;
	return ev ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

/* ---- the device ---- */

cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	return d == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int *d)
{
	*d = 0;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
	if (d != 0)
		return fail(cudaErrorInvalidDevice);
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "CPU emulation (HIP-CPU)");
	memcpy(p->uuid.bytes, "remat-cuda-emu\0", sizeof p->uuid.bytes);
	p->totalGlobalMem = device_total();
	p->major = EMU_CC_MAJOR;
	p->minor = EMU_CC_MINOR;
	p->warpSize = 32;
	p->maxThreadsPerBlock = 1024;
	p->sharedMemPerBlock = 48 * 1024;
	p->multiProcessorCount = 1;
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = EMU_VERSION;
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
	*v = EMU_VERSION;
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;
	last_error = cudaSuccess;
	return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInvalidValue:
		return "invalid argument";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorInvalidConfiguration:
		return "invalid configuration argument";
	case cudaErrorInvalidDevice:
		return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle:
		return "invalid resource handle";
	default:
		return "unrecognized error code";
	}
}
