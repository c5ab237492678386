/* test_mpi.c - data parallel over MPI: remat-train under `mpirun --oversubscribe -np 2`
 * (one thread a rank), alone and started by rematd.
 *
 *  - 2 ranks of batch B give the weights and moments of one process with grad_accum 2 of
 *    batch B, bit for bit, over shared memory and over TCP (--mca btl self,tcp);
 *  - 3 ranks agree with grad_accum 3 within the reference's 3e-4 (another order of sum);
 *  - a checkpoint saved by 2 ranks resumes in one process (grad_accum taken from it) to
 *    the same bits;
 *  - through rematd: `remat set` applies on both ranks at the step its reply named (rank
 *    1's saved activations change with it), mem-stats shows both ranks, and the weights
 *    are those of the unswitched one-process run;
 *  - under rematd --memory, 2 ranks count twice a rank's least, each told half the share;
 *  - SIGKILL of rank 1 fails the job within seconds, naming the rank, with no process left;
 *  - job-stop --save reaches every rank: a checkpoint, the job stopped, no rank left;
 *  - an mpirun that fails before rank 0 connects fails the job; rematd goes on.
 * Skipped, with one line, when Open MPI's mpirun is not there or the build has no MPI.
 */
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_dp.h"
#include "eng_import.h"
#include "eng_model.h"
#include "t_daemon.h"
#include "t_mpi.h"
#include "t_util.h"
#include "tests.h"

#define MPI_STEPS 20
#define MPI_MS 60000 /* a job of this file ends within this */

/* The environment of every mpirun here, and of rematd (which starts its jobs' mpirun): root
 * may run it (the tests may run as root); under make asan, Open MPI's components stay
 * loaded and allocations are traced in full, so that tests/lsan-mpi.supp can name Open
 * MPI's own leaks from MPI_Init (every other leak is still reported). */
static void mpi_env(void)
{
	static char supp[900];
	setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
	setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
	setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);
	snprintf(supp, sizeof supp, "suppressions=%s/../lsan-mpi.supp", t_env("REMAT_TESTDATA"));
	setenv("LSAN_OPTIONS", supp, 1);
	setenv("ASAN_OPTIONS", "fast_unwind_on_malloc=0", 1);
}

const char *t_mpi_missing(void)
{
	if (access("/usr/bin/mpirun", X_OK) != 0)
		return "no /usr/bin/mpirun (scripts/deps.sh installs openmpi-bin)";
	if (strstr(eng_dp_describe(), "without MPI"))
		return "this build has no MPI (libopenmpi-dev missing when it was built)";
	mpi_env();
	return NULL;
}

/* rematd's mpirun takes Open MPI's slots as they are (no --oversubscribe): two cores */
const char *t_mpi_slots_missing(void)
{
	const char *why = t_mpi_missing();
	if (!why && sysconf(_SC_NPROCESSORS_ONLN) < 2)
		why = "one core: rematd's mpirun -np 2 would find one slot";
	return why;
}

#define NEED(check) T_MPI_NEED("mpi", check)

