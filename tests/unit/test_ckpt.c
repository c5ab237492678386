/* test_ckpt.c - full checkpoints (engine/io/eng_ckpt_*.c, design.md §6), through the engine's API
 * and the real remat-train binary.
 *
 * What it covers: the four files are byte-identical under every recompute policy and carry
 * none of it; N steps, save, resume, M steps equals N+M steps in one go, bit for bit, across
 * policy changes and from a save directory; a worker killed with SIGKILL at many points of
 * a save always leaves `latest` on a checkpoint that verifies and resumes, and its .tmp
 * directories are removed at the next start; every kind of damage is refused with a message
 * naming the file, by the checksums first and by the structural checks behind them (with
 * the checksums recomputed), and the newest checkpoint that verifies is offered instead;
 * the reference weights survive a load and a save exactly; ckpt-save while a save is being
 * written is Busy; save.keep never removes the checkpoint `latest` names; a crash while a
 * name is saved again leaves it recoverable; names that collide with the save directory's
 * own files are refused.
 * What it does not: the safetensors parser on arbitrary bytes (test_st.c and the fuzz
 * target), the numbers of a training step (test_reference.c, test_model.c).
 */
#include "tests.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eng_ckpt.h"
#include "eng_hfconfig.h"
#include "eng_sha256.h"
#include "eng_st.h"
#include "t_daemon.h"
#include "t_ckpt.h"
#include "t_util.h"

/* Debian's copy of the GPL, 35 kB of English: a byte-level corpus every Debian system has. */

START_TEST(test_ckpt_write_same_under_every_policy)
{
	need_gpl();
	char *root = t_tmp_dir("policy");
	static const struct {
		const char *name, *remat, *sched;
	} runs[] = {
		{"off", "{\"default\": \"off\"}", NULL},
		{"selective", "{\"default\": \"selective\"}", NULL},
		{"full", "{\"default\": \"full\"}", NULL},
		{"chunked", "{\"default\": \"off\", \"sections\": {\"head\": \"chunked\"}}", NULL},
		{"mixed", "{\"default\": \"selective\", \"aliases\": {\"top\": \"h.1\"}, "
			  "\"sections\": {\"top\": \"full\", \"head\": \"chunked\"}}", NULL},
		/* and a policy changed before every step, through the command line */
		{"changing", "{\"default\": \"off\"}", "0:full,1:h.0=selective;head=chunked,2:off"},
	};
	enum { NRUNS = sizeof runs / sizeof runs[0] };
	char *dirs[NRUNS];
	for (int i = 0; i < NRUNS; i++)
		dirs[i] = train_policy(root, runs[i].name, runs[i].remat, runs[i].sched);

	/* transient run settings, in any case, in any file; "checkpointing" covers
	 * gradient_checkpointing */
	static const char *const words[] = {"remat", "recompute", "checkpointing", "policy",
		"selective", "chunked", "thread", "device", "socket"};
	static const char *const ckpts[] = {"step_00000002", "step_00000003"};
	for (int i = 0; i < NRUNS; i++) {
		char *latest = latest_of(dirs[i]);
		ck_assert_msg(latest && strcmp(latest, "step_00000003") == 0, "%s: latest '%s'",
			dirs[i], latest ? latest : "(none)");
		free(latest);
		ck_assert_str_eq(listing(dirs[i]), "latest step_00000002 step_00000003");
		for (int c = 0; c < 2; c++) {
			char *ck = path_join(dirs[i], ckpts[c]);
			ck_assert_str_eq(listing(ck), "config.json model.safetensors "
						      "optimizer.safetensors trainer_state.json");
			if (i > 0) {
				char *ref = path_join(dirs[0], ckpts[c]);
				expect_same_ckpt(ref, ck);
				free(ref);
			}
			for (size_t f = 0; f < NFILES; f++) {
				char *p = path_join(ck, ckpt_files[f]);
				size_t len;
				char *buf = t_read_file(p, &len);
				ck_assert_msg(len > 0, "%s is empty", p);
				for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
					ck_assert_msg(!contains_word(buf, len, words[w]),
						"%s (policy %s) mentions '%s'", p, runs[i].name,
						words[w]);
				if (strcmp(ckpt_files[f], "trainer_state.json") == 0)
					/* no paths at all: a path could hold any word (and the
					 * checkpoint must not depend on where it was written) */
					ck_assert_msg(!strchr(buf, '/') && !contains_word(buf, len,
						"gpl"), "%s holds a path:\n%s", p, buf);
				free(buf);
				free(p);
			}
			ck_assert_int_eq(eng_ckpt_verify(ck, NULL), 0);
			free(ck);
		}
	}
	/* the two checkpoints of one run differ: the comparison above is not vacuous */
	char *s2 = path_join(dirs[0], "step_00000002/model.safetensors");
	char *s3 = path_join(dirs[0], "step_00000003/model.safetensors");
	size_t n2, n3;
	char *b2 = t_read_file(s2, &n2), *b3 = t_read_file(s3, &n3);
	ck_assert_msg(n2 == n3 && memcmp(b2, b3, n2) != 0, "steps 2 and 3 saved the same weights");
	free(b2);
	free(b3);
	free(s2);
	free(s3);
	for (int i = 0; i < NRUNS; i++)
		free(dirs[i]);
	free(root);
}
END_TEST

