/* eng_sha256.h - SHA-256 (FIPS 180-4) as 64 hex digits: the checksums a checkpoint records
 * of its files, PEFT's hash of its config. Computed by OpenSSL's libcrypto (EVP_sha256),
 * which uses the processor's SHA extensions where it has them.
 *
 * Not here: any other digest, keys, or a streaming interface (no caller needs one). Only
 * the worker and the tests link libcrypto; rematd and rematctl never do (tests/link.sh).
 * Every failure, libcrypto's included, is returned with a message, never an abort.
 */
#ifndef ENG_SHA256_H
#define ENG_SHA256_H

#include <stddef.h>

#include "eng_err.h"

#define ENG_SHA256_HEX 65 /* 64 lower-case hex digits and a NUL */

/* Hashes n bytes at data into hex[65]. 0, or -1 with a message when libcrypto fails (out
 * of memory). */
int eng_sha256_buf(const void *data, size_t n, char hex[ENG_SHA256_HEX], eng_err *err);

/* Hashes a whole regular file into hex[65] (eng_fs_open_read: a FIFO or a device is
 * refused); -1 with a message naming it when it cannot be read. */
int eng_sha256_file(const char *path, char hex[ENG_SHA256_HEX], eng_err *err);

/* Hashes what is left to read of fd (path names it in messages). */
int eng_sha256_fd(int fd, const char *path, char hex[ENG_SHA256_HEX], eng_err *err);

#endif
