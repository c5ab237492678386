/* t_cuda.h - what the CUDA test suites share. */
#ifndef T_CUDA_H
#define T_CUDA_H

#include <stddef.h>

/* 1 when a GPU is usable; else 0 and why. Asks eng_cuda_probe in a child process: the
 * runner forks every test, and a process that has touched CUDA cannot hand it on to a
 * forked child, so the runner itself never does. */
int t_cuda_usable(char *why, size_t n);

#endif
