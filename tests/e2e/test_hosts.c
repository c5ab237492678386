/* test_hosts.c - data parallel across two hosts made of network namespaces, Open MPI over TCP
 * between them (issue 33's cluster, on one machine):
 *  - 2 ranks on two hosts give the weights and moments of one process with grad_accum 2;
 *  - through rematd (spec: parallel.hosts, parallel.mca), a killed remote rank fails the
 *    job within seconds, the reason naming it;
 *  - a cut link (the veth pair downed under a running job) is failed by rematd's stall
 *    watchdog within its timeout, where Open MPI would wait for minutes.
 *
 * The hosts: this test's process takes a network namespace of its own (host A, 10.77.0.1:
 * mpirun, rematd and rank 0 run in it) and a helper child another one, with a hostname of
 * its own (host B, 10.77.0.2), a veth pair between them. mpirun reaches B through an rsh
 * agent, a script that nsenters the helper's namespaces. Both namespaces go with the
 * processes in them: nothing is left behind however the test ends (the helper dies with
 * the test, PR_SET_PDEATHSIG). Skipped, with one line, without root, ip(8), nsenter(1) or
 * Open MPI.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_daemon.h"
#include "t_mpi.h"
#include "t_util.h"
#include "tests.h"

#define HOSTS_MS 60000 /* a job here ends within this */
#define HOST_A "10.77.0.1"
#define HOST_B "10.77.0.2"
/* the transport between the hosts, for a spec's parallel.mca and for mpirun by hand */
#define MCA_JSON "\"mca\":{\"btl\":\"self,tcp\",\"btl_tcp_if_include\":\"10.77.0.0/24\"," \
	"\"oob_tcp_if_include\":\"10.77.0.0/24\"}"

typedef struct hosts {
	pid_t b;          /* the helper whose namespaces are host B's */
	char agent[700];  /* the rsh agent */
} hosts;

/* Runs a shell command line, quietly: 0 when it exited 0 */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	char full[1100];
	snprintf(full, sizeof full, "(%s) >/dev/null 2>&1", cmd);
	return system(full);
}

