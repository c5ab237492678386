/* wk_main.c - remat-train: one training job, in the foreground or under control.
 *
 *   remat-train [--json] [--metrics FILE] [--remat-schedule STEP:POLICY,...] [--timing]
 *               [--control PATH | --control-fd N [--metrics-fd N]] [--job-id ID]
 *               [--pool-budget BYTES] [--as UID:GID[:GROUPS]] JOB.json
 *   remat-train --check [--as UID:GID[:GROUPS]] JOB.json
 *   remat-train --info
 *   remat-train --export-llmc CKPT_DIR OUT.bin [--bf16]
 *   remat-train --merge-lora ADAPTER_DIR OUT_DIR
 *   remat-train --sample CKPT [--prompt TEXT|IDS] [--tokens N] [--temperature T]
 *               [--top-k K] [--seed S] [--json]
 *   remat-train --encode TOKENIZER FILE...  |  --decode TOKENIZER
 *
 * Validates the job spec, builds the run, trains to `steps` printing one line per step (or
 * one JSON object per step with --json), and saves the weights at the end when save.dir is
 * set. --remat-schedule changes the recompute policy between steps without a daemon, e.g.
 * "0:off,5:full,9:h.0-1=selective,head=chunked": an entry S:P applies once S steps are done,
 * so it governs step S+1 onwards; each entry applies on top of the policy before it.
 * SIGINT/SIGTERM stop the run after the current step (saving when save.dir is set).
 * --timing (device cpu) times every kernel of the steps and prints, after the run, where
 * a steady step's time went, each class of work against its limit measured then
 * (eng_timing.h): a table (on stderr with --json, which adds it as one JSON line).
 * --metrics FILE appends every step and every evaluation to FILE, one JSON object a line
 * (wk_metrics.h); rematd hands its job's metrics.jsonl over as --metrics-fd.
 * --control PATH listens on a socket of its own for rematctl; --control-fd N speaks to
 * rematd over an inherited socketpair (wk_ctl.c): both take the protocol's commands,
 * applied here at step boundaries.
 * --pool-budget BYTES (rematd, a job of its memory pool): the budget the memory controller
 * keeps from the first step, the job's share of the pool (the spec has no remat.budget of
 * its own); as the spec's budget, it is never refused: a least above it runs the least
 * policy and says so, and the pool divides again.
 * --as (rematd as root, for a client of another uid): reads JOB.json, then becomes that
 * user (groups, gid, uid) before any file the spec names is opened (eng_cred.h).
 * --check trains nothing: it validates the whole job as its start would (eng_trainer_check:
 * files, shape, selectors, init_from, save directory, device) and prints one JSON line,
 * {"ok":true, "config":..., "policy":..., ...} or {"ok":false,"error":"..."} (status 1);
 * what is allowed but will not do what the spec hopes (threads above the CPUs this process
 * may use) goes in "warnings", a list of lines, which a run prints on stderr instead;
 * rematd runs it at job-start and passes the warnings on in its reply. --info prints one
 * JSON line: version, the BLAS and its kernel, the backends and GPUs, as the workers see them (rematd's daemon-info).
 * --export-llmc trains nothing: it loads a checkpoint (config.json + model.safetensors, or an
 * llm.c file) and writes it as an llm.c model file, version 3 (float32) or with --bf16
 * version 5 (bfloat16), then exits.
 * --merge-lora trains nothing: it loads LoRA adapters (PEFT's files, or a LoRA run's
 * checkpoint) on their base, folds them in (W += alpha/r B A) and writes a full Hugging Face
 * checkpoint (config.json + model.safetensors) into OUT_DIR.
 * --sample trains nothing: it continues a prompt from a checkpoint (wk_sample.h), greedily
 * with --temperature 0.
 * --encode and --decode train nothing: a Hugging Face tokenizer on files and standard input
 * (wk_tok.h).
 * Exit status: 0 done (finished or stopped), 1 bad input or a failed run, 2 bad usage,
 * 130 interrupted by a signal.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "eng_devices.h"
#include "eng_check_info.h"
#include "eng_ckpt.h"
#include "eng_cred.h"
#include "wk_ctl.h"
#include "eng_cuda.h"
#include "eng_dp.h"
#include "eng_import.h"
#include "eng_llmc.h"
#include "eng_mem.h"
#include "eng_peft.h"
#include "eng_spec.h"
#include "eng_tensors.h"
#include "eng_train.h"
#include "kn.h"
#include "wk_run.h"
#include "wk_sample.h"
#include "wk_text.h"
#include "wk_tok.h"

#define REMAT_VERSION "0.1.0"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void usage(FILE *f)
{
	char modes[160];
	fprintf(f, "usage: remat-train [--json] [--metrics FILE] [--timing]\n"
		   "                   [--remat-schedule STEP:POLICY[,STEP:POLICY...]]\n"
		   "                   [--control PATH | --control-fd N [--metrics-fd N] |\n"
		   "                    --control-connect PATH]\n"
		   "                   [--job-id ID] [--pool-budget BYTES]\n"
		   "                   [--as UID:GID[:GROUPS]] JOB.json\n"
		   "       remat-train --check [--as UID:GID[:GROUPS]] JOB.json\n"
		   "       remat-train --info\n"
		   "       remat-train --export-llmc CKPT_DIR OUT.bin [--bf16]\n"
		   "       remat-train --merge-lora ADAPTER_DIR OUT_DIR\n"
		   "       remat-train --sample CKPT [--prompt TEXT|IDS] [--tokens N]\n"
		   "                   [--temperature T] [--top-k K] [--seed S] [--json]\n"
		   "       remat-train --encode TOKENIZER FILE...\n"
		   "       remat-train --decode TOKENIZER < IDS\n"
		   "       remat-train --tokenize TOKENIZER OUT.bin [--jsonl] [--field KEY]\n"
		   "                   [--threads N] FILE...\n"
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

/* --merge-lora: the exit status. */
static int merge_lora(const char *from, const char *out)
{
	eng_err err;
	if (eng_merge_lora(from, out, &err) < 0) {
		fprintf(stderr, "remat-train: %s\n", err.msg);
		return 1;
	}
	printf("wrote %s (config.json, model.safetensors: the base with its adapters merged)\n",
		out);
	return 0;
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

/* Who runs the CPU's matmul products, in float32 and in bf16, into buf (the lines of
 * --version, and --info's "matmul") */
static void describe_matmuls(char *buf, size_t n, const char *sep)
{
	char why[320];
	int o;
	eng_config f32 = {0}, bf = {.mm_bf16 = 1};
	if (eng_model_route_flags(&f32) & ENG_PRODUCTS_DNNL)
		o = snprintf(buf, n, "float32 lm_head (cpu): logits and dlnf by oneDNN's matmul (%s), "
			"wte packed once a step; the rest OpenBLAS", kn_bf16_describe());
	else
		o = snprintf(buf, n, "float32 lm_head (cpu): OpenBLAS (%s)",
			kn_dnnl_available(why, sizeof why) ? "REMAT_FP32_DNNL=0" : why);
	if (o < 0 || (size_t)o >= n)
		return;
	if (kn_bf16_available(why, sizeof why))
		snprintf(buf + o, n - (size_t)o, "%sprecision bf16 (cpu): %s; weights %s", sep,
			kn_bf16_describe(), eng_model_route_flags(&bf) & ENG_PRODUCTS_PACK_BF16 ?
			"packed for oneDNN once a step" :
			"in plain layout (packing pays with AMX only)");
	else
		snprintf(buf + o, n - (size_t)o, "%sprecision bf16 (cpu): not available: %s", sep,
			why);
}

/* --info: one JSON line of what this build runs on, as a worker sees it. */
static int print_info(void)
{
	char mm[1024];
	kn_set_threads(1);
	describe_matmuls(mm, sizeof mm, "; ");
	json_t *o = json_pack("{s:s,s:s,s:s}", "version", REMAT_VERSION, "blas", kn_blas_describe(),
		"matmul", mm);
	if (!o || eng_devices_json(o) < 0) {
		fprintf(stderr, "remat-train: out of memory\n");
		return 1;
	}
	char *line = json_dumps(o, JSON_COMPACT);
	printf("%s\n", line ? line : "{}");
	free(line);
	json_decref(o);
	return 0;
}

/* --check's answer for an error: its message, and the protocol's class for it (Busy: try
 * again later; InvalidParameter: the spec must change). New reference. */
static json_t *check_failed(const eng_err *err)
{
	eng_check_info ci;
	memset(&ci, 0, sizeof ci);
	snprintf(ci.error, sizeof ci.error, "%s", err->msg);
	ci.busy = err->kind == ENG_ERR_BUSY;
	return eng_check_info_json(&ci);
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

/* --check: validates the job as its start would, one JSON line (eng_check_info.h, which
 * rematd reads); the exit status. */
static int check_job(eng_spec *s)
{
	eng_check ck;
	eng_check_info ci;
	eng_err err;
	size_t trainable;
	if (eng_trainer_check(s, &ck, &err) < 0)
		return print_check(check_failed(&err));
	memset(&ci, 0, sizeof ci);
	ci.ok = 1;
	snprintf(ci.name, sizeof ci.name, "%s", s->name);
	ci.steps = s->steps;
	ci.cfg = s->cfg;
	ci.batch = s->batch;
	ci.seq_len = s->seq_len;
	ci.chunk_rows = ck.chunk_rows;
	ci.policy = ck.policy;
	ci.aliases = ck.aliases;
	snprintf(ci.init_from, sizeof ci.init_from, "%s", s->init_from);
	snprintf(ci.save_dir, sizeof ci.save_dir, "%s", s->save_dir);
	ci.device = s->device;
	ci.tokens = (long long)ck.ntok;
	ci.has_resume_step = s->resume != 0;
	ci.resume_step = ck.resume_step;
	if (!eng_spec_warning(s, ci.warning, sizeof ci.warning))
		ci.warning[0] = '\0';
	if (ck.text_pending) {
		size_t w = strlen(ci.warning);
		snprintf(ci.warning + w, sizeof ci.warning - w, "%sdata: %.1f MiB of text not in "
			"the token cache yet: the job tokenizes it as it starts", w ? "; " : "",
			ck.text_pending / 1048576.0);
	}
	ci.params = (long long)eng_model_params(&s->cfg, &trainable);
	ci.trainable_params = (long long)trainable;
	ci.precision = s->precision;
	ci.ranks = s->ranks;
	snprintf(ci.hosts, sizeof ci.hosts, "%s", s->hosts);
	snprintf(ci.hostfile, sizeof ci.hostfile, "%s", s->hostfile);
	snprintf(ci.mca, sizeof ci.mca, "%s", s->mca);
	snprintf(ci.launcher, sizeof ci.launcher, "%s", s->launcher);
	/* the planner's terms: held whatever the policy and the process's beyond the tracked
	 * bytes (this check's own, its kernels' buffers made; device cpu), a save's snapshot */
	ci.has_fixed = ci.has_untracked = eng_backend_ops_for(s->device)->tracked_host;
	memcpy(ci.fixed, ck.fixed, sizeof ci.fixed);
	ci.untracked = ck.untracked;
	ci.snapshot = ck.snapshot;
	return print_check(eng_check_info_json(&ci));
}

/* The command line. */
typedef struct train_opts {
	int json, check, bf16, timing;
	int ctl_fd;                        /* --control-fd, -1 none */
	int metrics_fd;                    /* --metrics-fd, -1 none */
	size_t pool_budget;                /* --pool-budget BYTES, 0 none */
	const char *job, *sched_arg, *ctl_path, *job_id, *as, *export_from, *export_to;
	int merge;          /* --merge-lora: export_from/export_to are its two directories */
	const char *metrics;               /* --metrics FILE */
	const char *ctl_connect;           /* --control-connect PATH: rematd's socket (data
					    * parallel: rank 0, started by mpirun) */
	wk_sample_args sample;             /* --sample CKPT and its options */
	char **exec;                       /* --exec PROGRAM ARGS...: run it as --as's user */
} train_opts;

/* --tokens, --temperature, --top-k, --seed: remat-train --sample's numbers */
static int is_sample_num(const char *a)
{
	return !strcmp(a, "--tokens") || !strcmp(a, "--temperature") || !strcmp(a, "--top-k") ||
		!strcmp(a, "--seed");
}

static int sample_num(const char *a, const char *v, wk_sample_args *s)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || end == v || *end || !(x >= 0)) /* NaN too */
		return -1;
	if (!strcmp(a, "--temperature")) {
		s->o.temperature = (float)x;
		return x <= ENG_MAX_TEMPERATURE ? 0 : -1; /* sample.temperature's range */
	}
	if (x > (a[2] == 's' ? 4294967295.0 : 1e9) || x != floor(x))
		return -1;
	else if (!strcmp(a, "--tokens"))
		s->o.tokens = (int)x;
	else if (!strcmp(a, "--top-k"))
		s->o.top_k = (int)x;
	else
		s->o.seed = (uint32_t)x;
	return !strcmp(a, "--tokens") && (x < 1 || x > ENG_SAMPLE_MAX_TOKENS) ? -1 : 0;
}

