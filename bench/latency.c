/* latency.c - bench-latency: request latency of a remat server while it trains.
 *
 *   bench-latency SOCKET JOB [N] [COMMAND]
 *
 * Connects to rematd (or a worker's --control socket), sends N requests (default 1000) of
 * COMMAND (default mem-stats) for JOB (- : a command without arguments, daemon-info) one
 * at a time, each timed from the write to the reply's last byte, and prints the first
 * request's time, p50, p90, p99 and max in milliseconds, and one JSON line.
 * A benchmark for `make bench`, not a test: nothing here passes or fails on a number.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

typedef struct reader {
	int fd;
	proto_framer fr;
	int got;      /* a reply (not an event, not the greeting) was seen */
} reader;

static int on_line(const char *line, size_t len, void *ud)
{
	reader *r = ud;
	(void)len;
	if (strstr(line, "\"return\"") || strstr(line, "\"error\"")) {
		if (strstr(line, "\"error\""))
			fprintf(stderr, "bench-latency: error reply: %.200s\n", line);
		r->got = 1;
		return 1;
	}
	return 0;
}

/* Reads until a reply arrives; -1 on EOF, error or 10 s without one. */
static int wait_reply(reader *r)
{
	char buf[65536];
	r->got = 0;
	while (!r->got) {
		struct pollfd p = {.fd = r->fd, .events = POLLIN};
		if (poll(&p, 1, 10000) <= 0)
			return -1;
		ssize_t n = read(r->fd, buf, sizeof buf);
		if (n <= 0)
			return -1;
		if (proto_framer_feed(&r->fr, buf, (size_t)n, on_line, r) < 0)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bench-latency SOCKET JOB [N] [COMMAND]\n");
		return 2;
	}
	int n = argc > 3 ? atoi(argv[3]) : 1000;
	const char *cmd = argc > 4 ? argv[4] : "mem-stats";
	if (n < 1)
		n = 1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(argv[1]) >= sizeof sa.sun_path) {
		fprintf(stderr, "bench-latency: socket path too long\n");
		return 2;
	}
	strcpy(sa.sun_path, argv[1]);
	reader r = {.fd = socket(AF_UNIX, SOCK_STREAM, 0)};
	if (r.fd < 0 || connect(r.fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		fprintf(stderr, "bench-latency: cannot connect to '%s': %s\n", argv[1],
			strerror(errno));
		return 1;
	}
	proto_framer_init(&r.fr);
	double *ms = calloc((size_t)n, sizeof *ms);
	char req[512];
	int no_job = strcmp(argv[2], "-") == 0;
	for (int i = 0; i < n; i++) {
		int len = no_job ? snprintf(req, sizeof req, "{\"execute\":\"%s\",\"id\":%d}\n", cmd, i)
				 : snprintf(req, sizeof req, "{\"execute\":\"%s\",\"arguments\":"
							     "{\"job\":\"%s\"},\"id\":%d}\n", cmd, argv[2], i);
		double t0 = now_ms();
		if (write(r.fd, req, (size_t)len) != len || wait_reply(&r) < 0) {
			fprintf(stderr, "bench-latency: request %d failed\n", i);
			return 1;
		}
		ms[i] = now_ms() - t0;
	}
	double first = ms[0];
	qsort(ms, (size_t)n, sizeof *ms, cmp);
	double p50 = ms[n / 2], p90 = ms[n * 9 / 10], p99 = ms[n * 99 / 100], max = ms[n - 1];
	printf("%s latency over %d requests: first %.3f ms, p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, "
	       "max %.3f ms\n", cmd, n, first, p50, p90, p99, max);
	printf("{\"command\":\"%s\",\"n\":%d,\"first_ms\":%.4f,\"p50_ms\":%.4f,\"p90_ms\":%.4f,"
	       "\"p99_ms\":%.4f,\"max_ms\":%.4f}\n", cmd, n, first, p50, p90, p99, max);
	proto_framer_free(&r.fr);
	free(ms);
	close(r.fd);
	return 0;
}