/* Host B: a child in network and UTS namespaces of its own, asleep until killed */
static pid_t host_b(void)
{
	int ready[2];
	if (pipe(ready) < 0)
		return -1;
	pid_t p = fork();
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		char ok = unshare(CLONE_NEWNET | CLONE_NEWUTS) == 0 &&
			sethostname("remat-host-b", 12) == 0;
		if (write(ready[1], &ok, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	char ok = 0;
	close(ready[1]);
	if (p < 0 || read(ready[0], &ok, 1) != 1 || !ok) {
		if (p > 0)
			kill(p, SIGKILL), waitpid(p, NULL, 0);
		p = -1;
	}
	close(ready[0]);
	return p;
}

static void hosts_down(hosts *h);
static hosts *up; /* the test's hosts, downed at its exit too (a failed check exits) */

static void hosts_at_exit(void)
{
	if (up)
		hosts_down(up);
}

/* The two hosts up, or the reason they cannot be (the test skips) */
static const char *hosts_up(hosts *h, const td_daemon *d)
{
	const char *why = t_mpi_missing();
	if (why)
		return why;
	if (geteuid() != 0)
		return "not root: network namespaces need CAP_SYS_ADMIN";
	if (sh("command -v ip && command -v nsenter") != 0)
		return "no ip(8) or nsenter(1) (iproute2, util-linux)";
	if (unshare(CLONE_NEWNET) < 0)
		return strerror(errno);
	if ((h->b = host_b()) < 0)
		return "no network namespace for host B";
	up = h;
	atexit(hosts_at_exit);
	if (sh("ip link add rmA type veth peer name rmB && ip link set rmB netns %ld && "
	       "ip link set lo up && ip addr add " HOST_A "/24 dev rmA && ip link set rmA up && "
	       "nsenter -t %ld -n sh -c 'ip link set lo up && ip addr add " HOST_B "/24 dev "
	       "rmB && ip link set rmB up'", (long)h->b, (long)h->b) != 0)
		return "the veth pair between the hosts could not be made";
	/* Open MPI hands the remote command over as one shell line, as to ssh */
	snprintf(h->agent, sizeof h->agent, "%s/agent.sh", d->dir);
	char body[512];
	snprintf(body, sizeof body, "#!/bin/sh\nhost=$1; shift\ncase $host in " HOST_B ") "
		"exec nsenter -t %ld -n -u sh -c \"$*\";; esac\nexec sh -c \"$*\"\n", (long)h->b);
	t_write_file(h->agent, body, strlen(body));
	ck_assert_int_eq(chmod(h->agent, 0755), 0);
	/* rematd's mpirun reaches host B through it too (no spec key names a command) */
	setenv("OMPI_MCA_plm_rsh_agent", h->agent, 1);
	return NULL;
}

/* Host B down: every process in its network namespace killed (an orted whose mpirun went
 * would wait on a link that is no more), then the helper */
static void hosts_down(hosts *h)
{
	char self[64], link[64], path[64];
	ssize_t n;
	if (h->b <= 0)
		return;
	up = NULL;
	snprintf(path, sizeof path, "/proc/%ld/ns/net", (long)h->b);
	n = readlink(path, self, sizeof self - 1);
	self[n > 0 ? n : 0] = '\0';
	DIR *dp = opendir("/proc");
	struct dirent *e;
	while (n > 0 && dp && (e = readdir(dp))) {
		long pid = atol(e->d_name);
		if (pid <= 0 || pid == (long)h->b)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/ns/net", pid);
		ssize_t m = readlink(path, link, sizeof link - 1);
		link[m > 0 ? m : 0] = '\0';
		if (m > 0 && strcmp(link, self) == 0)
			kill((pid_t)pid, SIGKILL);
	}
	if (dp)
		closedir(dp);
	kill(h->b, SIGKILL);
	waitpid(h->b, NULL, 0);
	h->b = 0;
}

#define NEED_HOSTS(h, d)                                                                   \
	do {                                                                               \
		const char *why_ = hosts_up(h, d);                                         \
		if (why_) {                                                                \
			fprintf(stderr, "hosts: skipped: %s\n", why_);                     \
			hosts_down(h);                                                     \
			return;                                                            \
		}                                                                          \
	} while (0)

/* 2 ranks, one a host, over TCP: the bits of one process with grad_accum 2 */
START_TEST(test_hosts_two_equal_one)
{
	td_daemon d;
	td_daemon_paths(&d); /* a scratch directory */
	hosts h = {0};
	NEED_HOSTS(&h, &d);
	char *one = t_mpi_spec(d.dir, "one.json", "\"grad_accum\":2,", "one", 20);
	char *two = t_mpi_spec(d.dir, "two.json", "", "two", 20);
	t_mpi_train1(one);
	char *argv[] = {"/usr/bin/mpirun", "--bind-to", "none", "-np", "2", "--host",
		HOST_A ":1," HOST_B ":1", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include",
		"10.77.0.0/24", "--mca", "oob_tcp_if_include", "10.77.0.0/24",
		(char *)t_env("REMAT_TRAIN"), two, NULL}, *out;
	int rc = t_run(argv, &out);
	size_t len = strlen(out);
	ck_assert_msg(rc == 0, "mpirun across the hosts: exit %d:\n...%s", rc,
		out + (len > 2000 ? len - 2000 : 0));
	free(out);
	char a[700], b[700];
	snprintf(a, sizeof a, "%s/one/step_%08d", d.dir, 20);
	snprintf(b, sizeof b, "%s/two/step_%08d", d.dir, 20);
	t_same_weights(a, b, "2 ranks on two hosts against grad_accum 2");
	free(one);
	free(two);
	hosts_down(&h);
}
END_TEST

/* A job of 2 ranks on the two hosts under rematd (started here, in host A): its id and
 * the path of the spec its ranks run, past its first step */
static void hosts_job(td_daemon *d, td_conn *c, const char *const *extra, char *id,
	char *spec)
{
	t_mpi_long_job(d, c, extra, "\"parallel\":{\"ranks\":2,\"hosts\":[\"" HOST_A ":1\",\""
		HOST_B ":1\"]," MCA_JSON "},", id, spec);
}

/* The remote rank killed: the job fails within seconds, naming it */
START_TEST(test_hosts_remote_rank_killed)
{
	td_daemon d;
	td_daemon_paths(&d);
	hosts h = {0};
	NEED_HOSTS(&h, &d);
	td_conn c;
	char id[16], spec[700];
	hosts_job(&d, &c, NULL, id, spec);
	pid_t p1 = t_rank_pid(spec, 1);
	ck_assert_msg(p1 > 0, "no rank 1 of %s", spec);
	kill(p1, SIGKILL);
	long t0 = td_ms();
	json_t *data = td_wait_state(&c, id, "failed", 30000);
	ck_assert_msg(td_ms() - t0 < 20000, "the job took %ld ms to fail", td_ms() - t0);
	ck_assert_msg(strstr(td_str(data, "reason"), "rank 1"), "reason: %s",
		td_str(data, "reason"));
	json_decref(data);
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
	hosts_down(&h);
}
END_TEST

/* The link cut under a running job: nothing errs for minutes (TCP retransmits), the ranks
 * wait in their collective; rematd's stall watchdog fails the job within its timeout */
START_TEST(test_hosts_link_cut)
{
	td_daemon d;
	td_daemon_paths(&d);
	hosts h = {0};
	NEED_HOSTS(&h, &d);
	static const char *const extra[] = {"--stall-timeout", "3", NULL};
	td_conn c;
	char id[16], spec[700];
	hosts_job(&d, &c, extra, id, spec);
	ck_assert_int_eq(sh("ip link set rmA down"), 0);
	long t0 = td_ms();
	json_t *data = td_wait_state(&c, id, "failed", 30000);
	long took = td_ms() - t0;
	ck_assert_msg(strstr(td_str(data, "reason"), "rematd's stall timeout"), "reason: %s",
		td_str(data, "reason"));
	ck_assert_msg(took < 20000, "the cut link took %ld ms to fail the job", took);
	json_decref(data);
	/* rank 0 went with mpirun's process group; rank 1 is beyond the cut: ended here */
	ck_assert_msg(t_rank_pid(spec, 0) == 0, "rank 0 outlived the stall's kill");
	pid_t p1 = t_rank_pid(spec, 1);
	if (p1 > 0)
		kill(p1, SIGKILL);
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
	hosts_down(&h);
}
END_TEST

Suite *suite_hosts(void)
{
	Suite *s = suite_create("hosts");
	TCase *tc = tcase_create("netns");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_hosts_two_equal_one);
	tcase_add_test(tc, test_hosts_remote_rank_killed);
	tcase_add_test(tc, test_hosts_link_cut);
	suite_add_tcase(s, tc);
	return s;
}
