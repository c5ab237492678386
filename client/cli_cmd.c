/* cli_cmd.c - rematctl's subcommands (see cli_cmd.h): the table, and the requests built
 * from the command line before connecting: job-start's spec read and its paths made
 * absolute, remat-set's ordered sections, subscribe's events.
 *
 * Relative paths in a job spec (data.train, data.val, model.init_from, save.dir,
 * parallel.hostfile) are taken from the spec file's directory, as Docker Compose takes its
 * file's (the spec and its data travel together: `rematctl start examples/loop.json` finds
 * examples/train.txt from anywhere), and sent absolute: the daemon runs elsewhere and
 * refuses relative paths. A spec on standard input ("-") has the current directory.
 * Not here: parsing argv (rematctl.c), printing replies (cli_show.c).
 */
#include "cli_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_conn.h"
#include "cli_fmt.h"
#include "cli_logs.h"
#include "eng_fs.h"

static long long plan_budget = -1; /* --budget: set by build_remat, read by show_plan */

int cli_fail_usage(const cli_command *cmd, const char *fmt, const char *arg)
{
	fprintf(stderr, CLI_NAME ": ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	if (cmd)
		fprintf(stderr, "usage: " CLI_NAME " %s%s%s\n", cmd->name, *cmd->args ? " " : "",
			cmd->args);
	else
		fprintf(stderr, "try '" CLI_NAME " --help'\n");
	return CLI_EXIT_USAGE;
}

static int fail_memory(void)
{
	fprintf(stderr, CLI_NAME ": out of memory\n");
	return CLI_EXIT_FAIL;
}

/* {"job": JOB}, or {} when JOB was left out (a worker's own socket). */
int cli_build_job(const cli_command *cmd, const cli_args *a, json_t **req)
{
	(void)cmd;
	*req = a->job ? json_pack("{s:s}", "job", a->job) : json_object();
	return *req ? CLI_EXIT_OK : fail_memory();
}

static int build_empty(const cli_command *cmd, const cli_args *a, json_t **req)
{
	(void)cmd;
	(void)a;
	*req = json_object();
	return *req ? CLI_EXIT_OK : fail_memory();
}

/* Sets key to a string option; a string that is not UTF-8 is a usage error. */
static int set_str(const cli_command *cmd, json_t *req, const char *key, const char *opt,
		   const char *v)
{
	if (!v || json_object_set_new(req, key, json_string(v)) == 0)
		return CLI_EXIT_OK;
	json_decref(req);
	return cli_fail_usage(cmd, opt, v);
}

/* Reads a job spec (path, or "-" for stdin) into a JSON object with absolute paths, taken
 * from the spec file's directory (cli_spec_dir); show: the paths as resolved, on stderr
 * (stdout keeps the reply alone: JOB=$(rematctl start x.json)). */
static json_t *spec_load(const char *path, int show)
{
	json_error_t je;
	char cwd[CLI_PATH_MAX], dir[CLI_PATH_MAX], err[CLI_ERR_LEN];
	json_t *spec;
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");

	if (!f) {
		fprintf(stderr, CLI_NAME ": cannot open '%s': %s\n", path, strerror(errno));
		return NULL;
	}
	/* duplicate keys are refused here as the engine would, with the file's line number */
	spec = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	if (f != stdin)
		fclose(f);
	if (!spec) {
		fprintf(stderr, CLI_NAME ": cannot parse '%s': %s\n", path,
			eng_err_json(&je, err, sizeof err)); /* never the file's bytes */
		return NULL;
	}
	if (!getcwd(cwd, sizeof cwd)) {
		fprintf(stderr, CLI_NAME ": cannot get the working directory: %s\n",
			strerror(errno));
		goto fail;
	}
	if (cli_spec_dir(cwd, path, dir, sizeof dir) < 0) {
		fprintf(stderr, CLI_NAME ": '%s': path too long\n", path);
		goto fail;
	}
	if (cli_spec_absolutize(spec, dir, err, sizeof err) < 0) {
		fprintf(stderr, CLI_NAME ": '%s': %s\n", path, err);
		goto fail;
	}
	char *text = show ? cli_spec_paths_text(spec) : NULL;
	if (text)
		fputs(text, stderr);
	free(text);
	return spec;
fail:
	json_decref(spec);
	return NULL;
}

static int build_start(const cli_command *cmd, const cli_args *a, json_t **req)
{
	json_t *spec = spec_load(a->rest[0], !a->json);
	if (!spec)
		return CLI_EXIT_FAIL;
	*req = json_pack("{s:o}", "spec", spec);
	if (!*req)
		return fail_memory();
	return set_str(cmd, *req, "name", "--name '%s' is not valid UTF-8", a->name);
}

/* stop and shutdown: they save unless --no-save (--save, the old way to ask, is still
 * taken and changes nothing); stop: --name for the final checkpoint too */
static int build_save_flag(const cli_command *cmd, const cli_args *a, json_t **req)
{
	int rc = cmd->job == CLI_JOB_NONE ? build_empty(cmd, a, req) : cli_build_job(cmd, a, req);
	const char *why = a->save && a->no_save ? "give --save or --no-save, not both" :
			  a->name && a->no_save ? "--name names the final checkpoint, which "
						  "--no-save does not write" : NULL;
	if (rc == CLI_EXIT_OK && why) {
		json_decref(*req);
		return cli_fail_usage(cmd, "%s", why);
	}
	/* without a flag the server's default: save (a worker without save.dir stops unsaved
	 * and says so) */
	if (rc == CLI_EXIT_OK && (a->save || a->no_save))
		json_object_set_new(*req, "save", json_boolean(!a->no_save));
	if (rc == CLI_EXIT_OK)
		rc = set_str(cmd, *req, "name", "--name '%s' is not valid UTF-8", a->name);
	return rc;
}

static int build_ckpt_save(const cli_command *cmd, const cli_args *a, json_t **req)
{
	int rc = cli_build_job(cmd, a, req);
	if (rc != CLI_EXIT_OK)
		return rc;
	return set_str(cmd, *req, "name", "--name '%s' is not valid UTF-8", a->name);
}

/* remat set and plan: job, sections (when SEL=MODE were given), default, budget_bytes */
static int build_remat(const cli_command *cmd, const cli_args *a, json_t **req)
{
	char err[256];
	json_t *sections = NULL;
	int set = strcmp(cmd->execute, "remat-set") == 0;
	int rc;

	if (set && a->nrest == 0 && !a->deflt)
		return cli_fail_usage(cmd, "%s", "nothing to set: give SELECTOR=MODE or --default");
	rc = cli_build_job(cmd, a, req);
	if (rc != CLI_EXIT_OK)
		return rc;
	/* remat-set requires "sections": --default alone sends an empty object */
	if (a->nrest > 0 || set) {
		if (cli_sections_parse(a->rest, a->nrest, &sections, err, sizeof err) < 0) {
			json_decref(*req);
			return cli_fail_usage(cmd, "%s", err);
		}
		json_object_set_new(*req, "sections", sections);
	}
	rc = set_str(cmd, *req, "default", "--default '%s' is not valid UTF-8", a->deflt);
	if (rc == CLI_EXIT_OK && a->budget_word) {
		json_decref(*req);
		return cli_fail_usage(cmd, "--budget %s is remat auto's: a plan takes a size",
			a->budget_word);
	}
	if (rc == CLI_EXIT_OK && a->budget >= 0)
		json_object_set_new(*req, "budget_bytes", json_integer(a->budget));
	/* past the memory budget: the policy is the user's again, the controller off */
	if (rc == CLI_EXIT_OK && set && a->force)
		json_object_set_new(*req, "force", json_true());
	plan_budget = a->budget;
	return rc;
}

/* remat auto JOB --budget SIZE|cgroup|device|off: the memory controller on that budget, or off */
static int build_auto(const cli_command *cmd, const cli_args *a, json_t **req)
{
	if (!a->budget_word && a->budget < 0)
		return cli_fail_usage(cmd, "%s", "give --budget SIZE, cgroup, device or off");
	int rc = cli_build_job(cmd, a, req);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (a->budget_word)
		json_object_set_new(*req, "budget", json_string(a->budget_word));
	else
		json_object_set_new(*req, "budget_bytes", json_integer(a->budget));
	return CLI_EXIT_OK;
}

/* plan SPEC.json: remat-plan for a spec file (its paths made absolute), before anything
 * starts: the rest as remat plan's */
static int build_plan_spec(const cli_command *cmd, const cli_args *a, json_t **req)
{
	char err[256];
	json_t *spec = spec_load(a->rest[0], !a->json), *sections = NULL;
	if (!spec)
		return CLI_EXIT_FAIL;
	*req = json_pack("{s:o}", "spec", spec);
	if (!*req)
		return fail_memory();
	if (a->nrest > 1) {
		if (cli_sections_parse(a->rest + 1, a->nrest - 1, &sections, err, sizeof err) < 0) {
			json_decref(*req);
			return cli_fail_usage(cmd, "%s", err);
		}
		json_object_set_new(*req, "sections", sections);
	}
	int rc = set_str(cmd, *req, "default", "--default '%s' is not valid UTF-8", a->deflt);
	if (rc == CLI_EXIT_OK && a->budget >= 0)
		json_object_set_new(*req, "budget_bytes", json_integer(a->budget));
	plan_budget = a->budget;
	return rc;
}

/* remat memlog JOB [--count N] [--trace FILE [--format pytorch|chrome]] */
static int build_memlog(const cli_command *cmd, const cli_args *a, json_t **req)
{
	if (a->format && !a->trace)
		return cli_fail_usage(cmd, "%s", "--format is the format of --trace FILE");
	int rc = cli_build_job(cmd, a, req);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (a->count > 0)
		json_object_set_new(*req, "steps", json_integer(a->count));
	if (a->trace)
		json_object_set_new(*req, "trace", json_string(a->format ? a->format : "pytorch"));
	return CLI_EXIT_OK;
}

/* A value of set checked as the worker (h, a live hyperparameter) or rematd (h -1: priority)
 * will: 0, or -1 with desc. */
static int set_check(int h, const json_t *v, char *desc, size_t desclen)
{
	json_int_t p = json_integer_value(v);
	if (h >= 0)
		return proto_hparam_check((proto_hparam)h, v, desc, desclen);
	if (json_is_integer(v) && p >= 1 && p <= PROTO_PRIORITY_MAX)
		return 0;
	snprintf(desc, desclen, "priority must be an integer from 1 to %d", PROTO_PRIORITY_MAX);
	return -1;
}

/* set: KEY=VALUE... into {"job", "set": {KEY: VALUE}}, each checked as the worker will
 * (proto's table): numbers as numbers, schedule's cosine or constant as a string. */
static int build_set(const cli_command *cmd, const cli_args *a, json_t **req)
{
	char desc[PROTO_DESC_LEN];
	json_t *set = json_object();
	int rc = cli_build_job(cmd, a, req);
	if (rc != CLI_EXIT_OK || !set) {
		json_decref(set);
		return rc != CLI_EXIT_OK ? rc : CLI_EXIT_FAIL;
	}
	for (int i = 0; i < a->nrest; i++) {
		const char *kv = a->rest[i], *eq = strchr(kv, '=');
		char key[64], *end;
		size_t n = eq ? (size_t)(eq - kv) : 0;
		int h = -1;
		if (eq && n < sizeof key) {
			memcpy(key, kv, n);
			key[n] = '\0';
			h = proto_hparam_find(key);
		}
		int priority = eq && n < sizeof key && !strcmp(key, PROTO_PRIORITY);
		if (h < 0 && !priority) {
			json_decref(set);
			json_decref(*req);
			return cli_fail_usage(cmd, "'%s' is not KEY=VALUE with a live hyperparameter "
				"(lr, schedule, warmup, min_lr_frac, grad_clip, weight_decay, eval.every, "
				"save.every) or priority", kv);
		}
		errno = 0;
		double x = strtod(eq + 1, &end);
		json_t *v = h == PROTO_HP_SCHEDULE ? json_string(eq + 1)
			: errno || end == eq + 1 || *end ? NULL
			: x == floor(x) && fabs(x) < 1e15 && strpbrk(eq + 1, ".eE") == NULL
				? json_integer((json_int_t)x) : json_real(x);
		if (!v || set_check(h, v, desc, sizeof desc) < 0) {
			json_decref(v);
			json_decref(set);
			json_decref(*req);
			return cli_fail_usage(cmd, "%s", v ? desc : "a value must be a number");
		}
		json_object_set_new(set, key, v);
	}
	json_object_set_new(*req, "set", set);
	return CLI_EXIT_OK;
}

/* The timeline's JSON and a newline into f (eng_fs_write's fill) */
static int fill_trace(FILE *f, void *data, eng_err *err)
{
	if (json_dumpf(data, f, JSON_COMPACT) < 0 && !ferror(f))
		return eng_errf(err, "the timeline could not be written as JSON");
	fputc('\n', f); /* a write error: the final flush says it */
	return 0;
}

/* --trace FILE: the last step's timeline, as the worker gave it, into FILE (the client's
 * own file, written with its own rights; "-" for stdout), replaced as the engine replaces
 * a file (eng_fs_write): a symbolic link, a hard link or another user's file there is
 * refused, so rematctl run as root in a shared directory writes through no planted name. */
static int write_trace(const cli_args *a, const json_t *ret)
{
	if (!a->trace)
		return CLI_EXIT_OK;
	json_t *tr = json_object_get(ret, "trace"), *data = json_object_get(tr, "data");
	if (!data) {
		fprintf(stderr, CLI_NAME ": no memory timeline: %s\n", json_is_null(tr) ?
			"the job has taken no step yet, or runs on device cuda" : "the reply has none");
		return CLI_EXIT_FAIL;
	}
	int to_stdout = !strcmp(a->trace, "-");
	eng_err e = {0};
	int bad = to_stdout ? fill_trace(stdout, data, &e) < 0 || fflush(stdout) != 0
		: eng_fs_write(a->trace, fill_trace, data, &e) < 0;
	if (bad) {
		fprintf(stderr, CLI_NAME ": cannot write '%s': %s\n", a->trace, e.msg[0] ? e.msg
			: strerror(errno));
		return CLI_EXIT_FAIL;
	}
	if (!to_stdout && !a->json) {
		double step = 0, n = 0;
		cli_jnum(tr, "step", &step);
		cli_jnum(tr, "events", &n);
		fprintf(stdout, "\nstep %.0f's memory timeline (%.0f events) written to %s: %s\n",
			step, n, a->trace, a->format && !strcmp(a->format, "chrome")
			? "open it in ui.perfetto.dev or chrome://tracing"
				  : "open it in pytorch.org/memory_viz (Active Memory Timeline)");
	}
	return CLI_EXIT_OK;
}

/* subscribe: job, events */
static int build_events(const cli_command *cmd, const cli_args *a, json_t **req)
{
	json_t *list = json_array();
	*req = json_object();
	if (!list || !*req)
		goto fail;
	if (a->nrest == 1 && json_object_set_new(*req, "job", json_string(a->rest[0])) < 0) {
		json_decref(list);
		return set_str(cmd, *req, "job", "job '%s' is not valid UTF-8", a->rest[0]);
	}
	for (int i = 0; i < a->nevents; i++)
		json_array_append_new(list, json_string(a->events[i]));
	if (a->nevents > 0 && json_object_set(*req, "events", list) < 0)
		goto fail;
	json_decref(list);
	return CLI_EXIT_OK;
fail:
	json_decref(list);
	json_decref(*req);
	return fail_memory();
}

/* After start's id: what will train (the check's architecture and parameter counts), on
 * stderr beside the resolved paths, so that stdout stays the id alone. */
static int show_start_model(const cli_args *a, const json_t *ret)
{
	char line[256], id[64];
	if (!a->json && cli_model_text(ret, line, sizeof line))
		fprintf(stderr, "%s: %s\n", cli_str_clean(cli_jstr(ret, "job") ? cli_jstr(ret, "job")
			: "job", id, sizeof id), line);
	return CLI_EXIT_OK;
}

/* cli_show_plan with the budget asked for, in the shape of the other printers. */

static void show_plan(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	cli_show_plan(f, ret, plan_budget);
}

const cli_command cli_commands[] = {
    {"start", "SPEC.json [--name NAME]", CLI_JOB_NONE, CLI_OPT_NAME, 1, 1, "job-start", build_start,
     cli_show_start,
     "start a job, print its id; relative paths in the spec are from the spec's directory",
     show_start_model, NULL},
    {"ls", "", CLI_JOB_NONE, 0, 0, 0, "job-list", build_empty, cli_show_list, "list jobs", NULL, NULL},
    {"status", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "job-status", NULL, cli_show_status,
     "state, step, loss, speed, policy, last checkpoint", NULL, NULL},
    {"pause", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "job-pause", NULL, cli_show_pause,
     "pause at the next step boundary", NULL, NULL},
    {"resume", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "job-resume", NULL, cli_show_resume,
     "resume a paused job; a stopped, failed or interrupted one from its last checkpoint", NULL, NULL},
    {"stop", "JOB [--no-save | --name NAME]", CLI_JOB_NEEDED, CLI_OPT_SAVE | CLI_OPT_NAME, 0, 0,
     "job-stop", build_save_flag, cli_show_stop,
     "stop at the next step boundary, saved first (--no-save: drop the steps since the last "
     "checkpoint); a queued job is cancelled", NULL, NULL},
    {"kill", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "job-kill", NULL, cli_show_kill,
     "end the job's worker now, unsaved (SIGKILL to its processes, mpirun's ranks too): for "
     "a job that does not answer stop; it fails, resumable from its last checkpoint; a "
     "queued job is cancelled", NULL, NULL},
    {"rm", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "job-remove", NULL, cli_show_remove,
     "forget an ended job and remove its spec, record and log (never its checkpoints)", NULL, NULL},
    {"remat get", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "remat-get", NULL, cli_show_remat_get,
     "the recompute policy and saved bytes per section", NULL, NULL},
    {"remat set", "JOB SELECTOR=MODE... [--default MODE] [--force] [--wait]", CLI_JOB_NEEDED,
     CLI_OPT_DEFAULT | CLI_OPT_FORCE | CLI_OPT_WAIT, 0, CLI_MAX_POS, "remat-set", build_remat,
     cli_show_remat_set, "change the policy from the next step on (a later selector wins); "
     "under a memory budget it must fit, --force turns the controller off; --wait until it "
     "applies (exit 1 if it could not)", NULL, NULL},
    {"remat plan", "JOB [SELECTOR=MODE...] [--default MODE] [--budget SIZE]", CLI_JOB_NEEDED,
     CLI_OPT_DEFAULT | CLI_OPT_BUDGET, 0, CLI_MAX_POS, "remat-plan", build_remat, show_plan,
     "predict bytes and extra FLOPs, or the cheapest policy under a budget", NULL, NULL},
    {"plan", "SPEC.json [SELECTOR=MODE...] [--default MODE] [--budget SIZE]", CLI_JOB_NONE,
     CLI_OPT_DEFAULT | CLI_OPT_BUDGET, 1, CLI_MAX_POS, "remat-plan", build_plan_spec,
     show_plan, "remat plan for a spec file, before anything starts (checked as a job-start)", NULL, NULL},
    {"remat costs", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "remat-costs", NULL, cli_show_costs,
     "measured time and bytes per section and mode (ms added, ms per MiB saved)", NULL, NULL},
    {"remat auto", "JOB --budget SIZE|cgroup|device|off", CLI_JOB_NEEDED, CLI_OPT_BUDGET, 0, 0,
     "remat-auto", build_auto, cli_show_auto,
     "keep the job under a memory budget by itself (off, or a remat set, gives it back)", NULL, NULL},
    {"remat profile", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "remat-profile", NULL, cli_show_profile,
     "measure every section in every mode over the next steps (the numbers do not change)", NULL, NULL},
    {"remat memlog", "JOB [--count N] [--trace FILE [--format pytorch|chrome]]", CLI_JOB_NEEDED,
     CLI_OPT_COUNT | CLI_OPT_TRACE | CLI_OPT_FORMAT, 0, 0, "remat-memlog", build_memlog,
     cli_show_memlog, "the last N steps' peaks by category and section; --trace writes the "
     "last step's memory timeline for PyTorch's memory viewer or Chrome", write_trace, NULL},
    {"mem", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "mem-stats", NULL, cli_show_mem,
     "memory per category and section, RSS", NULL, NULL},
    {"mem reset", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "mem-reset-peak", NULL, cli_show_reset,
     "reset the peak-since-reset counters", NULL, NULL},
    {"save", "JOB [--name NAME]", CLI_JOB_NEEDED, CLI_OPT_NAME, 0, 0, "ckpt-save", build_ckpt_save,
     cli_show_save, "save a checkpoint while the job goes on", NULL, NULL},
    {"eval", "JOB", CLI_JOB_NEEDED, 0, 0, 0, "job-eval", NULL, cli_show_eval,
     "the validation loss now (at the next step boundary)", NULL, NULL},
    {"set", "JOB KEY=VALUE...", CLI_JOB_NEEDED, 0, 1, CLI_MAX_POS, "job-set", build_set,
     cli_show_set, "change lr (with schedule, warmup, min_lr_frac: a new schedule), "
     "grad_clip, weight_decay, eval.every or save.every from the next step on; priority=N "
     "(alone) weighs the job in rematd's memory pool", NULL, NULL},
    {"logs", "JOB [-f] [--interval DUR] [--count N]", CLI_JOB_NEEDED,
     CLI_OPT_FOLLOW | CLI_OPT_INTERVAL | CLI_OPT_COUNT, 0, 0, NULL, NULL, NULL,
     "every step and eval of the job (metrics.jsonl) as JSON lines; -f follows", NULL,
     cli_logs_run},
    {"plot", "JOB [--png FILE] [--svg FILE]", CLI_JOB_NEEDED, CLI_OPT_PNG | CLI_OPT_SVG, 0, 0,
     NULL, NULL, NULL, "training and validation loss, tokens/s and peak memory against the "
     "step; --png and --svg draw the loss as an image", NULL, cli_plot_run},
    {"watch", "JOB [--interval DUR] [--count N]", CLI_JOB_NEEDED, CLI_OPT_INTERVAL | CLI_OPT_COUNT,
     0, 0, NULL, NULL, NULL, "live view: step, loss, speed, policy, memory bars", NULL, NULL},
    {"events", "[JOB] [--event NAME]... [--count N]", CLI_JOB_NONE, CLI_OPT_EVENT | CLI_OPT_COUNT,
     0, 1, NULL, build_events, NULL, "print events as JSON lines until interrupted", NULL, NULL},
    {"info", "", CLI_JOB_NONE, 0, 0, 0, "daemon-info", build_empty, cli_show_info,
     "the daemon's version, pid, uptime, backends", NULL, NULL},
    {"shutdown", "[--no-save]", CLI_JOB_NONE, CLI_OPT_SAVE, 0, 0, "daemon-shutdown", build_save_flag,
     cli_show_shutdown, "stop every job, each saved first (--no-save: unsaved), then the daemon "
     "(root and rematd's own user only)", NULL, NULL},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL},
};
