/* test_links.c - links planted under the names remat writes in a save directory and in
 * rematd's state directory (design.md §10: every such file is created new and renamed into
 * place, or refused when it is a link, symbolic or hard, or another user's).
 *
 * Each test plants, under one name remat writes, a hard link to a file outside the
 * directory (the victim), a symbolic link to it, or (as root) a file of uid 65534, and
 * checks that the write is refused with a message naming the entry and saying why, and
 * that the victim keeps every byte. The names: the save directory's .lock, latest,
 * latest.tmp, the files of a checkpoint being written (model.safetensors, config.json,
 * trainer_state.json, their .tmp) in its step_XXXXXXXX.tmp directory; rematd's job
 * directory: worker.log, metrics.jsonl (appended to), resume.json and state.json (replaced);
 * rematd's lock beside its socket.
 * And a second save under one checkpoint name: refused, the first left byte-identical.
 *
 * The engine is driven through its own API (eng_fs, eng_ckpt) where a name is written;
 * the lock and a named save also through remat-train, and the state directory through the
 * real rematd (t_daemon.h).
 */
#include "t_ckpt.h"
#include "t_daemon.h"
#include "t_util.h"

#include "eng_train_ckpt.h"
#include "eng_fs.h"
#include "eng_hfconfig.h"
#include "eng_st.h"
#include "eng_train.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define VICTIM_TEXT "step_00000001\nthe victim's own words, marker-7f3a\n"
#define VICTIM_MARK "marker-7f3a" /* never in a message: no file's bytes are quoted */

/* How an entry is planted: a hard link to the victim, a symlink to it, or a file of
 * another user (the victim itself, then inside the directory). */
typedef enum { PLANT_HARD, PLANT_SYM, PLANT_FOREIGN, PLANT_N } plant_kind;

static const char *const plant_why[PLANT_N] = {"hard link", "symbolic link",
	"belongs to uid 65534"};

/* ---- helpers ---- */

/* A victim file outside any directory remat writes: root/victim-N, VICTIM_TEXT. */
static char *make_victim(const char *root, const char *tag)
{
	char name[128];
	snprintf(name, sizeof name, "victim-%s", tag);
	char *v = path_join(root, name);
	write_text(v, VICTIM_TEXT);
	return v;
}

/* The victim (or the foreign file) still holds VICTIM_TEXT exactly. */
static void victim_intact(const char *path, const char *what)
{
	size_t len = 0;
	struct stat st;
	ck_assert_msg(lstat(path, &st) == 0 && S_ISREG(st.st_mode), "%s: '%s' is gone", what,
		path);
	char *text = t_read_file(path, &len);
	ck_assert_msg(len == strlen(VICTIM_TEXT) && memcmp(text, VICTIM_TEXT, len) == 0,
		"%s: '%s' was written (%zu bytes now)", what, path, len);
	free(text);
}

/* 1 when this process is root (a file can be given to another user); else one line
 * saying the variant skips. */
static int can_chown(const char *test)
{
	if (geteuid() == 0)
		return 1;
	printf("%s: another user's file: skipped: needs root to chown\n", test);
	return 0;
}

/* Plants dir/name as kind (removing what was there); the file that must stay intact goes
 * to *target (malloc'd): the victim, or the foreign file itself. 0 when the kind cannot be
 * planted here (another user's file without root). */
static int plant(plant_kind kind, const char *dir, const char *name, const char *victim,
	const char *test, char **target)
{
	char *p = path_join(dir, name);
	unlink(p);
	*target = NULL;
	switch (kind) {
	case PLANT_HARD:
		ck_assert_msg(link(victim, p) == 0, "link %s: %s", p, strerror(errno));
		*target = strdup(victim);
		break;
	case PLANT_SYM:
		ck_assert_msg(symlink(victim, p) == 0, "symlink %s: %s", p, strerror(errno));
		*target = strdup(victim);
		break;
	default:
		if (!can_chown(test))
			break;
		write_text(p, VICTIM_TEXT);
		ck_assert_int_eq(chown(p, TD_NOBODY, TD_NOBODY), 0);
		*target = strdup(p);
		break;
	}
	free(p);
	return *target != NULL;
}