/* --version: the libraries and what runs each kind of product */
static int print_version(void)
{
	char mm[1024];
	kn_set_threads(1);
	describe_matmuls(mm, sizeof mm, "\n");
	printf("remat-train %s\nbackend cpu: %s\n%s\n", REMAT_VERSION, kn_blas_describe(), mm);
	print_cuda_backend();
	return 0;
}

/* One argument at argv[*i] into o (*i past its values): -1 to go on; -2 when the rest is
 * --exec's program's; or the exit status of a run that ends here (--help, --version,
 * --info, bad usage). */
static int parse_one(int argc, char **argv, int *i, train_opts *o)
{
	const char *a = argv[*i];
	int more = *i + 1 < argc;
	if (strcmp(a, "--json") == 0) {
		o->json = 1;
	} else if (strcmp(a, "--timing") == 0) {
		o->timing = 1;
	} else if (strcmp(a, "--remat-schedule") == 0 && more) {
		o->sched_arg = argv[++*i];
	} else if (strncmp(a, "--remat-schedule=", 17) == 0) {
		o->sched_arg = a + 17;
	} else if (strcmp(a, "--control") == 0 && more) {
		o->ctl_path = argv[++*i];
	} else if ((strcmp(a, "--control-fd") == 0 || strcmp(a, "--metrics-fd") == 0) &&
		   more) {
		char *end;
		long v = strtol(argv[++*i], &end, 10);
		if (*end || v < 0 || v > 65535) {
			usage(stderr);
			return 2;
		}
		*(a[2] == 'c' ? &o->ctl_fd : &o->metrics_fd) = (int)v;
	} else if (strcmp(a, "--metrics") == 0 && more) {
		o->metrics = argv[++*i];
	} else if (strcmp(a, "--control-connect") == 0 && more) {
		o->ctl_connect = argv[++*i];
	} else if (strcmp(a, "--exec") == 0 && more) {
		o->exec = argv + *i + 1; /* the rest is the program's */
		return -2;
	} else if (strcmp(a, "--sample") == 0 && more) {
		o->sample.ckpt = argv[++*i];
	} else if (strcmp(a, "--prompt") == 0 && more) {
		o->sample.prompt = argv[++*i];
	} else if (is_sample_num(a) && more) {
		if (sample_num(a, argv[++*i], &o->sample) < 0) {
			usage(stderr);
			return 2;
		}
	} else if (strcmp(a, "--pool-budget") == 0 && more) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(argv[++*i], &end, 10);
		if (*end || end == argv[*i] || errno || v == 0 || argv[*i][0] == '-') {
			usage(stderr);
			return 2;
		}
		o->pool_budget = (size_t)v;
	} else if (strcmp(a, "--job-id") == 0 && more) {
		o->job_id = argv[++*i];
	} else if (strcmp(a, "--export-llmc") == 0 && *i + 2 < argc && !o->export_from) {
		o->export_from = argv[++*i];
		o->export_to = argv[++*i];
	} else if (strcmp(a, "--merge-lora") == 0 && *i + 2 < argc && !o->export_from) {
		o->merge = 1;
		o->export_from = argv[++*i];
		o->export_to = argv[++*i];
	} else if (strcmp(a, "--bf16") == 0) {
		o->bf16 = 1;
	} else if (strcmp(a, "--as") == 0 && more) {
		o->as = argv[++*i];
	} else if (strcmp(a, "--check") == 0) {
		o->check = 1;
	} else if (strcmp(a, "--info") == 0) {
		return print_info();
	} else if (strcmp(a, "--version") == 0) {
		return print_version();
	} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
		usage(stdout);
		return 0;
	} else if (a[0] == '-' || o->job) {
		usage(stderr);
		return 2;
	} else {
		o->job = a;
	}
	return -1;
}

