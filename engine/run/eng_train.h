/* eng_train.h - a training run: spec, model, data, optimizer, schedule and policy.
 *
 * The trainer owns everything a run needs and takes one step at a time. Policy changes are
 * made between steps (eng_trainer_set_policy); the step counter counts completed steps, and
 * a change made when `step` is k applies to step k+1. Used by remat-train in the foreground
 * and, later, by its control thread.
 */
#ifndef ENG_TRAIN_H
#define ENG_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "eng_backend.h"
#include "eng_ckpt.h"
#include "eng_data.h"
#include "eng_err.h"
#include "eng_costs.h"
#include "eng_memtrace.h"
#include "eng_model.h"
#include "eng_plan.h"
#include "eng_policy.h"
#include "eng_spec.h"

typedef struct eng_step_stats {
	int step;                /* 1-based number of the step just taken */
	float loss;              /* mean cross-entropy before the update, over all its
				  * micro-batches */
	float lr;                /* learning rate used */
	float grad_norm;         /* global gradient norm before clipping */
	double step_ms;          /* the policy change it starts with, forward, backward,
				  * optimizer */
	double recompute_ms;     /* of which recomputation */
	double blocks_forward_ms; /* of which the blocks' forward (device cpu; 0 on a GPU):
				   * what `full` reruns, so its recompute_ms is to match it */
	double allreduce_ms;     /* of which summing the ranks' gradients (data parallel):
				  * what the step waited for, after the backward */
	double allreduce_hidden_ms; /* and the sum's time behind the backward (not in step_ms) */
	double tokens_per_s;     /* grad_accum*B*T / step time */
	int micro_batches;       /* grad_accum: the micro-batches the step took */
	size_t activation_bytes; /* saved for backward during the step */
	size_t peak_bytes;       /* the most all categories held together during the step,
				  * its policy change included */
	size_t peak_cat[ENG_MEM_NCAT]; /* the most each category held during it */
	int oom_retries;         /* policies given up for memory (an allocation refused, or a
				  * predicted peak over memory.limit) and replaced by a smaller
				  * one, all told (PyTorch's num_alloc_retries) */
	size_t rss_peak;         /* device cpu: the most the process held resident during the
				  * step (its window on VmHWM); 0 when unknown */
	size_t untracked_bytes;  /* of which beyond peak_bytes: binary, libraries, stacks,
				  * BLAS buffers, allocator slack; device cuda: the device's
				  * used memory (cudaMemGetInfo) beyond the allocator's tensors
				  * at the step's end */
} eng_step_stats;

#define UNTRACKED_STEPS 8 /* steps whose untracked bytes the run's term is the most of */

typedef struct eng_trainer {
	eng_spec spec;
	eng_model model;         /* the model (device cpu); with device cuda only the tensor
				  * table and the host copies of weights and moments that
				  * checkpoints read and write (no activations, no gradients) */
	eng_backend *be;         /* what runs the model (eng_backend.h): the cpu backend over
				  * `model`, or with device cuda the GPU's; every call about
				  * the model's maths and memory goes through it */
	eng_data train, val;     /* val closed when the spec has no val file */
	eng_aliases aliases;
	eng_policy policy;       /* what the activations are laid out for, either device */
	eng_costs costs;         /* each section's measured time and bytes per mode (cpu) */
	int oom_retries;         /* policies given up for memory (eng_step_stats) */
	size_t mem_cap;          /* the least total an allocation was refused at, 0 none (or
				  * that memory came back): no policy predicted over it is tried
				  * but the least */
	char oom_why[ENG_ERR_LEN]; /* the last step's last refusal, "" when it had none */
	size_t untracked;        /* the process's resident bytes beyond the tracked ones at a
				  * step's peak (measured; before the first step, at the start),
				  * or on device cuda the device's used memory beyond its tensors
				  * (measured by steps): a budget's and a plan's untracked term */
	size_t untracked_seen[UNTRACKED_STEPS]; /* the last steps' (by step % UNTRACKED_STEPS) */
	double last_ms;          /* the last step's time, 0 before the first */
	eng_policy last_policy;  /* its policy (`policy`, unless a paused run laid out
				  * another since: eng_trainer_lay_out_now) */
	int relaid;              /* the layout is new since the last step: the next one
				  * begins as with a change (no cost sample) */
	eng_memtrace trace;      /* the memory timeline of the step taken last (device cpu) */
	int step;                /* completed steps */
	uint32_t *inp, *tgt;     /* (B,T) current batch (ENG_MEM_DATA) */
	char lora_base[ENG_PATH_LEN]; /* LoRA: the base its checkpoints name, "" when they
				  * hold it (see eng_ckpt_snap.lora_base) */
	char lora_pin[192];      /* and what they record of it (eng_peft_base_pin) */
	char tokenizer[ENG_PATH_LEN]; /* the run's tokenizer (data.tokenizer, or init_from's
				  * when it holds one), "" none */
	eng_ckpt_tok tok_files;  /* its files, carried by every checkpoint */
	struct eng_tok *tok;     /* it loaded (samples come out as text), NULL none */
	int has_save_lock;       /* 1 while save_lock is held */
	int save_lock;           /* the save directory's lock (eng_fs_lock) */
} eng_trainer;