/* ---- 2. resume bit for bit ---- */

#define RESUME_N 3 /* steps before the save */
#define RESUME_T 6 /* the step the runs end at: N + M */

/* A run of the job to RESUME_T under remat and sched, from model (TINY or a resume),
 * saving into root/name (every `every` steps, 0: at the end only). Returns the save dir. */
static char *train_resume(const char *root, const char *name, const char *model,
	const char *remat, const char *sched, int every, run_rows *r)
{
	char *dir = path_join(root, name), extra[4400], file[80];
	snprintf(extra, sizeof extra, ", \"remat\": %s, \"save\": {\"dir\": \"%s\", \"every\": "
		"%d}", remat, dir, every);
	snprintf(file, sizeof file, "%s.json", name);
	char *job = job_file(root, file, model, RESUME_T, 2, extra);
	train_json(job, sched, r);
	free(job);
	return dir;
}

/* A resumed run went on from step N to the end, with the reference's rates and losses,
 * and saved what the reference saved. */
static void expect_resumed(const char *what, const run_rows *r, const run_rows *ref,
	const char *dir, const char *ref_dir)
{
	ck_assert_msg(r->n == RESUME_T - RESUME_N && r->first == RESUME_N + 1 &&
			r->last == RESUME_T, "%s: ran steps %d..%d (%d lines), want %d..%d", what,
		r->first, r->last, r->n, RESUME_N + 1, RESUME_T);
	for (int s = RESUME_N + 1; s <= RESUME_T; s++) {
		ck_assert_msg(r->lr[s] == ref->lr[s], "%s: step %d lr %.9g, in one go %.9g", what,
			s, r->lr[s], ref->lr[s]);
		ck_assert_msg(r->loss[s] == ref->loss[s], "%s: step %d loss %.9g, in one go %.9g",
			what, s, r->loss[s], ref->loss[s]);
	}
	char *a = path_join(dir, "step_00000006"), *b = path_join(ref_dir, "step_00000006");
	expect_same_ckpt(b, a);
	free(a);
	free(b);
}

START_TEST(test_ckpt_resume_bit_exact)
{
	need_gpl();
	char *root = t_tmp_dir("resume");
	run_rows ref, a_off, a_mix, r;
	/* the reference: N+M steps in one go, saved at the end only */
	char *ref_dir = train_resume(root, "ref", TINY, "{\"default\": \"off\"}", NULL, 0, &ref);
	ck_assert_int_eq(ref.n, RESUME_T);
	ck_assert_msg(ref.lr[1] < ref.lr[2] && ref.lr[4] < ref.lr[3], "the schedule is flat: "
		"%g %g %g %g", ref.lr[1], ref.lr[2], ref.lr[3], ref.lr[4]);

	/* the runs resumed from: N+M steps saved at N too (so the schedule is the same) */
	char *off = train_resume(root, "a_off", TINY, "{\"default\": \"off\"}", NULL, RESUME_N,
		&a_off);
	char *mix = train_resume(root, "a_mix", TINY, "{\"default\": \"selective\"}",
		"1:full,2:h.0=off;head=chunked", RESUME_N, &a_mix);
	char *ref6 = path_join(ref_dir, "step_00000006");
	char *off3 = path_join(off, "step_00000003"), *off6 = path_join(off, "step_00000006");
	char *mix3 = path_join(mix, "step_00000003"), *mix6 = path_join(mix, "step_00000006");
	expect_same_ckpt(ref6, off6); /* saving at N on the writer thread changed nothing */
	expect_same_ckpt(ref6, mix6);
	expect_same_ckpt(off3, mix3);

	/* off -> full with a chunked head */
	char *m = resume_from(off3);
	char *b1 = train_resume(root, "b_full", m, "{\"default\": \"full\", \"sections\": "
		"{\"head\": \"chunked\"}}", NULL, 0, &r);
	expect_resumed("off then full", &r, &ref, b1, ref_dir);
	free(m);

	/* a changing policy -> off, changed again in the middle of the resumed run */
	m = resume_from(mix3);
	char *b2 = train_resume(root, "b_change", m, "{\"default\": \"off\"}",
		"4:selective;head=chunked,5:h.1=full", 0, &r);
	expect_resumed("changing then off", &r, &ref, b2, ref_dir);
	free(m);

	/* from a save directory: init_from names it, latest picks the checkpoint, and the run
	 * saves into it */
	char *sd = path_join(root, "savedir"), *sd3 = path_join(sd, "step_00000003");
	ck_assert_int_eq(mkdir(sd, 0777), 0);
	copy_dir(off3, sd3);
	set_latest(sd, "step_00000003");
	m = resume_from(sd);
	char *b3 = train_resume(root, "savedir", m, "{\"default\": \"selective\", \"sections\": "
		"{\"h.0\": \"full\"}}", NULL, 0, &r);
	expect_resumed("from the save dir", &r, &ref, b3, ref_dir);
	char *latest = latest_of(sd);
	ck_assert_str_eq(latest, "step_00000006");
	ck_assert_str_eq(listing(sd), "latest step_00000003 step_00000006");
	free(latest);
	free(m);

	free(b3);
	free(sd3);
	free(sd);
	free(b2);
	free(b1);
	free(mix6);
	free(mix3);
	free(off6);
	free(off3);
	free(ref6);
	free(mix);
	free(off);
	free(ref_dir);
	free(root);
}
END_TEST