char *t_mpi_spec(const char *dir, const char *name, const char *extra, const char *save,
	int steps)
{
	char path[700], text[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(text, sizeof text,
		"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL "\",\"format\":"
		"\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":%d,\"threads\":1,%s"
		"\"optim\":{\"lr\":1e-3},\"save\":{\"dir\":\"%s/%s\"}}", steps, extra, dir, save);
	t_write_file(path, text, strlen(text));
	return strdup(path);
}

int t_mpirun(const char *spec, int np, int tcp, char **out)
{
	char n[16], *argv[16] = {"/usr/bin/mpirun", "--oversubscribe", "--bind-to", "none", "-np", n};
	int k = 6;
	snprintf(n, sizeof n, "%d", np);
	if (tcp) {
		argv[k++] = "--mca";
		argv[k++] = "btl";
		argv[k++] = "self,tcp";
	}
	argv[k++] = (char *)t_env("REMAT_TRAIN");
	argv[k++] = (char *)spec;
	argv[k] = NULL;
	return t_run(argv, out);
}

void t_mpirun2(const char *spec, int tcp)
{
	char *out;
	int rc = t_mpirun(spec, 2, tcp, &out);
	size_t len = strlen(out);
	ck_assert_msg(rc == 0, "mpirun -np 2%s: exit %d:\n...%s", tcp ? " (tcp)" : "", rc,
		out + (len > 2000 ? len - 2000 : 0));
	free(out);
}

void t_mpi_train1(const char *spec)
{
	char *argv[] = {(char *)t_env("REMAT_TRAIN"), (char *)spec, NULL}, *out;
	int rc = t_run(argv, &out);
	size_t len = strlen(out);
	ck_assert_msg(rc == 0, "remat-train: exit %d:\n...%s", rc, out + (len > 2000 ? len - 2000 : 0));
	free(out);
}

void t_same_weights(const char *a, const char *b, const char *what)
{
	/* a LoRA run's: its adapters, and the base it carries (base/) */
	static const char *const full[] = {"model.safetensors", "optimizer.safetensors", NULL},
		*const lora[] = {"adapter_model.safetensors", "base/model.safetensors",
			"optimizer.safetensors", NULL};
	char conf[800];
	snprintf(conf, sizeof conf, "%s/adapter_config.json", a);
	const char *const *files = access(conf, F_OK) == 0 ? lora : full;
	for (int i = 0; files[i]; i++) {
		char pa[800], pb[800];
		size_t na, nb;
		snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
		snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
		char *x = t_read_file(pa, &na), *y = t_read_file(pb, &nb);
		ck_assert_msg(na == nb && memcmp(x, y, na) == 0, "%s: %s differs from %s", what, pb,
			pa);
		free(x);
		free(y);
	}
}

START_TEST(test_mpi_two_ranks_equal_accum)
{
	NEED(t_mpi_missing);
	td_daemon d;
	td_daemon_paths(&d); /* a scratch directory */
	char *one = t_mpi_spec(d.dir, "one.json", "\"grad_accum\":2,", "one", MPI_STEPS);
	char *two = t_mpi_spec(d.dir, "two.json", "\"parallel\":{\"ranks\":2},", "two", MPI_STEPS);
	char *tcp = t_mpi_spec(d.dir, "tcp.json", "\"parallel\":{\"ranks\":2},", "tcp", MPI_STEPS);
	t_mpi_train1(one);
	t_mpirun2(two, 0);
	t_mpirun2(tcp, 1);
	char a[700], b[700], c[700];
	snprintf(a, sizeof a, "%s/one/step_%08d", d.dir, MPI_STEPS);
	snprintf(b, sizeof b, "%s/two/step_%08d", d.dir, MPI_STEPS);
	snprintf(c, sizeof c, "%s/tcp/step_%08d", d.dir, MPI_STEPS);
	t_same_weights(a, b, "2 ranks over shared memory against grad_accum 2");
	t_same_weights(a, c, "2 ranks over TCP against grad_accum 2");
	free(one);
	free(two);
	free(tcp);
}
END_TEST

START_TEST(test_mpi_save_two_resume_one)
{
	NEED(t_mpi_missing);
	td_daemon d;
	td_daemon_paths(&d);
	char *one = t_mpi_spec(d.dir, "one.json", "\"grad_accum\":2,", "one", MPI_STEPS);
	char *two = t_mpi_spec(d.dir, "two.json", "\"parallel\":{\"ranks\":2},", "two", MPI_STEPS);
	t_mpi_train1(one);
	/* saved at step 10 by two ranks */
	char text[4096], path[800];
	snprintf(path, sizeof path, "%s/two10.json", d.dir);
	size_t n;
	char *t = t_read_file(two, &n);
	char *at = strstr(t, "\"save\":{\"dir\":");
	ck_assert_ptr_nonnull(at);
	snprintf(text, sizeof text, "%.*s\"save\":{\"every\":10,\"dir\":%s", (int)(at - t), t,
		at + strlen("\"save\":{\"dir\":"));
	t_write_file(path, text, strlen(text));
	t_mpirun2(path, 0);
	/* resumed by one process, which takes grad_accum 2 from the checkpoint */
	snprintf(text, sizeof text,
		"{\"model\":{\"init_from\":\"%s/two/step_00000010\",\"resume\":true},\"data\":{"
		"\"train\":\"" T_GPL "\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,"
		"\"steps\":%d,\"threads\":1,\"optim\":{\"lr\":1e-3},\"save\":{\"dir\":\"%s/res\"}}",
		d.dir, MPI_STEPS, d.dir);
	snprintf(path, sizeof path, "%s/res.json", d.dir);
	t_write_file(path, text, strlen(text));
	t_mpi_train1(path);
	char a[700], b[700];
	snprintf(a, sizeof a, "%s/one/step_%08d", d.dir, MPI_STEPS);
	snprintf(b, sizeof b, "%s/res/step_%08d", d.dir, MPI_STEPS);
	t_same_weights(a, b, "saved by 2 ranks at step 10, resumed by one process");
	free(t);
	free(one);
	free(two);
}
END_TEST

/* The worst relative L2 error, tensor by tensor, between two checkpoints' weights. */
static double worst_rel(const char *a, const char *b)
{
	eng_config cfg;
	eng_model ma, mb;
	eng_err err;
	ck_assert_msg(eng_import_read_config(a, &cfg, &err) == 0, "%s", err.msg);
	ck_assert(eng_model_init(&ma, &cfg, 1, 1, 0, &err) == 0 &&
		eng_model_init(&mb, &cfg, 1, 1, 0, &err) == 0);
	ck_assert_msg(eng_import_load(&ma, a, &err) == 0 && eng_import_load(&mb, b, &err) == 0,
		"%s", err.msg);
	double worst = 0;
	for (int i = 0; i < ma.ntensors; i++) {
		const eng_ptensor *t = &ma.tensors[i];
		double e = t_rel_l2(mb.params + t->offset, ma.params + t->offset, t->numel);
		worst = e > worst ? e : worst;
	}
	eng_model_free(&ma);
	eng_model_free(&mb);
	return worst;
}

/* With 3 ranks the sum has three terms in another order than grad_accum 3's: the weights
 * agree within the reference's tolerance, 3e-4 relative L2 a tensor (6.8e-5 measured). */
START_TEST(test_mpi_three_ranks_within_tolerance)
{
	NEED(t_mpi_missing);
	td_daemon d;
	td_daemon_paths(&d);
	char *one = t_mpi_spec(d.dir, "one.json", "\"grad_accum\":3,", "one", MPI_STEPS);
	char *three = t_mpi_spec(d.dir, "three.json", "\"parallel\":{\"ranks\":3},", "three",
		MPI_STEPS);
	t_mpi_train1(one);
	char *out;
	int rc = t_mpirun(three, 3, 0, &out);
	size_t len = strlen(out);
	ck_assert_msg(rc == 0, "mpirun -np 3: exit %d:\n...%s", rc, out + (len > 2000 ? len - 2000
										 : 0));
	free(out);
	char a[700], b[700];
	snprintf(a, sizeof a, "%s/one/step_%08d", d.dir, MPI_STEPS);
	snprintf(b, sizeof b, "%s/three/step_%08d", d.dir, MPI_STEPS);
	double w = worst_rel(a, b);
	ck_assert_msg(w < 3e-4, "3 ranks against grad_accum 3: worst weight rel err %.3g", w);
	free(one);
	free(three);
}
END_TEST

/* The REMAT_APPLIED event of job after `after` (its step), waiting up to ms. */
static int applied_step(td_conn *c, const char *job, int ms)
{
	long t0 = td_ms();
	while (td_ms() - t0 < ms) {
		json_t *m = td_read_msg(c, 1000);
		if (!m)
			continue;
		const char *ev = json_string_value(json_object_get(m, "event"));
		json_t *data = json_object_get(m, "data");
		int step = ev && !strcmp(ev, "REMAT_APPLIED") &&
			!strcmp(json_string_value(json_object_get(data, "job")), job) &&
			json_integer_value(json_object_get(data, "step")) > 1
			? (int)json_integer_value(json_object_get(data, "step")) : 0;
		json_decref(m);
		if (step)
			return step;
	}
	ck_abort_msg("no REMAT_APPLIED for job %s within %d ms", job, ms);
	return 0;
}

/* mem-stats' ranks: rank r's activations now, and their count into *n. */
static long long rank_acts(td_conn *c, const char *job, int r, int *n)
{
	json_t *m = td_request(c, "{\"execute\":\"mem-stats\",\"arguments\":{\"job\":\"%s\"}}", job);
	json_t *ranks = json_object_get(td_expect_return(m), "ranks");
	*n = (int)json_array_size(ranks);
	json_t *row = json_array_get(ranks, (size_t)r);
	long long v = json_integer_value(json_object_get(json_object_get(json_object_get(row,
		"categories"), "activations"), "current"));
	json_decref(m);
	return v;
}

START_TEST(test_mpi_daemon_set_mem)
{
	NEED(t_mpi_slots_missing);
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	/* within the first epoch (274 samples of 2 x 2 x 32 in the GPL's 35149 bytes): past
	 * it the two layouts wrap at different places (remat-job(5)) */
	int steps = 250;
	char *one = t_mpi_spec(d.dir, "one.json", "\"grad_accum\":2,", "one", steps);
	char *two = t_mpi_spec(d.dir, "two.json", "\"parallel\":{\"ranks\":2},", "two", steps);
	t_mpi_train1(one);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	size_t n;
	char *text = t_read_file(two, &n);
	const char *job = td_job_start(&c, text, NULL);
	char id[16];
	snprintf(id, sizeof id, "%s", job);
	td_wait_step(&c, id);
	int nr;
	long long before = rank_acts(&c, id, 1, &nr);
	ck_assert_int_eq(nr, 2);
	/* paused while the text is looked at: 250 steps of tiny end within seconds, and an
	 * ended job's status is rematd's record, without its ranks */
	json_decref(td_request(&c, "{\"execute\":\"job-pause\",\"arguments\":{\"job\":"
		"\"%s\"}}", id));
	json_decref(td_wait_state(&c, id, "paused", MPI_MS));
	/* rematctl mem and status show both ranks in text too, a row each */
	static const char *const shows[][3] = {{"mem", "2 ranks", "TRACKED PEAK"},
		{"status", "ranks:", "HIDDEN MS"}};
	for (int i = 0; i < 2; i++) {
		char *out;
		int rc = td_ctl(&d, &out, shows[i][0], id, NULL);
		ck_assert_msg(rc == 0 && strstr(out, shows[i][1]) && strstr(out, shows[i][2]) &&
				      strstr(out, "\n   0 ") && strstr(out, "\n   1 "),
			"rematctl %s: %d\n%s", shows[i][0], rc, out);
		free(out);
	}
	char *out;
	int rc = td_ctl(&d, &out, "watch", id, "--count", "1", NULL);
	ck_assert_msg(rc == 0 && strstr(out, " ranks 2"), "rematctl watch: %d %s", rc, out);
	free(out);
	json_decref(td_request(&c, "{\"execute\":\"job-resume\",\"arguments\":{\"job\":"
		"\"%s\"}}", id));
	json_decref(td_wait_state(&c, id, "running", MPI_MS));
	json_t *r = td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{\"h.0-1\":\"full\"}}}", id);
	int at = (int)json_integer_value(json_object_get(td_expect_return(r), "applies_at_step"));
	json_decref(r);
	ck_assert_int_eq(applied_step(&c, id, MPI_MS), at);
	/* rank 1 runs under it too: its saved activations fall */
	long long after = before;
	for (long t0 = td_ms(); after >= before && td_ms() - t0 < 10000; td_sleep_ms(50))
		after = rank_acts(&c, id, 1, &nr);
	ck_assert_msg(after < before, "rank 1's activations %lld -> %lld after h.0-1=full",
		before, after);
	json_decref(td_wait_state(&c, id, "finished", MPI_MS));
	char a[700], b[700];
	snprintf(a, sizeof a, "%s/one/step_%08d", d.dir, steps);
	snprintf(b, sizeof b, "%s/two/step_%08d", d.dir, steps);
	t_same_weights(a, b, "2 ranks switched by remat set against the unswitched grad_accum 2");
	td_close(&c);
	free(text);
	free(one);
	free(two);
	td_daemon_stop(&d);
}
END_TEST

/* Process pid's command line (a /proc entry's name), its arguments one space apart, into
 * cmd ("" when it cannot be read) */
static void proc_cmdline(const char *pid, char *cmd, size_t len)
{
	char p[300];
	snprintf(p, sizeof p, "/proc/%s/cmdline", pid);
	FILE *f = fopen(p, "r");
	size_t n = f ? fread(cmd, 1, len - 1, f) : 0;
	if (f)
		fclose(f);
	for (size_t i = 0; i + 1 < n; i++)
		cmd[i] = cmd[i] ? cmd[i] : ' ';
	cmd[n] = '\0';
}

pid_t t_rank_pid(const char *spec, int r)
{
	char want[32];
	snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", r);
	DIR *dp = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;
	while (dp && !found && (e = readdir(dp))) {
		char p[300], cmd[4096];
		size_t n;
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		proc_cmdline(e->d_name, cmd, sizeof cmd);
		if (!strstr(cmd, "remat-train") || !strstr(cmd, spec) || strstr(cmd, "mpirun"))
			continue;
		snprintf(p, sizeof p, "/proc/%s/environ", e->d_name);
		char *env = t_read_file(p, &n);
		for (size_t i = 0; i < n; i += strlen(env + i) + 1)
			if (!strcmp(env + i, want))
				found = (pid_t)atoi(e->d_name);
		free(env);
	}
	if (dp)
		closedir(dp);
	return found;
}

/* Neither rank of the job running spec is left within 10 s of what ended it. */
static void no_rank_left(const char *spec, const char *what)
{
	for (long t0 = td_ms(); (t_rank_pid(spec, 0) || t_rank_pid(spec, 1)) &&
		td_ms() - t0 < 10000;)
		td_sleep_ms(50);
	ck_assert_msg(!t_rank_pid(spec, 0) && !t_rank_pid(spec, 1), "a rank outlived %s", what);
}

/* A rematd running a 2-rank job that would run for ever, past its first step: its id
 * (16 bytes) and the path of the spec its ranks run (700 bytes). */
static void long_job(td_daemon *d, td_conn *c, char *id, char *spec)
{
	td_daemon_paths(d);
	t_mpi_long_job(d, c, NULL, "\"parallel\":{\"ranks\":2},", id, spec);
}

void t_mpi_long_job(td_daemon *d, td_conn *c, const char *const *extra, const char *parallel,
	char *id, char *spec)
{
	td_daemon_start(d, extra);
	char *two = t_mpi_spec(d->dir, "two.json", parallel, "two", 1000000);
	*c = td_open(d);
	json_decref(td_request(c, "{\"execute\":\"subscribe\"}"));
	size_t n;
	char *text = t_read_file(two, &n);
	snprintf(id, 16, "%s", td_job_start(c, text, NULL));
	td_wait_step(c, id);
	snprintf(spec, 700, "%s/jobs/%s/job.json", d->state, id);
	free(text);
	free(two);
}

/* Under rematd --memory a job of 2 ranks on this host is two replicas under one budget
 * each: the pool counts it twice a rank's least, and tells its controller a rank's half of
 * the share. */
START_TEST(test_mpi_daemon_pool)
{
	NEED(t_mpi_slots_missing);
	const char *extra[] = {"--memory", "8GiB", NULL};
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, extra);
	char *spec[2] = {t_mpi_spec(d.dir, "one.json", "", "one", 1000000),
		t_mpi_spec(d.dir, "two.json", "\"parallel\":{\"ranks\":2},", "two", 1000000)};
	/* events on a connection of their own: a reply awaited drops those before it */
	td_conn c = td_open(&d), rq = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	long long told[2], share[2], budget[2];
	for (int i = 0; i < 2; i++) {
		size_t n;
		char *text = t_read_file(spec[i], &n), id[16];
		snprintf(id, sizeof id, "%s", td_job_start(&rq, text, NULL));
		free(text);
		/* its admission's share (the planned least), then its controller's first budget,
		 * each rank's part of it (remat-train --pool-budget), and the share said last
		 * before it */
		told[i] = share[i] = budget[i] = 0;
		for (long end = td_ms() + MPI_MS; !budget[i] && td_ms() < end;) {
			json_t *o = td_read_msg(&c, 1000);
			const char *ev = json_string_value(json_object_get(o, "event"));
			json_t *dt = json_object_get(o, "data");
			const char *of = json_string_value(json_object_get(dt, "job"));
			long long v = (long long)json_integer_value(json_object_get(dt,
				ev && !strcmp(ev, "REMAT_AUTO") ? "budget_bytes" : "share_bytes"));
			if (ev && of && !strcmp(of, id) && !strcmp(ev, "POOL_CHANGED"))
				share[i] = told[i] ? v : (told[i] = v);
			else if (ev && of && !strcmp(of, id) && !strcmp(ev, "REMAT_AUTO"))
				budget[i] = v;
			json_decref(o);
		}
		json_decref(td_request(&rq, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":"
			"\"%s\",\"save\":false}}", id));
		json_decref(td_wait_state(&c, id, "stopped", MPI_MS));
		free(spec[i]);
	}
	ck_assert_int_eq(budget[0], share[0]);
	ck_assert_int_eq(budget[1], share[1] / 2);
	ck_assert_msg(llabs(told[1] - 2 * told[0]) < told[1] / 20, "2 ranks' least %lld, one "
		"rank's %lld", told[1], told[0]);
	td_close(&rq);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* The command line of the mpirun running spec ("" when none), its arguments one space apart */
static void mpirun_cmdline(const char *spec, char *cmd, size_t len)
{
	DIR *dp = opendir("/proc");
	struct dirent *e;
	cmd[0] = '\0';
	while (dp && !cmd[0] && (e = readdir(dp))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		proc_cmdline(e->d_name, cmd, len);
		if (!strstr(cmd, "mpirun") || !strstr(cmd, spec) || !strstr(cmd, "-np"))
			cmd[0] = '\0';
	}
	if (dp)
		closedir(dp);
}

/* parallel.mca reaches rematd's mpirun as --mca KEY VALUE, an argument each, and the job
 * trains under it (TCP on the loopback) */
START_TEST(test_mpi_daemon_mca)
{
	NEED(t_mpi_slots_missing);
	td_daemon d;
	td_conn c;
	char id[16], spec[700], cmd[4096] = "";
	td_daemon_paths(&d);
	t_mpi_long_job(&d, &c, NULL, "\"parallel\":{\"ranks\":2,\"launcher\":\"ssh\",\"mca\":"
		"{\"btl\":\"self,tcp\",\"btl_tcp_if_include\":\"lo\"}},", id, spec);
	for (long t0 = td_ms(); !cmd[0] && td_ms() - t0 < 10000; td_sleep_ms(50))
		mpirun_cmdline(spec, cmd, sizeof cmd);
	ck_assert_msg(strstr(cmd, " --mca plm rsh --mca btl self,tcp --mca btl_tcp_if_include lo "),
		"mpirun's command line: %s", cmd);
	json_decref(td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", id));
	json_decref(td_wait_state(&c, id, "stopped", MPI_MS));
	no_rank_left(spec, "the stop");
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* parallel.launcher "slurm" outside a Slurm allocation: the job fails at once, saying so,
 * where mpirun's own words would be "orte_plm_base_select failed" */
START_TEST(test_mpi_daemon_slurm_outside)
{
	NEED(t_mpi_missing);
	unsetenv("SLURM_JOB_ID"); /* rematd's environment is this test's */
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	char *two = t_mpi_spec(d.dir, "two.json", "\"parallel\":{\"ranks\":2,\"launcher\":"
		"\"slurm\"},", "two", 10);
	td_conn c = td_open(&d);
	size_t n;
	char *text = t_read_file(two, &n), id[16];
	/* it fails as it is spawned, before job-start's reply: its status says so */
	snprintf(id, sizeof id, "%s", td_job_start(&c, text, NULL));
	json_t *st = NULL;
	for (long t0 = td_ms(); td_ms() - t0 < MPI_MS; td_sleep_ms(50)) {
		json_decref(st);
		st = td_job_status(&c, id);
		if (!strcmp(td_str(st, "state"), "failed"))
			break;
	}
	ck_assert_msg(strstr(td_str(st, "reason"), "inside a Slurm allocation"), "%s: %s",
		td_str(st, "state"), td_str(st, "reason"));
	json_decref(st);
	td_close(&c);
	td_daemon_stop(&d);
	free(text);
	free(two);
}
END_TEST

/* rematctl kill ends mpirun and every rank with it (its process group): the job fails
 * with the kill as its reason */
START_TEST(test_mpi_job_kill)
{
	NEED(t_mpi_slots_missing);
	td_daemon d;
	td_conn c;
	char id[16], spec[700], *out;
	long_job(&d, &c, id, spec);
	ck_assert_msg(t_rank_pid(spec, 0) > 0 && t_rank_pid(spec, 1) > 0, "no ranks of %s", spec);
	int rc = td_ctl(&d, &out, "kill", id, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "killed"), "kill: %d %s", rc, out);
	free(out);
	json_t *data = td_wait_state(&c, id, "failed", 20000);
	ck_assert_msg(strstr(td_str(data, "reason"), "job-kill"), "reason: %s",
		td_str(data, "reason"));
	json_decref(data);
	no_rank_left(spec, "rematctl kill");
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_mpi_rank_killed)
{
	NEED(t_mpi_slots_missing);
	td_daemon d;
	td_conn c;
	char id[16], spec[700];
	long_job(&d, &c, id, spec);
	pid_t p1 = t_rank_pid(spec, 1);
	ck_assert_msg(p1 > 0, "no rank 1 of %s", spec);
	kill(p1, SIGKILL);
	long t0 = td_ms();
	json_t *data = td_wait_state(&c, id, "failed", 20000);
	ck_assert_msg(td_ms() - t0 < 15000, "the job took %ld ms to fail", td_ms() - t0);
	const char *reason = td_str(data, "reason");
	ck_assert_msg(strstr(reason, "rank 1"), "reason '%s' names no rank", reason);
	json_decref(data);
	no_rank_left(spec, "the job");
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* job-stop --save reaches every rank: rank 0 saves and tells the others the run is over;
 * the job is stopped with its checkpoint, and no rank is left. */
START_TEST(test_mpi_stop_reaches_every_rank)
{
	NEED(t_mpi_slots_missing);
	td_daemon d;
	td_conn c;
	char id[16], spec[700];
	long_job(&d, &c, id, spec);
	ck_assert(t_rank_pid(spec, 0) > 0 && t_rank_pid(spec, 1) > 0);
	json_t *r = td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":true}}", id);
	const char *ckpt = td_str(td_expect_return(r), "checkpoint");
	char path[900];
	snprintf(path, sizeof path, "%s/model.safetensors", ckpt);
	ck_assert_msg(access(path, R_OK) == 0, "no %s", path);
	json_decref(r);
	json_decref(td_wait_state(&c, id, "stopped", MPI_MS));
	no_rank_left(spec, "job-stop");
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* An mpirun that fails before rank 0 connects (a host that does not exist): the job fails
 * with mpirun's word, and rematd goes on serving. */
START_TEST(test_mpi_mpirun_fails_early)
{
	NEED(t_mpi_missing);
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	char *two = t_mpi_spec(d.dir, "two.json", "\"parallel\":{\"ranks\":2,\"hosts\":["
		"\"no-such-host.invalid\"]},", "two", 100);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	size_t n;
	char *text = t_read_file(two, &n);
	const char *job = td_job_start(&c, text, NULL);
	json_t *data = td_wait_state(&c, job, "failed", MPI_MS);
	ck_assert_msg(strstr(td_str(data, "reason"), "exit status"), "%s", td_str(data, "reason"));
	json_decref(data);
	td_alive(&d);
	td_close(&c);
	free(text);
	free(two);
	td_daemon_stop(&d);
}
END_TEST

Suite *suite_mpi(void)
{
	Suite *s = suite_create("mpi");
	TCase *tc = tcase_create("ranks");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_mpi_two_ranks_equal_accum);
	tcase_add_test(tc, test_mpi_save_two_resume_one);
	tcase_add_test(tc, test_mpi_three_ranks_within_tolerance);
	tcase_add_test(tc, test_mpi_daemon_set_mem);
	tcase_add_test(tc, test_mpi_daemon_pool);
	tcase_add_test(tc, test_mpi_rank_killed);
	tcase_add_test(tc, test_mpi_job_kill);
	tcase_add_test(tc, test_mpi_daemon_mca);
	tcase_add_test(tc, test_mpi_daemon_slurm_outside);
	tcase_add_test(tc, test_mpi_stop_reaches_every_rank);
	tcase_add_test(tc, test_mpi_mpirun_fails_early);
	suite_add_tcase(s, tc);
	return s;
}
