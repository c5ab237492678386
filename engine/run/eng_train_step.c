/* eng_train_step.c - one optimizer step (see eng_train.h's eng_trainer_step_as): the
 * schedule's learning rate, the micro-batches' gradients, the ranks' sum, clipping, AdamW,
 * the step's figures (times, peaks, the untracked term), and the retry after a refusal.
 * Not here: what policy fits (eng_train_fit.c), the model's passes (eng_model.c,
 * eng_cuda_step.c). */
#include "eng_train_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eng_cuda.h"
#include "eng_cuda_mem.h"
#include "eng_dp.h"
#include "eng_mem.h"
#include "eng_util.h"
#include "kn.h"

size_t eng_step_tokens(const eng_spec *s)
{
	return (size_t)s->grad_accum * s->batch * s->seq_len * s->ranks;
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
	double t0 = eng_now_ms();
	if (tr->gpu && eng_cuda_sum_ranks(tr->gpu, err) < 0)
		return dp_alone(tr, err);
	int rc = (!tr->gpu && eng_dp_sum_floats(grads, tr->model.ngrad, err) < 0) ||
		eng_dp_sum_doubles(loss_sum, 1, err) < 0 ? -1 : 0;
	*ar_ms = eng_now_ms() - t0;
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

/* The AdamW update of step tr->step + 1 at learning rate lr, the gradients scaled by `scale`
 * first (the clipping). On the GPU a failure is never a retry: the update may have begun. */
static int step_update(eng_trainer *tr, float *grads, float scale, float lr, eng_err *err)
{
	eng_model *m = &tr->model;
	const eng_spec *s = &tr->spec;
	int t = tr->step + 1;
	double bc1 = 1.0 - pow(s->beta1, t), bc2 = 1.0 - pow(s->beta2, t);
	if (tr->gpu) {
		/* the clipping scale is applied inside the update, as kn_scale would have */
		if (eng_cuda_adamw(tr->gpu, scale, lr, s->beta1, s->beta2, s->eps, s->weight_decay,
			    bc1, bc2, err) < 0) {
			err->kind = ENG_ERR_BAD; /* the update may have begun: never a retry */
			return -1;
		}
		return 0;
	}
	if (scale != 1.0f)
		kn_scale(grads, scale, m->ngrad);
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *pt = &m->tensors[i];
		if (pt->frozen) /* no gradient, no moments: never moves */
			continue;
		kn_adamw_update(m->params + pt->offset, m->m + pt->goff, m->v + pt->goff,
			grads + pt->goff, pt->numel, lr, s->beta1, s->beta2, s->eps,
			pt->decay ? s->weight_decay : 0.0f, bc1, bc2);
	}
	eng_model_params_changed(m); /* precision bf16: its bf16 copy, before the next step */
	return 0;
}

/* The step's memory into st once it is taken (its times filled in already): the
 * activations held, the peaks, the OOM retries and the process's or device's untracked
 * bytes (step_rss). */
static void step_memory(eng_trainer *tr, eng_step_stats *st)
{
	eng_mem_stats ms_now;
	eng_mem_get_counters(&ms_now); /* no /proc read on the step path */
	if (tr->gpu) {
		/* the step's memory is the device's */
		eng_cuda_mem_stats ds;
		eng_cuda_mem_get_stats(&ds);
		ms_now.current[ENG_MEM_ACTIVATIONS] = ds.current[ENG_MEM_ACTIVATIONS];
		ms_now.total_current = ds.total_current;
	}
	st->micro_batches = tr->spec.grad_accum;
	st->tokens_per_s = st->step_ms > 0 ? (double)eng_step_tokens(&tr->spec) /
		(st->step_ms / 1e3) : 0.0;
	st->activation_bytes = ms_now.current[ENG_MEM_ACTIVATIONS];
	if (tr->gpu)
		eng_cuda_mem_step_peaks(st->peak_cat, &st->peak_bytes, 0);
	else
		eng_mem_step_peaks(st->peak_cat, &st->peak_bytes, 0);
	st->oom_retries = tr->oom_retries;
	step_rss(tr, st);
}

/* One try at step tr->step + 1 under the policy laid out (laid 0: its lay-out failed, the
 * message in err, and this rank only tells the others). A failure changes nothing the next
 * try would see: weights, moments and the data position stay (the gradients are written
 * afresh by every step). */
static int step_try(eng_trainer *tr, int changed, int laid, eng_step_stats *st, eng_err *err)
{
	eng_model *m = &tr->model;
	const eng_spec *s = &tr->spec;
	double t0 = eng_now_ms(), sumsq, rec_ms = 0, sec_ms[ENG_MAX_LAYERS + 1][3], loss_sum = 0;
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
	float lr = eng_lr_at(s, tr->step);
	int t = tr->step + 1;
	if (step_update(tr, grads, scale, lr, err) < 0) {
		dp_alone(tr, err);
		return step_failed(tr, &at, err);
	}
	tr->step = t;
	double ms = eng_now_ms() - t0;
	if (!tr->gpu && !changed) {
		/* a sample of the costs, unless the step began with a policy change: its new
		 * buffers make its sections slower than the same policy's next steps */
		size_t saved[ENG_MAX_LAYERS + 1];
		for (int i = 0; i <= m->cfg.n_layer; i++)
			saved[i] = eng_model_saved_bytes(m, i);
		eng_costs_add(&tr->costs, &tr->policy, (const double (*)[3])sec_ms, saved, ms);
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
	step_memory(tr, st);
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
	double t_start = eng_now_ms();
	if (want && eng_trainer_check_policy(tr, want, err) < 0)
		return -1;
	tr->oom_why[0] = '\0';
	/* a step that lays out another policy first: its buffers are new (no cost sample) */
	eng_policy before = tr->policy;
	int was_laid = eng_train_laid_out(tr);
	trace_begin(tr);
	for (;;) {
		int laid = eng_train_lay_out(tr, &p, &tries, err) == 0, dp = eng_dp_size() > 1;
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
			st->step_ms = eng_now_ms() - t_start;
			st->tokens_per_s = (double)eng_step_tokens(&tr->spec) / (st->step_ms / 1e3);
			break;
		}
		/* again after a refusal of this rank's own, or after another rank's failure */
		int again = laid && (err->kind == ENG_ERR_PEER ||
			(err->kind == ENG_ERR_NOMEM && eng_train_on_refusal(tr, &p, &tries, err) == 0));
		if (step_again(again, err) < 0)
			break;
	}
	tr->model.trace = NULL;
	eng_mem_trace_thread(NULL, NULL);
	return rc;
}
