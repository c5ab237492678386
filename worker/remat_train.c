/* remat_train.c - remat-train: one training job, in the foreground or under control.
 *
 *   remat-train [--json] [--remat-schedule STEP:POLICY,...] [--control PATH |
 *               --control-fd N] [--job-id ID] [--as UID:GID[:GROUPS]] JOB.json
 *   remat-train --check [--as UID:GID[:GROUPS]] JOB.json
 *   remat-train --info
 *   remat-train --export-llmc CKPT_DIR OUT.bin [--bf16]
 *
 * Validates the job spec, builds the run, trains to `steps` printing one line per step (or
 * one JSON object per step with --json), and saves the weights at the end when save.dir is
 * set. --remat-schedule changes the recompute policy between steps without a daemon, e.g.
 * "0:off,5:full,9:h.0-1=selective,head=chunked": an entry S:P applies once S steps are done,
 * so it governs step S+1 onwards; each entry applies on top of the policy before it.
 * SIGINT/SIGTERM stop the run after the current step (saving when save.dir is set).
 * --control PATH listens on a socket of its own for rematctl; --control-fd N speaks to
 * rematd over an inherited socketpair (eng_ctl.c): both take the protocol's commands,
 * applied here at step boundaries.
 * --as (rematd as root, for a client of another uid): reads JOB.json, then becomes that
 * user (groups, gid, uid) before any file the spec names is opened (eng_cred.h).
 * --check trains nothing: it validates the whole job as its start would (eng_trainer_check:
 * files, shape, selectors, init_from, save directory, device) and prints one JSON line,
 * {"ok":true, "config":..., "policy":..., ...} or {"ok":false,"error":"..."} (status 1);
 * rematd runs it at job-start. --info prints one JSON line: version, the BLAS and its
 * kernel, the backends and GPUs, as the workers see them (rematd's daemon-info).
 * --export-llmc trains nothing: it loads a checkpoint (config.json + model.safetensors, or an
 * llm.c file) and writes it as an llm.c model file, version 3 (float32) or with --bf16
 * version 5 (bfloat16), then exits.
 * Exit status: 0 done (finished or stopped), 1 bad input or a failed run, 2 bad usage,
 * 130 interrupted by a signal.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "eng_backends.h"
#include "eng_ckpt.h"
#include "eng_cred.h"
#include "eng_ctl.h"
#include "eng_cuda.h"
#include "eng_import.h"
#include "eng_llmc.h"
#include "eng_mem.h"
#include "eng_spec.h"
#include "eng_train.h"
#include "kn.h"

#define REMAT_VERSION "0.1.0"
#define MAX_SCHEDULE 64 /* entries of --remat-schedule */
#define PAUSE_POLL_MS 200 /* while paused, how often signals are looked at */
#define LOG_EVERY 100     /* under rematd (--control-fd), a progress line per this many steps */

typedef struct sched_entry {
	int at;          /* completed steps when it applies */
	char text[512];  /* the policy text */
} sched_entry;

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void usage(FILE *f)
{
	char modes[160];
	fprintf(f, "usage: remat-train [--json] [--remat-schedule STEP:POLICY[,STEP:POLICY...]]\n"
		   "                   [--control PATH | --control-fd N] [--job-id ID]\n"
		   "                   [--as UID:GID[:GROUPS]] JOB.json\n"
		   "       remat-train --check [--as UID:GID[:GROUPS]] JOB.json\n"
		   "       remat-train --info\n"
		   "       remat-train --export-llmc CKPT_DIR OUT.bin [--bf16]\n"
		   "       remat-train --version\n"
		   "POLICY is a MODE, or SECTION=MODE[,SECTION=MODE] with sections h.N, h.N-M,\n"
		   "blocks, head, all or an alias of the job.\n"
		   "MODE: %s\n",
		proto_modes_text(modes, sizeof modes));
}

/* --version's cuda line: the GPUs and libraries, or why there is no cuda backend. */
static void print_cuda_backend(void)
{
	eng_cuda_info ci;
	eng_cuda_probe(&ci);
	if (ci.ngpus == 0) {
		printf("backend cuda: not available: %s\n", ci.why);
		return;
	}
	for (int i = 0; i < ci.ngpus; i++)
		printf("backend cuda: GPU %d %s, %.1f GiB, compute capability %d.%d\n", i,
			ci.gpu[i].name, ci.gpu[i].memory_bytes / 1073741824.0, ci.gpu[i].cc_major,
			ci.gpu[i].cc_minor);
	printf("backend cuda: %s, %s\n", ci.runtime, eng_cuda_libraries());
}

