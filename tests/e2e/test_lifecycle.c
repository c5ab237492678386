/* test_lifecycle.c - the job lifecycle people expect, through the real daemon, worker and
 * client: nothing lost when a save fails (a full disk), jobs that outlive a daemon killed
 * with SIGKILL and resume bit for bit, requests to a job that is still starting, queued
 * jobs cancelled, planned and removed, a spec refused at job-start, queries a worker
 * never answers, idle connections, and the events' promises.
 *
 * Tests that need a facility the machine may lack (mounting a tmpfs) say so in one line
 * and skip. Timings are bounds, never measurements.
 */
#include "eng_auto.h"
#include "eng_plan.h"
#include "eng_tensors.h"
#include "t_daemon.h"
#include "t_util.h"
#include "tests.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_DELAY "1500" /* ms a worker holds its start (REMAT_START_DELAY_MS) */
#define SRV_REPLY_WAIT_MS 10000 /* rematd's SRV_WORKER_REPLY_MS: a query's time limit */

/* A tiny job on GPL's bytes, 2 threads: steps, save dir (NULL: none), extra fields. */
static char *spec_of(int steps, const char *save_dir, const char *extra)
{
	char *s = NULL, save[4200] = "";
	if (save_dir)
		snprintf(save, sizeof save, ", \"save\": {\"dir\": \"%s\", \"every\": 5, \"keep\": 2}",
			save_dir);
	ck_assert(asprintf(&s, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL
		"\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":%d,\"threads\":2,"
		"\"optim\":{\"lr\":1e-3},\"schedule\":\"constant\"%s%s}", steps, save,
		extra ? extra : "") > 0);
	return s;
}

/* job-status until its step reaches at least step (failing after ms); the status. */
static json_t *wait_step(td_conn *c, const char *job, int step, int ms)
{
	long end = td_ms() + ms;
	for (;;) {
		json_t *st = td_job_status(c, job);
		int s = (int)json_integer_value(json_object_get(st, "step"));
		const char *state = td_str(st, "state");
		ck_assert_msg(strcmp(state, "failed") != 0, "job %s failed: %s", job,
			td_str(st, "reason"));
		if (s >= step)
			return st;
		json_decref(st);
		ck_assert_msg(td_ms() < end, "job %s did not reach step %d in %d ms", job, step, ms);
		td_sleep_ms(50);
	}
}

/* The two safetensors files of checkpoints a and b are the same bytes. */
static void same_weights(const char *a, const char *b)
{
	static const char *const files[] = {"model.safetensors", "optimizer.safetensors"};
	for (int i = 0; i < 2; i++) {
		char pa[4200], pb[4200];
		size_t la, lb;
		snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
		snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
		char *x = t_read_file(pa, &la), *y = t_read_file(pb, &lb);
		ck_assert_msg(la == lb && memcmp(x, y, la) == 0, "%s differs from %s", pa, pb);
		free(x);
		free(y);
	}
}

/* Trains spec alone (remat-train, no daemon) into save dir dir; its final checkpoint. */
static char *train_alone(const td_daemon *d, const char *spec, const char *name)
{
	char path[700], *out;
	snprintf(path, sizeof path, "%s/%s.json", d->dir, name);
	t_write_file(path, spec, strlen(spec));
	const char *args[] = {path, NULL};
	int rc = t_train_run(&out, 0, args);
	ck_assert_msg(rc == 0, "remat-train %s: status %d:\n%s", path, rc, out);
	char *nl, *p = strstr(out, "saved ");
	ck_assert_msg(p != NULL, "no final save:\n%s", out);
	char *last = p;
	while ((p = strstr(p + 1, "\nsaved ")))
		last = p + 1;
	last += 6;
	nl = strchr(last, ' ');
	*nl = '\0';
	char *ck = strdup(last);
	free(out);
	return ck;
}

static const char *const real_worker[] = {"--worker", NULL, NULL};

/* {"--worker", REMAT_TRAIN, more..., NULL} in buf. */
static const char *const *with_worker(const char **buf, const char *a, const char *b)
{
	buf[0] = real_worker[0];
	buf[1] = t_env("REMAT_TRAIN");
	buf[2] = a;
	buf[3] = b;
	buf[4] = NULL;
	return buf;
}

/* A daemon on the real worker, started, and a connection to it. */
static td_conn real_daemon(td_daemon *d)
{
	const char *ex[5];
	td_daemon_paths(d);
	td_daemon_start(d, with_worker(ex, NULL, NULL));
	return td_open(d);
}

/* ---- a full disk ---- */

/* A tmpfs of size at dir, or 0 with a line saying why not. It is mounted in a mount
 * namespace of this test's own (the daemon and workers it starts share it), so that it
 * goes with the test however the test ends. */
static int mount_tmpfs(const char *dir, const char *size)
{
	char opts[64];
	snprintf(opts, sizeof opts, "size=%s,mode=0755", size);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return 0;
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		printf("test_lifecycle_disk_full: skipped: no mount namespace of its own: %s\n",
			strerror(errno));
		return 0;
	}
	if (mount("tmpfs", dir, "tmpfs", 0, opts) < 0) {
		printf("test_lifecycle_disk_full: skipped: cannot mount a tmpfs at %s: %s\n", dir,
			strerror(errno));
		return 0;
	}
	return 1;
}

/* Fills the file system of dir with a file until keep bytes are left; its path. */
static char *fill_up(const char *dir, long long keep)
{
	struct statvfs vs;
	ck_assert_int_eq(statvfs(dir, &vs), 0);
	long long avail = (long long)vs.f_bavail * (long long)vs.f_frsize;
	char *path = NULL;
	ck_assert(asprintf(&path, "%s/filler", dir) > 0);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	static char block[1 << 16];
	for (long long left = avail - keep; left > 0;) {
		ssize_t n = write(fd, block, left < (long long)sizeof block ? (size_t)left :
			sizeof block);
		if (n <= 0)
			break;
		left -= n;
	}
	close(fd);
	return path;
}

/* daemon-shutdown --save while job's save cannot be written: called off, with the reason;
 * the daemon serves on, job runs on, and a job queued behind it, which the shutdown had
 * stopped, is queued again */