/* What may go together (--export-llmc, --merge-lora, --check, --sample and --exec are
 * subcommands of their own): -1 to go on, or 2 after the usage. */
static int args_fit(const train_opts *o)
{
	int run_opts = o->json || o->sched_arg || o->timing || o->ctl_path || o->ctl_fd >= 0 ||
		o->metrics || o->metrics_fd >= 0 || o->ctl_connect || o->pool_budget;
	if (o->exec) /* --as and --exec alone */
		return o->as && !o->job && !o->json && !o->check && !o->sample.ckpt ? -1
			: (usage(stderr), 2);
	int sample_opts = o->sample.prompt != NULL; /* and its numbers: defaults elsewhere */
	if (o->sample.ckpt)
		return !o->job && !o->export_from && !o->check && !o->as && !o->sched_arg &&
				!o->timing && !o->ctl_path && o->ctl_fd < 0 && !o->metrics &&
				o->metrics_fd < 0 ? -1 : (usage(stderr), 2);
	int ok = sample_opts ? 0
		: o->export_from ? !o->job && !run_opts && !o->as && !o->check && !(o->merge && o->bf16)
				: o->job && !o->bf16 && !(o->check && run_opts) &&
					  (o->ctl_fd >= 0) + !!o->ctl_path + !!o->ctl_connect <= 1 &&
					  !(o->metrics && o->metrics_fd >= 0);
	if (!ok) {
		usage(stderr);
		return 2;
	}
	return -1;
}