/* err says it refused name for why, and quotes none of the victim's bytes. */
static void refused_for(const eng_err *err, const char *name, const char *why,
	const char *what)
{
	char quoted[300];
	snprintf(quoted, sizeof quoted, "'%s'", name);
	ck_assert_msg(strstr(err->msg, quoted) && strstr(err->msg, why), "%s: the message lacks "
		"%s or '%s': %s", what, quoted, why, err->msg);
	ck_assert_msg(!strstr(err->msg, VICTIM_MARK), "%s: the message quotes the file: %s", what,
		err->msg);
}

/* A tiny trainer's snapshot at step 1, for eng_ckpt_write. */
static void snapshot(eng_trainer *tr, eng_ckpt_snap *s)
{
	eng_err err = {0};
	need_gpl();
	trainer_from(tr, TINY, 1000, "");
	ck_assert_msg(eng_trainer_snap_take(s, tr, &err) == 0, "%s", err.msg);
	s->step = 1;
}

static void dir_open(eng_dir *d, const char *path)
{
	eng_err err = {0};
	ck_assert_msg(eng_dir_open(d, path, &err) == 0, "%s", err.msg);
}

/* ---- the save directory's lock ---- */

START_TEST(test_links_lock)
{
	char *root = t_tmp_dir("lk_lock"), *sd = path_join(root, "save");
	ck_assert_int_eq(mkdir(sd, 0755), 0);
	for (int k = 0; k < PLANT_N; k++) {
		char tag[16], *target;
		snprintf(tag, sizeof tag, "%d", k);
		char *victim = make_victim(root, tag);
		if (!plant((plant_kind)k, sd, ENG_SAVE_LOCK, victim, "test_links_lock", &target)) {
			free(victim);
			continue;
		}
		eng_dir d;
		eng_err err = {0};
		dir_open(&d, sd);
		int fd = eng_fs_lock(&d, ENG_SAVE_LOCK, "save directory", &err);
		if (fd >= 0)
			close(fd);
		ck_assert_msg(fd < 0, "kind %d: the lock was taken (the pid written into it)", k);
		refused_for(&err, ENG_SAVE_LOCK, plant_why[k], "eng_fs_lock");
		ck_assert_int_eq(eng_fs_lock_free(&d, ENG_SAVE_LOCK, "save directory", &err), -1);
		refused_for(&err, ENG_SAVE_LOCK, plant_why[k], "eng_fs_lock_free");
		eng_dir_close(&d);
		victim_intact(target, "a planted .lock");
		free(target);
		free(victim);
	}
	free(sd);
	free(root);
}
END_TEST

/* remat-train on a save directory whose .lock is a hard link: refused at the start. */
START_TEST(test_links_lock_train)
{
	need_gpl();
	char *root = t_tmp_dir("lk_locktr"), *sd = path_join(root, "save");
	char *victim = make_victim(root, "t"), *lock = path_join(sd, ENG_SAVE_LOCK);
	ck_assert_int_eq(mkdir(sd, 0755), 0);
	ck_assert_int_eq(link(victim, lock), 0);
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\"}", sd);
	char *job = job_file(root, "job.json", TINY, 2, 2, extra), *out = NULL;
	const char *args[] = {job, NULL};
	int rc = t_train_run(&out, 0, args);
	ck_assert_msg(rc == 1 && strstr(out, "'" ENG_SAVE_LOCK "'") && strstr(out, "hard link"),
		"remat-train: status %d:\n%s", rc, out);
	victim_intact(victim, "remat-train with .lock a hard link");
	ck_assert_str_eq(listing(sd), "");
	free(out);
	free(job);
	free(lock);
	free(victim);
	free(sd);
	free(root);
}
END_TEST

/* ---- latest and latest.tmp ---- */

/* A save over a planted name (latest or latest.tmp): refused before anything is written,
 * latest still names step 1's checkpoint when it was not the name planted. */