static void shutdown_called_off(const td_daemon *d, td_conn *c, const char *job)
{
	char *behind = spec_of(1000000, NULL, NULL), second[16];
	snprintf(second, sizeof second, "%s", td_job_start(c, behind, "queued"));
	json_t *r = td_request(c, "{\"execute\":\"daemon-shutdown\",\"arguments\":"
		"{\"save\":true}}");
	const char *desc = td_expect_error(r, "IOError");
	ck_assert_msg(strstr(desc, "called off") && strstr(desc, job), "desc: %s", desc);
	json_decref(r);
	td_alive(d);
	json_t *st = td_job_status(c, job);
	ck_assert_str_eq(td_str(st, "state"), "running");
	json_decref(st);
	st = td_job_status(c, second);
	ck_assert_msg(!strcmp(td_str(st, "state"), "queued") && strstr(td_str(st, "reason"),
		"called off"), "the job behind: %s, %s", td_str(st, "state"), td_str(st, "reason"));
	json_decref(st);
	json_decref(td_request(c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", second));
	free(behind);
}

START_TEST(test_lifecycle_disk_full)
{
	td_daemon d;
	td_daemon_paths(&d);
	char mnt[700], save[720];
	snprintf(mnt, sizeof mnt, "%s/small", d.dir);
	if (!mount_tmpfs(mnt, "6m"))
		return;
	snprintf(save, sizeof save, "%s/save", mnt);
	const char *ex[5];
	td_daemon_start(&d, with_worker(ex, NULL, NULL));
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	char *filler = fill_up(mnt, 400 << 10); /* a checkpoint needs 1.6 MB */
	char *spec = spec_of(1000000, save, NULL);
	char job[16];
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, NULL));

	/* a periodic save fails: an event, the status says so, training goes on */
	json_t *ev = td_wait_event(&c, job, "CHECKPOINT_FAILED", T_JOB_MS);
	ck_assert_int_eq(json_integer_value(json_object_get(ev, "step")), 5);
	ck_assert_msg(strstr(td_str(ev, "reason"), "No space left"), "reason: %s",
		td_str(ev, "reason"));
	ck_assert_ptr_nonnull(strstr(td_str(ev, "path"), "step_00000005"));
	json_decref(ev);
	json_t *st = wait_step(&c, job, 7, T_JOB_MS);
	ck_assert_msg(json_is_object(json_object_get(st, "last_save_error")), "no "
		"last_save_error in job-status");
	json_decref(st);

	/* stop --save fails with IOError, and the job goes on */
	json_t *r = td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":true},\"id\":1}", job);
	const char *desc = td_expect_error(r, "IOError");
	ck_assert_msg(strstr(desc, "No space left") && strstr(desc, "goes on"), "desc: %s", desc);
	json_decref(r);
	st = td_job_status(&c, job);
	int at = (int)json_integer_value(json_object_get(st, "step"));
	ck_assert_str_eq(td_str(st, "state"), "running");
	json_decref(st);
	json_decref(wait_step(&c, job, at + 2, T_JOB_MS));

	shutdown_called_off(&d, &c, job);

	/* space again: the same stop works, nothing was lost */
	ck_assert_int_eq(unlink(filler), 0);
	r = td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":true},\"id\":2}", job);
	json_t *ret = td_expect_return(r);
	int stop_step = (int)json_integer_value(json_object_get(ret, "step"));
	char *ck = strdup(td_str(ret, "checkpoint"));
	json_decref(r);
	json_t *data = td_wait_state(&c, job, "stopped", T_READ_MS);
	ck_assert_str_eq(td_str(data, "last_checkpoint"), ck);
	json_decref(data);

	/* and its weights are those of a run that never met a full disk */
	char *plain = spec_of(stop_step, NULL, NULL), save2[700], *p2 = NULL;
	snprintf(save2, sizeof save2, "%s/plain", d.dir);
	free(plain);
	plain = spec_of(stop_step, save2, NULL);
	p2 = train_alone(&d, plain, "plain");
	same_weights(ck, p2);
	td_close(&c);
	td_daemon_stop(&d);
	free(p2);
	free(plain);
	free(ck);
	free(spec);
	free(filler);
}
END_TEST

/* ---- a daemon killed with SIGKILL ---- */

START_TEST(test_lifecycle_daemon_killed_resume)
{
	/* the worker outlives rematd: it must come back to us to be reaped */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	td_daemon d;
	td_conn c = real_daemon(&d);
	char save[700];
	snprintf(save, sizeof save, "%s/save", d.dir);
	char *spec = spec_of(40, save, NULL);
	char job[16];
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, NULL));
	json_t *st = wait_step(&c, job, 12, T_JOB_MS);
	pid_t wpid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	json_decref(st);
	ck_assert_int_eq(kill(d.pid, SIGKILL), 0);
	ck_assert_int_eq(td_wait_pid(d.pid, T_STOP_MS), 128 + SIGKILL);
	d.pid = 0;
	td_close(&c);
	/* the worker saw its link go: it saves at its next step boundary and exits */
	int rc = td_wait_pid(wpid, T_STOP_MS);
	ck_assert_msg(rc == 0, "the orphaned worker ended with %d", rc);

	/* a new rematd on the same state dir lists the job as interrupted */
	const char *ex[5];
	td_daemon_start(&d, with_worker(ex, NULL, NULL));
	c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	st = td_job_status(&c, job);
	ck_assert_str_eq(td_str(st, "state"), "interrupted");
	ck_assert_msg(strstr(td_str(st, "reason"), "rematd ended"), "reason: %s",
		td_str(st, "reason"));
	json_decref(st);

	/* rematctl resume continues it to its end */
	char *out;
	rc = td_ctl(&d, &out, "resume", job, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "resumes from") && strstr(out, save), "resume: %d %s",
		rc, out);
	free(out);
	json_t *data = td_wait_state(&c, job, "finished", T_JOB_MS);
	char *ck = strdup(td_str(data, "last_checkpoint"));
	ck_assert_msg(strstr(ck, "step_00000040") != NULL, "last checkpoint %s", ck);
	ck_assert_int_eq(json_integer_value(json_object_get(data, "exit_status")), 0);
	json_decref(data);
	/* bit for bit those of an uninterrupted run */
	char save2[700];
	snprintf(save2, sizeof save2, "%s/plain", d.dir);
	char *plain = spec_of(40, save2, NULL), *p2 = train_alone(&d, plain, "plain");
	same_weights(ck, p2);
	/* a finished job is not resumed */
	json_t *r = td_request(&c, "{\"execute\":\"job-resume\",\"arguments\":{\"job\":\"%s\"}}",
		job);
	ck_assert_ptr_nonnull(strstr(td_expect_error(r, "InvalidState"), "finished"));
	json_decref(r);
	td_close(&c);
	td_daemon_stop(&d);
	free(p2);
	free(plain);
	free(ck);
	free(spec);
}
END_TEST

