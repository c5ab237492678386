/* test_security.c - attacks on the worker and the daemon, each followed by a check that the
 * victim (a file or directory outside the save directory, a file the user may not read)
 * is untouched and the attack got a clear error.
 *
 * The attacks go through the programs (remat-train, rematctl, rematd), not through the
 * engine's functions, so that the same tests run against any build: pointed at a build
 * from before the fixes (REMAT_TRAIN=... REMATD=...), each of them fails.
 *
 *   - a save directory holding symlinks under the names the engine uses itself: X.tmp,
 *     X.old, step_N, latest.tmp, and a named checkpoint;
 *   - a FIFO as a data file, and as a file inside init_from;
 *   - a file that is not an llm.c file: its first bytes never appear in a message;
 *   - (as root) another user's entry where a checkpoint entry is expected.
 * The daemon's side: a --group peer of a root rematd naming a file or a directory only root
 * may use, and the job it may run running as it; another uid on a worker's --control
 * socket; a FIFO named at job-start.
 */
#include "t_ckpt.h"
#include "t_daemon.h"
#include "t_util.h"

#include "eng_cred.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUN_MS 30000       /* a small job ends within this, or it hangs */
#define VICTIM_TEXT "the victim's own words\n"

/* ---- helpers ---- */

/* A victim directory under root holding one file; returns its path. */
static char *make_victim(const char *root)
{
	char *v = path_join(root, "victim");
	ck_assert_int_eq(mkdir(v, 0755), 0);
	char *f = path_join(v, "precious.txt");
	write_text(f, VICTIM_TEXT);
	free(f);
	return v;
}

/* The victim directory still holds its file, unchanged. */
static void victim_intact(const char *victim, const char *what)
{
	char *f = path_join(victim, "precious.txt");
	struct stat st;
	ck_assert_msg(stat(f, &st) == 0, "%s: the victim's file is gone", what);
	size_t len;
	char *text = t_read_file(f, &len);
	ck_assert_msg(strcmp(text, VICTIM_TEXT) == 0, "%s: the victim's file was rewritten: "
		"'%.60s'", what, text);
	free(text);
	free(f);
}

/* Runs remat-train with args, killing it after ms (then returns 124): its exit status,
 * with stdout and stderr in *out. A hang is a failure of the test, never of the suite. */
