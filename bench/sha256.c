/* sha256.c - bench-sha256: how fast checkpoints are hashed (engine/io/eng_sha256.h, over
 * OpenSSL's libcrypto), in memory and from a file.
 *
 *   bench-sha256 [MB] [FILE]
 *
 * Hashes MB megabytes (default 400, 10^6 bytes each) of a fixed pattern 3 times from
 * memory (eng_sha256_buf) and prints MB/s each time; with FILE, writes the same bytes
 * there and hashes them 3 times as a save's verify does (eng_sha256_file: reads of 64 KiB,
 * from the page cache after the first). Ends with one JSON line of the best figures.
 * A benchmark for `make bench`, not a test: nothing here passes or fails on a number.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "eng_sha256.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Writes n bytes of buf to a new file at path. 0, or -1 with a message on stderr. */
static int write_file(const char *path, const unsigned char *buf, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	size_t done = 0;
	while (fd >= 0 && done < n) {
		ssize_t w = write(fd, buf + done, n - done);
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	if (fd < 0 || done < n || close(fd) < 0) {
		perror(path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	double mb = argc > 1 ? atof(argv[1]) : 400, best_mem = 0, best_file = 0;
	size_t n = (size_t)(mb * 1e6);
	unsigned char *buf = malloc(n ? n : 1);
	char hex[ENG_SHA256_HEX];
	eng_err err = {0};

	if (!buf || n == 0) {
		fprintf(stderr, "bench-sha256: cannot have %g MB\n", mb);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)((i * 2654435761u) >> 24);
	for (int r = 0; r < 3; r++) {
		double t0 = now_s();
		if (eng_sha256_buf(buf, n, hex, &err) < 0) {
			fprintf(stderr, "bench-sha256: %s\n", err.msg);
			return 1;
		}
		double rate = n / 1e6 / (now_s() - t0);
		best_mem = rate > best_mem ? rate : best_mem;
		printf("memory: %.0f MB in %.3f s = %.0f MB/s (%.16s...)\n", n / 1e6,
			n / 1e6 / rate, rate, hex);
	}
	if (argc > 2 && write_file(argv[2], buf, n) == 0) {
		for (int r = 0; r < 3; r++) {
			double t0 = now_s();
			if (eng_sha256_file(argv[2], hex, &err) < 0) {
				fprintf(stderr, "bench-sha256: %s\n", err.msg);
				return 1;
			}
			double rate = n / 1e6 / (now_s() - t0);
			best_file = rate > best_file ? rate : best_file;
			printf("file: %.0f MB = %.0f MB/s\n", n / 1e6, rate);
		}
		unlink(argv[2]);
	}
	printf("{\"bench\":\"sha256\",\"mb\":%.0f,\"memory_mb_s\":%.0f,\"file_mb_s\":%.0f}\n",
		n / 1e6, best_mem, best_file);
	free(buf);
	return 0;
}