#define ENG_SAVE_LOCK ".lock"  /* in a save directory: held by the job that writes there */

/* What eng_trainer_check learns of a spec. */
typedef struct eng_check {
	eng_policy policy;       /* the policy the run starts with */
	eng_aliases aliases;     /* the spec's aliases */
	int chunk_rows;          /* the head's chunk (the planner's figures need it) */
	size_t ntok;             /* tokens of the training data */
	int resume_step;         /* with model.resume: the step the checkpoint is at */
	size_t fixed[ENG_MEM_NCAT]; /* device cpu: what the run will hold whatever its policy
				     * (params, grads, optimizer, workspace, data) */
	size_t snapshot;         /* a save's snapshot (held when memory has room for one),
				  * whether or not the spec names save.dir: rematd gives every
				  * job a save directory */
	size_t untracked;        /* device cpu: the process's resident bytes beyond the tracked
				  * ones, measured by the check itself once its kernels have their
				  * buffers (the run's term before its first step) */
	uint64_t text_pending;   /* text data: bytes of corpus not in the token cache yet,
				  * which the run tokenizes first (ntok is 0 until then when the
				  * training corpus is one of them) */
} eng_check;

/* Everything eng_trainer_init would refuse, found without allocating the model or reading
 * the data's tokens: the device, init_from (resolved into s->init_from, verified; its
 * weights' headers, dtypes, shapes and offsets and each shard, eng_import_check), the
 * shape (into s->cfg) and the spec's parts that depend on it, aliases and policy, the data
 * files (regular, their headers, a batch at least), the save directory (writable, free,
 * nothing the start would refuse to clean), resume's fit, and memory.limit against the
 * least any policy needs (the planner's figure the run refuses with). Messages are the
 * ones the run itself would give. Changes nothing on disk. */
int eng_trainer_check(eng_spec *s, eng_check *out, eng_err *err);

/* Text data being made ready (data.format text or jsonl, eng_tokcache.h), as it goes: for
 * each corpus ("train", then "val") its hashing (looking it up in the cache), bytes
 * tokenized of the total (after each block), and its entry once found or made. */
typedef enum { ENG_TEXT_HASHING, ENG_TEXT_TOKENIZING, ENG_TEXT_DONE } eng_text_phase;
typedef struct eng_text_note {
	const char *which;                /* "train" or "val" */
	const char *corpus;               /* its path, as the spec gives it */
	eng_text_phase phase;
	uint64_t done, total;             /* bytes of it tokenized (TOKENIZING) */
	const struct eng_tokcache_entry *entry; /* DONE: the token file, hit or made */
} eng_text_note;
typedef struct eng_train_hooks {
	void (*text)(void *ud, const eng_text_note *n); /* may be NULL */
	void *ud;
} eng_train_hooks;

/* Builds the run: shape from the spec or init_from's config.json, weights from init_from or
 * the seed, text data tokenized (or found in the cache; data parallel: by rank 0, the
 * others waiting for it), data opened and checked, the spec's remat policy applied. */
int eng_trainer_init(eng_trainer *tr, const eng_spec *spec, eng_err *err);
/* The same, telling hooks (may be NULL) how the text data's preparation goes. */
int eng_trainer_init_hooks(eng_trainer *tr, const eng_spec *spec, const eng_train_hooks *h,
	eng_err *err);
void eng_trainer_free(eng_trainer *tr); /* safe on a zeroed or failed trainer */

/* Tokens an optimizer step trains on: grad_accum micro-batches of B x T on every rank
 * (spec->ranks: mpirun's, once the run is under way). */
size_t eng_step_tokens(const eng_spec *spec);

/* Learning rate of the step with 0-based index s (warm-up, then cosine or constant). */
float eng_lr_at(const eng_spec *spec, int s);

/* Takes step tr->step + 1 under policy want (NULL: the current one), laid out at the
 * step's start. Out of memory is a retry, not a death: an allocation refused (by the
 * system, memory.limit, the device, or the test hook eng_mem_fail_nth), while the policy is
 * laid out or inside the step, abandons the try with nothing changed (weights, moments,
 * data cursor), gives up that policy for the fastest one predicted to fit below what was
 * refused (on the measured costs), and tries again; each policy given up is an OOM retry
 * (oom_retries). A policy predicted over memory.limit or over a refusal's total is given
 * up without a try. Fails, with the least memory the run needs in the message and kind
 * ENG_ERR_NOMEM, only after FIT_TRIES refusals in the step (the policy of the least memory
 * among them); and (weights untouched) when the loss or gradient norm is not finite. */