/* Parses argv into o: -1 to go on, or the exit status of a run that ends here (--help,
 * --version, --info, bad usage). */
static int parse_args(int argc, char **argv, train_opts *o)
{
	memset(o, 0, sizeof *o);
	o->ctl_fd = o->metrics_fd = -1;
	o->sample.o = (eng_sample_opts){64, 1.0f, 0, 1337};
	o->job_id = "job";
	for (int i = 1; i < argc; i++) {
		int rc = parse_one(argc, argv, &i, o);
		if (rc == -2)
			break;
		if (rc != -1)
			return rc;
	}
	return args_fit(o);
}

/* Reads the spec (rematd's file, read with rematd's rights), becomes --as's user when
 * asked, then parses it (--pool-budget its budget where it gives none): from here on,
 * everything the spec names is opened as that user.
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
	/* rematd's pool share: the spec's budget where it has none, kept from the first step
	 * (the check that refuses a budget below the least is --check's, which takes no
	 * --pool-budget) */
	else if (o->pool_budget && !spec->remat_budget && !spec->remat_budget_cgroup)
		spec->remat_budget = o->pool_budget;
	free(text);
	return rc;
}

/* The line before the steps: the job, its shape, batch, threads and backend. */
static void print_banner(eng_trainer *tr)
{
	const eng_spec *s = &tr->spec;
	char params[160];
	size_t trainable, all = eng_model_params(&s->cfg, &trainable);
	printf("remat-train %s: job '%s', %s (L %d, C %d, NH %d, V %d), %s, batch %d x %d, "
	       "%d threads, %s\n", REMAT_VERSION, s->name, eng_arch_name(s->cfg.arch),
		s->cfg.n_layer, s->cfg.n_embd, s->cfg.n_head, s->cfg.vocab_size,
		proto_params_text((long long)trainable, (long long)all, params, sizeof params),
		s->batch, s->seq_len, s->threads, eng_trainer_backend(tr));
	if (eng_trainer_allreduce(tr))
		printf("remat-train: %d ranks (%s), gradients summed by %s\n", s->ranks,
			eng_dp_describe(), eng_trainer_allreduce(tr));
}

