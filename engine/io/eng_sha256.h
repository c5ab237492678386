/* eng_sha256.h - SHA-256 (FIPS 180-4), for the checksums a checkpoint records of its files.
 * Streaming: init, update any number of times, final. Not a general crypto library. */
#ifndef ENG_SHA256_H
#define ENG_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "eng_err.h"

typedef struct eng_sha256 {
	uint32_t h[8];      /* the hash state */
	uint64_t bytes;     /* message length so far */
	uint8_t buf[64];    /* a partial block */
	size_t used;        /* bytes in buf */
} eng_sha256;

void eng_sha256_init(eng_sha256 *s);
void eng_sha256_update(eng_sha256 *s, const void *data, size_t n);
/* Writes the digest as 64 lower-case hex digits and a NUL into hex[65]. */
void eng_sha256_final(eng_sha256 *s, char hex[65]);

/* Hashes a whole regular file into hex[65] (eng_fs_open_read: a FIFO or a device is
 * refused); -1 with a message naming it when it cannot be read. */
int eng_sha256_file(const char *path, char hex[65], eng_err *err);
/* Hashes what is left to read of fd (path names it in messages). */
int eng_sha256_fd(int fd, const char *path, char hex[65], eng_err *err);

#endif