/* ---- a failure's reason after a resume ---- */

/* A failed run's reason is what its own worker said: a resumed job appends to its earlier
 * runs' worker.log, and their lines (mpirun's word on a rank that died, preferred where a
 * run has one) must not stand in for the new run's. The stand-in worker runs the real one
 * until its first checkpoint, kills it and says what mpirun says of a dead rank; resumed,
 * it fails at once with a line of its own. */
START_TEST(test_lifecycle_reason_from_this_run)
{
	td_daemon d;
	td_daemon_paths(&d);
	char save[700], body[2400];
	snprintf(save, sizeof save, "%s/save", d.dir);
	snprintf(body, sizeof body,
		"if [ -e second ]; then echo 'remat-train: the second run failed' >&2; exit 3; fi\n"
		": > second\n"
		"'%s' \"$@\" & p=$!\n"
		"until [ -e '%s'/latest ]; do sleep 0.05; done\n"
		"kill -9 $p; wait $p\n"
		"echo \"mpirun noticed that process rank 1 with PID $p on node h2 exited on"
		" signal 9 (Killed).\" >&2\n"
		"exit 1", t_env("REMAT_TRAIN"), save);
	char *w = td_script(&d, "worker.sh", body);
	const char *ex[] = {"--worker", w, NULL};
	td_daemon_start(&d, ex);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	char *spec = spec_of(1000000, save, NULL), job[16];
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, NULL));
	json_t *data = td_wait_state(&c, job, "failed", T_JOB_MS);
	ck_assert_msg(strstr(td_str(data, "reason"), "noticed that process rank 1"),
		"the first run's reason: %s", td_str(data, "reason"));
	json_decref(data);

	char *out;
	int rc = td_ctl(&d, &out, "resume", job, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "resumes from"), "resume: %d %s", rc, out);
	free(out);
	data = td_wait_state(&c, job, "failed", T_JOB_MS);
	const char *why = td_str(data, "reason");
	ck_assert_msg(strstr(why, "exit status 3") && strstr(why, "the second run failed") &&
			      !strstr(why, "noticed"),
		"the resumed run's reason: %s", why);
	json_decref(data);
	td_close(&c);
	td_daemon_stop(&d);
	free(spec);
	free(w);
}
END_TEST

/* ---- requests to a job that is starting ---- */

START_TEST(test_lifecycle_requests_while_starting)
{
	setenv("REMAT_START_DELAY_MS", START_DELAY, 1);
	td_daemon d;
	td_conn c = real_daemon(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	char save[700];
	snprintf(save, sizeof save, "%s/save", d.dir);
	char *spec = spec_of(1000000, save, NULL);
	char job[16];
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, "starting"));
	json_t *st = td_job_status(&c, job);
	ck_assert_str_eq(td_str(st, "state"), "starting");
	/* the policy it will start with is known from the check */
	ck_assert_str_eq(td_str(json_object_get(st, "policy"), "head"), "off");
	json_decref(st);
	/* kept for its first step boundary, not refused: both sent while it starts */
	char line[256];
	snprintf(line, sizeof line, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{\"h.0\":\"full\"}},\"id\":1}", job);
	td_send(&c, line);
	snprintf(line, sizeof line, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":true},\"id\":2}", job);
	td_send(&c, line);
	json_t *r = td_reply(&c, T_JOB_MS);
	ck_assert_int_eq(json_integer_value(json_object_get(r, "id")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(td_expect_return(r),
		"applies_at_step")), 1);
	json_decref(r);
	r = td_reply(&c, T_JOB_MS);
	json_t *ret = td_expect_return(r);
	ck_assert_int_eq(json_integer_value(json_object_get(ret, "step")), 0);
	ck_assert_ptr_nonnull(strstr(td_str(ret, "checkpoint"), "step_00000000"));
	json_decref(r);
	json_decref(td_wait_state(&c, job, "stopped", T_READ_MS));
	st = td_job_status(&c, job);
	ck_assert_str_eq(td_str(json_object_get(st, "policy"), "h.0"), "full");
	json_decref(st);

	/* daemon-shutdown --save while a job starts: it waits for the job, saved */
	free(spec);
	spec = spec_of(1000000, NULL, NULL);
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, "starting"));
	td_send(&c, "{\"execute\":\"daemon-shutdown\",\"arguments\":{\"save\":true},\"id\":9}");
	json_t *data = td_wait_state(&c, job, "stopped", T_JOB_MS);
	ck_assert_ptr_nonnull(strstr(td_str(data, "last_checkpoint"), "step_00000000"));
	json_decref(data);
	r = td_reply(&c, T_READ_MS);
	td_expect_return(r);
	json_decref(r);
	ck_assert_int_eq(td_wait_pid(d.pid, T_STOP_MS), 0);
	d.pid = 0;
	ck_assert_msg(!strstr(td_slurp(d.log), "killing"), "a worker was killed:\n%s",
		td_slurp(d.log));
	td_close(&c);
	free(spec);
}
END_TEST

/* rematd plans a spec of a Llama with LoRA adapters from what --check said of it: the
 * family's widths, the adapters' activations and their small optimizer state, as the
 * engine's planner counts them for the same shape */
