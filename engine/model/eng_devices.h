/* eng_devices.h - which backends this process can run, in the protocol's terms
 * (daemon-info's "backends" and "gpus", docs/protocol.md). Shared by rematd and
 * remat-train's control thread, in builds with and without CUDA.
 */
#ifndef ENG_DEVICES_H
#define ENG_DEVICES_H

#include <jansson.h>

/* Sets "backends" (["cpu"], plus "cuda" when this build has the CUDA backend and a GPU is
 * usable) and "gpus" ([{"name", "memory_bytes"}], empty without one) on obj. The first call
 * asks the CUDA runtime (eng_cuda_probe); later ones are answered from its cache. 0, or -1
 * when out of memory. */
int eng_devices_json(json_t *obj);

#endif
