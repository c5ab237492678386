/* eng_train_check.c - what a run of a spec will hold and whether it can start, found
 * before it does (eng_trainer_check, remat-train --check), and the run's fixed bytes, its
 * snapshot and untracked terms (one count for --check, memory.limit, the controller and
 * remat-plan). Not here: the start itself (eng_train.c), what fits a bound
 * (eng_train_fit.c). */
#include "eng_train_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_ckpt.h"
#include "eng_dp.h"
#include "eng_fs.h"
#include "eng_import.h"
#include "eng_mem.h"
#include "eng_tok.h"
#include "kn.h"

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

/* Rank 0 of a sharded optimizer, with save.dir (or always): the moments gathered whole
 * while a save writes them, a live save's too; 0 elsewhere. */
static size_t gather_of(const eng_spec *s, int always)
{
	size_t ngrad;
	eng_model_floats(&s->cfg, &ngrad);
	return s->cfg.opt_shards && s->cfg.opt_rank == 0 && (always || s->save_dir[0])
		? 2 * sizeof(float) * ngrad : 0;
}

/* What a run of s holds whatever its policy, by category: the model's part, both token
 * files and the batch, a sharded optimizer's gathered moments on rank 0 (gather_of: saves
 * need them), and with save.dir the snapshot a save holds while it writes (one count for
 * --check, the memory limit, the controller and remat-plan). */
static void fixed_of(const eng_spec *s, const eng_data_file *train, const eng_data_file *val,
	size_t tok_bytes, const eng_model *live, int always, size_t out[ENG_MEM_NCAT])
{
	eng_model_fixed_bytes(&s->cfg, s->batch, s->seq_len, s->chunk_rows, s->threads, live, out);
	out[ENG_MEM_WORKSPACE] += gather_of(s, always);
	if (s->grad_accum > 1)
		out[ENG_MEM_GRADS] *= 2; /* the sum of the micro-batches' gradients */
	out[ENG_MEM_DATA] = eng_data_bytes(train, s->batch, s->seq_len, s->shuffle) +
		(val ? eng_data_bytes(val, s->batch, s->seq_len, 0) : 0) +
		2 * sizeof(uint32_t) * (size_t)s->batch * s->seq_len + tok_bytes;
}

/* A save's snapshot of weights and moments (the trainable tensors'), as eng_ckpt_snap_take
 * copies them, with save.dir (or always); 0 without. Optional: a save that memory cannot hold it for
 * writes from the live tensors (eng_ckpt_snap_borrow). */
static size_t snapshot_of(const eng_spec *s, int always)
{
	size_t ngrad, nfloats = eng_model_floats(&s->cfg, &ngrad);
	/* a sharded optimizer's moments are fixed_of's already (gather_of) */
	return always || s->save_dir[0] ? eng_ckpt_snap_bytes(nfloats, ngrad) -
		gather_of(s, always) : 0;
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
size_t eng_train_untracked_now(const eng_config *cfg, int chunk_rows, int threads)
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
	size_t fx[ENG_MEM_NCAT], total = 0, all;
	size_t *o = out ? out : fx;
	if (!tr->be->ops->tracked_host) { /* the device's, as its allocator counts them */
		tr->be->ops->mem_now(tr->be, o, &all);
		o[ENG_MEM_ACTIVATIONS] = o[ENG_MEM_RECOMPUTE] = 0;
	} else {
		fixed_of(&tr->spec, &tr->train.file, eng_data_opened(&tr->val) ? &tr->val.file
			: NULL, eng_ckpt_tok_bytes(&tr->tok_files), &tr->model, 0, o);
	}
	for (int c = 0; c < ENG_MEM_NCAT; c++)
		total += o[c];
	return total;
}

/* "N MiB (...)": what a run needs at least (need, of which fixed whatever its policy), as
 * the refusals for memory word it. */
void eng_train_need_text(size_t need, size_t fixed, char *buf, size_t n)
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

/* Whether the spec's device runs on the host's tracked memory (its backend's tracked_host):
 * what memory.limit, remat.budget and the untracked term are about. */
static int host_tracked(const eng_spec *s)
{
	return eng_backend_ops_for(s->device)->tracked_host;
}