START_TEST(test_lifecycle_plan_llama_lora)
{
	td_daemon d;
	td_conn c = real_daemon(&d);
	json_t *r = td_request(&c, "{\"execute\":\"remat-plan\",\"arguments\":{\"spec\":"
		"{\"model\":{\"preset\":\"llama-tiny\"},\"data\":{\"train\":\"" T_GPL "\","
		"\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":5,\"threads\":2,"
		"\"lora\":{\"r\":4,\"targets\":[\"q_proj\",\"v_proj\",\"down_proj\"]}},"
		"\"default\":\"selective\"}}");
	json_t *ret = td_expect_return(r);
	eng_config cfg;
	eng_err err;
	const char *t[] = {"q_proj", "v_proj", "down_proj"};
	ck_assert(eng_config_preset("llama-tiny", &cfg, &err) == 0);
	ck_assert(eng_lora_targets(&cfg, t, 3, &cfg.lora_units, &err) == 0);
	cfg.lora_r = 4;
	cfg.lora_alpha = 8;
	eng_policy p;
	eng_plan want;
	eng_policy_init(&p, cfg.n_layer);
	for (int l = 0; l < cfg.n_layer; l++)
		p.block[l] = ENG_MODE_SELECTIVE;
	int R = (int)json_integer_value(json_object_get(ret, "chunk_rows"));
	eng_plan_policy(&cfg, 2, 32, R ? R : eng_plan_chunk_rows(&cfg, 2, 32), &p, &want);
	ck_assert_int_eq(json_integer_value(json_object_get(ret, "saved_bytes")),
		(json_int_t)want.saved_bytes);
	/* the optimizer: the adapters' two moments alone */
	json_t *mem = json_object_get(ret, "memory");
	size_t ngrad;
	for (int i = 0; i < eng_lora_base_tensors(&cfg); i++)
		eng_config_freeze(&cfg, i);
	eng_model_floats(&cfg, &ngrad);
	ck_assert_int_eq(json_integer_value(json_object_get(mem, "optimizer")),
		(json_int_t)(8 * ngrad));
	json_decref(r);
	/* and run: mem-stats holds the adapters' gradients and moments alone */
	const char *spec = "{\"model\":{\"preset\":\"llama-tiny\"},\"data\":{\"train\":\""
		T_GPL "\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":100000,"
		"\"threads\":2,\"lora\":{\"r\":4,\"targets\":[\"q_proj\",\"v_proj\","
		"\"down_proj\"]}}";
	char id[16];
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	snprintf(id, sizeof id, "%s", td_job_start(&c, spec, "starting"));
	td_wait_step(&c, id);
	r = td_request(&c, "{\"execute\":\"mem-stats\",\"arguments\":{\"job\":\"%s\"}}", id);
	json_t *cats = json_object_get(td_expect_return(r), "categories");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(cats, "grads"),
				 "current")), (json_int_t)(4 * ngrad));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(cats, "optimizer"),
				 "current")), (json_int_t)(8 * ngrad));
	json_decref(r);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* ---- the queue: cancel, plan, remove ---- */

START_TEST(test_lifecycle_queue_cancel_plan_remove)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *w = td_script(&d, "worker.sh", "exec sleep 60");
	const char *extra[] = {"--worker", w, "--max-jobs", "1", "--stop-timeout", "1", NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	char *spec = spec_of(100, NULL, NULL);
	char j1[16], j2[16];
	snprintf(j1, sizeof j1, "%s", td_job_start(&c, spec, "starting"));
	snprintf(j2, sizeof j2, "%s", td_job_start(&c, spec, "queued"));

	/* a queued job is planned from its spec, without a worker */
	json_t *r = td_request(&c, "{\"execute\":\"remat-plan\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{\"h.1\":\"full\"}}}", j2);
	json_t *ret = td_expect_return(r);
	json_t *secs = json_object_get(ret, "sections");
	ck_assert_uint_eq(json_array_size(secs), 3); /* tiny: h.0, h.1, head */
	ck_assert_str_eq(td_str(json_array_get(secs, 1), "mode"), "full");
	ck_assert_int_gt(json_integer_value(json_object_get(ret, "saved_bytes")), 0);
	/* the whole peak: what the run holds whatever its policy, as --check counted it */
	json_int_t fixed = json_integer_value(json_object_get(ret, "fixed_bytes"));
	ck_assert_int_gt(fixed, 0);
	ck_assert_int_eq(json_integer_value(json_object_get(ret, "peak_bytes")),
		fixed + json_integer_value(json_object_get(ret, "saved_bytes")) +
			json_integer_value(json_object_get(ret, "recompute_bytes")));
	ck_assert_str_eq(td_str(json_object_get(ret, "memory"), "fixed_source"), "engine");
	json_decref(r);
	/* and so is a spec, before anything starts: a budget nothing fits is a failure that
	 * names the least any policy needs; one that fits says so */
	char *out;
	char path[700];
	snprintf(path, sizeof path, "%s/plan.json", d.dir);
	t_write_file(path, spec, strlen(spec));
	int rc = td_ctl(&d, &out, "plan", path, "--budget", "64KiB", NULL);
	ck_assert_msg(rc == 1 && strstr(out, "does not fit: the least memory any policy needs is") &&
			  strstr(out, "h.1"), "plan: %d %s", rc, out);
	free(out);
	rc = td_ctl(&d, &out, "plan", path, "--budget", "1GiB", NULL);
	ck_assert_msg(rc == 0 && strstr(out, "1.0 GiB: fits") && strstr(out, "peak:"),
		"plan: %d %s", rc, out);
	free(out);
	rc = td_ctl(&d, &out, "plan", path, "h.7=full", NULL);
	ck_assert_msg(rc == 1 && strstr(out, "h.7"), "plan h.7: %d %s", rc, out);
	free(out);

	/* stop cancels a queued job; rm forgets an ended one, and only an ended one */
	rc = td_ctl(&d, &out, "stop", j2, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "cancelled"), "stop: %d %s", rc, out);
	free(out);
	json_t *st = td_job_status(&c, j2);
	ck_assert_str_eq(td_str(st, "state"), "stopped");
	json_decref(st);
	rc = td_ctl(&d, &out, "rm", j1, NULL);
	ck_assert_msg(rc == 1 && strstr(out, "InvalidState"), "rm of a live job: %d %s", rc, out);
	free(out);
	rc = td_ctl(&d, &out, "rm", j2, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "removed"), "rm: %d %s", rc, out);
	free(out);
	r = td_request(&c, "{\"execute\":\"job-status\",\"arguments\":{\"job\":\"%s\"}}", j2);
	td_expect_error(r, "JobNotFound");
	json_decref(r);
	char f[800];
	snprintf(f, sizeof f, "%s/jobs/%s/job.json", d.state, j2);
	ck_assert_msg(access(f, F_OK) < 0, "%s is still there", f);
	/* daemon-info names the kernel the workers run, as remat-train --info does */
	char *argv[] = {(char *)t_env("REMAT_TRAIN"), "--info", NULL};
	ck_assert_int_eq(t_run(argv, &out), 0);
	json_t *info = json_loads(out, 0, NULL);
	r = td_request(&c, "{\"execute\":\"daemon-info\"}");
	ck_assert_str_eq(td_str(td_expect_return(r), "blas"), td_str(info, "blas"));
	/* and who runs the matmul products, float32 and bf16 */
	ck_assert_str_eq(td_str(td_expect_return(r), "matmul"), td_str(info, "matmul"));
	ck_assert_ptr_nonnull(strstr(td_str(info, "matmul"), "float32 lm_head (cpu): "));
	json_decref(r);
	json_decref(info);
	free(out);
	td_close(&c);
	td_daemon_stop(&d);
	free(spec);
	free(w);
}
END_TEST