static void save_over(const char *name, const char *test)
{
	char *root = t_tmp_dir("lk_latest"), *sd = path_join(root, "save");
	eng_trainer tr;
	eng_ckpt_snap s;
	eng_ckpt_result res;
	snapshot(&tr, &s);
	ck_assert_int_eq(mkdir(sd, 0755), 0);
	eng_err err = {0};
	ck_assert_msg(eng_ckpt_write(&s, sd, NULL, 10, &res, &err) == 0, "%s", err.msg);
	for (int k = 0; k < PLANT_N; k++) {
		char tag[16], *target;
		snprintf(tag, sizeof tag, "%d", k);
		char *victim = make_victim(root, tag);
		if (!plant((plant_kind)k, sd, name, victim, test, &target)) {
			free(victim);
			continue;
		}
		s.step = 2;
		ck_assert_msg(eng_ckpt_write(&s, sd, NULL, 10, &res, &err) == -1, "%s planted as "
			"kind %d: the save went through", name, k);
		refused_for(&err, name, plant_why[k], name);
		victim_intact(target, name);
		/* refused before anything was written: no step 2, the planted entry stays */
		char want[128];
		snprintf(want, sizeof want, "%s%s step_00000001", strcmp(name, "latest") ? "latest " :
			"", name);
		ck_assert_str_eq(listing(sd), want);
		char *p = path_join(sd, name);
		ck_assert_int_eq(unlink(p), 0);
		free(p);
		free(target);
		free(victim);
	}
	eng_ckpt_snap_free(&s);
	eng_trainer_free(&tr);
	free(sd);
	free(root);
}

START_TEST(test_links_latest)
{
	save_over("latest", "test_links_latest");
}
END_TEST

START_TEST(test_links_latest_tmp)
{
	save_over("latest.tmp", "test_links_latest_tmp");
}
END_TEST

/* ---- the files of a checkpoint, in its step_XXXXXXXX.tmp directory ---- */

/* One file of a checkpoint, written as the save writes it (into d). */
static int write_one(const eng_dir *d, int which, const eng_config *cfg, eng_err *err)
{
	static const float w[4] = {1, 2, 3, 4};
	eng_st_entry e = {.name = "w", .ndim = 1, .shape = {4}, .data = w};
	json_t *o;
	int rc;
	switch (which) {
	case 0:
		return eng_st_write_at(d, "model.safetensors", &e, 1, err);
	case 1:
		return eng_st_write_at(d, "optimizer.safetensors", &e, 1, err);
	case 2:
		return eng_hfconfig_write_at(d, "config.json", cfg, err);
	default:
		o = json_pack("{s:i}", "step", 2);
		rc = eng_fs_write_json(d, "trainer_state.json", 0666, o, err);
		json_decref(o);
		return rc;
	}
}

/* Removing a checkpoint (pruned, a leftover .tmp) that carries its base in base/: the
 * subdirectory goes with it, a link in it is removed and never followed (the victim stays),
 * a directory deeper down is refused, and so (as root) is another user's base/. */
START_TEST(test_links_remove_with_base)
{
	char *root = t_tmp_dir("lk_base"), *victim = make_victim(root, "base");
	eng_dir d;
	eng_err err = {0};
	dir_open(&d, root);
	static const char *const made[] = {"ck", "ck/base", "deep", "deep/base",
		"deep/base/more", "theirs", "theirs/base"};
	for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
		char *p = path_join(root, made[i]);
		ck_assert_int_eq(mkdir(p, 0755), 0);
		free(p);
	}
	char *f = path_join(root, "ck/base/model.safetensors"), *l = path_join(root,
		"ck/base/config.json");
	write_text(f, "weights");
	ck_assert_int_eq(symlink(victim, l), 0);
	ck_assert_msg(eng_fs_remove_dir(&d, "ck", &err) == 0, "%s", err.msg);
	ck_assert_int_ne(access(f, F_OK), 0);
	victim_intact(victim, "a link in base/ removed");
	ck_assert_int_eq(eng_fs_remove_dir(&d, "deep", &err), -1);
	refused_for(&err, "base", "which no checkpoint has", "a directory in base/");
	if (can_chown("test_links_remove_with_base")) {
		char *t = path_join(root, "theirs/base");
		ck_assert_int_eq(chown(t, TD_NOBODY, TD_NOBODY), 0);
		ck_assert_int_eq(eng_fs_remove_dir(&d, "theirs", &err), -1);
		refused_for(&err, "theirs", "belongs to uid 65534", "another user's base/");
		ck_assert_int_eq(access(t, F_OK), 0);
		free(t);
	}
	eng_dir_close(&d);
	free(f);
	free(l);
	free(victim);
	free(root);
}
END_TEST

