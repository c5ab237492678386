/* eng_train.c - a training run (see eng_train.h): init (including resume from a
 * checkpoint), step, optimizer, schedule, on the CPU model (eng_model.c) or the GPU model
 * (eng_cuda.h, device cuda). Not here: the model's maths (eng_model.c, eng_cuda_step.c),
 * the checkpoint files (eng_ckpt.c), the control protocol (worker/wk_ctl.c). */
#include "eng_train.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "eng_train_ckpt.h"
#include "eng_peft.h"
#include "eng_cuda.h"
#include "eng_cuda_mem.h"
#include "eng_dp.h"
#include "eng_fs.h"
#include "eng_hfconfig.h"
#include "eng_import.h"
#include "eng_mem.h"
#include "eng_st.h"
#include "kn.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* mkdir -p, then a check that files can be created there: a save directory that cannot
 * be used is an error before training, not after it. */
static int make_dirs(const char *dir, eng_err *err)
{
	eng_dir d;
	if (eng_dir_make(&d, dir, err) < 0)
		return -1;
	int rc = 0;
	if (faccessat(d.fd, ".", W_OK | X_OK, AT_EACCESS) < 0)
		rc = eng_errf(err, "save directory '%s' is not writable: %s", dir, strerror(errno));
	eng_dir_close(&d);
	return rc;
}

/* The job's own save directory at its start: made, locked against a second job (the lock
 * is held in tr->save_lock until eng_trainer_free), cleaned of interrupted saves. */
static int open_save_dir(eng_trainer *tr, eng_err *err)
{
	const char *dir = tr->spec.save_dir;
	eng_dir d;
	if (make_dirs(dir, err) < 0 || eng_dir_open(&d, dir, err) < 0)
		return -1;
	int fd = eng_fs_lock(&d, ENG_SAVE_LOCK, "save directory", err);
	eng_dir_close(&d);
	if (fd < 0)
		return -1;
	tr->save_lock = fd;
	tr->has_save_lock = 1;
	/* interrupted saves are never picked up; a link under their names stops the start */
	return eng_ckpt_clean_tmp(dir, 0, err);
}

/* init_from may name a checkpoint or a save directory (then its newest checkpoint that
 * verifies). A remat checkpoint (with trainer_state.json) must verify; when it does not,
 * the message offers the newest one that does. Rewrites s->init_from to the checkpoint. */
/* tr->lora_base: where a LoRA run's checkpoints say its base is (adapter_config.json's
 * base_model_name_or_path): the real path of the base it loaded, or "" (the checkpoints
 * hold the base themselves) when it has none on disk (a preset's), it lies in the save
 * directory, whose checkpoints come and go, or it is not a base directory of its own. */