/* ---- a spec refused at job-start, not later ---- */

START_TEST(test_lifecycle_spec_refused_at_start)
{
	td_daemon d;
	td_conn c = real_daemon(&d);
	static const struct {
		const char *extra;   /* replaces the spec's tail */
		const char *needle;
	} cases[] = {
		{",\"remat\":{\"sections\":{\"h.5\":\"full\"}}", "h.5"},
		{",\"remat\":{\"aliases\":{\"trunk\":\"h.1-9\"}}", "trunk"},
		{",\"device\":\"cuda\"", "device 'cuda' is not available"},
		{",\"save\":{\"dir\":\"" T_GPL "/x\"}", "Not a directory"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *spec = spec_of(10, NULL, cases[i].extra);
		json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}",
			spec);
		const char *desc = td_expect_error(r, "InvalidParameter");
		ck_assert_msg(strstr(desc, cases[i].needle), "%s: %s", cases[i].extra, desc);
		json_decref(r);
		free(spec);
	}
	/* a data file that is not there */
	json_t *r0 = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":{\"model\":"
		"{\"preset\":\"tiny\"},\"data\":{\"train\":\"/nonexistent/data.bin\"}}}}");
	ck_assert_ptr_nonnull(strstr(td_expect_error(r0, "InvalidParameter"), "No such file"));
	json_decref(r0);
	/* a save directory another job holds (remat-train alone, outside rematd): Busy */
	char save[700], jpath[720], log[720];
	snprintf(save, sizeof save, "%s/held", d.dir);
	snprintf(jpath, sizeof jpath, "%s/held.json", d.dir);
	snprintf(log, sizeof log, "%s/held.log", d.dir);
	char *held = spec_of(1000000, save, NULL);
	t_write_file(jpath, held, strlen(held));
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(t_env("REMAT_TRAIN"), "remat-train", jpath, (char *)NULL);
		_exit(127);
	}
	for (long end = td_ms() + T_JOB_MS; !strstr(td_slurp(log), "step "); td_sleep_ms(20))
		ck_assert_msg(td_ms() < end, "the other job never stepped:\n%s", td_slurp(log));
	json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}",
		held);
	const char *busy = td_expect_error(r, "Busy");
	ck_assert_msg(strstr(busy, "in use by another job"), "desc: %s", busy);
	json_decref(r);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	free(held);
	/* nothing was queued */
	r = td_request(&c, "{\"execute\":\"job-list\"}");
	ck_assert_uint_eq(json_array_size(json_object_get(td_expect_return(r), "jobs")), 0);
	json_decref(r);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* ---- a stopped job keeps its save directory ---- */

/* A stopped job's resume goes on from the newest checkpoint of its save directory: another
 * job started there is refused (Busy, saying how to free it) until the stopped one is
 * forgotten (job-remove), and then it starts. */
START_TEST(test_lifecycle_stopped_job_keeps_save_dir)
{
	td_daemon d;
	td_conn c = real_daemon(&d);
	char save[700], first[16];
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	snprintf(save, sizeof save, "%s/kept", d.dir);
	char *spec = spec_of(1000000, save, NULL);
	snprintf(first, sizeof first, "%s", td_job_start(&c, spec, NULL));
	json_decref(wait_step(&c, first, 1, T_JOB_MS));
	json_t *r = td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", first);
	td_expect_return(r);
	json_decref(r);
	json_decref(td_wait_state(&c, first, "stopped", T_JOB_MS));
	r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}", spec);
	const char *busy = td_expect_error(r, "Busy");
	ck_assert_msg(strstr(busy, first) && strstr(busy, "stopped") &&
		strstr(busy, "job-remove"), "desc: %s", busy);
	json_decref(r);
	for (long end = td_ms() + T_JOB_MS;; td_sleep_ms(100)) { /* its worker reaped */
		r = td_request(&c, "{\"execute\":\"job-remove\",\"arguments\":{\"job\":\"%s\"}}",
			first);
		if (!json_object_get(r, "error") || td_ms() > end)
			break;
		json_decref(r);
	}
	td_expect_return(r);
	json_decref(r);
	const char *second = td_job_start(&c, spec, NULL);
	json_decref(td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", second));
	free(spec);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* ---- a worker that never answers ---- */

START_TEST(test_lifecycle_unanswered_query)
{
	td_daemon d;
	td_daemon_paths(&d);
	/* greets, says it runs, then reads nothing */
	char *w = td_script(&d, "worker.sh",
		TD_WORKER_RUNNING "exec sleep 60");
	const char *extra[] = {"--worker", w, "--stop-timeout", "1", NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	char *spec = spec_of(100, NULL, NULL);
	char job[16];
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, NULL));
	json_decref(td_wait_state(&c, job, "running", T_READ_MS));
	td_send(&c, "{\"execute\":\"job-status\",\"arguments\":{\"job\":\"j1\"},\"id\":1}");
	td_send(&c, "{\"execute\":\"remat-get\",\"arguments\":{\"job\":\"j1\"},\"id\":2}");
	long t0 = td_ms();
	for (int i = 0; i < 2; i++) {
		json_t *r = td_reply(&c, 2 * SRV_REPLY_WAIT_MS);
		long waited = td_ms() - t0;
		ck_assert_msg(waited >= SRV_REPLY_WAIT_MS - 1500, "answered after %ld ms", waited);
		if (json_integer_value(json_object_get(r, "id")) == 1) {
			json_t *ret = td_expect_return(r);
			ck_assert(json_is_true(json_object_get(ret, "stale")));
			ck_assert_str_eq(td_str(ret, "state"), "running");
		} else {
			ck_assert_ptr_nonnull(strstr(td_expect_error(r, "Busy"), "did not answer"));
		}
		json_decref(r);
	}
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
	free(spec);
	free(w);
}
END_TEST