static int check_mem_limit(const eng_spec *s, const eng_check *ck, eng_err *err)
{
	size_t fixed, need;
	char what[320];
	if (!host_tracked(s) || !s->mem_limit ||
		(need = least_need(s, ck, 0, &fixed)) <= s->mem_limit)
		return 0;
	eng_train_need_text(need, fixed, what, sizeof what);
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
	if (!host_tracked(s) || !s->remat_budget ||
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
	eng_data_file train, val;
	memset(out, 0, sizeof *out);
	if (eng_train_plan(s, &cfg, err) < 0 || eng_train_policy(s, &out->aliases, &out->policy,
		err) < 0)
		return -1;
	/* init_from's weights as their load will check them, their headers alone */
	if (s->init_from[0] && eng_import_check(s->init_from, &s->cfg, err) < 0)
		return -1;
	/* the tokenizer as the run loads it, and the bytes of its files the run keeps; text
	 * data as the token files the cache holds of it (one not there yet is read by the run
	 * once it has made it, and is left out of the checks below that read tokens) */
	eng_ckpt_tok tf;
	struct eng_tok *tok;
	char tpath[ENG_PATH_LEN];
	int pending[2];
	if (eng_train_tokenizer(s, tpath, &tok, &tf, err) < 0)
		return -1;
	size_t tok_bytes = eng_ckpt_tok_bytes(&tf);
	int rc = eng_train_prompt(s, tok, err) < 0 ||
		eng_train_text_find(s, tpath, &tf, &out->text_pending, pending, err) < 0 ? -1 : 0;
	eng_tok_free(tok);
	eng_ckpt_tok_free(&tf);
	if (rc < 0)
		return -1;
	/* the run's thread count: oneDNN's scratchpads (precision bf16) are sized for it */
	kn_set_threads(s->threads);
	/* a token file yet to be made: its widest tokens, for the data's bytes */
	train = (eng_data_file){0, 4, 0};
	val = train;
	if (!pending[0] && eng_data_check(s->train_path, s->data_format, s->batch, s->seq_len,
		    s->cfg.vocab_size, &train, err) < 0)
		return -1;
	size_t ntok = train.ntok;
	if (s->hostfile[0]) { /* mpirun reads it as the job's owner, as this check runs */
		struct stat hst;
		int hfd = eng_fs_open_read(s->hostfile, "hostfile", &hst, err);
		if (hfd < 0)
			return -1;
		close(hfd);
	}
	if (s->ranks > 1 && !pending[0] && ntok < (size_t)s->ranks * s->batch * s->seq_len + 1)
		return eng_errf(err, "data file '%s': %zu tokens, fewer than one step of %d ranks "
				     "needs (%d x %d x %d + 1)", s->train_path, ntok, s->ranks, s->ranks,
			s->batch, s->seq_len);
	if (s->val_path[0] && !pending[1] && eng_data_check(s->val_path, s->data_format, s->batch,
		    s->seq_len, s->cfg.vocab_size, &val, err) < 0)
		return -1;
	if (s->save_dir[0] && check_save_dir(s->save_dir, err) < 0)
		return -1;
	if (s->resume && eng_ckpt_check_resume(s->init_from, s, pending[0] ? 0 : ntok,
		&out->resume_step, err) < 0)
		return -1;
	out->chunk_rows = s->chunk_rows > 0 ? s->chunk_rows
					    : eng_plan_chunk_rows(&s->cfg, s->batch, s->seq_len);
	if ((size_t)out->chunk_rows > (size_t)s->batch * s->seq_len)
		out->chunk_rows = s->batch * s->seq_len;
	out->ntok = ntok;
	/* the model's fixed part, and the data: both token files and the batch (inp, tgt) */
	fixed_of(s, &train, s->val_path[0] ? &val : NULL, tok_bytes, NULL, 1, out->fixed);
	out->snapshot = snapshot_of(s, 1); /* rematd's jobs always save */
	out->untracked = host_tracked(s) ? eng_train_untracked_now(&s->cfg, out->chunk_rows,
		s->threads) : 0;
	if (check_mem_limit(s, out, err) < 0)
		return -1;
	return check_budget(s, out, err);
}
