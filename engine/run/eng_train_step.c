/* eng_train_step.c - one optimizer step (see eng_train.h's eng_trainer_step_as): the
 * schedule's learning rate, the micro-batches' gradients, the ranks' sum, clipping, AdamW,
 * the step's figures (times, peaks, the untracked term), and the retry after a refusal.
 * The model's maths and memory go through the backend (eng_backend.h), never asked which.
 * Not here: what policy fits (eng_train_fit.c), the model's passes (eng_model.c,
 * eng_cuda_step.c). */
#include "eng_train_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eng_dp.h"
#include "eng_util.h"

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
	const eng_live *l = &s->live;
	if ((l->set & ENG_HP_LR) && i >= l->lr_from)
		return lr_formula(l->lr_new, l->lr_kind, l->lr_warmup, l->lr_min_frac,
			s->steps - l->lr_from, i - l->lr_from);
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
 * ranks'), in the backend (micro_step); the sum of their losses in *loss_sum, their section
 * times (where the backend measures them) summed into sec_ms, their recomputation into
 * *rec_ms. */
static int step_grads(eng_trainer *tr, double *loss_sum, double sec_ms[][3], double *rec_ms,
	eng_err *err)
{
	eng_backend *be = tr->be;
	int K = tr->spec.grad_accum, L = tr->model.cfg.n_layer;
	int secs = eng_backend_has_sections(be);
	*loss_sum = 0.0;
	*rec_ms = 0.0;
	for (int k = 0; k < K; k++) {
		float l;
		int rc;
		ENG_TIMED(tr->model.timing, ENG_TIMING_DATA, 0, 0,
			rc = eng_data_next(&tr->train, tr->inp, tr->tgt, err));
		if (rc < 0 || be->ops->micro_step(be, tr->inp, tr->tgt, k, &l, err) < 0)
			return -1;
		*rec_ms += be->ops->recompute_ms(be);
		const double (*sec)[3] = secs ? be->ops->section_ms(be) : NULL;
		for (int i = 0; sec && i <= L; i++)
			for (int j = 0; j < 3; j++)
				sec_ms[i][j] = (k ? sec_ms[i][j] : 0.0) + sec[i][j];
		*loss_sum += l;
	}
	return 0;
}

