/* eng_sha256.c - SHA-256 through libcrypto's EVP interface (see eng_sha256.h). */
#include "eng_sha256.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "eng_fs.h"

/* Reads a file in pieces this big (one per thread: the checkpoint writer hashes while the
 * trainer may verify). */
#define SHA_CHUNK (1 << 16)

/* Records why libcrypto failed at `what` (its first queued error, or none given) and
 * clears its queue. Returns -1. */
static int crypto_fail(eng_err *err, const char *what)
{
	char why[256] = "no reason given";
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, why, sizeof why);
	ERR_clear_error();
	return eng_errf(err, "SHA-256: %s failed in libcrypto: %s", what, why);
}

/* A new context, begun on SHA-256; NULL with a message. */
static EVP_MD_CTX *sha_begin(eng_err *err)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx) {
		crypto_fail(err, "a digest context");
		return NULL;
	}
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		crypto_fail(err, "starting the digest");
		EVP_MD_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/* Frees ctx, after ending its digest into hex[65] when ok (the caller fed it all; else it
 * failed, its message given). 0, or -1. */
static int sha_end(EVP_MD_CTX *ctx, int ok, char hex[ENG_SHA256_HEX], eng_err *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	int rc = 0;
	if (!ok)
		rc = -1;
	else if (EVP_DigestFinal_ex(ctx, md, &len) != 1 || len != 32)
		rc = crypto_fail(err, "ending the digest");
	else
		for (unsigned i = 0; i < len; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
	EVP_MD_CTX_free(ctx);
	return rc;
}

int eng_sha256_buf(const void *data, size_t n, char hex[ENG_SHA256_HEX], eng_err *err)
{
	EVP_MD_CTX *ctx = sha_begin(err);
	if (!ctx)
		return -1;
	int ok = EVP_DigestUpdate(ctx, data, n) == 1;
	if (!ok)
		crypto_fail(err, "hashing");
	return sha_end(ctx, ok, hex, err);
}

int eng_sha256_fd(int fd, const char *path, char hex[ENG_SHA256_HEX], eng_err *err)
{
	static _Thread_local unsigned char buf[SHA_CHUNK];
	EVP_MD_CTX *ctx = sha_begin(err);
	int ok = 0;
	if (!ctx)
		return -1;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			eng_errf(err, "cannot read '%s': %s", path, strerror(errno));
			break;
		}
		if (n == 0) {
			ok = 1;
			break;
		}
		if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
			crypto_fail(err, "hashing");
			break;
		}
	}
	return sha_end(ctx, ok, hex, err);
}

int eng_sha256_file(const char *path, char hex[ENG_SHA256_HEX], eng_err *err)
{
	int fd = eng_fs_open_read(path, NULL, NULL, err);
	if (fd < 0)
		return -1;
	int rc = eng_sha256_fd(fd, path, hex, err);
	close(fd);
	return rc;
}