START_TEST(test_links_checkpoint_files)
{
	static const char *const names[] = {"model.safetensors", "optimizer.safetensors",
		"config.json", "trainer_state.json"};
	char *root = t_tmp_dir("lk_files"), *sd = path_join(root, "save");
	char *td = path_join(sd, "step_00000002.tmp");
	eng_trainer tr;
	eng_ckpt_snap s;
	snapshot(&tr, &s);
	ck_assert_int_eq(mkdir(sd, 0755), 0);
	ck_assert_int_eq(mkdir(td, 0755), 0);
	for (int i = 0; i < 4; i++) {
		for (int tmp = 0; tmp < 2; tmp++) {
			for (int k = 0; k < PLANT_N; k++) {
				char name[64], tag[48], *target;
				snprintf(name, sizeof name, "%s%s", names[i], tmp ? ".tmp" : "");
				snprintf(tag, sizeof tag, "%d-%d-%d", i, tmp, k);
				char *victim = make_victim(root, tag);
				if (!plant((plant_kind)k, td, name, victim, "test_links_checkpoint_files",
					    &target)) {
					free(victim);
					continue;
				}
				eng_dir d;
				eng_err err = {0};
				dir_open(&d, td);
				ck_assert_msg(write_one(&d, i, &s.cfg, &err) == -1, "%s planted as kind "
					"%d: written", name, k);
				eng_dir_close(&d);
				refused_for(&err, name, plant_why[k], name);
				victim_intact(target, name);
				ck_assert_str_eq(listing(td), name); /* nothing else left */
				char *p = path_join(td, name);
				ck_assert_int_eq(unlink(p), 0);
				free(p);
				free(target);
				free(victim);
			}
		}
	}
	eng_ckpt_snap_free(&s);
	eng_trainer_free(&tr);
	free(td);
	free(sd);
	free(root);
}
END_TEST

/* ---- a name saved twice ---- */

/* The bytes of every file of checkpoint dir ck, concatenated with their names. */
static char *ckpt_bytes(const char *ck, size_t *total)
{
	size_t cap = 0, len = 0;
	char *all = NULL;
	for (int i = 0; i < NFILES; i++) {
		char *p = path_join(ck, ckpt_files[i]);
		size_t n = 0;
		char *b = exists(p) ? t_read_file(p, &n) : NULL;
		cap = len + n + 64;
		all = realloc(all, cap);
		ck_assert_ptr_nonnull(all);
		len += (size_t)snprintf(all + len, 64, "%s:%zu:", ckpt_files[i], n);
		if (b)
			memcpy(all + len, b, n);
		len += n;
		free(b);
		free(p);
	}
	*total = len;
	return all;
}

START_TEST(test_links_named_save_twice)
{
	char *root = t_tmp_dir("lk_named"), *sd = path_join(root, "save");
	char *mine = path_join(sd, "mine");
	eng_trainer tr;
	eng_ckpt_snap s;
	eng_ckpt_result res;
	eng_err err = {0};
	snapshot(&tr, &s);
	ck_assert_int_eq(mkdir(sd, 0755), 0);
	ck_assert_msg(eng_ckpt_write(&s, sd, "mine", 10, &res, &err) == 0, "%s", err.msg);
	size_t n1, n2;
	char *before = ckpt_bytes(mine, &n1);
	s.step = 2;
	s.params[0] += 1.0f; /* other weights: a replacement would show */
	ck_assert_int_eq(eng_ckpt_write(&s, sd, "mine", 10, &res, &err), -1);
	char want[1024];
	snprintf(want, sizeof want, "a checkpoint named 'mine' exists in '%s': choose another name",
		sd);
	ck_assert_msg(strstr(err.msg, want), "message: %s", err.msg);
	char *after = ckpt_bytes(mine, &n2);
	ck_assert_msg(n1 == n2 && memcmp(before, after, n1) == 0, "the first 'mine' changed");
	ck_assert_str_eq(listing(sd), "latest mine");
	char *latest = latest_of(sd);
	ck_assert_str_eq(latest, "mine");
	/* another name still saves */
	ck_assert_msg(eng_ckpt_write(&s, sd, "mine2", 10, &res, &err) == 0, "%s", err.msg);
	free(latest);
	free(after);
	free(before);
	eng_ckpt_snap_free(&s);
	eng_trainer_free(&tr);
	free(mine);
	free(sd);
	free(root);
}
END_TEST