/* A rank's failure once the ranks' sum has begun (a device error in the sum, the norm or
 * the update; a backend's sum_fails_alone) is its own: the others went on, their sum done
 * or their update taken, and cannot be told. Data parallel, the job ends here, every rank
 * with it (MPI_Abort: mpirun reports this rank); alone, the step fails as any other. -1. */
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
 * gradients (the backend's sum_ranks) and the losses, in *ar_ms milliseconds. A
 * part that failed anywhere fails the try everywhere: this rank's own error, or
 * ENG_ERR_PEER naming the rank that failed. */
static int step_sum(eng_trainer *tr, int lrc, double *loss_sum, double *ar_ms, eng_err *err)
{
	char msg[ENG_ERR_LEN];
	*ar_ms = 0;
	tr->be->exposed_ms = tr->be->hidden_ms = 0;
	if (eng_dp_size() == 1)
		return lrc;
	/* this rank's part first, whether its micro-batches worked or not: the backward may
	 * have begun its sum, which every rank's needs */
	if (tr->be->ops->reduce_part)
		tr->be->ops->reduce_part(tr->be);
	int kind = err->kind;
	snprintf(msg, sizeof msg, "%s", lrc < 0 ? err->msg : "");
	int first = eng_dp_first_failure(lrc < 0, &kind, msg, sizeof msg);
	if (first >= 0 && lrc == 0) {
		eng_errf(err, "rank %d: %.440s", first, msg);
		err->kind = ENG_ERR_PEER;
	}
	if (first >= 0)
		return -1;
	double t0 = eng_now_ms(), p0 = eng_timing_t0(tr->model.timing);
	if (tr->be->ops->sum_ranks(tr->be, err) < 0)
		return tr->be->ops->sum_fails_alone ? dp_alone(tr, err) : -1;
	int rc = eng_dp_sum_doubles(loss_sum, 1, err) < 0 ? -1 : 0;
	*ar_ms = tr->be->exposed_ms + eng_now_ms() - t0;
	eng_timing_add(tr->model.timing, ENG_TIMING_ALLREDUCE, p0, 0, 4.0 * tr->model.ngrad);
	return rc;
}

/* After a step, the memory beyond the tracked peak (the backend's step_untracked: device
 * cpu, the process's resident peak in the step's window beyond it, that peak into st too;
 * device cuda, the device's used memory beyond the allocator's tensors at the step's end):
 * the run's untracked term from now on (the most of the last UNTRACKED_STEPS steps', so
 * that one quiet step does not make room that the next takes back). Nothing when unknown. */
static void step_rss(eng_trainer *tr, eng_step_stats *st)
{
	size_t most = 0;
	if (tr->be->ops->step_untracked(tr->be, st->peak_bytes, &st->rss_peak,
		    &st->untracked_bytes) < 0)
		return;
	tr->untracked_seen[tr->step % UNTRACKED_STEPS] = st->untracked_bytes;
	for (int i = 0; i < UNTRACKED_STEPS; i++)
		if (tr->untracked_seen[i] > most)
			most = tr->untracked_seen[i];
	tr->untracked = most;
}

/* The AdamW update of step tr->step + 1 at learning rate lr, the gradients scaled by `scale`
 * first (the clipping). A failure is never a retry: the update may have begun. */
static int step_update(eng_trainer *tr, float scale, float lr, eng_err *err)
{
	const eng_spec *s = &tr->spec;
	int t = tr->step + 1;
	eng_adamw_args a = {scale, lr, s->beta1, s->beta2, s->eps, s->weight_decay,
		1.0 - pow(s->beta1, t), 1.0 - pow(s->beta2, t)};
	if (tr->be->ops->adamw(tr->be, &a, err) < 0) {
		err->kind = ENG_ERR_BAD; /* the update may have begun: never a retry */
		return -1;
	}
	return 0;
}

/* The step's memory into st once it is taken (its times filled in already): the
 * activations held, the peaks, the OOM retries and the process's or device's untracked
 * bytes (step_rss). */
static void step_memory(eng_trainer *tr, eng_step_stats *st)
{
	size_t cur[ENG_MEM_NCAT], total;
	tr->be->ops->mem_now(tr->be, cur, &total); /* the backend's allocator: no /proc read */
	st->micro_batches = tr->spec.grad_accum;
	st->tokens_per_s = st->step_ms > 0 ? (double)eng_step_tokens(&tr->spec) /
		(st->step_ms / 1e3) : 0.0;
	st->activation_bytes = cur[ENG_MEM_ACTIVATIONS];
	tr->be->ops->step_peaks(tr->be, st->peak_cat, &st->peak_bytes);
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
	eng_backend *be = tr->be;
	const eng_spec *s = &tr->spec;
	double t0 = eng_now_ms(), sumsq, rec_ms = 0, sec_ms[ENG_MAX_LAYERS + 1][3], loss_sum = 0;
	double ar_ms;
	float scale = 1.0f;
	int secs = eng_backend_has_sections(be);
	eng_data_pos at = tr->train.pos;
	/* the mean over every micro-batch of every rank: the sum, scaled once */
	int n = s->grad_accum * eng_dp_size();
	eng_timing_step_begin(m->timing);
	int lrc = laid ? step_grads(tr, &loss_sum, sec_ms, &rec_ms, err) : -1;
	if (step_sum(tr, lrc, &loss_sum, &ar_ms, err) < 0)
		return step_failed(tr, &at, err);
	float loss = (float)(loss_sum / n);
	if ((n > 1 && be->ops->scale_grads(be, 1.0f / (float)n, err) < 0) ||
		be->ops->grad_sumsq(be, &sumsq, err) < 0) {
		dp_alone(tr, err);
		return step_failed(tr, &at, err);
	}
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
	be->gather_ms = 0;
	if (step_update(tr, scale, lr, err) < 0) {
		dp_alone(tr, err);
		return step_failed(tr, &at, err);
	}
	tr->step = t;
	double ms = eng_now_ms() - t0;
	if (m->timing) {
		char pol[256];
		eng_policy_format(&tr->policy, pol, sizeof pol);
		eng_timing_step_end(m->timing, ms, changed, pol);
	}
	if (secs && !changed) {
		/* a sample of the costs, unless the step began with a policy change: its new
		 * buffers make its sections slower than the same policy's next steps */
		size_t saved[ENG_MAX_LAYERS + 1];
		for (int i = 0; i <= m->cfg.n_layer; i++)
			saved[i] = be->ops->saved_bytes(be, i);
		eng_costs_add(&tr->costs, &tr->policy, (const double (*)[3])sec_ms, saved, ms);
	}
	memset(st, 0, sizeof *st);
	st->step = t;
	st->loss = loss;
	st->lr = lr;
	st->grad_norm = (float)norm;
	st->step_ms = ms;
	st->recompute_ms = rec_ms;
	st->allreduce_ms = ar_ms + be->gather_ms; /* a sharded optimizer's all-gather too */
	st->allreduce_hidden_ms = be->hidden_ms;
	for (int l = 0; secs && l < m->cfg.n_layer; l++)
		st->blocks_forward_ms += sec_ms[l][ENG_SEC_FWD];
	step_memory(tr, st);
	tr->last_ms = ms;
	tr->last_policy = tr->policy;
	return 0;
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
	int was_laid = eng_train_laid_out(tr) && !tr->relaid;
	tr->relaid = 0;
	/* the step's window on the peaks and its memory timeline begin */
	tr->be->ops->step_begin(tr->be, &tr->trace, tr->step + 1);
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
	eng_backend_step_end(tr->be);
	return rc;
}