/* ---- idle connections ---- */

/* Until rematd has seen its start probe (client 1, td_wait_listening's) hang up: from then
 * on every connection of the test counts. */
static void probe_gone(const td_daemon *d)
{
	long end = td_ms() + T_READ_MS;
	while (!strstr(td_slurp(d->log), "client 1 disconnected")) {
		ck_assert_msg(td_ms() < end, "rematd never saw its probe go:\n%s", td_slurp(d->log));
		td_sleep_ms(20);
	}
}

START_TEST(test_lifecycle_idle_connections)
{
	td_daemon d;
	td_daemon_paths(&d);
	const char *extra[] = {"--idle-timeout", "1", NULL};
	td_daemon_start(&d, extra);
	probe_gone(&d);
	int fds[PROTO_MAX_CONNECTIONS];
	for (int i = 0; i < PROTO_MAX_CONNECTIONS; i++)
		ck_assert_int_ge(fds[i] = td_connect(d.sock), 0);
	td_sleep_ms(300);
	ck_assert_int_eq(td_try_info(&d), 0); /* every place taken */
	td_sleep_ms(2000);
	td_alive(&d); /* the silent ones were closed */
	for (int i = 0; i < PROTO_MAX_CONNECTIONS; i++)
		close(fds[i]);
	td_daemon_stop(&d);

	/* without the limit, a full daemon tells rematctl it is busy (not "Broken pipe") */
	td_daemon_paths(&d);
	const char *never[] = {"--idle-timeout", "0", NULL};
	td_daemon_start(&d, never);
	probe_gone(&d);
	for (int i = 0; i < PROTO_MAX_CONNECTIONS; i++)
		ck_assert_int_ge(fds[i] = td_connect(d.sock), 0);
	td_sleep_ms(300);
	char *out;
	int rc = td_ctl(&d, &out, "info", NULL);
	ck_assert_msg(rc == 1 && strstr(out, "too many connections") && strstr(out, "Busy") &&
		!strstr(out, "Broken pipe"), "rematctl info: %d %s", rc, out);
	free(out);
	for (int i = 0; i < PROTO_MAX_CONNECTIONS; i++)
		close(fds[i]);
	td_alive_soon(&d);
	td_daemon_stop(&d);
}
END_TEST

/* ---- events keep their promises ---- */

START_TEST(test_lifecycle_events_promises)
{
	td_daemon d;
	td_conn c = real_daemon(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	char save[700];
	snprintf(save, sizeof save, "%s/save", d.dir);
	char *spec = spec_of(3, save, NULL);
	char job[16];
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, NULL));
	/* the policy as the job starts, for a view opened right after start */
	json_t *ev = td_wait_event(&c, job, "REMAT_APPLIED", T_JOB_MS);
	ck_assert_int_eq(json_integer_value(json_object_get(ev, "step")), 1);
	ck_assert_str_eq(td_str(json_object_get(ev, "policy"), "head"), "off");
	json_decref(ev);
	json_t *data = td_wait_state(&c, job, "finished", T_JOB_MS);
	ck_assert_int_eq(json_integer_value(json_object_get(data, "exit_status")), 0);
	ck_assert_ptr_nonnull(strstr(td_str(data, "last_checkpoint"), "step_00000003"));
	json_decref(data);
	free(spec);

	/* pause answers the step it stops at, as status then says */
	spec = spec_of(1000000, NULL, NULL);
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, NULL));
	json_decref(wait_step(&c, job, 2, T_JOB_MS));
	json_t *r = td_request(&c, "{\"execute\":\"job-pause\",\"arguments\":{\"job\":\"%s\"}}",
		job);
	int at = (int)json_integer_value(json_object_get(td_expect_return(r), "step"));
	json_decref(r);
	json_decref(td_wait_state(&c, job, "paused", T_READ_MS));
	json_t *st = td_job_status(&c, job);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "step")), at);
	json_decref(st);
	td_close(&c);
	td_daemon_stop(&d);
	free(spec);
}
END_TEST

/* The number a request's reply gave as "change" (r taken) */
static int change_of(json_t *r)
{
	int n = (int)json_integer_value(json_object_get(td_expect_return(r), "change"));
	json_decref(r);
	return n;
}

/* An event's cause and change, as "cause:N" (null: "cause:-") */
static const char *cause_of(const json_t *ev, char *buf, size_t len)
{
	json_t *n = json_object_get(ev, "change");
	if (json_is_integer(n))
		snprintf(buf, len, "%s:%d", td_str((json_t *)ev, "cause"),
			(int)json_integer_value(n));
	else
		snprintf(buf, len, "%s:-", td_str((json_t *)ev, "cause"));
	return buf;
}

/* No STEP after unsubscribe's reply, on s (a tiny step is faster than the pacing: one is
 * held back nearly always) */
static void no_step_after_unsubscribe(td_conn *s)
{
	for (int round = 0; round < 3; round++) {
		td_send(s, "{\"execute\":\"subscribe\",\"arguments\":{\"events\":[\"STEP\"]}}");
		json_decref(td_reply(s, T_READ_MS));
		td_sleep_ms(120);
		td_send(s, "{\"execute\":\"unsubscribe\",\"arguments\":{\"events\":[\"STEP\"]}}");
		json_t *m;
		while ((m = td_read_msg(s, T_READ_MS)) && json_object_get(m, "event"))
			json_decref(m);
		ck_assert_ptr_nonnull(json_object_get(m, "return"));
		json_decref(m);
		m = td_read_msg(s, 300);
		ck_assert_msg(m == NULL, "a line after unsubscribe's reply: %s",
			td_str(m, "event"));
	}
}