/* The same through a running remat-train's control socket, as rematctl save --name. */
START_TEST(test_links_named_save_twice_ctl)
{
	need_gpl();
	char *root = t_tmp_dir("lk_namedctl"), *sd = path_join(root, "save");
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\"}", sd);
	char *job = job_file(root, "job.json", TINY, 1000000, 2, extra);
	char *log = path_join(root, "train.log"), *sock = path_join(root, "ctl.sock");
	pid_t pid = spawn_train(job, log, sock);
	char *argv[] = {(char *)t_env("REMATCTL"), "--control", sock, "save", "--name", "mine",
		NULL};
	char *out = NULL;
	long end = td_ms() + WAIT_MS;
	int rc;
	/* the first save, once the worker answers */
	for (;;) {
		ck_assert_msg(td_ms() < end, "the worker never saved:\n%s", td_slurp(log));
		ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "the worker exited:\n%s",
			td_slurp(log));
		free(out);
		out = NULL;
		if (access(sock, F_OK) == 0 && (rc = t_run(argv, &out)) == 0)
			break;
		td_sleep_ms(100);
	}
	free(out);
	char *mine = path_join(sd, "mine");
	size_t n1, n2;
	char *before = ckpt_bytes(mine, &n1);
	rc = t_run(argv, &out);
	ck_assert_msg(rc != 0 && strstr(out, "a checkpoint named 'mine' exists in") &&
		strstr(out, "choose another name"), "the second save: status %d: %s", rc, out);
	char *after = ckpt_bytes(mine, &n2);
	ck_assert_msg(n1 == n2 && memcmp(before, after, n1) == 0, "the first 'mine' changed");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	free(after);
	free(before);
	free(mine);
	free(out);
	free(sock);
	free(log);
	free(job);
	free(sd);
	free(root);
}
END_TEST

/* ---- rematd's job directory ---- */

/* jobs/ID/name of the daemon's state directory (malloc'd). */
static char *job_entry(const td_daemon *d, const char *id, const char *name)
{
	char *p = malloc(1400);
	ck_assert_ptr_nonnull(p);
	snprintf(p, 1400, "%s/jobs/%s/%s", d->state, id, name);
	return p;
}

/* Replaces the job's entry name by a hard link to victim (with copy, the victim first
 * takes the entry's bytes, so that a record still reads as one). */
static void plant_job_link(const td_daemon *d, const char *id, const char *name,
	const char *victim, int copy)
{
	char *p = job_entry(d, id, name);
	if (access(p, F_OK) == 0) {
		size_t n = 0;
		char *b = t_read_file(p, &n);
		if (copy)
			t_write_file(victim, b, n);
		free(b);
		ck_assert_int_eq(unlink(p), 0);
	}
	ck_assert_msg(link(victim, p) == 0, "link %s: %s", p, strerror(errno));
	free(p);
}

/* The whole file, for comparing before and after (malloc'd). */
static char *whole(const char *path, size_t *n)
{
	return t_read_file(path, n);
}

static void same_bytes(const char *path, const char *was, size_t n, const char *what)
{
	size_t m = 0;
	char *now = whole(path, &m);
	ck_assert_msg(m == n && memcmp(now, was, n) == 0, "%s: '%s' was written (%zu bytes, "
		"%zu before)", what, path, m, n);
	free(now);
}

/* job-status once the job has failed (T_JOB_MS at most): a new reference. */
static json_t *failed_status(td_conn *c, const char *id)
{
	long end = td_ms() + T_JOB_MS;
	for (;;) {
		json_t *st = td_job_status(c, id);
		const char *state = td_str(st, "state");
		if (strcmp(state, "failed") == 0)
			return st;
		ck_assert_msg(td_ms() < end && strcmp(state, "running") != 0, "job %s is %s, not "
			"failed", id, state);
		json_decref(st);
		td_sleep_ms(50);
	}
}

/* job-resume of a stopped or failed job whose entry name is a hard link: the resume fails
 * with a reason naming the entry, and the victim keeps its bytes. */
static void resume_refused(td_daemon *d, td_conn *c, const char *id, const char *name,
	const char *victim)
{
	size_t n = 0;
	plant_job_link(d, id, name, victim, strcmp(name, "resume.json") == 0);
	char *was = whole(victim, &n);
	json_t *r = td_request(c, "{\"execute\":\"job-resume\",\"arguments\":{\"job\":\"%s\"}}", id);
	const char *why = NULL;
	json_t *data = NULL;
	if (json_object_get(r, "error")) {
		why = td_str(json_object_get(r, "error"), "desc");
	} else {
		/* its events may come before the reply (which skips them): asked, not awaited */
		data = failed_status(c, id);
		why = td_str(data, "reason");
	}
	char quoted[128];
	snprintf(quoted, sizeof quoted, "'%s'", name);
	ck_assert_msg(strstr(why, quoted) && strstr(why, "hard link"), "%s a hard link: %s", name,
		why);
	same_bytes(victim, was, n, name);
	json_decref(data);
	json_decref(r);
	/* the link goes: the next resume may create the file anew */
	char *p = job_entry(d, id, name);
	ck_assert_int_eq(unlink(p), 0);
	free(p);
	free(was);
}