static int run_train_bounded(const char *const *args, int ms, char **out)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		const char *argv[T_TRAIN_MAX_ARGS + 2];
		int n = 0;
		argv[n++] = t_env("REMAT_TRAIN");
		for (int i = 0; args[i] && n < T_TRAIN_MAX_ARGS; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	long end = td_ms() + ms;
	int timed_out = 0;
	for (;;) {
		long left = end - td_ms();
		if (left <= 0) {
			timed_out = 1;
			break;
		}
		struct pollfd pf = {p[0], POLLIN, 0};
		if (poll(&pf, 1, (int)left) <= 0)
			continue;
		if (len + 1 >= cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
		ssize_t r = read(p[0], buf + len, cap - len - 1);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	close(p[0]);
	if (timed_out)
		kill(pid, SIGKILL);
	int status = 0;
	waitpid(pid, &status, 0);
	*out = buf;
	if (timed_out)
		return 124;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A tiny job saving into save_dir: steps, and extra top-level fields. */
static char *save_job(const char *root, const char *save_dir, int steps, const char *extra)
{
	char x[8192];
	snprintf(x, sizeof x, ", \"save\": {\"dir\": \"%s\"%s}", save_dir, extra);
	return job_file(root, "job.json", TINY, steps, 2, x);
}

/* Runs remat-train on job: it must fail (status 1) within RUN_MS, saying each needle. */
static void expect_refused(const char *what, const char *job, const char *n1, const char *n2)
{
	const char *args[] = {job, NULL};
	char *out;
	int rc = run_train_bounded(args, RUN_MS, &out);
	ck_assert_msg(rc != 124, "%s: remat-train hung (killed after %d ms):\n%s", what, RUN_MS,
		out);
	ck_assert_msg(rc == 1, "%s: exit status %d, want 1:\n%s", what, rc, out);
	ck_assert_msg(strstr(out, n1) && (!n2 || strstr(out, n2)), "%s: the message lacks '%s' "
		"or '%s':\n%s", what, n1, n2 ? n2 : "", out);
	free(out);
}

/* 1 when this process is root; else a line saying that test skips. */
static int is_root(const char *test, const char *why)
{
	if (geteuid() == 0)
		return 1;
	printf("%s: skipped: needs root%s\n", test, why);
	return 0;
}

/* ---- the save directory's own names, as symlinks ---- */

START_TEST(test_security_tmp_symlink_not_followed)
{
	need_gpl();
	char *root = t_tmp_dir("sec_tmp"), *victim = make_victim(root);
	char *sd = path_join(root, "save"), *link = path_join(sd, "step_00000005.tmp");
	ck_assert_int_eq(mkdir(sd, 0755), 0);
	ck_assert_int_eq(symlink(victim, link), 0);
	char *job = save_job(root, sd, 2, "");
	expect_refused("step_00000005.tmp -> victim", job, "refusing to remove 'step_00000005.tmp'",
		"symbolic link");
	victim_intact(victim, "step_00000005.tmp");
	struct stat st;
	ck_assert_msg(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link itself went");
	free(job);
	free(link);
	free(sd);
	free(victim);
	free(root);
}
END_TEST

START_TEST(test_security_old_symlink_not_followed)
{
	need_gpl();
	char *root = t_tmp_dir("sec_old"), *victim = make_victim(root);
	char *sd = path_join(root, "save"), *base = path_join(sd, "best");
	char *link = path_join(sd, "best.old");
	ck_assert_int_eq(mkdir(sd, 0755), 0);
	ck_assert_int_eq(mkdir(base, 0755), 0); /* X exists: X.old would be removed */
	ck_assert_int_eq(symlink(victim, link), 0);
	char *job = save_job(root, sd, 2, "");
	expect_refused("best.old -> victim", job, "'best.old'", "symbolic link");
	victim_intact(victim, "best.old");
	free(job);
	free(link);
	free(base);
	free(sd);
	free(victim);
	free(root);
}
END_TEST

/* keep 1 with a save every step: pruning reaches the oldest step_ entry, a link */
START_TEST(test_security_step_symlink_not_pruned)
{
	need_gpl();
	char *root = t_tmp_dir("sec_step"), *victim = make_victim(root);
	char *sd = path_join(root, "save"), *link = path_join(sd, "step_00000000");
	ck_assert_int_eq(mkdir(sd, 0755), 0);
	ck_assert_int_eq(symlink(victim, link), 0);
	char *job = save_job(root, sd, 3, ", \"every\": 1, \"keep\": 1");
	const char *args[] = {job, NULL};
	char *out;
	int rc = run_train_bounded(args, RUN_MS, &out);
	ck_assert_msg(rc == 0, "exit status %d:\n%s", rc, out);
	victim_intact(victim, "step_00000000 -> victim, keep 1");
	struct stat st;
	ck_assert_msg(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link itself went");
	/* what keep is for still happens to the real checkpoints */
	ck_assert_str_eq(listing(sd), "latest step_00000000 step_00000003");
	free(out);
	free(job);
	free(link);
	free(sd);
	free(victim);
	free(root);
}
END_TEST

/* Starts a long job under --control in root with save dir sd; returns its pid once it
 * answers job-status as running. The socket is root/ctl.sock. */
static pid_t start_controlled(const char *root, const char *sd, char **sock)
{
	char *job = save_job(root, sd, 1000000, ""), *log = path_join(root, "train.log");
	*sock = path_join(root, "ctl.sock");
	pid_t pid = spawn_train(job, log, *sock);
	long end = td_ms() + WAIT_MS;
	for (;;) {
		ck_assert_msg(td_ms() < end, "the worker never ran:\n%s", td_slurp(log));
		ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "the worker exited:\n%s",
			td_slurp(log));
		char *out = NULL;
		char *argv[] = {(char *)t_env("REMATCTL"), "--control", *sock, "--json", "status",
			NULL};
		if (access(*sock, F_OK) == 0 && t_run(argv, &out) == 0 && strstr(out,
			"\"state\":\"running\"")) {
			free(out);
			break;
		}
		free(out);
		td_sleep_ms(50);
	}
	free(log);
	free(job);
	return pid;
}

static void stop_controlled(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* rematctl --control sock save [--name name]: its status, output in *out. */
static int ctl_save(const char *sock, const char *name, char **out)
{
	char *argv[] = {(char *)t_env("REMATCTL"), "--control", (char *)sock, "save",
		name ? "--name" : NULL, (char *)name, NULL};
	return t_run(argv, out);
}

/* latest.tmp appears mid-run as a link to the victim's file; the next save must not write
 * through it */
START_TEST(test_security_latest_tmp_symlink_not_written)
{
	need_gpl();
	char *root = t_tmp_dir("sec_latest"), *victim = make_victim(root);
	char *sd = path_join(root, "save"), *sock;
	pid_t pid = start_controlled(root, sd, &sock);
	char *link = path_join(sd, "latest.tmp"), *target = path_join(victim, "precious.txt");
	ck_assert_int_eq(symlink(target, link), 0);
	char *out;
	int rc = ctl_save(sock, NULL, &out);
	victim_intact(victim, "latest.tmp -> victim's file");
	ck_assert_msg(rc == 1 && strstr(out, "latest.tmp") && strstr(out, "symbolic link"),
		"save: status %d: %s", rc, out);
	free(out);
	/* once the link is gone, saving works again: the run lost nothing */
	ck_assert_int_eq(unlink(link), 0);
	rc = ctl_save(sock, NULL, &out);
	ck_assert_msg(rc == 0, "save after the link went: status %d: %s", rc, out);
	stop_controlled(pid);
	free(out);
	free(target);
	free(link);
	free(sock);
	free(sd);
	free(victim);
	free(root);
}
END_TEST

/* a checkpoint saved by name, where that name is a link to the victim */
START_TEST(test_security_named_symlink_not_replaced)
{
	need_gpl();
	char *root = t_tmp_dir("sec_named"), *victim = make_victim(root);
	char *sd = path_join(root, "save"), *sock;
	pid_t pid = start_controlled(root, sd, &sock);
	char *link = path_join(sd, "best");
	ck_assert_int_eq(symlink(victim, link), 0);
	char *out;
	int rc = ctl_save(sock, "best", &out);
	victim_intact(victim, "best -> victim");
	ck_assert_msg(rc == 1 && strstr(out, "'best'") && strstr(out, "symbolic link"),
		"save --name best: status %d: %s", rc, out);
	struct stat st;
	ck_assert_msg(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link itself went");
	stop_controlled(pid);
	free(out);
	free(link);
	free(sock);
	free(sd);
	free(victim);
	free(root);
}
END_TEST

/* As root: another user's directory under a name the engine removes at start. */
START_TEST(test_security_foreign_entry_refused)
{
	if (!is_root("test_security_foreign_entry_refused", " to chown"))
		return;
	need_gpl();
	char *root = t_tmp_dir("sec_foreign"), *sd = path_join(root, "save");
	char *tmp = path_join(sd, "step_00000004.tmp"), *f = path_join(tmp, "precious.txt");
	ck_assert_int_eq(mkdir(sd, 0755), 0);
	ck_assert_int_eq(mkdir(tmp, 0755), 0);
	write_text(f, VICTIM_TEXT);
	ck_assert_int_eq(chown(f, 65534, 65534), 0);
	ck_assert_int_eq(chown(tmp, 65534, 65534), 0);
	char *job = save_job(root, sd, 2, "");
	expect_refused("another user's step_00000004.tmp", job, "'step_00000004.tmp'",
		"belongs to uid 65534");
	ck_assert_msg(exists(f), "another user's file was removed");
	free(job);
	free(f);
	free(tmp);
	free(sd);
	free(root);
}
END_TEST

/* ---- files that are not regular files, and files that are not ours to show ---- */

START_TEST(test_security_fifo_data_refused)
{
	char *root = t_tmp_dir("sec_fifo"), *fifo = path_join(root, "data.fifo");
	ck_assert_int_eq(mkfifo(fifo, 0644), 0);
	char extra[256];
	char *job = NULL;
	snprintf(extra, sizeof extra, ", \"data\": {\"train\": \"%s\", \"format\": \"bytes\"}",
		fifo);
	ck_assert(asprintf(&job, "{\"model\": {" TINY "}, \"steps\": 2%s}", extra) > 0);
	char *path = path_join(root, "job.json");
	write_text(path, job);
	expect_refused("data.train a FIFO", path, "data.fifo", "FIFO");
	free(path);
	free(job);
	free(fifo);
	free(root);
}
END_TEST

/* a checkpoint directory whose config.json is a FIFO */
START_TEST(test_security_fifo_in_init_from_refused)
{
	need_gpl();
	char *root = t_tmp_dir("sec_fifo_init"), *ck = path_join(root, "ck");
	char *src = t_data("reference/tiny");
	copy_dir(src, ck);
	char *cfg = path_join(ck, "config.json");
	ck_assert_int_eq(unlink(cfg), 0);
	ck_assert_int_eq(mkfifo(cfg, 0644), 0);
	char model[4200];
	snprintf(model, sizeof model, "\"init_from\": \"%s\"", ck);
	char *job = job_file(root, "job.json", model, 2, 2, "");
	expect_refused("init_from with a FIFO config.json", job, "config.json", "FIFO");
	free(job);
	free(cfg);
	free(src);
	free(ck);
	free(root);
}
END_TEST

/* The first bytes of a file that is not in the format asked for are not echoed, in any
 * form: the daemon may be made to open what the user could not read. */
START_TEST(test_security_bytes_not_echoed)
{
	char *root = t_tmp_dir("sec_echo"), *secret = path_join(root, "secret.bin");
	static const char bytes[] = "SECRETXYhunter2-password-and-more-than-256-bytes-follow";
	char *big = calloc(1, 4096);
	ck_assert_ptr_nonnull(big);
	memcpy(big, bytes, sizeof bytes);
	t_write_file(secret, big, 4096);
	int32_t w0, w1;
	memcpy(&w0, bytes, 4);
	memcpy(&w1, bytes + 4, 4);
	char i0[16], i1[16];
	snprintf(i0, sizeof i0, "%d", w0);
	snprintf(i1, sizeof i1, "%d", w1);
	/* as an llmc token file, and as an llm.c model file */
	char spec[8192], model[4200];
	snprintf(spec, sizeof spec, "{\"model\": {" TINY "}, \"data\": {\"train\": \"%s\"}, "
		"\"steps\": 2}", secret);
	char *job = path_join(root, "data.json");
	write_text(job, spec);
	snprintf(model, sizeof model, "\"init_from\": \"%s\"", secret);
	char *job2 = job_file(root, "model.json", model, 2, 2, "");
	const char *jobs[] = {job, job2};
	for (int i = 0; i < 2; i++) {
		const char *args[] = {jobs[i], NULL};
		char *out;
		int rc = run_train_bounded(args, RUN_MS, &out);
		ck_assert_msg(rc == 1 && strstr(out, "secret.bin"), "%s: status %d: %s", jobs[i], rc,
			out);
		ck_assert_msg(!strstr(out, i0) && !strstr(out, i1) && !strstr(out, "SECRET") &&
			!strstr(out, "hunter2"), "%s: the file's bytes are in the message: %s",
			jobs[i], out);
		free(out);
	}
	free(job2);
	free(job);
	free(big);
	free(secret);
	free(root);
}
END_TEST

/* remat-train --as: what rematd writes is what the worker reads, and nothing else parses */
START_TEST(test_eng_cred_round_trip)
{
	eng_cred c = {1000, 100, 3, {4, 24, 4242}}, d;
	char buf[ENG_CRED_ARG_LEN], err[128];
	eng_cred_format(&c, buf, sizeof buf);
	ck_assert_str_eq(buf, "1000:100:4,24,4242");
	ck_assert_int_eq(eng_cred_parse(buf, &d, err, sizeof err), 0);
	ck_assert(d.uid == 1000 && d.gid == 100 && d.ngroups == 3 && d.groups[2] == 4242);
	c.ngroups = ENG_CRED_MAX_GROUPS;
	for (int i = 0; i < c.ngroups; i++)
		c.groups[i] = 4000000000u - (gid_t)i; /* the longest ids: the buffer still holds */
	eng_cred_format(&c, buf, sizeof buf);
	ck_assert_int_eq(eng_cred_parse(buf, &d, err, sizeof err), 0);
	ck_assert_int_eq(d.ngroups, ENG_CRED_MAX_GROUPS);
	static const char *const bad[] = {"", "1000", "1000:", ":100", "x:100", "1000:100:",
		"1000:100:a", "1000:100:4,,5", "-1:100", "1000:100:4;5", "99999999999:1"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(eng_cred_parse(bad[i], &d, err, sizeof err) == -1 && strstr(err,
			"--as"), "'%s' accepted", bad[i]);
}
END_TEST

/* ---- the daemon's side ---- */


/* "Uid:" of /proc/PID/status: the real uid of a process, or -1. */
static long proc_uid(pid_t pid)
{
	char path[64], line[256];
	long uid = -1;
	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "Uid:", 4) == 0)
			uid = strtol(line + 4, NULL, 10);
	if (f)
		fclose(f);
	return uid;
}

/* rematd as root with --group: a member of the group (not root) names a root-only file, a
 * root-only directory; and its job, when it starts, runs as that member. */
START_TEST(test_security_group_peer_has_own_rights)
{
	if (!is_root("test_security_group_peer_has_own_rights", ""))
		return;
	need_gpl();
	td_daemon d;
	td_daemon_paths(&d);
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	if (!td_peer_can_reach("test_security_group_peer_has_own_rights", d.dir))
		return;
	/* the victims: a file and a directory only root may use */
	char *priv = path_join(d.dir, "private"), *secret = path_join(priv, "precious.txt");
	char *save_victim = path_join(priv, "save");
	ck_assert_int_eq(mkdir(priv, 0700), 0);
	write_text(secret, VICTIM_TEXT);
	ck_assert_int_eq(chmod(secret, 0600), 0);
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), "--group", TD_PEER_GROUP, NULL};
	td_daemon_start(&d, extra);

	char spec[8192], *out;
	snprintf(spec, sizeof spec, "{\"model\": {" TINY "}, \"data\": {\"train\": \"%s\", "
		"\"format\": \"bytes\"}, \"batch\": 2, \"seq_len\": 32, \"steps\": 5}", secret);
	char *job1 = path_join(d.dir, "read.json");
	write_text(job1, spec);
	ck_assert_int_eq(chmod(job1, 0644), 0);
	char *argv[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "start", job1, NULL};
	int rc = td_run_as_peer(argv, &out);
	ck_assert_msg(rc == 1 && strstr(out, "precious.txt") && strstr(out, "Permission denied"),
		"a root-only data file: status %d: %s", rc, out);
	free(out);

	snprintf(spec, sizeof spec, "{\"model\": {" TINY "}, \"data\": {\"train\": \"" GPL "\", "
		"\"format\": \"bytes\"}, \"batch\": 2, \"seq_len\": 32, \"steps\": 5, \"save\": "
		"{\"dir\": \"%s\"}}", save_victim);
	char *job2 = path_join(d.dir, "write.json");
	write_text(job2, spec);
	ck_assert_int_eq(chmod(job2, 0644), 0);
	argv[4] = job2;
	rc = td_run_as_peer(argv, &out);
	ck_assert_msg(rc == 1 && strstr(out, "Permission denied"), "a root-only save directory: "
		"status %d: %s", rc, out);
	ck_assert_msg(!exists(save_victim), "%s was created", save_victim);
	free(out);

	/* a job it may run runs as it: its worker's uid, its checkpoints' owner */
	snprintf(spec, sizeof spec, "{\"model\": {" TINY "}, \"data\": {\"train\": \"" GPL "\", "
		"\"format\": \"bytes\"}, \"batch\": 2, \"seq_len\": 32, \"steps\": 1000000}");
	char *job3 = path_join(d.dir, "own.json");
	write_text(job3, spec);
	ck_assert_int_eq(chmod(job3, 0644), 0);
	argv[4] = job3;
	rc = td_run_as_peer(argv, &out);
	ck_assert_msg(rc == 0, "a job of its own: status %d: %s", rc, out);
	/* the id is stdout's line alone; the resolved paths and what trains (stderr, merged
	 * here) come around it */
	char id[16] = "";
	for (const char *l = out; *l;) {
		size_t n = strcspn(l, "\n");
		if (n > 1 && n < sizeof id && l[0] == 'j' && strspn(l + 1, "0123456789") == n - 1)
			snprintf(id, sizeof id, "%.*s", (int)n, l);
		l += n + (l[n] == '\n');
	}
	ck_assert_msg(id[0], "no job id in: %s", out);
	free(out);
	td_conn c = td_open(&d);
	json_t *st;
	long end = td_ms() + T_JOB_MS;
	for (;;) {
		st = td_job_status(&c, id);
		if (json_integer_value(json_object_get(st, "step")) >= 1)
			break;
		ck_assert_msg(strcmp(td_str(st, "state"), "failed") != 0, "failed: %s",
			td_str(st, "reason"));
		json_decref(st);
		ck_assert_msg(td_ms() < end, "the job never stepped");
		td_sleep_ms(50);
	}
	pid_t wpid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	ck_assert_int_eq(json_integer_value(json_object_get(st, "uid")), TD_NOBODY);
	json_decref(st);
	ck_assert_int_eq(proc_uid(wpid), TD_NOBODY);
	/* root's own job may not be stopped by it */
	char *rootsave = path_join(d.dir, "rootsave");
	char *job4 = save_job(d.dir, rootsave, 1000000, "");
	const char *root_job = td_job_start(&c, td_slurp(job4), NULL);
	char rj[16];
	snprintf(rj, sizeof rj, "%s", root_job);
	char *stop[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "stop", rj, NULL};
	rc = td_run_as_peer(stop, &out);
	ck_assert_msg(rc == 1 && strstr(out, "PermissionDenied"), "stopping root's job: %d %s",
		rc, out);
	free(out);
	/* its own, saved: the files are its */
	char *stop_own[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "--json", "stop", id,
		"--save", NULL};
	rc = td_run_as_peer(stop_own, &out);
	ck_assert_msg(rc == 0, "stop --save of its own job: %d %s", rc, out);
	json_t *ret = json_loads(out, 0, NULL);
	char *model = path_join(td_str(ret, "checkpoint"), "model.safetensors");
	struct stat sb;
	ck_assert_int_eq(stat(model, &sb), 0);
	ck_assert_int_eq(sb.st_uid, TD_NOBODY);
	json_decref(ret);
	free(out);
	free(model);
	td_close(&c);
	td_daemon_stop(&d);
	victim_intact(priv, "a --group peer");
	free(job4);
	free(rootsave);
	free(job3);
	free(job2);
	free(job1);
	free(save_victim);
	free(secret);
	free(priv);
}
END_TEST

/* The worker's own socket (--control): its mode is not all that guards it. */
START_TEST(test_security_control_socket_checks_peer)
{
	if (!is_root("test_security_control_socket_checks_peer", ""))
		return;
	need_gpl();
	char *root = t_tmp_dir("sec_ctl"), *sd = path_join(root, "save"), *sock;
	ck_assert_int_eq(chmod(root, 0711), 0);
	if (!td_peer_can_reach("test_security_control_socket_checks_peer", root))
		return;
	pid_t pid = start_controlled(root, sd, &sock);
	ck_assert_int_eq(chmod(sock, 0666), 0); /* as if its mode had been got wrong */
	char *argv[] = {(char *)t_env("REMATCTL"), "--control", sock, "status", NULL}, *out;
	int rc = td_run_as_peer(argv, &out);
	ck_assert_msg(rc == 1 && strstr(out, "PermissionDenied") && !strstr(out, "running"),
		"another uid on the worker's socket: %d %s", rc, out);
	free(out);
	/* and its own user still gets in */
	char *mine[] = {(char *)t_env("REMATCTL"), "--control", sock, "status", NULL};
	ck_assert_int_eq(t_run(mine, &out), 0);
	free(out);
	stop_controlled(pid);
	free(sock);
	free(sd);
	free(root);
}
END_TEST

/* A FIFO named by a spec is refused at job-start, at once: no worker ever blocks on it. */
START_TEST(test_security_fifo_refused_at_job_start)
{
	need_gpl();
	td_daemon d;
	td_daemon_paths(&d);
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	char *fifo = path_join(d.dir, "data.fifo"), *ck = path_join(d.dir, "ck");
	ck_assert_int_eq(mkfifo(fifo, 0644), 0);
	char *src = t_data("reference/tiny");
	copy_dir(src, ck);
	char *cfg = path_join(ck, "config.json");
	ck_assert_int_eq(unlink(cfg), 0);
	ck_assert_int_eq(mkfifo(cfg, 0644), 0);
	long t0 = td_ms();
	json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":{"
		"\"model\":{" TINY "},\"data\":{\"train\":\"%s\",\"format\":\"bytes\"}}}}", fifo);
	const char *desc = td_expect_error(r, "InvalidParameter");
	ck_assert_msg(strstr(desc, "data.fifo") && strstr(desc, "FIFO"), "desc: %s", desc);
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":{"
		"\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"" GPL "\","
		"\"format\":\"bytes\"}}}}", ck);
	desc = td_expect_error(r, "InvalidParameter");
	ck_assert_msg(strstr(desc, "config.json") && strstr(desc, "FIFO"), "desc: %s", desc);
	json_decref(r);
	ck_assert_msg(td_ms() - t0 < T_READ_MS, "refusing took %ld ms", td_ms() - t0);
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
	free(cfg);
	free(src);
	free(ck);
	free(fifo);
}
END_TEST

/* Links planted in rematd's state directory are never followed: a jobs/jN that is a link
 * to another directory is not loaded as a job, nor written through (new jobs take other
 * ids); a jobs/ that is a link stops rematd at start, before anything is written. */
START_TEST(test_security_state_dir_links_not_followed)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *victim = make_victim(d.dir);
	char *rec = path_join(victim, "state.json");
	write_text(rec, "{\"format\":1,\"name\":\"planted\",\"state\":\"stopped\"}\n");
	char jobs[700], link[800];
	snprintf(jobs, sizeof jobs, "%s/jobs", d.state);
	ck_assert_int_eq(mkdir(d.state, 0700), 0);
	ck_assert_int_eq(mkdir(jobs, 0711), 0);
	snprintf(link, sizeof link, "%s/j1", jobs);
	ck_assert_int_eq(symlink(victim, link), 0);
	td_daemon_start(&d, NULL);
	td_conn c = td_open(&d);
	json_t *r = td_request(&c, "{\"execute\":\"job-list\"}");
	ck_assert_uint_eq(json_array_size(json_object_get(td_expect_return(r), "jobs")), 0);
	json_decref(r);
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "symbolic link"));
	/* a new job: another id, and nothing written through the link */
	const char *id = td_job_start(&c, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\""
		T_GPL "\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":1}", NULL);
	ck_assert_str_ne(id, "j1");
	td_close(&c);
	td_daemon_stop(&d);
	victim_intact(victim, "jobs/j1 a link");
	char *spec = path_join(victim, "job.json");
	ck_assert_msg(access(spec, F_OK) < 0, "a job's spec was written through jobs/j1");
	free(spec);

	/* jobs/ itself a link: rematd refuses to start */
	char *other = path_join(d.dir, "elsewhere");
	ck_assert_int_eq(mkdir(other, 0755), 0);
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", jobs);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(symlink(other, jobs), 0);
	pid_t pid = td_daemon_exec(&d, NULL);
	int st = td_wait_pid(pid, T_STOP_MS);
	ck_assert_msg(st == 1, "rematd with jobs/ a link: status %d", st);
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "symbolic link"));
	snprintf(cmd, sizeof cmd, "[ -z \"$(ls -A '%s')\" ]", other);
	ck_assert_msg(system(cmd) == 0, "rematd wrote into the directory jobs/ points to");
	free(other);
	free(rec);
	free(victim);
}
END_TEST

Suite *suite_security(void)
{
	Suite *s = suite_create("security");
	TCase *tc = tcase_create("save_dir");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_security_tmp_symlink_not_followed);
	tcase_add_test(tc, test_security_old_symlink_not_followed);
	tcase_add_test(tc, test_security_step_symlink_not_pruned);
	tcase_add_test(tc, test_security_latest_tmp_symlink_not_written);
	tcase_add_test(tc, test_security_named_symlink_not_replaced);
	tcase_add_test(tc, test_security_foreign_entry_refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("files");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_security_fifo_data_refused);
	tcase_add_test(tc, test_security_fifo_in_init_from_refused);
	tcase_add_test(tc, test_security_bytes_not_echoed);
	tcase_add_test(tc, test_eng_cred_round_trip);
	suite_add_tcase(s, tc);
	tc = tcase_create("daemon");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_security_group_peer_has_own_rights);
	tcase_add_test(tc, test_security_control_socket_checks_peer);
	tcase_add_test(tc, test_security_fifo_refused_at_job_start);
	tcase_add_test(tc, test_security_state_dir_links_not_followed);
	suite_add_tcase(s, tc);
	return s;
}