int eng_trainer_step_as(eng_trainer *tr, const eng_policy *want, eng_step_stats *st,
	eng_err *err);

/* Parses "MODE" or "SEL=MODE;..." with the job's aliases on top of the current policy. */
int eng_trainer_parse_policy(const eng_trainer *tr, const char *text, eng_policy *out,
	eng_err *err);
/* job-set (proto's live hyperparameters, engine/core/eng_hparam.h's fields), from the next
 * step on: lr, schedule, warmup and min_lr_frac start a schedule of their own (what is not
 * given: the rate the next step would have used, constant, no warm-up, the spec's floor);
 * the rest replace the spec's values. Recorded in the spec, whose log of changes
 * checkpoints write (trainer_state.json "live") and a resume takes back. 0; or -1 with
 * nothing changed when eng_trainer_set_check refuses the set. */
int eng_trainer_set(eng_trainer *tr, const json_t *set, eng_err *err);
/* Whether set is a job-set the run takes: a non-empty object of live hyperparameters, each
 * a value it takes, warmup and min_lr_frac only with schedule, eval.every only with a val
 * file and save.every only with save.dir. Changes nothing (the control thread asks). */
int eng_trainer_set_check(const eng_trainer *tr, const json_t *set, eng_err *err);

/* Replaces the policy from the next step on. */
/* What the run holds whatever its policy (params, grads, optimizer, workspace, data):
 * counted from its shape and data, as --check counts it, never from the live counters.
 * The total; by category into out when not NULL. A save's snapshot is not in it: it is
 * optional (eng_trainer_snapshot_bytes). */
size_t eng_trainer_fixed_bytes(const eng_trainer *tr, size_t out[ENG_MEM_NCAT]);
/* The planner's peak of policy p for this run: eng_trainer_fixed_bytes and the plan's
 * activations (as the run's own retries bound a policy). */
size_t eng_trainer_predicted_peak(const eng_trainer *tr, const eng_policy *p);
/* The bytes a save's snapshot holds while it is written (rank 0 with save.dir; else 0). */
size_t eng_trainer_snapshot_bytes(const eng_trainer *tr);
/* The run's untracked term (eng_trainer.untracked). */
size_t eng_trainer_untracked(const eng_trainer *tr);
/* (device cuda: measured on the device, where those live; a save's snapshot is host
 * memory there) */

int eng_trainer_set_policy(eng_trainer *tr, const eng_policy *p, eng_err *err);
/* Between steps (a paused run giving memory back): policy p laid out now, as the next step
 * would at its start; when memory will not have it, the fastest that fits instead (then in
 * *p). The next step runs under it and is no cost sample. 0 (also when no step has laid a
 * policy out yet: nothing is held to give back), or -1 with err. */
int eng_trainer_lay_out_now(eng_trainer *tr, eng_policy *p, eng_err *err);
/* The planner's question "the fastest policy under a bound" for this run, into *q: its
 * shape, `fixed` bytes held whatever the policy, the bound (0: none), and the step's costs
 * (into *pc, which q points to) measured per section where the cost table has them, the
 * analytic FLOPs at the last step's rate else; no optional snapshot (the caller adds
 * one). Returns that rate (ms per FLOP; 0 before the first step). For eng_plan_search and
 * the controller (eng_auto_decide). */
double eng_trainer_query(const eng_trainer *tr, size_t fixed, size_t bound, eng_plan_costs *pc,
	eng_plan_query *q);

/* Whether the run's backend takes policy p: `offload` needs device cuda. */
int eng_trainer_check_policy(const eng_trainer *tr, const eng_policy *p, eng_err *err);

/* Measured bytes of saved activations of block i (i < L) or the head (i == L): host memory
 * on the CPU, device memory on the GPU. */
size_t eng_trainer_saved_bytes(const eng_trainer *tr, int i);

/* Brings tr->model's weights and moments up to date before a checkpoint reads them (device
 * cuda: a download from the GPU; cpu: nothing to do). */
int eng_trainer_sync_host(eng_trainer *tr, eng_err *err);

/* "cpu: OpenBLAS ..." or "cuda: NVIDIA H200, bf16 ...": what runs the model. */
const char *eng_trainer_backend(const eng_trainer *tr);
/* "fp32" or "bf16": the matmuls' operands (job-status' "precision"). */
const char *eng_trainer_precision(const eng_trainer *tr);
/* How the ranks' gradients are summed (job-status' "allreduce"), as the backend says: MPI
 * in host memory on the CPU; on the GPU NCCL or host memory. NULL with one rank. */
const char *eng_trainer_allreduce(const eng_trainer *tr);

/* Mean loss over `batches` batches of the val file from its start (0 batches: all that fit
 * once); NAN when there is no val file. */
float eng_trainer_val_loss(eng_trainer *tr, int batches);

#endif