/* --control-connect: the socket rematd made for this job's rank 0 (mpirun passes no
 * descriptor), connected; then it is rematd's link as --control-fd's would be. -1 said. */
static int connect_rematd(const char *path)
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof a.sun_path) {
		fprintf(stderr, "remat-train: --control-connect '%s': path too long\n", path);
		return -1;
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		fprintf(stderr, "remat-train: --control-connect '%s': %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The control thread, when asked for (--control, --control-fd): -1 when it cannot start
 * (said). Then the start, held by the test hook REMAT_START_DELAY_MS (as a large
 * init_from would hold it, so that tests can talk to a job that is still starting; unset
 * in normal use). */
static int start_control(const train_opts *o, wk_ctl **c)
{
	/* jansson's hash seed is set before the control thread exists (it is not thread-safe
	 * to let both threads initialise it lazily). */
	json_object_seed(0);
	signal(SIGPIPE, SIG_IGN);
	*c = NULL;
	int fd = o->ctl_fd;
	if (o->ctl_connect && (fd = connect_rematd(o->ctl_connect)) < 0)
		return -1;
	if ((fd >= 0 || o->ctl_path) && !(*c = wk_ctl_start(fd, o->ctl_path, o->job_id, NULL)))
		return -1;
	const char *delay = getenv("REMAT_START_DELAY_MS");
	if (delay && atoi(delay) > 0)
		usleep((useconds_t)atoi(delay) * 1000u);
	return 0;
}

/* --as CRED --exec PROGRAM ARGS...: rematd's way to start mpirun for a data-parallel job as
 * its owner (groups, gid, uid: what --as drops to), so that mpirun, its daemons and every
 * rank are the owner's from the start. Returns only on failure. */
static int exec_as(const char *as, char **argv)
{
	eng_cred cred;
	char why[256];
	if (eng_cred_parse(as, &cred, why, sizeof why) < 0 ||
		eng_cred_drop(&cred, why, sizeof why) < 0) {
		fprintf(stderr, "remat-train: %s\n", why);
		return 2;
	}
	execv(argv[0], argv);
	fprintf(stderr, "remat-train: cannot run '%s': %s\n", argv[0], strerror(errno));
	return 127;
}

/* The ranks the spec asks for against those mpirun started (s->ranks becomes them): 0, or
 * the exit status after saying what is wrong. */
static int check_ranks(eng_spec *s)
{
	int world = eng_dp_size();
	if (world > 1 && s->has_ranks && s->ranks != world) {
		fprintf(stderr, "remat-train: parallel.ranks is %d, but mpirun started %d ranks\n",
			s->ranks, world);
		return 2;
	}
	if (world == 1 && s->ranks > 1) {
		fprintf(stderr, "remat-train: parallel.ranks %d: start the job with rematd (which "
				"runs mpirun), or run mpirun -np %d remat-train yourself\n", s->ranks,
			s->ranks);
		return 2;
	}
	s->ranks = world;
	/* the ranks of one host share its processors, unless the spec says */
	int local = eng_dp_local_size();
	if (world > 1 && !s->has_threads && local > 1) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		s->threads = cpus / local > 1 ? (int)(cpus / local) : 1;
	}
	return 0;
}

/* --timing: the kernels timed from the first step (device cpu: the GPU's run elsewhere).
 * 0, or the exit status 1 after saying why not. */
static int timing_start(eng_trainer *tr)
{
	if (tr->spec.device != ENG_DEVICE_CPU) {
		fprintf(stderr, "remat-train: --timing times the cpu backend's kernels; this job "
				"runs on cuda\n");
		return 1;
	}
	if (tr->spec.steps - tr->step < 2) {
		fprintf(stderr, "remat-train: --timing needs two steps or more to run: the "
				"first (allocation, first touch) is left out of the table\n");
		return 1;
	}
	if (!(tr->model.timing = calloc(1, sizeof *tr->model.timing))) {
		fprintf(stderr, "remat-train: --timing: out of memory\n");
		return 1;
	}
	return 0;
}

/* --timing's table after the run (its limits measured now): the exit status */
static int timing_end(eng_trainer *tr, int json)
{
	eng_err err;
	if (eng_timing_report(tr->model.timing, &tr->model, json ? stderr : stdout,
		    json ? stdout : NULL, &err) < 0) {
		fprintf(stderr, "remat-train: --timing: %s\n", err.msg);
		return 1;
	}
	return 0;
}

/* A subcommand that is not a run (--export-llmc, --merge-lora, --exec, --sample): its exit
 * status; -1 when o asks for a run or --check. */
static int subcommand(train_opts *o)
{
	if (o->export_from)
		return o->merge ? merge_lora(o->export_from, o->export_to)
				: export_llmc(o->export_from, o->export_to, o->bf16);
	if (o->exec)
		return exec_as(o->as, o->exec);
	if (o->sample.ckpt) {
		o->sample.json = o->json;
		return wk_sample_cli(&o->sample);
	}
	return -1;
}

/* The run's outputs, before the model. Data parallel, rank 0 is the worker that is spoken
 * to, writes the log and prints; the others follow it (wk_dp.h) and say only what goes
 * wrong. spec_ok: the spec parsed (else the run only says why it fails). 0, or -1. */
static int run_outputs(const train_opts *o, const eng_spec *spec, int spec_ok, wk_ctl **c,
	wk_metrics *mx)
{
	int lead = eng_dp_rank() == 0;
	if (!lead && !freopen("/dev/null", "w", stdout))
		return -1;
	if (lead && start_control(o, c) < 0)
		return -1;
	/* the log before the model: a bad path fails before minutes of loading */
	if (o->metrics_fd >= 0 && lead)
		wk_metrics_adopt(mx, o->metrics_fd);
	else if (spec_ok && lead && o->metrics && wk_metrics_open(mx, o->metrics) < 0)
		return -1;
	char warn[256]; /* what --check returned in "warnings", said by the run itself */
	if (spec_ok && lead && eng_spec_warning(spec, warn, sizeof warn))
		fprintf(stderr, "remat-train: warning: %s\n", warn);
	return 0;
}

int main(int argc, char **argv)
{
	int rc;
	train_opts o;
	wk_ctl *c = NULL;
	static wk_schedule sched;
	eng_trainer tr;
	eng_spec spec;
	eng_err err;
	memset(&tr, 0, sizeof tr);
	if (wk_tok_wanted(argc, argv)) /* --encode, --decode: no BLAS, no job (wk_tok.h) */
		return wk_tok_main(argc, argv);
	pid_t parent = getppid(); /* mpirun's, under it */
	kn_fix_runtime(argv); /* may re-execute this program with a better BLAS kernel and
			       * OpenMP wait policy */
	if ((rc = parse_args(argc, argv, &o)) >= 0)
		return rc;
	/* under mpirun: the ranks of one job (a world of one otherwise) */
	if (eng_dp_init(&argc, &argv, &err) < 0) {
		fprintf(stderr, "remat-train: %s\n", err.msg);
		return 1;
	}
	if ((rc = subcommand(&o)) >= 0)
		return rc;
	if (o.sched_arg && wk_schedule_parse(o.sched_arg, &sched) < 0)
		return 2;
	int spec_rc = load_spec(&o, &spec, &err);
	if (spec_rc > 0)
		return spec_rc;
	if (o.check) {
		if (spec_rc < 0)
			return print_check(check_failed(&err));
		return check_job(&spec);
	}
	wk_metrics mx;
	int together = 0;
	wk_metrics_init(&mx);
	if (spec_rc == 0 && (rc = check_ranks(&spec)) != 0)
		goto out;
	/* a rank dies with mpirun (set now: a change of user clears it), so that no rank
	 * outlives a job rematd killed; mpirun gone already: no job to be part of */
	if (eng_dp_size() > 1 && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)) {
		rc = 1;
		goto out;
	}
	rc = 1;
	if (run_outputs(&o, &spec, spec_rc == 0, &c, &mx) < 0)
		goto out;
	wk_text text;
	eng_train_hooks hooks;
	wk_text_hooks(&text, c, &hooks);
	if (spec_rc < 0 || eng_trainer_init_hooks(&tr, &spec, &hooks, &err) < 0) {
		fprintf(stderr, "remat-train: %s\n", err.msg);
		wk_ctl_set_state(c, CTL_FAILED, err.msg);
		goto out;
	}
	if ((rc = wk_schedule_check(&tr, &sched)) != 0)
		goto out;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!o.json)
		print_banner(&tr);
	wk_ctl_attach(c, &tr);
	wk_run_opts ro = {o.json, o.ctl_fd >= 0 || o.ctl_connect, &sched, &stop_signal, &mx,
		&together};
	if (o.timing && (rc = timing_start(&tr)) != 0)
		goto out;
	rc = wk_run(&tr, c, &ro);
	if (o.timing && rc == 0 && eng_dp_rank() == 0)
		rc = timing_end(&tr, o.json);
out:
	wk_metrics_close(&mx);
	wk_ctl_stop(c);
	if (rc != 0 && rc != 130 && eng_dp_size() > 1 && !together)
		eng_dp_abort(rc); /* no rank left waiting in a collective for this one */
	eng_trainer_free(&tr);
	eng_dp_finalize();
	return rc;
}
