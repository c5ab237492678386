/* cuda_bf16.h - the CUDA emulation's stand-in for the kernels of kernels/cuda/:
 * everything is in ../kc_emu.h */
#include "../kc_emu.h"