START_TEST(test_links_state_dir)
{
	need_gpl();
	td_daemon d;
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_paths(&d);
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	char spec[2048], id[16];
	snprintf(spec, sizeof spec, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL
		"\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":1000000,"
		"\"threads\":2,\"save\":{\"dir\":\"%s/save\"}}", d.dir);
	snprintf(id, sizeof id, "%s", td_job_start(&c, spec, NULL));
	td_wait_step(&c, id);
	json_decref(td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":true}}", id));
	json_decref(td_wait_state(&c, id, "stopped", T_JOB_MS));

	/* appended to by each worker: worker.log, then metrics.jsonl; replaced: resume.json */
	char *v1 = make_victim(d.dir, "log"), *v2 = make_victim(d.dir, "metrics");
	char *v3 = make_victim(d.dir, "resume");
	resume_refused(&d, &c, id, "worker.log", v1);
	resume_refused(&d, &c, id, "metrics.jsonl", v2);
	resume_refused(&d, &c, id, "resume.json", v3);

	/* state.json, replaced at every change of state: refused, said in rematd's log, and the
	 * job itself goes on (its record is rematd's to fix, the victim is nobody's to lose) */
	char *v4 = make_victim(d.dir, "state");
	plant_job_link(&d, id, "state.json", v4, 1);
	size_t n = 0;
	char *was = whole(v4, &n);
	json_t *r = td_request(&c, "{\"execute\":\"job-resume\",\"arguments\":{\"job\":\"%s\"}}",
		id);
	td_expect_return(r);
	json_decref(r);
	td_wait_step(&c, id);
	same_bytes(v4, was, n, "state.json");
	const char *log = td_slurp(d.log);
	/* (rematd's log line is cut short before the reason: the refusal is what counts) */
	ck_assert_msg(strstr(log, "refusing to replace 'state.json'"), "rematd's log says nothing "
		"of state.json:\n%s", log);
	ck_assert_msg(!strstr(log, VICTIM_MARK), "rematd's log quotes a file:\n%s", log);
	json_decref(td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", id));
	json_decref(td_wait_state(&c, id, "stopped", T_JOB_MS));
	td_close(&c);
	td_daemon_stop(&d);
	same_bytes(v4, was, n, "state.json after the daemon stopped");
	victim_intact(v1, "worker.log's victim");
	victim_intact(v2, "metrics.jsonl's victim");
	free(was);
	free(v4);
	free(v3);
	free(v2);
	free(v1);
}
END_TEST

/* rematd's own lock beside its socket (SOCKET.lock), a hard link: rematd refuses to start
 * rather than write its pid into the file elsewhere. */
START_TEST(test_links_daemon_lock)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *victim = make_victim(d.dir, "lock"), lock[700];
	snprintf(lock, sizeof lock, "%s.lock", d.sock);
	ck_assert_int_eq(link(victim, lock), 0);
	pid_t pid = td_daemon_exec(&d, NULL);
	int st = td_wait_pid(pid, T_STOP_MS);
	if (st < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	ck_assert_msg(st == 1, "rematd with its lock a hard link: status %d:\n%s", st,
		td_slurp(d.log));
	ck_assert_msg(strstr(td_slurp(d.log), "hard link"), "rematd's log:\n%s", td_slurp(d.log));
	victim_intact(victim, "rematd's lock a hard link");
	free(victim);
}
END_TEST

Suite *suite_links(void)
{
	Suite *s = suite_create("links");
	TCase *tc = tcase_create("save_dir");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_links_lock);
	tcase_add_test(tc, test_links_lock_train);
	tcase_add_test(tc, test_links_latest);
	tcase_add_test(tc, test_links_latest_tmp);
	tcase_add_test(tc, test_links_checkpoint_files);
	tcase_add_test(tc, test_links_remove_with_base);
	tcase_add_test(tc, test_links_named_save_twice);
	tcase_add_test(tc, test_links_named_save_twice_ctl);
	suite_add_tcase(s, tc);
	tc = tcase_create("state_dir");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_links_state_dir);
	tcase_add_test(tc, test_links_daemon_lock);
	suite_add_tcase(s, tc);
	return s;
}