/* Events say which request caused them: a remat-set kept while the job starts is the one
 * REMAT_APPLIED of step 1 (no second one for the spec's policy); sets taken at one boundary
 * are said once, with the last one's change; job-set's HPARAMS_APPLIED its own; the
 * controller's changes are the controller's; "off" is a null budget in REMAT_AUTO as in
 * remat-auto's reply; unsubscribe's reply is the last of the STEP events it removed; a
 * removed job's JOB_STATE_CHANGED has its exit status and last checkpoint. */
START_TEST(test_lifecycle_events_name_requests)
{
	setenv("REMAT_START_DELAY_MS", START_DELAY, 1);
	td_daemon d;
	td_conn c = real_daemon(&d), e = td_open(&d), s = td_open(&d);
	json_decref(td_request(&e, "{\"execute\":\"subscribe\",\"arguments\":{\"events\":["
		"\"REMAT_APPLIED\",\"REMAT_FAILED\",\"HPARAMS_APPLIED\",\"REMAT_AUTO\","
		"\"JOB_STATE_CHANGED\"]}}"));
	char save[700], job[16], cs[64];
	snprintf(save, sizeof save, "%s/save", d.dir);
	char *spec = spec_of(1000000, save, NULL);
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, "starting"));
#define SET(sections) change_of(td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":" \
	"{\"job\":\"%s\",\"sections\":{" sections "}}}", job))
	ck_assert_int_eq(SET("\"h.0\":\"selective\""), 1);
	json_t *ev = td_wait_event(&e, job, "REMAT_APPLIED", T_JOB_MS);
	ck_assert_int_eq(json_integer_value(json_object_get(ev, "step")), 1);
	ck_assert_str_eq(cause_of(ev, cs, sizeof cs), "remat-set:1");
	ck_assert_str_eq(td_str(json_object_get(ev, "policy"), "h.0"), "selective");
	json_decref(ev);

	/* two sets and a job-set taken at one boundary (the job paused) */
	json_decref(td_request(&c, "{\"execute\":\"job-pause\",\"arguments\":{\"job\":\"%s\"}}",
		job));
	json_decref(td_wait_state(&e, job, "paused", T_READ_MS));
	ck_assert_int_eq(SET("\"h.0\":\"full\""), 2);
	ck_assert_int_eq(SET("\"h.1\":\"full\""), 3);
#undef SET
	ck_assert_int_eq(change_of(td_request(&c, "{\"execute\":\"job-set\",\"arguments\":{"
		"\"job\":\"%s\",\"set\":{\"lr\":0.002}}}", job)), 4);
	json_decref(td_request(&c, "{\"execute\":\"job-resume\",\"arguments\":{\"job\":\"%s\"}}",
		job));
	ev = td_wait_event(&e, job, "HPARAMS_APPLIED", T_JOB_MS);
	ck_assert_int_eq(json_integer_value(json_object_get(ev, "change")), 4);
	json_decref(ev);
	ev = td_wait_event(&e, job, "REMAT_APPLIED", T_JOB_MS);
	ck_assert_str_eq(cause_of(ev, cs, sizeof cs), "remat-set:3");
	ck_assert_str_eq(td_str(json_object_get(ev, "policy"), "h.0-1"), "full");
	json_decref(ev);

	/* the controller's own change, and off said as null */
	json_t *r = td_request(&c, "{\"execute\":\"remat-auto\",\"arguments\":{\"job\":\"%s\","
		"\"budget_bytes\":4294967296}}", job);
	td_expect_return(r);
	json_decref(r);
	ev = td_wait_event(&e, job, "REMAT_APPLIED", T_JOB_MS);
	ck_assert_str_eq(cause_of(ev, cs, sizeof cs), "controller:-");
	json_decref(ev);
	r = td_request(&c, "{\"execute\":\"remat-auto\",\"arguments\":{\"job\":\"%s\","
		"\"budget\":\"off\"}}", job);
	td_expect_return(r);
	json_decref(r);
	for (ev = NULL; !ev || !json_is_null(json_object_get(ev, "policy"));) {
		json_decref(ev);
		ev = td_wait_event(&e, job, "REMAT_AUTO", T_JOB_MS);
	}
	ck_assert(json_is_null(json_object_get(ev, "budget_bytes")) &&
		  json_is_null(json_object_get(ev, "predicted_peak_bytes")));
	json_decref(ev);

	no_step_after_unsubscribe(&s);
	json_decref(td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\"}}",
		job));
	json_decref(td_wait_state(&e, job, "stopped", T_JOB_MS));
	json_decref(td_request(&c, "{\"execute\":\"job-remove\",\"arguments\":{\"job\":\"%s\"}}",
		job));
	ev = td_wait_state(&e, job, "removed", T_READ_MS);
	ck_assert_msg(json_integer_value(json_object_get(ev, "exit_status")) == 0 &&
		      json_is_integer(json_object_get(ev, "exit_status")) &&
		      strstr(td_str(ev, "last_checkpoint"), save), "removed: no exit status or "
		"checkpoint");
	json_decref(ev);
	td_close(&s);
	td_close(&e);
	td_close(&c);
	td_daemon_stop(&d);
	free(spec);
}
END_TEST

/* A client on a worker's own socket sees its last STEP, though STEP events are paced. */
START_TEST(test_lifecycle_control_sees_final_step)
{
	setenv("REMAT_START_DELAY_MS", START_DELAY, 1);
	td_daemon d;
	td_daemon_paths(&d); /* only for its directory */
	char *spec = spec_of(60, NULL, NULL), job[700], sock[720], log[720];
	snprintf(job, sizeof job, "%s/job.json", d.dir);
	snprintf(sock, sizeof sock, "%s/ctl.sock", d.dir);
	snprintf(log, sizeof log, "%s/train.log", d.dir);
	t_write_file(job, spec, strlen(spec));
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(t_env("REMAT_TRAIN"), "remat-train", "--control", sock, job, (char *)NULL);
		_exit(127);
	}
	long end = td_ms() + T_START_MS;
	int fd;
	while ((fd = td_connect(sock)) < 0) {
		ck_assert_msg(td_ms() < end, "no control socket:\n%s", td_slurp(log));
		td_sleep_ms(20);
	}
	td_conn c = {fd, NULL, 0, 0};
	json_decref(td_read_msg(&c, T_READ_MS)); /* the greeting */
	json_decref(td_request(&c, "{\"execute\":\"subscribe\",\"arguments\":{\"events\":"
		"[\"STEP\"]}}"));
	int last = 0, n = 0;
	for (json_t *o; (o = td_read_msg(&c, T_JOB_MS));) {
		json_t *data = json_object_get(o, "data");
		if (json_is_integer(json_object_get(data, "step"))) {
			last = (int)json_integer_value(json_object_get(data, "step"));
			n++;
		}
		json_decref(o);
	}
	ck_assert_msg(last == 60, "the last STEP seen was %d (of %d events)", last, n);
	ck_assert_int_eq(td_wait_pid(pid, T_STOP_MS), 0);
	td_close(&c);
	free(spec);
}
END_TEST