/* ---- 3. crashes in the middle of a save ---- */




START_TEST(test_ckpt_write_killed_mid_save)
{
	need_gpl();
	char *root = t_tmp_dir("crash"), *sd = path_join(root, "save");
	char *log = path_join(root, "train.log");
	/* one good checkpoint first, so `latest` exists before the first kill */
	free(good_checkpoint(sd, 1, 1000000));
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\", \"every\": 1, \"keep\": 2}",
		sd);
	char *model = resume_from(sd);
	char *job = job_file(root, "crash.json", model, 1000000, 1, extra);
	setenv("REMAT_CKPT_DELAY_US", CRASH_DELAY_US, 1);
	long window = 0; /* ms from a save's .tmp to its `latest`, measured by kill 0 */
	int prev = 1, left_tmp = 0, advanced = 0;
	for (int i = 0; i < CRASH_KILLS; i++) {
		pid_t pid = spawn_train(job, log, NULL);
		int began = wait_save_begins(sd, pid, WAIT_MS);
		ck_assert_msg(began, "kill %d: no save began within %d ms; log:\n%s", i, WAIT_MS,
			td_slurp(log));
		long t0 = td_ms(), at;
		if (i == 0) {
			/* the first one is watched to its end and killed right after */
			while (latest_step(sd) == prev && td_ms() < t0 + WAIT_MS)
				usleep(500);
			at = window = td_ms() - t0;
		} else {
			/* the others spread over two windows: inside a save, and after one */
			at = 2 * window * (i - 1) / (CRASH_KILLS - 2);
			usleep((useconds_t)(at * 1000));
		}
		kill(pid, SIGKILL);
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			"kill %d: the worker ended by itself (status 0x%x); log:\n%s", i, status,
			td_slurp(log));
		left_tmp += count_suffix(sd, ".tmp") > 0;

		/* latest names a checkpoint that verifies, never older than the last one */
		char *name = latest_of(sd);
		ck_assert_msg(name != NULL, "kill %d (%ld ms into a save): no latest in %s: %s", i,
			at, sd, listing(sd));
		int step = step_of(name);
		ck_assert_msg(step >= prev, "kill %d: latest went back from step %d to %d", i, prev,
			step);
		advanced += i > 0 && step > prev;
		prev = step;
		char *ck = path_join(sd, name);
		eng_err err = {0};
		ck_assert_msg(eng_ckpt_verify(ck, &err) == 0, "kill %d (%ld ms into a save): "
			"latest '%s' does not verify: %s", i, at, name, err.msg);

		/* finding it reads only; the job's own start removes what the interrupted
		 * save left */
		char found[ENG_PATH_LEN + 64];
		ck_assert_msg(eng_ckpt_find(sd, found, sizeof found, &err) == 0,
			"kill %d: find: %s", i, err.msg);
		ck_assert_str_eq(found, ck);
		ck_assert_msg(eng_ckpt_clean_tmp(sd, 0, &err) == 0, "kill %d: clean: %s", i, err.msg);
		ck_assert_msg(count_suffix(sd, ".tmp") == 0 && count_suffix(sd, ".old") == 0,
			"kill %d: left after the clean: %s", i, listing(sd));

		/* and a trainer resumes from it: init_from the save dir, one more step */
		eng_trainer tr;
		eng_step_stats st;
		trainer_from(&tr, model, step + 1, "");
		ck_assert_int_eq(tr.step, step);
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "kill %d: step: %s", i,
			err.msg);
		ck_assert_int_eq(tr.step, step + 1);
		eng_trainer_free(&tr);
		free(ck);
		free(name);
	}
	/* the kills landed inside saves and after them, and the runs went on from one another */
	ck_assert_msg(window > 0 && prev > 2, "latest reached only step %d", prev);
	ck_assert_msg(left_tmp >= CRASH_KILLS / 4, "only %d of %d kills interrupted a save "
		"(a save takes %ld ms)", left_tmp, CRASH_KILLS, window);
	ck_assert_msg(advanced >= 1, "no kill came after a save (a save takes %ld ms)", window);
	free(job);
	free(model);
	free(log);
	free(sd);
	free(root);
}
END_TEST