/* --export-llmc: the exit status. */
static int export_llmc(const char *from, const char *out, int bf16)
{
	eng_err err;
	int version = bf16 ? ENG_LLMC_BF16 : ENG_LLMC_F32;
	if (eng_export_llmc(from, out, version, &err) < 0) {
		fprintf(stderr, "remat-train: %s\n", err.msg);
		return 1;
	}
	printf("wrote %s (llm.c model file, version %d)\n", out, version);
	return 0;
}

/* 1 when item starts a schedule entry ("STEP:..."; a ':' before any '='), 0 for one more
 * item of the entry before it ("head=chunked"). */
static int starts_entry(const char *item)
{
	const char *colon = strchr(item, ':'), *eq = strchr(item, '=');
	return colon && (!eq || colon < eq);
}

/* Splits "0:off,5:full,9:h.0-1=selective,head=chunked" into entries sorted by step (stable
 * for equal steps). An item that does not start with "STEP:" continues the entry before
 * it, so a policy is written as it is printed (items joined by ','); ';' works too. */
static int parse_schedule(const char *arg, sched_entry *e, int *n)
{
	char *copy = strdup(arg), *save = NULL;
	int rc = -1;
	*n = 0;
	if (!copy)
		return -1;
	for (char *it = strtok_r(copy, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		if (!starts_entry(it)) {
			size_t len = *n ? strlen(e[*n - 1].text) : 0;
			if (*n == 0 || len + 1 + strlen(it) >= sizeof e->text) {
				fprintf(stderr, "remat-train: bad --remat-schedule entry '%.64s' "
						"(expected STEP:POLICY)\n", it);
				goto out;
			}
			snprintf(e[*n - 1].text + len, sizeof e->text - len, ",%s", it);
			continue;
		}
		char *colon = strchr(it, ':'), *end;
		if (*n >= MAX_SCHEDULE) {
			fprintf(stderr, "remat-train: too many --remat-schedule entries (at most %d)\n",
				MAX_SCHEDULE);
			goto out;
		}
		*colon = '\0';
		errno = 0;
		long at = strtol(it, &end, 10);
		if (errno || end == it || *end || at < 0 || at > 1000000000 ||
			strlen(colon + 1) >= sizeof e->text || !colon[1]) {
			fprintf(stderr, "remat-train: bad step '%.32s' in --remat-schedule\n", it);
			goto out;
		}
		e[*n].at = (int)at;
		snprintf(e[*n].text, sizeof e->text, "%s", colon + 1);
		(*n)++;
	}
	for (int i = 1; i < *n; i++) /* insertion sort: stable */
		for (int j = i; j > 0 && e[j - 1].at > e[j].at; j--) {
			sched_entry t = e[j];
			e[j] = e[j - 1];
			e[j - 1] = t;
		}
	rc = 0;
out:
	free(copy);
	return rc;
}

static void print_policy(const eng_trainer *tr, int json)
{
	if (json)
		return;
	char buf[8192];
	eng_policy_format(&tr->policy, buf, sizeof buf);
	printf("remat: from step %d: %s\n", tr->step + 1, buf);
}

static int apply_text(eng_trainer *tr, eng_ctl *c, const char *text, int json)
{
	eng_err err;
	eng_policy p;
	if (eng_trainer_parse_policy(tr, text, &p, &err) < 0 ||
		eng_trainer_set_policy(tr, &p, &err) < 0) {
		fprintf(stderr, "remat-train: --remat-schedule '%s': %s\n", text, err.msg);
		return -1;
	}
	eng_ctl_policy_applied(c, tr->step + 1);
	print_policy(tr, json);
	return 0;
}

/* What the control side asked for, accumulated over boundaries. */
typedef struct run_ctl {
	eng_ckpt_writer *writer; /* writes checkpoints beside training (NULL without save.dir) */
	/* the last save's outcome, written by the writer thread and read by the training
	 * thread only after eng_ckpt_writer_wait (whose mutex orders the two) */
	int last_saved;          /* step of the last checkpoint written, -1 none */
	char last_path[ENG_PATH_LEN + 64]; /* where it went */
	char last_err[ENG_ERR_LEN];        /* why the last save failed, "" when it did not */
	int paused;
	int hold;                /* the run is done but its final save failed: it waits,
				  * paused, for a command (resume retries the save) */
	int stop, stop_save;
	char stop_name[72];      /* the name a job-stop asked the final save to have */
	eng_ctl_cmd *stops;   /* job-stop requests, answered when the run has stopped */
} run_ctl;

/* A save handed to the writer thread, and who to tell when it ends. */
typedef struct save_job {
	eng_ctl *c;
	int json;
	run_ctl *run;       /* gets the outcome */
	int step;           /* the step saved */
	char target[ENG_PATH_LEN + 80]; /* the checkpoint directory it writes, for messages */
	int has_cmd;
	eng_ctl_cmd cmd;    /* a ckpt-save to answer: its connection and id (own reference) */
} save_job;

/* Runs on the writer thread when a save ends. */
static void on_saved(void *ud, int ok, const eng_ckpt_result *res, const char *msg)
{
	save_job *j = ud;
	snprintf(j->run->last_err, sizeof j->run->last_err, "%s", ok ? "" : msg);
	if (ok) {
		j->run->last_saved = res->step;
		snprintf(j->run->last_path, sizeof j->run->last_path, "%s", res->path);
		eng_ctl_event_saved(j->c, res->path, res->step, res->bytes);
		if (!j->json)
			printf("saved %s (%.1f MiB in %.0f ms; training stalled %.1f ms)\n", res->path,
				res->bytes / 1048576.0, res->ms, res->stall_ms);
		if (res->warning[0])
			fprintf(stderr, "remat-train: checkpoint: %s\n", res->warning);
		if (j->has_cmd)
			eng_ctl_reply(j->c, &j->cmd, json_pack("{s:s,s:i,s:I,s:f,s:f}", "path",
				res->path, "step", res->step, "bytes", (json_int_t)res->bytes, "ms",
				res->ms, "stall_ms", res->stall_ms));
	} else {
		/* the run goes on with its state in memory; the failure is said, not fatal */
		fprintf(stderr, "remat-train: checkpoint at step %d: %s\n", j->step, msg);
		eng_ctl_event_save_failed(j->c, j->target, j->step, msg);
		if (j->has_cmd)
			eng_ctl_reply_error(j->c, &j->cmd, PROTO_ERR_IO_ERROR, msg);
	}
	json_decref(j->cmd.id);
	free(j);
}

/* Copies the state now and lets the writer thread write it while training goes on. When a
 * save is still being written: waits for it (wait != 0), or fails with Busy's message. */
static int save_async(eng_trainer *tr, eng_ctl *c, eng_ckpt_writer *w, const char *name,
	const eng_ctl_cmd *cmd, int json, int wait, run_ctl *run, eng_err *err)
{
	if (eng_ckpt_writer_busy(w)) {
		if (!wait)
			return eng_errf(err, "a checkpoint is being written; ask again after its "
					     "CHECKPOINT_SAVED event");
		eng_ckpt_writer_wait(w);
	}
	save_job *j = calloc(1, sizeof *j);
	eng_ckpt_snap snap;
	if (!j)
		return eng_errf(err, "out of memory");
	if (eng_trainer_sync_host(tr, err) < 0 || eng_ckpt_snap_take(&snap, tr, err) < 0) {
		free(j);
		return -1;
	}
	j->c = c;
	j->json = json;
	j->run = run;
	j->step = tr->step;
	if (name)
		snprintf(j->target, sizeof j->target, "%s/%s", tr->spec.save_dir, name);
	else
		snprintf(j->target, sizeof j->target, "%s/step_%08d", tr->spec.save_dir, tr->step);
	if (cmd) {
		j->has_cmd = 1;
		j->cmd.conn = cmd->conn;
		j->cmd.id = json_incref(cmd->id);
	}
	/* this thread is the only one submitting, and the writer was idle: it takes it */
	eng_ckpt_writer_submit(w, &snap, tr->spec.save_dir, name, tr->spec.save_keep, on_saved, j);
	return 0;
}

/* Applies commands taken at a boundary; keeps job-stop requests in rc->stops. */
static void apply_cmds(eng_trainer *tr, eng_ctl *c, eng_ctl_cmd *cmds, run_ctl *rc, int json)
{
	eng_err err;
	while (cmds) {
		eng_ctl_cmd *cmd = cmds;
		cmds = cmds->next;
		cmd->next = NULL;
		switch (cmd->op) {
		case CTL_OP_POLICY:
			if (eng_trainer_set_policy(tr, &cmd->policy, &err) < 0) {
				fprintf(stderr, "remat-train: remat-set: %s\n", err.msg);
				break;
			}
			eng_ctl_policy_applied(c, tr->step + 1);
			print_policy(tr, json);
			break;
		case CTL_OP_PAUSE:
			rc->paused = 1;
			eng_ctl_set_state(c, CTL_PAUSED, "job-pause");
			break;
		case CTL_OP_RESUME:
			rc->paused = 0;
			rc->hold = 0; /* a run held after a failed final save tries that save again */
			eng_ctl_set_state(c, CTL_RUNNING, "job-resume");
			break;
		case CTL_OP_STOP:
			rc->stop = 1;
			rc->stop_save |= cmd->save;
			if (cmd->save && cmd->name[0])
				snprintf(rc->stop_name, sizeof rc->stop_name, "%s", cmd->name);
			cmd->next = rc->stops;
			rc->stops = cmd;
			continue; /* answered at the end */
		case CTL_OP_SAVE:
			if (save_async(tr, c, rc->writer, cmd->name[0] ? cmd->name : NULL, cmd, json, 0,
				    rc, &err) < 0)
				eng_ctl_reply_error(c, cmd, eng_ckpt_writer_busy(rc->writer) ?
					PROTO_ERR_BUSY : PROTO_ERR_IO_ERROR, err.msg);
			break;
		}
		eng_ctl_cmd_free(cmd);
	}
}

/* The end of the run: finished, stopped by job-stop, or interrupted by a signal. A stop
 * saves only when asked; the end of the run and a signal save whenever save.dir is set.
 * Returns 0 once it has ended (the final state set, job-stop answered), or -1 when the
 * final save failed (the message in err): then nothing has ended, and the caller decides
 * whether the run can go on. */
static int end_run(eng_trainer *tr, eng_ctl *c, run_ctl *run, int json, eng_err *err)
{
	const eng_spec *s = &tr->spec;
	int want_save = run->stop ? run->stop_save : s->save_dir[0] != 0;
	const char *ckpt = NULL, *name = run->stop && run->stop_name[0] ? run->stop_name : NULL;
	if (run->stop)
		eng_ctl_set_state(c, CTL_STOPPING, "job-stop");
	eng_ckpt_writer_wait(run->writer);
	if (want_save) {
		/* the writer thread writes it, as every save; a save of this very step that has
		 * just been written (a periodic one) is not written again, unless a name is
		 * asked for */
		if (!s->save_dir[0]) {
			return eng_errf(err, "the job has no save.dir");
		} else if (run->last_saved == tr->step && !name) {
			ckpt = run->last_path;
		} else {
			run->last_saved = -1;
			if (save_async(tr, c, run->writer, name, NULL, json, 1, run, err) < 0)
				return -1;
			eng_ckpt_writer_wait(run->writer);
			if (run->last_saved != tr->step)
				return eng_errf(err, "%s", run->last_err);
			ckpt = run->last_path;
		}
	}
	for (eng_ctl_cmd *k = run->stops; k; k = k->next)
		eng_ctl_reply(c, k, json_pack("{s:i,s:s?}", "step", tr->step, "checkpoint", ckpt));
	if (run->stop || stop_signal)
		eng_ctl_set_state(c, CTL_STOPPED, run->stop ? "job-stop" : "signal");
	else
		eng_ctl_set_state(c, CTL_FINISHED, "reached the last step");
	return 0;
}

/* The final save failed and a controller can still act: job-stop gets the error, and the
 * run goes on as it was (running, or paused), or holds, paused, when it was done. */
static void end_failed(eng_trainer *tr, eng_ctl *c, run_ctl *run, const char *why)
{
	char msg[ENG_ERR_LEN + 256], reason[ENG_ERR_LEN + 128];
	int done = tr->step >= tr->spec.steps;
	snprintf(msg, sizeof msg, "the final save failed: %s; the job goes on%s with its state "
		"in memory: free space (or fix the save directory) and ask again", why,
		done || run->paused ? ", paused," : "");
	for (eng_ctl_cmd *k = run->stops; k; k = k->next)
		eng_ctl_reply_error(c, k, PROTO_ERR_IO_ERROR, msg);
	eng_ctl_cmd_free(run->stops);
	run->stops = NULL;
	run->stop = run->stop_save = 0;
	run->stop_name[0] = '\0';
	if (done) {
		run->paused = run->hold = 1;
		snprintf(reason, sizeof reason, "trained to the last step, but the final save failed: "
			"%s; resume or stop --save tries again", why);
	} else {
		snprintf(reason, sizeof reason, "the final save failed: %s", why);
	}
	eng_ctl_set_state(c, run->paused ? CTL_PAUSED : CTL_RUNNING, reason);
}

/* --info: one JSON line of what this build runs on, as a worker sees it. */
static int print_info(void)
{
	kn_set_threads(1);
	json_t *o = json_pack("{s:s,s:s}", "version", REMAT_VERSION, "blas", kn_blas_describe());
	if (!o || eng_backends_json(o) < 0) {
		fprintf(stderr, "remat-train: out of memory\n");
		return 1;
	}
	char *line = json_dumps(o, JSON_COMPACT);
	printf("%s\n", line ? line : "{}");
	free(line);
	json_decref(o);
	return 0;
}

static void alias_item(json_t *o, const eng_aliases *al)
{
	for (int i = 0; i < al->n; i++)
		json_object_set_new(o, al->a[i].name, json_string(al->a[i].selector));
}

/* --check's answer for an error: its message, and the protocol's class for it (Busy: try
 * again later; InvalidParameter: the spec must change). New reference. */
static json_t *check_failed(const eng_err *err)
{
	return json_pack("{s:b,s:s,s:s}", "ok", 0, "error", err->msg, "class",
		proto_errclass_name(err->kind == ENG_ERR_BUSY ? PROTO_ERR_BUSY
							      : PROTO_ERR_INVALID_PARAMETER));
}

/* Prints --check's answer (taken) as one line; the exit status it means. */
static int print_check(json_t *o)
{
	char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
	printf("%s\n", line ? line : "{\"ok\":false,\"error\":\"out of memory\"}");
	int ok = json_is_true(json_object_get(o, "ok"));
	free(line);
	json_decref(o);
	return ok ? 0 : 1;
}

/* --check: validates the job as its start would, one JSON line; the exit status. */
static int check_job(eng_spec *s)
{
	eng_check ck;
	eng_err err;
	json_t *o;
	if (eng_trainer_check(s, &ck, &err) < 0) {
		o = check_failed(&err);
	} else {
		json_t *al = json_object();
		alias_item(al, &ck.aliases);
		o = json_pack("{s:b,s:s,s:i,s:{s:i,s:i,s:i,s:i,s:i},s:i,s:i,s:i,s:o,s:o,s:s,s:s,"
			      "s:s,s:I}", "ok", 1, "name", s->name, "steps", s->steps, "config",
			"n_layer", s->cfg.n_layer, "n_embd", s->cfg.n_embd, "n_head", s->cfg.n_head,
			"n_positions", s->cfg.n_positions, "vocab_size", s->cfg.vocab_size, "batch",
			s->batch, "seq_len", s->seq_len, "chunk_rows", ck.chunk_rows, "policy",
			eng_policy_json(&ck.policy), "aliases", al, "init_from", s->init_from,
			"save_dir", s->save_dir, "device", s->device == ENG_DEVICE_CUDA ? "cuda" : "cpu",
			"tokens", (json_int_t)ck.ntok);
		if (o && s->resume)
			json_object_set_new(o, "resume_step", json_integer(ck.resume_step));
	}
	return print_check(o);
}

/* The run reached its end or was asked to stop: 1 once it has ended; 0 when it goes on
 * (its final save failed and a controller can still act); -1 when it failed (said). */
static int reach_end(eng_trainer *tr, eng_ctl *c, run_ctl *run, int json, int *ended_once)
{
	eng_err err;
	if (tr->val.tok && !json && !*ended_once)
		printf("val loss %.6f\n", eng_trainer_val_loss(tr, 0));
	*ended_once = 1;
	if (end_run(tr, c, run, json, &err) == 0)
		return 1;
	/* without a controller, or under a signal, the process must end, and says so; with
	 * one the run is kept */
	fprintf(stderr, "remat-train: %s\n", err.msg);
	if (!c || stop_signal) {
		for (eng_ctl_cmd *k = run->stops; k; k = k->next)
			eng_ctl_reply_error(c, k, PROTO_ERR_IO_ERROR, err.msg);
		eng_ctl_set_state(c, CTL_FAILED, err.msg);
		return -1;
	}
	end_failed(tr, c, run, err.msg);
	return 0;
}

/* The command line. */
typedef struct train_opts {
	int json, check, bf16;
	int ctl_fd;                        /* --control-fd, -1 none */
	const char *job, *sched_arg, *ctl_path, *job_id, *as, *export_from, *export_to;
} train_opts;

/* Parses argv into o: -1 to go on, or the exit status of a run that ends here (--help,
 * --version, --info, bad usage). */
static int parse_args(int argc, char **argv, train_opts *o)
{
	memset(o, 0, sizeof *o);
	o->ctl_fd = -1;
	o->job_id = "job";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if (strcmp(a, "--json") == 0) {
			o->json = 1;
		} else if (strcmp(a, "--remat-schedule") == 0 && more) {
			o->sched_arg = argv[++i];
		} else if (strncmp(a, "--remat-schedule=", 17) == 0) {
			o->sched_arg = a + 17;
		} else if (strcmp(a, "--control") == 0 && more) {
			o->ctl_path = argv[++i];
		} else if (strcmp(a, "--control-fd") == 0 && more) {
			char *end;
			long v = strtol(argv[++i], &end, 10);
			if (*end || v < 0 || v > 65535) {
				usage(stderr);
				return 2;
			}
			o->ctl_fd = (int)v;
		} else if (strcmp(a, "--job-id") == 0 && more) {
			o->job_id = argv[++i];
		} else if (strcmp(a, "--export-llmc") == 0 && i + 2 < argc) {
			o->export_from = argv[++i];
			o->export_to = argv[++i];
		} else if (strcmp(a, "--bf16") == 0) {
			o->bf16 = 1;
		} else if (strcmp(a, "--as") == 0 && more) {
			o->as = argv[++i];
		} else if (strcmp(a, "--check") == 0) {
			o->check = 1;
		} else if (strcmp(a, "--info") == 0) {
			return print_info();
		} else if (strcmp(a, "--version") == 0) {
			kn_set_threads(1);
			printf("remat-train %s\nbackend cpu: %s\n", REMAT_VERSION, kn_blas_describe());
			print_cuda_backend();
			return 0;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (a[0] == '-' || o->job) {
			usage(stderr);
			return 2;
		} else {
			o->job = a;
		}
	}
	/* what may go together: --export-llmc and --check are subcommands of their own */
	int run_opts = o->json || o->sched_arg || o->ctl_path || o->ctl_fd >= 0;
	int ok = o->export_from ? !o->job && !run_opts && !o->as && !o->check
				: o->job && !o->bf16 && !(o->check && run_opts) &&
					  !(o->ctl_fd >= 0 && o->ctl_path);
	if (!ok) {
		usage(stderr);
		return 2;
	}
	return -1;
}

/* Reads the spec (rematd's file, read with rematd's rights), becomes --as's user when
 * asked, then parses it: from here on, everything the spec names is opened as that user.
 * 0; -1 with the spec's problem in err; or an exit status (>0) when --as fails (said). */
static int load_spec(const train_opts *o, eng_spec *spec, eng_err *err)
{
	size_t len = 0;
	char *text = eng_spec_read(o->job, &len, err), why[256];
	eng_cred cred;
	int rc = 0;
	if (o->as && eng_cred_parse(o->as, &cred, why, sizeof why) < 0)
		rc = 2;
	else if (o->as && eng_cred_drop(&cred, why, sizeof why) < 0)
		rc = 1;
	if (rc)
		fprintf(stderr, "remat-train: %s\n", why);
	else if (!text || eng_spec_parse_buf(spec, text, len, o->job, err) < 0)
		rc = -1;
	free(text);
	return rc;
}

/* Every --remat-schedule entry checked now, not hours into the run when it is reached:
 * 0, or 2 after saying what is wrong. */
static int check_schedule(const eng_trainer *tr, const sched_entry *sched, int nsched)
{
	eng_policy chk = tr->policy;
	eng_err err;
	for (int i = 0; i < nsched; i++) {
		if (sched[i].at >= tr->spec.steps) {
			fprintf(stderr, "remat-train: --remat-schedule step %d is at or past the end of "
					"the run (steps %d)\n", sched[i].at, tr->spec.steps);
			return 2;
		}
		if (eng_policy_parse(&chk, &tr->aliases, sched[i].text, &err) < 0 ||
			eng_trainer_check_policy(tr, &chk, &err) < 0) {
			fprintf(stderr, "remat-train: --remat-schedule '%s': %s\n", sched[i].text,
				err.msg);
			return 2;
		}
	}
	return 0;
}

/* The line before the steps: the job, its shape, batch, threads and backend. */
static void print_banner(eng_trainer *tr)
{
	const eng_spec *s = &tr->spec;
	printf("remat-train %s: job '%s', %zu parameters (L %d, C %d, NH %d, V %d), batch %d x %d, "
	       "%d threads, %s\n", REMAT_VERSION, s->name, eng_config_num_params(&s->cfg),
		s->cfg.n_layer, s->cfg.n_embd, s->cfg.n_head, s->cfg.vocab_size, s->batch,
		s->seq_len, s->threads, eng_trainer_backend(tr));
}

/* A step's line: a JSON object with --json, else the progress line (under rematd, whose
 * log it is, one in LOG_EVERY). */
static void print_step(const eng_trainer *tr, const eng_step_stats *st, int json,
	int under_rematd)
{
	const eng_spec *s = &tr->spec;
	if (json) {
		eng_mem_stats ms;
		eng_mem_get_stats(&ms); /* RSS for the JSON line only */
		json_t *o = json_pack("{s:i,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:f,s:o}", "step",
			st->step, "loss", (double)st->loss, "lr", (double)st->lr, "tokens_per_s",
			st->tokens_per_s, "step_ms", st->step_ms, "recompute_ms", st->recompute_ms,
			"activation_bytes", (json_int_t)st->activation_bytes, "peak_bytes",
			(json_int_t)st->peak_bytes, "rss", (json_int_t)ms.rss, "rss_peak",
			(json_int_t)ms.rss_peak, "grad_norm", (double)st->grad_norm, "policy",
			eng_policy_json(&tr->policy));
		char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		printf("%s\n", line);
		free(line);
		json_decref(o);
	} else if (!under_rematd || st->step % LOG_EVERY == 0 || st->step == s->steps) {
		printf("step %6d/%d | loss %.6f | lr %.3e | %8.0f tok/s | %9.1f ms (recompute "
		       "%.1f) | act %.1f MiB\n", st->step, s->steps, st->loss, st->lr,
			st->tokens_per_s, st->step_ms, st->recompute_ms,
			st->activation_bytes / 1048576.0);
	}
}

/* The periodic save after a step, when one is due; one that cannot even begin is said like
 * one that failed. */
static void periodic_save(eng_trainer *tr, eng_ctl *c, run_ctl *run, int json)
{
	const eng_spec *s = &tr->spec;
	eng_err err;
	if (s->save_every <= 0 || tr->step % s->save_every != 0 || tr->step >= s->steps ||
		save_async(tr, c, run->writer, NULL, NULL, json, 1, run, &err) == 0)
		return;
	char target[ENG_PATH_LEN + 80];
	snprintf(target, sizeof target, "%s/step_%08d", s->save_dir, tr->step);
	fprintf(stderr, "remat-train: checkpoint at step %d: %s\n", tr->step, err.msg);
	eng_ctl_event_save_failed(c, target, tr->step, err.msg);
}

/* The control thread, when asked for (--control, --control-fd): -1 when it cannot start
 * (said). Then the start, held by the test hook REMAT_START_DELAY_MS (as a large
 * init_from would hold it, so that tests can talk to a job that is still starting; unset
 * in normal use). */
static int start_control(const train_opts *o, eng_ctl **c)
{
	/* jansson's hash seed is set before the control thread exists (it is not thread-safe
	 * to let both threads initialise it lazily). */
	json_object_seed(0);
	signal(SIGPIPE, SIG_IGN);
	*c = NULL;
	if ((o->ctl_fd >= 0 || o->ctl_path) &&
		!(*c = eng_ctl_start(o->ctl_fd, o->ctl_path, o->job_id, NULL)))
		return -1;
	const char *delay = getenv("REMAT_START_DELAY_MS");
	if (delay && atoi(delay) > 0)
		usleep((useconds_t)atoi(delay) * 1000u);
	return 0;
}

int main(int argc, char **argv)
{
	int nsched = 0, rc;
	train_opts o;
	eng_ctl *c = NULL;
	run_ctl run = {0};
	static sched_entry sched[MAX_SCHEDULE];
	eng_trainer tr;
	eng_spec spec;
	eng_err err;
	memset(&tr, 0, sizeof tr);
	kn_fix_runtime(argv); /* may re-execute this program with a better BLAS kernel and
			       * OpenMP wait policy */
	if ((rc = parse_args(argc, argv, &o)) >= 0)
		return rc;
	if (o.export_from)
		return export_llmc(o.export_from, o.export_to, o.bf16);
	if (o.sched_arg && parse_schedule(o.sched_arg, sched, &nsched) < 0)
		return 2;
	int spec_rc = load_spec(&o, &spec, &err);
	if (spec_rc > 0)
		return spec_rc;
	if (o.check) {
		if (spec_rc < 0)
			return print_check(check_failed(&err));
		return check_job(&spec);
	}
	rc = 1;
	if (start_control(&o, &c) < 0)
		return 1;
	if (spec_rc < 0 || eng_trainer_init(&tr, &spec, &err) < 0) {
		fprintf(stderr, "remat-train: %s\n", err.msg);
		eng_ctl_set_state(c, CTL_FAILED, err.msg);
		goto out;
	}
	if ((rc = check_schedule(&tr, sched, nsched)) != 0)
		goto out;
	rc = 1;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const eng_spec *s = &tr.spec;
	if (!o.json)
		print_banner(&tr);
	eng_ctl_attach(c, &tr);
	run.last_saved = -1;
	if (s->save_dir[0] && !(run.writer = eng_ckpt_writer_start())) {
		fprintf(stderr, "remat-train: cannot start the checkpoint writer thread\n");
		goto out;
	}

	int next = 0, ended_once = 0;
	for (;;) {
		for (; next < nsched && sched[next].at <= tr.step; next++)
			if (apply_text(&tr, c, sched[next].text, o.json) < 0)
				goto out;
		apply_cmds(&tr, c, eng_ctl_take(c), &run, o.json);
		if (run.stop || stop_signal || (tr.step >= s->steps && !run.hold)) {
			int r = reach_end(&tr, c, &run, o.json, &ended_once);
			if (r < 0)
				goto out;
			if (r > 0)
				break;
			continue;
		}
		if (run.paused) {
			apply_cmds(&tr, c, eng_ctl_wait(c, PAUSE_POLL_MS), &run, o.json);
			continue;
		}
		if (!eng_ctl_begin_step(c))
			continue; /* a command came in since the take: apply it first */
		eng_step_stats st;
		if (eng_trainer_step(&tr, &st, &err) < 0) {
			fprintf(stderr, "remat-train: %s\n", err.msg);
			eng_ctl_set_state(c, CTL_FAILED, err.msg);
			goto out;
		}
		eng_ctl_end_step(c, &st);
		periodic_save(&tr, c, &run, o.json);
		print_step(&tr, &st, o.json, o.ctl_fd >= 0);
	}
	if (stop_signal && !run.stop) {
		fprintf(stderr, "remat-train: interrupted after step %d\n", tr.step);
		rc = 130;
		goto out;
	}
	rc = 0;
out:
	eng_ctl_cmd_free(run.stops);
	eng_ckpt_writer_stop(run.writer); /* a save in progress is finished, never cut */
	eng_ctl_stop(c);
	eng_trainer_free(&tr);
	return rc;
}