/* remat-auto through rematd: a budget between what off and the least policy need (as
 * remat-plan predicts them, without a save's snapshot) gives a REMAT_AUTO event with a
 * policy that fits, and job-status shows the budget; a remat-set --force takes the policy
 * back, with a REMAT_AUTO saying so. */
START_TEST(test_lifecycle_auto_budget)
{
	if (t_asan_skips("test_lifecycle_auto_budget"))
		return;
	td_daemon d;
	char id[16];
	td_conn c = td_real_job(&d, id);
	/* the peaks without a save's snapshot, which the controller can do without */
	json_t *r = td_request(&c, "{\"execute\":\"remat-plan\",\"arguments\":{\"job\":\"%s\","
		"\"default\":\"off\",\"sections\":{\"head\":\"off\"}}}", id);
	json_t *ret = td_expect_return(r);
	json_int_t off = json_integer_value(json_object_get(ret, "peak_bytes")) -
		json_integer_value(json_object_get(json_object_get(ret, "memory"), "snapshot"));
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"remat-plan\",\"arguments\":{\"job\":\"%s\","
		"\"default\":\"full\",\"sections\":{\"head\":\"chunked\"}}}", id);
	ret = td_expect_return(r);
	json_int_t least = json_integer_value(json_object_get(ret, "peak_bytes")) -
		json_integer_value(json_object_get(json_object_get(ret, "memory"), "snapshot"));
	json_decref(r);
	ck_assert_int_lt(least, off);
	/* the controller aims at the budget less its headroom: that aim halfway */
	json_int_t budget = (json_int_t)((double)(off + least) / 2 / (1.0 - ENG_AUTO_HEADROOM));
	r = td_request(&c, "{\"execute\":\"remat-auto\",\"arguments\":{\"job\":\"%s\","
		"\"budget_bytes\":%lld}}", id, (long long)budget);
	ck_assert_int_eq(json_integer_value(json_object_get(td_expect_return(r), "budget_bytes")),
		budget);
	json_decref(r);
	json_t *ev = td_wait_event(&c, id, "REMAT_AUTO", T_JOB_MS);
	ck_assert_msg(json_integer_value(json_object_get(ev, "predicted_peak_bytes")) <= budget,
		"%s (off %lld, least %lld)", json_dumps(ev, 0), (long long)off, (long long)least);
	/* the change for a new budget, not one under pressure */
	ck_assert_msg(strncmp(td_str(ev, "reason"), "budget ", 7) == 0, "%s", td_str(ev, "reason"));
	ck_assert_int_eq(json_integer_value(json_object_get(ev, "budget_bytes")), budget);
	ck_assert(json_is_object(json_object_get(ev, "policy")));
	json_decref(ev);
	json_t *st = td_job_status(&c, id);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "auto_budget_bytes")), budget);
	json_decref(st);
	/* watch shows the budget beside the memory */
	char *out;
	int rc = td_ctl(&d, &out, "watch", id, "--count", "2", NULL);
	ck_assert_msg(rc == 0 && strstr(out, " budget "), "watch: %d %s", rc, out);
	free(out);
	/* remat-set --force hands the policy back: the reply and a REMAT_AUTO say so */
	r = td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{\"h.0\":\"full\"},\"force\":true}}", id);
	ck_assert_str_eq(td_str(td_expect_return(r), "controller"), "off");
	json_decref(r);
	ev = td_wait_event(&c, id, "REMAT_AUTO", T_JOB_MS);
	ck_assert_ptr_nonnull(strstr(td_str(ev, "reason"), "off"));
	json_decref(ev);
	st = td_job_status(&c, id);
	ck_assert(json_is_null(json_object_get(st, "auto_budget_bytes")));
	json_decref(st);
	/* a budget with neither bytes nor a source is refused by the worker */
	r = td_request(&c, "{\"execute\":\"remat-auto\",\"arguments\":{\"job\":\"%s\"}}", id);
	ck_assert_str_eq(td_str(json_object_get(r, "error"), "class"), "InvalidParameter");
	json_decref(r);
	td_daemon_stop(&d);
	td_close(&c);
}
END_TEST

Suite *suite_lifecycle(void)
{
	Suite *s = suite_create("lifecycle");
	TCase *tc = tcase_create("lifecycle");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lifecycle_disk_full);
	tcase_add_test(tc, test_lifecycle_daemon_killed_resume);
	tcase_add_test(tc, test_lifecycle_reason_from_this_run);
	tcase_add_test(tc, test_lifecycle_requests_while_starting);
	tcase_add_test(tc, test_lifecycle_queue_cancel_plan_remove);
	tcase_add_test(tc, test_lifecycle_plan_llama_lora);
	tcase_add_test(tc, test_lifecycle_spec_refused_at_start);
	tcase_add_test(tc, test_lifecycle_stopped_job_keeps_save_dir);
	tcase_add_test(tc, test_lifecycle_unanswered_query);
	tcase_add_test(tc, test_lifecycle_idle_connections);
	tcase_add_test(tc, test_lifecycle_events_promises);
	tcase_add_test(tc, test_lifecycle_events_name_requests);
	tcase_add_test(tc, test_lifecycle_control_sees_final_step);
	tcase_add_test(tc, test_lifecycle_auto_budget);
	suite_add_tcase(s, tc);
	return s;
}