/* A run with shuffled data and grad_accum 3 on reference/accum's data (7 samples an epoch,
 * 3 a step: epochs end inside steps), saved after step 2, in the middle of its first epoch,
 * and resumed: the resumed run's losses and weights are the uninterrupted run's, bit for
 * bit, across two reshuffles. The checkpoint records the order, the generator and
 * grad_accum, which the resumed spec does not give. */
START_TEST(test_ckpt_resume_shuffled_accumulated)
{
	char *data = t_data("reference/accum"), *root = t_tmp_dir("shufacc");
	static const char spec[] = "{\"model\":{%s},\"data\":{\"train\":\"%s/train.bin\","
		"\"shuffle\":true,\"shuffle_seed\":5},\"batch\":2,\"seq_len\":24,\"steps\":8,"
		"%s\"threads\":2,\"optim\":{\"lr\":3e-3},\"save\":{\"dir\":\"%s/%s\"}}";
	char model[8192], path[ENG_PATH_LEN + 64];
	eng_trainer a, b;
	eng_err err;
	float loss[9];
	snprintf(model, sizeof model, "\"init_from\":\"%s\"", data);
	t_trainer(&a, spec, model, data, "\"grad_accum\":3,", root, "a");
	t_steps_saving(&a, 8, 2, loss, path, sizeof path);
	ck_assert_int_eq(a.train.pos.epoch, 3); /* 24 samples: three epochs of 7, and 3 */
	snprintf(model, sizeof model, "\"init_from\":\"%s\",\"resume\":true", path);
	t_trainer(&b, spec, model, data, "", root, "b");
	ck_assert_int_eq(b.spec.grad_accum, 3);
	ck_assert_int_eq(b.step, 2);
	t_resumed_steps(&b, 3, 8, loss);
	ck_assert_msg(memcmp(a.model.params, b.model.params, a.model.nfloats * 4) == 0,
		"resumed weights differ from the uninterrupted run's");
	eng_trainer_free(&b);
	/* a resume that asks for another grad_accum, or file order, is refused */
	eng_spec sp;
	char text[16384];
	snprintf(text, sizeof text, spec, model, data, "\"grad_accum\":2,", root, "c");
	ck_assert(eng_spec_parse(&sp, text, &err) == 0);
	ck_assert_int_eq(eng_trainer_init(&b, &sp, &err), -1);
	ck_assert_msg(strstr(err.msg, "its steps took 3 micro-batches, the job asks for 2 x 1 ranks"), "%s",
		err.msg);
	snprintf(text, sizeof text, "{\"model\":{%s},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":2,\"seq_len\":24,\"steps\":8}", model, data);
	ck_assert(eng_spec_parse(&sp, text, &err) == 0);
	ck_assert_int_eq(eng_trainer_init(&b, &sp, &err), -1);
	ck_assert_msg(strstr(err.msg, "its data was read shuffled"), "%s", err.msg);
	eng_trainer_free(&a);
	free(root);
	free(data);
}
END_TEST

/* ---- 4. damaged checkpoints ---- */

/* The 8-byte little-endian header length of a safetensors buffer. */

Suite *suite_ckpt(void)
{
	Suite *s = suite_create("ckpt");
	tcase_ckpt_damage(s);
	TCase *tc = tcase_create("files");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_ckpt_write_same_under_every_policy);
	tcase_add_test(tc, test_ckpt_resume_bit_exact);
	tcase_add_test(tc, test_ckpt_resume_shuffled_accumulated);
	suite_add_tcase(s, tc);

	/* real time: kills and saves slowed by REMAT_CKPT_DELAY_US; generous for a loaded or
	 * sanitizer build, the tests themselves take seconds */
	tc = tcase_create("crash");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_ckpt_write_killed_mid_save);
	suite_add_tcase(s, tc);
	return s;
}