static int lora_base_of(eng_trainer *tr, eng_err *err)
{
	const eng_spec *s = &tr->spec;
	char base[ENG_PATH_LEN + 64], real[PATH_MAX], save[PATH_MAX];
	eng_config c;
	eng_dir d;
	struct stat st;
	tr->lora_base[0] = '\0';
	if (!s->cfg.lora_r || !s->init_from[0])
		return 0;
	if (eng_peft_is_adapter(s->init_from)) {
		if (eng_peft_read_config(s->init_from, &c, base, sizeof base, err) < 0)
			return -1;
	} else {
		snprintf(base, sizeof base, "%s", s->init_from);
	}
	if (!realpath(base, real))
		return eng_errf(err, "the base model '%.200s': %s", base, strerror(errno));
	size_t n = strlen(real);
	if (n >= sizeof tr->lora_base)
		return eng_errf(err, "the base model's path is too long");
	/* a base the checkpoints cannot name: an llm.c file (no directory), another LoRA
	 * run's checkpoint holding its base (an adapter directory itself), or any run's
	 * checkpoint (they come and go as save.keep says): copied in. Its entries looked at
	 * through its descriptor, never a link's. */
	int fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR ? 0 : eng_errf(err, "the base model '%.200s': %s", real,
						   strerror(errno));
	d.fd = fd;
	memcpy(d.path, real, n + 1);
	int copy = eng_peft_is_adapter_at(&d) ||
		   fstatat(d.fd, "trainer_state.json", &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (!copy && s->save_dir[0] && realpath(s->save_dir, save)) {
		size_t k = strlen(save);
		copy = strncmp(real, save, k) == 0 && (real[k] == '/' || real[k] == '\0');
	}
	int rc = copy ? 0 : eng_peft_base_pin(&d, tr->lora_pin, sizeof tr->lora_pin, err);
	if (!copy && rc == 0)
		memcpy(tr->lora_base, real, n + 1);
	eng_dir_close(&d);
	return rc;
}

/* The model's weights: init_from's (and new adapters on a base model with the job's
 * "lora"; an adapter directory brings its own), or the seed's; a LoRA base pinned before
 * its weights are read (lora_base_of). */
static int trainer_weights(eng_trainer *tr, eng_err *err)
{
	const eng_spec *s = &tr->spec;
	if (lora_base_of(tr, err) < 0)
		return -1;
	if (!s->init_from[0]) {
		eng_model_init_weights(&tr->model, s->seed);
		return 0;
	}
	if (eng_import_load(&tr->model, s->init_from, err) < 0)
		return -1;
	if (s->lora_r && !eng_peft_is_adapter(s->init_from))
		eng_model_init_adapters(&tr->model, s->seed);
	return 0;
}

static int resolve_init(eng_spec *s, eng_err *err)
{
	char p[ENG_PATH_LEN + 64], found[ENG_PATH_LEN + 64];
	struct stat st;
	if (eng_import_exists(s->init_from, err) < 0) /* before any file of it is missed */
		return -1;
	/* a directory holding none of a checkpoint's files is a save directory (latest, or
	 * its step_ directories) */
	int is_save_dir = stat(s->init_from, &st) == 0 && S_ISDIR(st.st_mode);
	static const char *const own[] = {"/config.json", "/model.safetensors",
		"/trainer_state.json", "/" ENG_PEFT_CONFIG};
	for (size_t i = 0; i < sizeof own / sizeof own[0] && is_save_dir; i++) {
		snprintf(p, sizeof p, "%s%s", s->init_from, own[i]);
		is_save_dir = stat(p, &st) < 0;
	}
	if (is_save_dir) {
		eng_err why = {0};
		if (eng_ckpt_find(s->init_from, found, sizeof found, &why) < 0)
			return eng_errf(err, "no checkpoint in '%s' verifies%s%s", s->init_from,
				why.msg[0] ? ": " : "", why.msg);
		size_t n = strlen(found);
		if (n >= sizeof s->init_from)
			return eng_errf(err, "checkpoint path too long");
		memcpy(s->init_from, found, n + 1);
	}
	snprintf(p, sizeof p, "%s/trainer_state.json", s->init_from);
	int is_ckpt = stat(p, &st) == 0;
	if (!is_ckpt && s->resume)
		return eng_errf(err, "cannot resume from '%s': it has no trainer_state.json (weights "
				     "only: drop \"resume\" to fine-tune from them)", s->init_from);
	if (is_ckpt && eng_ckpt_verify(s->init_from, err) < 0) {
		if (eng_ckpt_previous(s->init_from, found, sizeof found) == 0) {
			size_t n = strlen(err->msg);
			snprintf(err->msg + n, sizeof err->msg - n,
				"; the newest checkpoint that verifies is '%s'", found);
		}
		return -1;
	}
	return 0;
}

/* Device cuda: tr->model keeps the tensor table and the host copies of weights and moments
 * that checkpoints read and write, nothing of a step. It is made for batch 1 x 1 (activation
 * and workspace buffers of one row; the gradients freed), then given the run's batch,
 * sequence length and chunking, which the GPU model, the planner and the control commands
 * read from it. Its activations are never laid out: eng_model_step must not run on it. */
static int host_mirror_init(eng_trainer *tr, eng_err *err)
{
	const eng_spec *s = &tr->spec;
	eng_model *m = &tr->model;
	if (s->batch < 1 || s->seq_len < 1 || s->seq_len > s->cfg.n_positions)
		return eng_errf(err, "batch %d x seq_len %d does not fit the model (n_positions %d)",
			s->batch, s->seq_len, s->cfg.n_positions);
	if (eng_model_init_host(m, &s->cfg, err) < 0)
		return -1;
	eng_mem_free(m->grads);
	m->grads = NULL;
	memset(&m->g, 0, sizeof m->g);
	size_t N = (size_t)s->batch * s->seq_len;
	m->B = s->batch;
	m->T = s->seq_len;
	m->chunk_rows = s->chunk_rows > 0 ? s->chunk_rows
					  : eng_plan_chunk_rows(&s->cfg, s->batch, s->seq_len);
	if ((size_t)m->chunk_rows > N)
		m->chunk_rows = (int)N;
	return 0;
}

/* What the save directory will be at the job's start, checked without creating or
 * changing anything: the nearest directory of its path that exists can be written; when
 * it exists, no other job holds it and nothing the start cleans is a link or a stranger's. */
static int check_save_dir(const char *dir, eng_err *err)
{
	char p[ENG_PATH_LEN];
	struct stat st;
	snprintf(p, sizeof p, "%s", dir);
	while (stat(p, &st) < 0) {
		if (errno != ENOENT)
			return eng_errf(err, "save directory '%s': %s", p, strerror(errno));
		char *slash = strrchr(p, '/');
		if (!slash || slash == p) {
			snprintf(p, sizeof p, "/");
			break;
		}
		*slash = '\0';
	}
	if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
		return eng_errf(err, "save directory '%s': '%s' is not a directory", dir, p);
	if (access(p, W_OK | X_OK) < 0)
		return eng_errf(err, "cannot create save directory '%s': '%s': %s", dir, p,
			strerror(errno));
	if (strcmp(p, dir) != 0)
		return 0; /* made at the start */
	eng_dir d;
	if (eng_dir_open(&d, dir, err) < 0)
		return -1;
	int rc = eng_fs_lock_free(&d, ENG_SAVE_LOCK, "save directory", err);
	eng_dir_close(&d);
	return rc < 0 ? -1 : eng_ckpt_clean_tmp(dir, 1, err);
}

/* The parts of eng_trainer_init that read the spec's files and decide the model's shape,
 * before anything is allocated: init_from resolved and verified, the shape known and the
 * spec finished, the policy built. */
static int trainer_plan(eng_spec *s, eng_config *cfg, eng_err *err)
{
	if (s->device == ENG_DEVICE_CUDA) {
		/* before any file is read: a run that cannot start says so at once */
		eng_cuda_info info;
		eng_cuda_probe(&info);
		if (info.ngpus == 0)
			return eng_errf(err, "device 'cuda' is not available: %s", info.why);
	}
	*cfg = s->cfg;
	if (s->init_from[0] && resolve_init(s, err) < 0)
		return -1;
	/* a checkpoint directory, or an llm.c model file (eng_import.h) */
	if (s->init_from[0] && eng_import_read_config(s->init_from, cfg, err) < 0)
		return -1;
	if (s->resume && eng_ckpt_adopt(s->init_from, s, err) < 0)
		return -1;
	if (eng_spec_finish(s, cfg, err) < 0)
		return -1;
	*cfg = s->cfg;
	char why[256];
	if (s->cfg.mm_bf16 && !kn_bf16_available(why, sizeof why))
		return eng_errf(err, "'precision' \"bf16\" is refused: %s; train in \"fp32\"", why);
	return 0;
}

/* The spec's aliases and the policy it starts with (checked against the device). */
static int trainer_policy(const eng_spec *s, eng_aliases *al, eng_policy *p, eng_err *err)
{
	memset(al, 0, sizeof *al);
	for (int i = 0; i < s->n_alias; i++)
		if (eng_aliases_add(al, s->alias[i].name, s->alias[i].selector, s->cfg.n_layer,
			    err) < 0)
			return -1;
	eng_policy_init(p, s->cfg.n_layer);
	if (eng_policy_apply(p, al, "all", s->remat_default, err) < 0)
		return -1;
	for (int i = 0; i < s->n_assign; i++)
		if (eng_policy_apply(p, al, s->assign[i].selector, s->assign[i].mode, err) < 0)
			return -1;
	return eng_policy_check_device(s->device, p, err);
}

/* What a run of s holds whatever its policy, by category: the model's part, both token
 * files and the batch, and with save.dir the snapshot a save holds while it writes (one
 * count for --check, the memory limit, the controller and remat-plan). */
static void fixed_of(const eng_spec *s, size_t ntok, size_t vtok, const eng_model *live,
	size_t out[ENG_MEM_NCAT])
{
	eng_model_fixed_bytes(&s->cfg, s->batch, s->seq_len, s->chunk_rows, s->threads, live, out);
	if (s->grad_accum > 1)
		out[ENG_MEM_GRADS] *= 2; /* the sum of the micro-batches' gradients */
	out[ENG_MEM_DATA] = eng_data_bytes(ntok, s->batch, s->seq_len, s->shuffle) +
		eng_data_bytes(vtok, s->batch, s->seq_len, 0) +
		2 * 2 * (size_t)s->batch * s->seq_len;
}

/* A save's snapshot of weights and moments (the trainable tensors'), as eng_ckpt_snap_take
 * copies them, with save.dir (or always); 0 without. Optional: a save that memory cannot hold it for
 * writes from the live tensors (eng_ckpt_snap_borrow). */
static size_t snapshot_of(const eng_spec *s, int always)
{
	size_t ngrad, nfloats = eng_model_floats(&s->cfg, &ngrad);
	return always || s->save_dir[0] ? eng_ckpt_snap_bytes(nfloats, ngrad) : 0;
}

size_t eng_trainer_snapshot_bytes(const eng_trainer *tr)
{
	return eng_dp_rank() == 0 ? snapshot_of(&tr->spec, 0) : 0;
}

size_t eng_trainer_untracked(const eng_trainer *tr)
{
	return tr->untracked;
}

/* Makes the BLAS library allocate and fill its buffers as a step's matmuls will: a linear
 * layer's forward (512 rows by 512), which starts its threads, and the head's weight
 * gradient (vocabulary by chunk rows, A transposed), the product whose operand OpenBLAS
 * copies whole into its buffer (up to its size, 64 MiB here), which keeps those pages: on
 * a large vocabulary the most a run holds beyond its tracked bytes. On tracked buffers
 * freed after: no more than a chunk of logits, which every step holds anyway. */
static void warm_blas(const eng_config *cfg, int chunk_rows)
{
	int n = 512, V = cfg->vocab_size, w = 16;
	size_t sq = (size_t)n * n * sizeof(float);
	float *a = eng_mem_alloc(ENG_MEM_WORKSPACE, sq), *b = eng_mem_alloc(ENG_MEM_WORKSPACE, sq);
	float *c = eng_mem_alloc(ENG_MEM_WORKSPACE, sq);
	if (a && b && c) /* (n,n) = (n,n) @ (n,n)^T */
		kn_sgemm(0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
	eng_mem_free(a);
	eng_mem_free(b);
	eng_mem_free(c);
	a = eng_mem_alloc(ENG_MEM_WORKSPACE, (size_t)chunk_rows * V * sizeof(float));
	b = eng_mem_alloc(ENG_MEM_WORKSPACE, (size_t)chunk_rows * w * sizeof(float));
	c = eng_mem_alloc(ENG_MEM_WORKSPACE, (size_t)V * w * sizeof(float));
	if (a && b && c) /* (V,w) = (rows,V)^T @ (rows,w): the head's dwte, w columns of it */
		kn_sgemm(1, 0, V, w, chunk_rows, 1.0f, a, V, b, w, 0.0f, c, w);
	eng_mem_free(a);
	eng_mem_free(b);
	eng_mem_free(c);
}

/* The process's resident bytes beyond the tracked ones now, once the kernels have their
 * buffers (warm_blas, on the run's threads): what a plan counts as `untracked` before any
 * step has measured it (remat-train --check gives it for a spec; the trainer starts from
 * it). The same code in both, so that the two agree. */
static size_t untracked_now(const eng_config *cfg, int chunk_rows, int threads)
{
	kn_set_threads(threads);
	warm_blas(cfg, chunk_rows);
	eng_mem_stats ms;
	eng_mem_get_counters(&ms);
	size_t rss = eng_mem_rss();
	return rss > ms.total_current ? rss - ms.total_current : 0;
}

size_t eng_trainer_fixed_bytes(const eng_trainer *tr, size_t out[ENG_MEM_NCAT])
{
	size_t fx[ENG_MEM_NCAT], total = 0;
	size_t *o = out ? out : fx;
	if (tr->gpu) { /* the device's, as its allocator counts them */
		eng_cuda_mem_stats ds;
		eng_cuda_mem_get_stats(&ds);
		for (int c = 0; c < ENG_MEM_NCAT; c++)
			o[c] = c == ENG_MEM_ACTIVATIONS || c == ENG_MEM_RECOMPUTE ? 0 : ds.current[c];
	} else {
		fixed_of(&tr->spec, tr->train.ntok, tr->val.tok ? tr->val.ntok : 0, &tr->model, o);
	}
	for (int c = 0; c < ENG_MEM_NCAT; c++)
		total += o[c];
	return total;
}

/* "N MiB (...)": what a run needs at least (need, of which fixed whatever its policy), as
 * the refusals for memory word it. */
static void need_text(size_t need, size_t fixed, char *buf, size_t n)
{
	snprintf(buf, n, "%.1f MiB (%.1f MiB of weights, gradients, moments, workspace and "
		"data, and %.1f MiB of activations with every block full and the head chunked)",
		need / 1048576.0, fixed / 1048576.0, (need - fixed) / 1048576.0);
}

/* memory.limit against the least any policy needs, the planner's figure with which
 * lay_out refuses the run: refused at the start rather than once running. */
/* The least a run of s needs under any policy (every block full, the head chunked): its
 * fixed part, plus `extra` (the untracked term, for process memory), into *fixed, and
 * the activations on top; the whole returned. */
static size_t least_need(const eng_spec *s, const eng_check *ck, size_t extra, size_t *fixed)
{
	*fixed = extra;
	for (int c = 0; c < ENG_MEM_NCAT; c++)
		*fixed += ck->fixed[c];
	return eng_plan_least(&s->cfg, s->batch, s->seq_len, ck->chunk_rows, *fixed, NULL);
}

static int check_mem_limit(const eng_spec *s, const eng_check *ck, eng_err *err)
{
	size_t fixed, need;
	char what[320];
	if (s->device != ENG_DEVICE_CPU || !s->mem_limit ||
		(need = least_need(s, ck, 0, &fixed)) <= s->mem_limit)
		return 0;
	need_text(need, fixed, what, sizeof what);
	return eng_err_nomem(err, "memory.limit %.1f MiB is too small: this run needs at least "
				  "%s", s->mem_limit / 1048576.0, what);
}

/* remat.budget (a size) against the least process memory any policy needs: the fixed
 * part, the untracked term the check measured, and every block full with the head
 * chunked (no snapshot: saves can do without). Refused at the start, as remat-auto refuses
 * it on a running job. */
static int check_budget(const eng_spec *s, const eng_check *ck, eng_err *err)
{
	size_t fixed, need;
	if (s->device != ENG_DEVICE_CPU || !s->remat_budget ||
		(need = least_need(s, ck, ck->untracked, &fixed)) <= s->remat_budget)
		return 0;
	return eng_errf(err, "remat.budget %.1f MiB is below the least any policy needs: %.1f MiB "
			     "of process memory (%.1f MiB of weights, gradients, moments, workspace "
			     "and data, %.1f MiB beyond them: the binary, libraries and kernel "
			     "buffers, and %.1f MiB of activations with every block full and the "
			     "head chunked)", s->remat_budget / 1048576.0, need / 1048576.0,
		(fixed - ck->untracked) / 1048576.0, ck->untracked / 1048576.0,
		(need - fixed) / 1048576.0);
}

int eng_trainer_check(eng_spec *s, eng_check *out, eng_err *err)
{
	eng_config cfg;
	size_t ntok;
	memset(out, 0, sizeof *out);
	if (trainer_plan(s, &cfg, err) < 0 || trainer_policy(s, &out->aliases, &out->policy,
		err) < 0)
		return -1;
	/* init_from's weights as their load will check them, their headers alone */
	if (s->init_from[0] && eng_import_check(s->init_from, &s->cfg, err) < 0)
		return -1;
	/* the run's thread count: oneDNN's scratchpads (precision bf16) are sized for it */
	kn_set_threads(s->threads);
	if (eng_data_check(s->train_path, s->data_format, s->batch, s->seq_len,
		    s->cfg.vocab_size, &ntok, err) < 0)
		return -1;
	if (s->hostfile[0]) { /* mpirun reads it as the job's owner, as this check runs */
		struct stat hst;
		int hfd = eng_fs_open_read(s->hostfile, "hostfile", &hst, err);
		if (hfd < 0)
			return -1;
		close(hfd);
	}
	if (s->ranks > 1 && ntok < (size_t)s->ranks * s->batch * s->seq_len + 1)
		return eng_errf(err, "data file '%s': %zu tokens, fewer than one step of %d ranks "
				     "needs (%d x %d x %d + 1)", s->train_path, ntok, s->ranks, s->ranks,
			s->batch, s->seq_len);
	size_t vtok = 0;
	if (s->val_path[0] && eng_data_check(s->val_path, s->data_format, s->batch, s->seq_len,
		    s->cfg.vocab_size, &vtok, err) < 0)
		return -1;
	if (s->save_dir[0] && check_save_dir(s->save_dir, err) < 0)
		return -1;
	if (s->resume && eng_ckpt_check_resume(s->init_from, s, ntok, &out->resume_step, err) < 0)
		return -1;
	out->chunk_rows = s->chunk_rows > 0 ? s->chunk_rows
					    : eng_plan_chunk_rows(&s->cfg, s->batch, s->seq_len);
	if ((size_t)out->chunk_rows > (size_t)s->batch * s->seq_len)
		out->chunk_rows = s->batch * s->seq_len;
	out->ntok = ntok;
	/* the model's fixed part, and the data: both token files and the batch (inp, tgt) */
	fixed_of(s, ntok, vtok, NULL, out->fixed);
	out->snapshot = snapshot_of(s, 1); /* rematd's jobs always save */
	out->untracked = s->device == ENG_DEVICE_CPU ? untracked_now(&s->cfg, out->chunk_rows,
		s->threads) : 0;
	if (check_mem_limit(s, out, err) < 0)
		return -1;
	return check_budget(s, out, err);
}

size_t eng_step_tokens(const eng_spec *s)
{
	return (size_t)s->grad_accum * s->batch * s->seq_len * s->ranks;
}

/* ---- memory: what fits, and out of memory as a retry ---- */

#define FIT_SLACK 0.03 /* of the bound, less each refusal: the plan misses chunk alignment */
#define FIT_TRIES 4    /* refusals in one step before the run gives up */

/* The bytes of all tracked categories held now: the host's, or with device cuda the
 * device's. */
static size_t held_bytes(const eng_trainer *tr)
{
	eng_mem_stats ms;
	if (tr->gpu) {
		eng_cuda_mem_stats ds;
		eng_cuda_mem_get_stats(&ds);
		return ds.total_current;
	}
	eng_mem_get_counters(&ms);
	return ms.total_current;
}

static int laid_out(const eng_trainer *tr)
{
	int L = tr->model.cfg.n_layer;
	return (tr->gpu ? eng_cuda_policy(tr->gpu)->n_layer : tr->model.lay.policy.n_layer) == L;
}

/* The planner's peak of policy p for this run, its fixed part included. */
static size_t predicted(const eng_trainer *tr, const eng_policy *p)
{
	const eng_model *m = &tr->model;
	eng_plan pl;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, p, &pl);
	return eng_trainer_fixed_bytes(tr, NULL) + pl.peak_bytes;
}

/* What a policy must fit in after `tries` refusals: memory.limit (device cpu) or the least
 * total a refusal happened at, whichever is smaller, less FIT_SLACK a try; 0: unbounded. */
static size_t fit_bound(const eng_trainer *tr, int tries)
{
	size_t b = tr->gpu ? 0 : tr->spec.mem_limit;
	if (tr->mem_cap && (!b || tr->mem_cap < b))
		b = tr->mem_cap;
	return (size_t)((double)b * (1.0 - FIT_SLACK * tries));
}

/* The fastest policy whose predicted peak fits bound, on the run's measured costs (the
 * analytic FLOPs where there are none): 0; or -1 when none does, *p then the policy of the
 * least memory. The least any policy needs goes to *need. */
static int fit_policy(const eng_trainer *tr, size_t bound, eng_policy *p, size_t *need)
{
	const eng_model *m = &tr->model;
	eng_plan_costs pc;
	eng_plan pl;
	double rate = eng_costs_rate(&m->cfg, m->B, m->T, m->chunk_rows, &tr->policy,
		tr->last_ms);
	eng_costs_plan(&tr->costs, &m->cfg, m->B, m->T, m->chunk_rows, rate, &pc, NULL);
	eng_plan_query q = {&m->cfg, m->B, m->T, m->chunk_rows, eng_trainer_fixed_bytes(tr, NULL),
		&pc, bound, 0, 0.0};
	int r = eng_plan_search(&q, p, &pl);
	*need = pl.peak_bytes;
	return r;
}

/* The run cannot go on: not even the policy of the least memory fits. `why` is the last
 * refusal ("" when memory.limit is known to be too small without trying). */
static int cannot_fit(const eng_trainer *tr, const char *why, eng_err *err)
{
	eng_policy least;
	size_t need, fixed = eng_trainer_fixed_bytes(tr, NULL);
	char what[320], msg[ENG_ERR_LEN];
	fit_policy(tr, 0, &least, &need);
	need_text(need, fixed, what, sizeof what);
	snprintf(msg, sizeof msg, "%s", why);
	if (!why[0])
		return eng_err_nomem(err, "memory.limit %.1f MiB is too small: this run needs at "
					  "least %s", tr->spec.mem_limit / 1048576.0, what);
	return eng_err_nomem(err, "out of memory: this run needs at least %s, and even that was "
				  "refused (%.300s)", what, msg);
}

/* After an allocation was refused with policy p laid out or being laid out: the bound
 * learnt from it (what the refused allocation would have brought the total to), one OOM
 * retry counted, and in *p the fastest policy under the new bound, or the least there is.
 * -1 after FIT_TRIES refusals in this step. */
static int on_refusal(eng_trainer *tr, eng_policy *p, int *tries, eng_err *err)
{
	size_t at = eng_mem_take_refused(), need; /* 0: a refusal no allocator counted */
	if (at && (!tr->mem_cap || at < tr->mem_cap))
		tr->mem_cap = at;
	tr->oom_retries++;
	if (++*tries >= FIT_TRIES)
		return cannot_fit(tr, err->msg, err);
	snprintf(tr->oom_why, sizeof tr->oom_why, "%s", err->msg);
	fit_policy(tr, *tries >= FIT_TRIES - 1 ? 0 : fit_bound(tr, *tries), p, &need);
	return 0;
}

/* Lays policy p out for the next step; when memory will not have it, the fastest policy
 * that fits what is known instead (*p then the one laid out, each policy given up an OOM
 * retry): a policy predicted over memory.limit or over a refusal's total is given up
 * untried, one refused is given up after the try. The policy of the least memory is always
 * tried, unless memory.limit is known to be too small for it. `tries` counts this step's
 * refusals; -1 when there were too many, or on another error. */
static int lay_out(eng_trainer *tr, eng_policy *p, int *tries, eng_err *err)
{
	eng_policy least;
	size_t need;
	fit_policy(tr, 0, &least, &need);
	if (!tr->gpu && tr->spec.mem_limit && need > tr->spec.mem_limit)
		return cannot_fit(tr, "", err);
	for (;;) {
		size_t bound = fit_bound(tr, *tries);
		if (bound && !eng_policy_equal(p, &least) && predicted(tr, p) > bound) {
			fit_policy(tr, bound, p, &need); /* the least when nothing fits */
			tr->oom_retries++;
		}
		if (laid_out(tr) && eng_policy_equal(p, &tr->policy))
			return 0;
		if (eng_trainer_set_policy(tr, p, err) == 0)
			return 0;
		if (err->kind != ENG_ERR_NOMEM || on_refusal(tr, p, tries, err) < 0)
			return -1;
	}
}

int eng_trainer_init(eng_trainer *tr, const eng_spec *spec, eng_err *err)
{
	memset(tr, 0, sizeof *tr);
	tr->spec = *spec;
	eng_spec *s = &tr->spec;
	eng_config cfg;
	int cuda = s->device == ENG_DEVICE_CUDA;
	eng_policy p;
	if (trainer_plan(s, &cfg, err) < 0)
		goto fail;
	eng_costs_init(&tr->costs, s->cfg.n_layer);
	if (eng_memtrace_init(&tr->trace, ENG_MEMTRACE_CAP) < 0) {
		eng_errf(err, "out of memory for the step's memory timeline");
		goto fail;
	}
	eng_mem_set_limit(s->device == ENG_DEVICE_CPU ? s->mem_limit : 0);
	kn_set_threads(s->threads);
	if ((cuda ? host_mirror_init(tr, err)
		  : eng_model_init(&tr->model, &s->cfg, s->batch, s->seq_len, s->chunk_rows, err)) < 0) {
		if (!cuda && s->mem_limit) {
			size_t fx[ENG_MEM_NCAT], need = 0;
			eng_model_fixed_bytes(&s->cfg, s->batch, s->seq_len, s->chunk_rows,
				s->threads, NULL, fx);
			for (int c = 0; c < ENG_MEM_NCAT; c++)
				need += fx[c];
			eng_errf(err, "memory.limit %.1f MiB is too small: this run needs %.1f MiB "
				      "for its weights, gradients, moments and workspace before any "
				      "activation", s->mem_limit / 1048576.0, need / 1048576.0);
		}
		goto fail;
	}
	if (trainer_weights(tr, err) < 0 || trainer_policy(s, &tr->aliases, &p, err) < 0)
		goto fail;
	if (cuda) {
		eng_cuda_opts o;
		/* rank 0's settings on every rank: mpirun passes no environment to other hosts */
		if (eng_cuda_opts_from_env(&o, err) < 0 || eng_dp_bcast(&o, sizeof o, err) < 0)
			goto fail;
		if (s->has_precision) /* the spec's, over REMAT_CUDA_PRECISION */
			o.fp32 = s->precision == ENG_PREC_FP32;
		o.gpu = eng_dp_local_rank(); /* ranks on one machine take its GPUs in turn */
		o.accum = s->grad_accum > 1;
		if (eng_cuda_new(&tr->gpu, &tr->model, &o, err) < 0 ||
			eng_cuda_dp_open(tr->gpu, o.comm, err) < 0)
			goto fail;
	}
	/* the data before the activations: all the run holds besides them is allocated when
	 * a memory limit picks the policy */
	if (eng_data_open(&tr->train, s->train_path, s->data_format, s->cfg.vocab_size, s->batch,
		    s->seq_len, err) < 0)
		goto fail;
	if (s->val_path[0] && eng_data_open(&tr->val, s->val_path, s->data_format,
				      s->cfg.vocab_size, s->batch, s->seq_len, err) < 0)
		goto fail;
	if (s->ranks > 1 && eng_data_set_ranks(&tr->train, s->ranks, eng_dp_rank(), err) < 0)
		goto fail;
	if (s->shuffle && eng_data_shuffle(&tr->train, s->shuffle_seed, err) < 0)
		goto fail;
	size_t n = (size_t)s->batch * s->seq_len * sizeof(uint16_t);
	tr->inp = eng_mem_alloc(ENG_MEM_DATA, n);
	tr->tgt = eng_mem_alloc(ENG_MEM_DATA, n);
	if (!tr->inp || !tr->tgt) {
		eng_errf(err, "out of memory for the batch buffers");
		goto fail;
	}
	if (!cuda && s->grad_accum > 1 &&
		!(tr->acc = eng_mem_alloc(ENG_MEM_GRADS, tr->model.ngrad * sizeof(float)))) {
		eng_errf(err, "out of memory for the accumulated gradients (%.1f MiB)",
			tr->model.ngrad * 4 / 1048576.0);
		goto fail;
	}
	/* under a budget the first step lays out the controller's policy: the run never holds
	 * one over it, not even before that step */
	int tries = 0;
	if (!cuda && (s->remat_budget || s->remat_budget_cgroup))
		tr->policy = p;
	else if (lay_out(tr, &p, &tries, err) < 0)
		goto fail;
	/* what the process holds beyond the tracked bytes, before a step has measured it */
	if (!cuda)
		tr->untracked = untracked_now(&s->cfg, tr->model.chunk_rows, s->threads);
	/* data parallel: rank 0 writes the checkpoints */
	if (s->save_dir[0] && eng_dp_rank() == 0 && open_save_dir(tr, err) < 0)
		goto fail;
	if (s->resume && eng_trainer_resume(tr, s->init_from, err) < 0)
		goto fail;
	if (tr->gpu && eng_cuda_upload(tr->gpu, &tr->model, err) < 0)
		goto fail;
	return 0;
fail:
	eng_trainer_free(tr);
	return -1;
}

void eng_trainer_free(eng_trainer *tr)
{
	eng_mem_free(tr->inp);
	eng_mem_free(tr->tgt);
	eng_mem_free(tr->acc);
	eng_data_close(&tr->val);
	eng_data_close(&tr->train);
	eng_cuda_destroy(tr->gpu);
	eng_model_free(&tr->model);
	eng_memtrace_free(&tr->trace);
	if (tr->save_lock >= 0)
		close(tr->save_lock); /* the save directory is free for another job */
	if (tr->spec.mem_limit)
		eng_mem_set_limit(0); /* the process's next trainer sets its own */
	memset(tr, 0, sizeof *tr);
}

/* Step index i of a schedule of `steps` steps: warm-up lr*(i+1)/warmup, then cosine from
 * lr down to lr*min_frac at the end, or constant. */
static float lr_formula(float lr, eng_sched_kind kind, int warmup, float min_frac, int steps,
	int i)
{
	if (warmup > 0 && i < warmup)
		return lr * (float)(i + 1) / (float)warmup;
	if (kind == ENG_SCHED_CONSTANT || steps <= warmup)
		return lr;
	double ratio = (double)(i - warmup) / (double)(steps - warmup);
	if (ratio > 1.0)
		ratio = 1.0;
	double min_lr = (double)lr * min_frac;
	return (float)(min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (lr - min_lr));
}

float eng_lr_at(const eng_spec *s, int i)
{
	if ((s->hp_set & ENG_HP_LR) && i >= s->lr_from)
		return lr_formula(s->lr_new, s->lr_kind, s->lr_warmup, s->lr_min_frac,
			s->steps - s->lr_from, i - s->lr_from);
	return lr_formula(s->lr, s->sched, s->warmup, s->min_lr_frac, s->steps, i);
}

/* "step N: <what the GPU model said>" */
static int step_failed(eng_trainer *tr, const eng_data_pos *at, eng_err *err)
{
	char why[ENG_ERR_LEN];
	eng_err_kind kind = err->kind;
	snprintf(why, sizeof why, "%s", err->msg);
	eng_data_seek(&tr->train, at); /* the batches are taken again by the step that replaces
					* it */
	eng_errf(err, "step %d: %.400s; weights left as they were after step %d", tr->step + 1,
		why, tr->step);
	err->kind = kind;
	return -1;
}

/* This rank's part of the step's gradient: the sum of its grad_accum micro-batch gradients,
 * each computed alone, of its own mean loss, and added to the sum (as an all-reduce adds
 * ranks'), in the model's gradients (one micro-batch) or tr->acc (on the GPU: its own
 * buffers, eng_cuda_accumulate); the sum of their losses in
 * *loss_sum, their section times summed into sec_ms, their recomputation into *rec_ms. */
static int step_grads(eng_trainer *tr, double *loss_sum, double sec_ms[][3], double *rec_ms,
	eng_err *err)
{
	eng_model *m = &tr->model;
	int K = tr->spec.grad_accum, L = m->cfg.n_layer;
	*loss_sum = 0.0;
	*rec_ms = 0.0;
	for (int k = 0; k < K; k++) {
		float l;
		eng_data_next(&tr->train, tr->inp, tr->tgt);
		if (tr->gpu) {
			if (eng_cuda_step(tr->gpu, tr->inp, tr->tgt, &l, err) < 0 ||
				eng_cuda_accumulate(tr->gpu, k, err) < 0)
				return -1;
			*rec_ms += eng_cuda_recompute_ms(tr->gpu);
		} else {
			if (eng_model_step(m, tr->inp, tr->tgt, &l, err) < 0)
				return -1;
			*rec_ms += m->recompute_ms;
			for (int i = 0; i <= L; i++)
				for (int j = 0; j < 3; j++)
					sec_ms[i][j] = (k ? sec_ms[i][j] : 0.0) + m->sec_ms[i][j];
			if (K > 1 && k == 0) /* 0 + g, exactly */
				memcpy(tr->acc, m->grads, m->ngrad * sizeof(float));
			else if (K > 1)
				kn_add(tr->acc, m->grads, m->ngrad);
		}
		*loss_sum += l;
	}
	return 0;
}

/* A GPU rank's failure once the ranks' sum has begun (a CUDA error in the sum, the norm or
 * the update) is its own: the others went on, their sum done or their update taken, and
 * cannot be told. Data parallel, the job ends here, every rank with it (MPI_Abort: mpirun
 * reports this rank); alone, the step fails as any other. -1. */
static int dp_alone(const eng_trainer *tr, const eng_err *err)
{
	if (eng_dp_size() > 1) {
		fprintf(stderr, "remat-train: rank %d: step %d: %s; the ranks can no longer agree, "
				"ending the job\n", eng_dp_rank(), tr->step + 1, err->msg);
		eng_dp_abort(1);
	}
	return -1;
}

/* Every rank's part of the step summed (data parallel; nothing with one rank): first
 * whether every rank's part worked (lrc: this one's; its message in err), then the
 * gradients (on the GPU: eng_cuda_sum_ranks) and the losses, in *ar_ms milliseconds. A
 * part that failed anywhere fails the try everywhere: this rank's own error, or
 * ENG_ERR_PEER naming the rank that failed. */
static int step_sum(eng_trainer *tr, int lrc, float *grads, double *loss_sum, double *ar_ms,
	eng_err *err)
{
	char msg[ENG_ERR_LEN];
	*ar_ms = 0;
	if (eng_dp_size() == 1)
		return lrc;
	int kind = err->kind;
	snprintf(msg, sizeof msg, "%s", lrc < 0 ? err->msg : "");
	int first = eng_dp_first_failure(lrc < 0, &kind, msg, sizeof msg);
	if (first >= 0 && lrc == 0) {
		eng_errf(err, "rank %d: %.440s", first, msg);
		err->kind = ENG_ERR_PEER;
	}
	if (first >= 0)
		return -1;
	double t0 = now_ms();
	if (tr->gpu && eng_cuda_sum_ranks(tr->gpu, err) < 0)
		return dp_alone(tr, err);
	int rc = (!tr->gpu && eng_dp_sum_floats(grads, tr->model.ngrad, err) < 0) ||
		eng_dp_sum_doubles(loss_sum, 1, err) < 0 ? -1 : 0;
	*ar_ms = now_ms() - t0;
	return rc;
}

/* After a step: device cpu, the process's peak in the step's window (begun by trace_begin)
 * into st, and what it held beyond the tracked peak then; device cuda, the device's used
 * memory beyond the allocator's tensors at the step's end: the run's untracked term from
 * now on (the most of the last UNTRACKED_STEPS steps', so that one quiet step does not
 * make room that the next takes back). */
static void step_rss(eng_trainer *tr, eng_step_stats *st)
{
	size_t hwm = 0, most = 0;
	if (tr->gpu) {
		/* the device's used memory (cudaMemGetInfo, refreshed at the step's end) beyond
		 * the allocator's tensors: the CUDA context, cuBLAS's and cuDNN's workspaces,
		 * the arenas' slack, other processes on the GPU */
		eng_cuda_mem_stats ds;
		eng_cuda_mem_get_stats(&ds);
		size_t used = ds.device_total > ds.device_free ? ds.device_total - ds.device_free : 0;
		st->untracked_bytes = used > ds.total_current ? used - ds.total_current : 0;
	} else if (eng_mem_rss_window(&hwm, 0) < 0 || !hwm) {
		return;
	} else {
		st->rss_peak = hwm;
		st->untracked_bytes = hwm > st->peak_bytes ? hwm - st->peak_bytes : 0;
		eng_mem_note_untracked(st->untracked_bytes);
	}
	tr->untracked_seen[tr->step % UNTRACKED_STEPS] = st->untracked_bytes;
	for (int i = 0; i < UNTRACKED_STEPS; i++)
		if (tr->untracked_seen[i] > most)
			most = tr->untracked_seen[i];
	tr->untracked = most;
}

/* One try at step tr->step + 1 under the policy laid out (laid 0: its lay-out failed, the
 * message in err, and this rank only tells the others). A failure changes nothing the next
 * try would see: weights, moments and the data position stay (the gradients are written
 * afresh by every step). */
static int step_try(eng_trainer *tr, int changed, int laid, eng_step_stats *st, eng_err *err)
{
	eng_model *m = &tr->model;
	const eng_spec *s = &tr->spec;
	double t0 = now_ms(), sumsq, rec_ms = 0, sec_ms[ENG_MAX_LAYERS + 1][3], loss_sum = 0;
	double ar_ms;
	float scale = 1.0f, *grads = tr->acc ? tr->acc : m->grads;
	eng_data_pos at = tr->train.pos;
	/* the mean over every micro-batch of every rank: the sum, scaled once */
	int n = s->grad_accum * eng_dp_size();
	int lrc = laid ? step_grads(tr, &loss_sum, sec_ms, &rec_ms, err) : -1;
	if (step_sum(tr, lrc, grads, &loss_sum, &ar_ms, err) < 0)
		return step_failed(tr, &at, err);
	if (!tr->gpu && n > 1)
		kn_scale(grads, 1.0f / (float)n, m->ngrad);
	float loss = (float)(loss_sum / n);
	if (tr->gpu && ((n > 1 && eng_cuda_scale_grads(tr->gpu, 1.0f / (float)n, err) < 0) ||
			       eng_cuda_grad_sumsq(tr->gpu, &sumsq, err) < 0)) {
		dp_alone(tr, err);
		return step_failed(tr, &at, err);
	}
	if (!tr->gpu)
		sumsq = kn_sumsq(grads, m->ngrad);
	double norm = sqrt(sumsq);
	if (!isfinite(loss) || !isfinite(norm)) {
		eng_data_seek(&tr->train, &at);
		return eng_errf(err, "step %d: loss %g, gradient norm %g: not finite; weights left "
				     "as they were after step %d", tr->step + 1, loss, norm, tr->step);
	}
	if (s->grad_clip > 0) {
		/* torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6), at most 1 */
		double coef = s->grad_clip / (norm + 1e-6);
		if (coef < 1.0)
			scale = (float)coef;
	}
	if (!tr->gpu && scale != 1.0f)
		kn_scale(grads, scale, m->ngrad);
	float lr = eng_lr_at(s, tr->step);
	int t = tr->step + 1;
	double bc1 = 1.0 - pow(s->beta1, t), bc2 = 1.0 - pow(s->beta2, t);
	if (tr->gpu) {
		/* the clipping scale is applied inside the update, as kn_scale would have */
		if (eng_cuda_adamw(tr->gpu, scale, lr, s->beta1, s->beta2, s->eps, s->weight_decay,
			    bc1, bc2, err) < 0) {
			err->kind = ENG_ERR_BAD; /* the update may have begun: never a retry */
			dp_alone(tr, err);
			return step_failed(tr, &at, err);
		}
	} else {
		for (int i = 0; i < m->ntensors; i++) {
			const eng_ptensor *pt = &m->tensors[i];
			if (pt->frozen) /* no gradient, no moments: never moves */
				continue;
			kn_adamw_update(m->params + pt->offset, m->m + pt->goff, m->v + pt->goff,
				grads + pt->goff, pt->numel, lr, s->beta1, s->beta2, s->eps,
				pt->decay ? s->weight_decay : 0.0f, bc1, bc2);
		}
		eng_model_params_changed(m); /* precision bf16: its bf16 copy, before the next step */
	}
	tr->step = t;
	double ms = now_ms() - t0;
	if (!tr->gpu && !changed) {
		/* a sample of the costs, unless the step began with a policy change: its new
		 * buffers make its sections slower than the same policy's next steps */
		size_t saved[ENG_MAX_LAYERS + 1];
		for (int i = 0; i <= m->cfg.n_layer; i++)
			saved[i] = eng_model_saved_bytes(m, i);
		eng_costs_add(&tr->costs, &tr->policy, (const double (*)[3])sec_ms, saved, ms);
	}
	eng_mem_stats ms_now;
	eng_mem_get_counters(&ms_now); /* no /proc read on the step path */
	if (tr->gpu) {
		/* the step's memory is the device's */
		eng_cuda_mem_stats ds;
		eng_cuda_mem_get_stats(&ds);
		ms_now.current[ENG_MEM_ACTIVATIONS] = ds.current[ENG_MEM_ACTIVATIONS];
		ms_now.total_current = ds.total_current;
	}
	memset(st, 0, sizeof *st);
	st->step = t;
	st->loss = loss;
	st->lr = lr;
	st->grad_norm = (float)norm;
	st->step_ms = ms;
	st->recompute_ms = rec_ms;
	st->allreduce_ms = ar_ms;
	for (int l = 0; !tr->gpu && l < m->cfg.n_layer; l++)
		st->blocks_forward_ms += sec_ms[l][ENG_SEC_FWD];
	st->micro_batches = s->grad_accum;
	st->tokens_per_s = ms > 0 ? (double)eng_step_tokens(s) / (ms / 1e3) : 0.0;
	st->activation_bytes = ms_now.current[ENG_MEM_ACTIVATIONS];
	if (tr->gpu)
		eng_cuda_mem_step_peaks(st->peak_cat, &st->peak_bytes, 0);
	else
		eng_mem_step_peaks(st->peak_cat, &st->peak_bytes, 0);
	st->oom_retries = tr->oom_retries;
	step_rss(tr, st);
	tr->last_ms = ms;
	return 0;
}

/* The step's window on the peaks and its memory timeline begin: what every step holds
 * (all but activations and recompute) is live from the start, one event a category; the
 * model adds its sections' buffers, the allocator the mappings the step makes (cpu). */
static void trace_begin(eng_trainer *tr)
{
	eng_mem_stats ms;
	if (tr->gpu)
		eng_cuda_mem_step_peaks(NULL, NULL, 1);
	else
		eng_mem_step_peaks(NULL, NULL, 1);
	eng_memtrace_begin(&tr->trace, tr->step + 1, tr->model.cfg.n_layer);
	if (tr->gpu)
		return; /* the GPU model's passes are not traced */
	eng_mem_rss_window(NULL, 1);
	eng_mem_get_counters(&ms);
	for (int c = 0; c < ENG_MEM_NCAT; c++)
		if (c != ENG_MEM_ACTIVATIONS && c != ENG_MEM_RECOMPUTE && ms.current[c])
			eng_memtrace_add(&tr->trace, ENG_MT_LIVE, (void *)((uintptr_t)(c + 1) << 40),
				ms.current[c], (eng_mem_cat)c, -1, -1);
	tr->model.trace = &tr->trace;
	eng_mem_trace_thread(eng_memtrace_on_alloc, &tr->trace);
}

/* Whether the step is tried again: on every rank, or on none when some rank gives it up
 * (again 0 here: err holds why; elsewhere: err names that rank and says why). 0: again. */
static int step_again(int again, eng_err *err)
{
	char msg[ENG_ERR_LEN];
	if (eng_dp_size() == 1)
		return again ? 0 : -1;
	int kind = err->kind;
	snprintf(msg, sizeof msg, "%s", again ? "" : err->msg);
	int first = eng_dp_first_failure(!again, &kind, msg, sizeof msg);
	if (first < 0)
		return 0;
	if (again) { /* this rank's try was fine, or it could have gone on: the giver-up's */
		eng_errf(err, "rank %d: %.480s", first, msg);
		err->kind = (eng_err_kind)kind; /* out of memory names the last checkpoint */
	}
	return -1;
}

int eng_trainer_step_as(eng_trainer *tr, const eng_policy *want, eng_step_stats *st,
	eng_err *err)
{
	eng_policy p = want ? *want : tr->policy;
	int tries = 0, rc;
	double t_start = now_ms();
	if (want && eng_trainer_check_policy(tr, want, err) < 0)
		return -1;
	tr->oom_why[0] = '\0';
	/* a step that lays out another policy first: its buffers are new (no cost sample) */
	eng_policy before = tr->policy;
	int was_laid = laid_out(tr);
	trace_begin(tr);
	for (;;) {
		int laid = lay_out(tr, &p, &tries, err) == 0, dp = eng_dp_size() > 1;
		if (!laid && !dp) { /* with ranks, step_try says it to the others first */
			char why[ENG_ERR_LEN];
			eng_err_kind kind = err->kind;
			snprintf(why, sizeof why, "%s", err->msg);
			eng_errf(err, "step %d: %.440s", tr->step + 1, why);
			err->kind = kind;
			rc = -1;
			break;
		}
		int changed = !was_laid || !eng_policy_equal(&tr->policy, &before);
		if ((rc = step_try(tr, changed, laid, st, err)) == 0) {
			/* the whole step: its policy change and any try before included (the cost
			 * table took the sections' own times) */
			st->step_ms = now_ms() - t_start;
			st->tokens_per_s = (double)eng_step_tokens(&tr->spec) / (st->step_ms / 1e3);
			break;
		}
		/* again after a refusal of this rank's own, or after another rank's failure */
		int again = laid && (err->kind == ENG_ERR_PEER ||
			(err->kind == ENG_ERR_NOMEM && on_refusal(tr, &p, &tries, err) == 0));
		if (step_again(again, err) < 0)
			break;
	}
	tr->model.trace = NULL;
	eng_mem_trace_thread(NULL, NULL);
	return rc;
}

int eng_trainer_step(eng_trainer *tr, eng_step_stats *st, eng_err *err)
{
	return eng_trainer_step_as(tr, NULL, st, err);
}

int eng_trainer_parse_policy(const eng_trainer *tr, const char *text, eng_policy *out,
	eng_err *err)
{
	*out = tr->policy;
	return eng_policy_parse(out, &tr->aliases, text, err);
}

int eng_trainer_check_policy(const eng_trainer *tr, const eng_policy *p, eng_err *err)
{
	return eng_policy_check_device(tr->spec.device, p, err);
}

int eng_trainer_set_policy(eng_trainer *tr, const eng_policy *p, eng_err *err)
{
	if (eng_trainer_check_policy(tr, p, err) < 0)
		return -1;
	if ((tr->gpu ? eng_cuda_set_policy(tr->gpu, p, err)
		     : eng_model_set_policy(&tr->model, p, err)) < 0)
		return -1;
	tr->policy = *p; /* what the control thread and the progress lines read */
	if (tr->mem_cap && held_bytes(tr) >= tr->mem_cap)
		tr->mem_cap = 0; /* more than a refusal's total fits now: that memory came back */
	return 0;
}

size_t eng_trainer_saved_bytes(const eng_trainer *tr, int i)
{
	return tr->gpu ? eng_cuda_saved_bytes(tr->gpu, i) : eng_model_saved_bytes(&tr->model, i);
}

int eng_trainer_sync_host(eng_trainer *tr, eng_err *err)
{
	return tr->gpu ? eng_cuda_download(tr->gpu, &tr->model, err) : 0;
}

const char *eng_trainer_backend(const eng_trainer *tr)
{
	static char buf[512];
	if (!tr->gpu) {
		snprintf(buf, sizeof buf, "cpu: %s%s%s", kn_blas_describe(),
			tr->model.cfg.mm_bf16 ? "; bf16 matmuls: " : "",
			tr->model.cfg.mm_bf16 ? kn_bf16_describe() : "");
		return buf;
	}
	eng_cuda_info info;
	eng_cuda_probe(&info);
	int d = eng_cuda_device(tr->gpu);
	const eng_cuda_gpu *gpu = &info.gpu[0];
	for (int i = 0; i < info.ngpus; i++)
		if (info.gpu[i].device == d)
			gpu = &info.gpu[i];
	snprintf(buf, sizeof buf, "cuda: GPU %d, %s (%.1f GiB), %s", d, gpu->name,
		gpu->memory_bytes / 1073741824.0, eng_cuda_describe(tr->gpu));
	return buf;
}

const char *eng_trainer_precision(const eng_trainer *tr)
{
	return tr->gpu ? eng_cuda_precision(tr->gpu) : tr->model.cfg.mm_bf16 ? "bf16" : "fp32";
}

const char *eng_trainer_allreduce(const eng_trainer *tr)
{
	if (tr->spec.ranks == 1)
		return NULL;
	return tr->gpu ? eng_cuda_dp_describe(tr->gpu)
		       : "mpi: reduce-scatter and all-gather of float32 gradients in host memory";
}

float eng_trainer_val_loss(eng_trainer *tr, int batches)
{
	if (!tr->val.tok)
		return NAN;
	eng_data *d = &tr->val;
	int fit = d->nsamples > INT_MAX ? INT_MAX : (int)d->nsamples;
	if (batches <= 0 || batches > fit)
		batches = fit;
	eng_data_pos saved = d->pos, start = {0};
	eng_data_seek(d, &start);
	double sum = 0.0;
	for (int i = 0; i < batches; i++) {
		float l;
		eng_err e;
		eng_data_next(d, tr->inp, tr->tgt);
		if ((tr->gpu ? eng_cuda_loss(tr->gpu, tr->inp, tr->tgt, &l, &e)
			     : eng_model_loss(&tr->model, tr->inp, tr->tgt, &l, &e)) < 0)
			l = NAN; /* a failure: the mean says so, the next step reports it */
		sum += l;
	}
	eng_data_seek(d, &saved);
	return (float)(sum / batches);
}

int eng_trainer_save(eng_trainer *tr, const char *name, char *out, size_t outlen,
	size_t *bytes, eng_err *err)
{
	eng_ckpt_snap snap;
	eng_ckpt_result res;
	if (make_dirs(tr->spec.save_dir, err) < 0 || eng_trainer_sync_host(tr, err) < 0 ||
		eng_trainer_snap_take(&snap, tr, err) < 0)
		return -1;
	int rc = eng_ckpt_write(&snap, tr->spec.save_dir, name, tr->spec.save_keep, &res, err);
	eng_ckpt_snap_free(&snap);
	if (rc < 0)
		return -1;
	snprintf(out, outlen, "%s", res.path);
	if (bytes)
		*bytes = res.bytes;
	return 0;
}
