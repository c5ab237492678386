/* remat_train.c - remat-train: one training job in the foreground.
 *
 *   remat-train [--json] [--remat-schedule STEP:POLICY,...] JOB.json
 *
 * Validates the job spec, builds the run, trains to `steps` printing one line per step (or
 * one JSON object per step with --json), and saves the weights at the end when save.dir is
 * set. --remat-schedule changes the recompute policy between steps without a daemon, e.g.
 * "0:off,5:full,9:h.0-1=selective;head=chunked": an entry S:P applies once S steps are done,
 * so it governs step S+1 onwards; each entry applies on top of the policy before it.
 * SIGINT/SIGTERM stop the run after the current step (saving when save.dir is set).
 * Exit status: 0 done, 1 bad input or a failed run, 2 bad usage, 130 interrupted.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_mem.h"
#include "eng_spec.h"
#include "eng_train.h"
#include "kn.h"

#define REMAT_VERSION "0.1.0"
#define MAX_SCHEDULE 64 /* entries of --remat-schedule */

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
	fprintf(f, "usage: remat-train [--json] [--remat-schedule STEP:POLICY[,STEP:POLICY...]] "
		   "JOB.json\n"
		   "       remat-train --version\n"
		   "POLICY is a mode (off, selective, full, chunked) or SECTION=MODE[;SECTION=MODE]\n"
		   "with sections h.N, h.N-M, blocks, head, all or an alias of the job.\n");
}

/* Splits "0:off,5:full" into entries sorted by step (stable for equal steps). */
static int parse_schedule(const char *arg, sched_entry *e, int *n)
{
	char *copy = strdup(arg), *save = NULL;
	int rc = -1;
	*n = 0;
	if (!copy)
		return -1;
	for (char *it = strtok_r(copy, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(it, ':'), *end;
		if (!colon || *n >= MAX_SCHEDULE) {
			fprintf(stderr, "remat-train: bad --remat-schedule entry '%.64s' "
					"(expected STEP:POLICY, at most %d entries)\n", it, MAX_SCHEDULE);
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

/* "h.0-1=full h.2=off head=off" as a JSON object {"h.0-1":"full",...} */
static void print_policy_json(const eng_policy *p)
{
	char buf[8192];
	eng_policy_format(p, buf, sizeof buf);
	printf("{");
	char *save = NULL;
	int first = 1;
	for (char *it = strtok_r(buf, " ", &save); it; it = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(it, '=');
		*eq = '\0';
		printf("%s\"%s\":\"%s\"", first ? "" : ",", it, eq + 1);
		first = 0;
	}
	printf("}");
}

static int apply_text(eng_trainer *tr, const char *text, int json)
{
	eng_err err;
	eng_policy p;
	if (eng_trainer_parse_policy(tr, text, &p, &err) < 0 ||
		eng_trainer_set_policy(tr, &p, &err) < 0) {
		fprintf(stderr, "remat-train: --remat-schedule '%s': %s\n", text, err.msg);
		return -1;
	}
	if (!json) {
		char buf[8192];
		eng_policy_format(&p, buf, sizeof buf);
		printf("remat: from step %d: %s\n", tr->step + 1, buf);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int json = 0, nsched = 0, rc = 1;
	const char *job = NULL, *sched_arg = NULL;
	static sched_entry sched[MAX_SCHEDULE];
	eng_trainer tr;
	eng_err err;
	memset(&tr, 0, sizeof tr);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "--remat-schedule") == 0 && i + 1 < argc) {
			sched_arg = argv[++i];
		} else if (strncmp(argv[i], "--remat-schedule=", 17) == 0) {
			sched_arg = argv[i] + 17;
		} else if (strcmp(argv[i], "--version") == 0) {
			kn_set_threads(1);
			printf("remat-train %s\nbackend cpu: %s\n", REMAT_VERSION, kn_blas_describe());
			return 0;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' || job) {
			usage(stderr);
			return 2;
		} else {
			job = argv[i];
		}
	}
	if (!job) {
		usage(stderr);
		return 2;
	}
	if (sched_arg && parse_schedule(sched_arg, sched, &nsched) < 0)
		return 2;

	eng_spec spec;
	if (eng_spec_load(&spec, job, &err) < 0) {
		fprintf(stderr, "remat-train: %s\n", err.msg);
		return 1;
	}
	if (eng_trainer_init(&tr, &spec, &err) < 0) {
		fprintf(stderr, "remat-train: %s\n", err.msg);
		return 1;
	}
	/* Check every schedule entry now, not hours into the run when it is reached. */
	eng_policy chk = tr.model.policy;
	for (int i = 0; i < nsched; i++) {
		if (sched[i].at >= tr.spec.steps) {
			fprintf(stderr, "remat-train: --remat-schedule step %d is at or past the end of "
					"the run (steps %d)\n", sched[i].at, tr.spec.steps);
			rc = 2;
			goto out;
		}
		if (eng_policy_parse(&chk, &tr.aliases, sched[i].text, &err) < 0) {
			fprintf(stderr, "remat-train: --remat-schedule '%s': %s\n", sched[i].text,
				err.msg);
			rc = 2;
			goto out;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const eng_spec *s = &tr.spec;
	if (!json)
		printf("remat-train %s: job '%s', %zu parameters (L %d, C %d, NH %d, V %d), batch %d "
		       "x %d, %d threads, %s\n", REMAT_VERSION, s->name,
			eng_config_num_params(&s->cfg), s->cfg.n_layer, s->cfg.n_embd, s->cfg.n_head,
			s->cfg.vocab_size, s->batch, s->seq_len, s->threads, kn_blas_describe());

	int next = 0;
	while (tr.step < s->steps && !stop_signal) {
		for (; next < nsched && sched[next].at <= tr.step; next++)
			if (apply_text(&tr, sched[next].text, json) < 0)
				goto out;
		eng_step_stats st;
		if (eng_trainer_step(&tr, &st, &err) < 0) {
			fprintf(stderr, "remat-train: %s\n", err.msg);
			goto out;
		}
		if (json) {
			printf("{\"step\":%d,\"loss\":%.9g,\"lr\":%.9g,\"tokens_per_s\":%.1f,"
			       "\"step_ms\":%.3f,\"recompute_ms\":%.3f,\"activation_bytes\":%zu,"
			       "\"peak_bytes\":%zu,\"grad_norm\":%.9g,\"policy\":",
				st.step, st.loss, st.lr, st.tokens_per_s, st.step_ms, st.recompute_ms,
				st.activation_bytes, st.peak_bytes, st.grad_norm);
			print_policy_json(&tr.model.policy);
			printf("}\n");
		} else {
			printf("step %6d/%d | loss %.6f | lr %.3e | %8.0f tok/s | %9.1f ms "
			       "(recompute %.1f) | act %.1f MiB\n", st.step, s->steps, st.loss, st.lr,
				st.tokens_per_s, st.step_ms, st.recompute_ms,
				st.activation_bytes / 1048576.0);
		}
	}
	if (tr.val.tok && !json)
		printf("val loss %.6f\n", eng_trainer_val_loss(&tr, 0));
	if (s->save_dir[0]) {
		char path[ENG_PATH_LEN + 64];
		if (eng_trainer_save(&tr, path, sizeof path, &err) < 0) {
			fprintf(stderr, "remat-train: %s\n", err.msg);
			goto out;
		}
		if (!json)
			printf("saved %s\n", path);
	}
	if (stop_signal) {
		fprintf(stderr, "remat-train: interrupted after step %d\n", tr.step);
		rc = 130;
		goto out;
	}
	rc = 0;
out:
	eng_trainer_free(&tr);
	return rc;
}
