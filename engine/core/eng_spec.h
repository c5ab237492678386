/* eng_spec.h - the job spec (design.md §5): parsing, defaults and validation.
 *
 * A job spec is a JSON object. Every field but data.train and the model's shape has a
 * default; unknown keys anywhere are refused with an error that names them with their path
 * ("unknown key 'optim.betas'"); every bad value gets a message naming the field and the
 * accepted range. The spec only holds text for the remat policy; the engine checks the
 * selectors once the model's layer count is known (init_from may decide it).
 */
#ifndef ENG_SPEC_H
#define ENG_SPEC_H

#include <limits.h>
#include <stdint.h>

#include "eng_config.h"
#include "eng_err.h"
#include "eng_policy.h"
#include "proto.h"

#define ENG_PATH_LEN 4096      /* longest path kept from a spec */
#define ENG_NAME_LEN 64        /* longest job name */
#define ENG_MAX_ASSIGN 64      /* remat.sections entries one spec may give */
#define ENG_MAX_FREEZE 32      /* train.freeze entries one spec may give */
#define ENG_MAX_PROMPT 1024    /* sample.prompt tokens */
#define ENG_MAX_ACCUM 65536    /* grad_accum */
#define ENG_MAX_RANKS 4096     /* parallel.ranks */
#define ENG_BUCKET_MB 25       /* parallel.bucket_mb's default: DDP's bucket_cap_mb */
#define ENG_MAX_BUCKET_MB 65536
#define ENG_MCA_LEN 1024       /* parallel.mca's pairs, joined */
#define ENG_MCA_VALUE 256      /* longest parallel.mca value */
#define ENG_MAX_PRIORITY PROTO_PRIORITY_MAX /* "priority": rematd's pool weighs jobs by it */
#define ENG_MAX_TEMPERATURE 100.0 /* sample.temperature, remat-train --sample --temperature */

/* data.format: a token file (llm.c's), raw bytes (a token a byte), or text for the job's
 * tokenizer: a text file (one document) or JSON Lines (one a line), tokenized once into a
 * token file in the cache (eng_tokcache.h) that the run then reads as llmc */
typedef enum { ENG_DATA_LLMC, ENG_DATA_BYTES, ENG_DATA_TEXT, ENG_DATA_JSONL } eng_data_format;
#define ENG_DATA_IS_TEXT(f) ((f) == ENG_DATA_TEXT || (f) == ENG_DATA_JSONL)
extern const char *const eng_data_format_names[]; /* "llmc", "bytes", "text", "jsonl", NULL */
#define ENG_FIELD_LEN 64       /* longest data.field */
#define ENG_PROMPT_TEXT 4096   /* longest sample.prompt text (bytes) */
typedef enum { ENG_SCHED_COSINE, ENG_SCHED_CONSTANT } eng_sched_kind;
typedef enum { ENG_DEVICE_CPU, ENG_DEVICE_CUDA } eng_device;
/* "precision": the matmuls' operands. The CPU's bf16 takes oneDNN's bf16 matmuls (kn.h);
 * a GPU runs bf16 unless told fp32 (eng_cuda.h). */
typedef enum { ENG_PREC_FP32, ENG_PREC_BF16 } eng_precision;
extern const char *const eng_precision_names[]; /* "fp32", "bf16", NULL */

typedef struct eng_assign {
	char selector[ENG_SELECTOR_LEN]; /* as written: "h.0-5", "trunk", "head" */
	char mode[16];                   /* as written: "full" */
} eng_assign;

#define ENG_MAX_CHANGES 32 /* job-sets a run's history keeps, the oldest dropped first */

/* One job-set as given: the step it applies from and each value it gave, by proto_hparam
 * (eng_hparam.h's table says each one's type; a schedule's kind is 0 cosine, 1 constant). */
typedef struct eng_live_change {
	int step;
	unsigned given;                   /* bit h: the set gave proto_hparam h */
	double value[PROTO_HP_COUNT];
} eng_live_change;

/* A run's history of job-sets, which a checkpoint keeps for a resume (trainer_state.json's
 * "live"): which fields they changed (ENG_HP_*; the values are the spec's own fields but
 * the learning rate's), a learning rate set from a step on, and the sets in order. */
typedef struct eng_live {
	unsigned set;
	int lr_from;                      /* ENG_HP_LR: from this 0-based step index on, */
	eng_sched_kind lr_kind;           /* a schedule of its own: warm-up, then cosine */
	float lr_new;                     /* from lr_new to lr_new * lr_min_frac at the end, */
	int lr_warmup;                    /* or constant lr_new */
	float lr_min_frac;
	int n_changes;                    /* the last ENG_MAX_CHANGES sets, oldest first */
	eng_live_change changes[ENG_MAX_CHANGES];
} eng_live;

typedef struct eng_spec {
	char name[ENG_NAME_LEN];          /* "name", default "job" */

	/* model */
	eng_config cfg;                   /* the shape: from preset, then explicit fields
					   * override; all zero when init_from gives it */
	int has_shape;                    /* 1 when preset or fields gave a complete shape */
	char init_from[ENG_PATH_LEN];     /* "" or a checkpoint directory (config.json +
					   * model.safetensors), a save directory (its newest
					   * valid checkpoint), or an llm.c model file */
	int resume;                       /* model.resume, default 0 */

	/* data */
	char train_path[ENG_PATH_LEN];    /* data.train, required */
	char val_path[ENG_PATH_LEN];      /* data.val, "" when absent */
	char tokenizer[ENG_PATH_LEN];     /* data.tokenizer: a tokenizer.json or a directory
					   * holding one (or GPT-2's vocab.json + merges.txt);
					   * "" for init_from's directory when it holds one */
	eng_data_format data_format;      /* data.format, default by train's name: .txt text,
					   * .jsonl jsonl, else llmc */
	char data_field[ENG_FIELD_LEN];   /* data.field: jsonl's key of the text, "text" */
	char data_cache[ENG_PATH_LEN];    /* data.cache: where text is tokenized to, ""
					   * for save.dir's tokens/ (eng_tokcache.h) */
	int shuffle;                      /* data.shuffle: llm.c's shuffled order, default 0
					   * (file order) */
	uint32_t shuffle_seed;            /* data.shuffle_seed, default 42 (llm.c's, rank 0) */
	int has_shuffle_seed;             /* 1 when the spec gave it (resume takes the
					   * checkpoint's otherwise) */

	int batch;                        /* B, default 4 */
	int seq_len;                      /* T, default min(256, n_positions) (0 until the
					   * shape is known: see eng_spec_finish) */
	int steps;                        /* the step the run ends at, default 1000 */
	int grad_accum;                   /* micro-batches of `batch` rows per optimizer step,
					   * default 1 */
	int has_grad_accum;               /* 1 when the spec gave grad_accum (resume takes the
					   * checkpoint's otherwise) */
	uint64_t seed;                    /* default 1337 */

	/* optim */
	float lr;                         /* default 3e-4, > 0 */
	float beta1, beta2;               /* defaults 0.9, 0.95; in [0, 1) */
	float eps;                        /* default 1e-8, > 0 */
	float weight_decay;               /* default 0.1, >= 0 */
	float grad_clip;                  /* default 1.0; 0 disables clipping */

	/* schedule: an object, or the string "cosine"/"constant" for the kind alone */
	eng_sched_kind sched;             /* default cosine */
	int warmup;                       /* default 0, 0 <= warmup <= steps */
	float min_lr_frac;                /* default 0.1, in [0, 1] */

	/* remat */
	char remat_default[16];           /* default "off" */
	int n_assign;                     /* remat.sections in the order written */
	eng_assign assign[ENG_MAX_ASSIGN];
	int n_alias;                      /* remat.aliases in the order written */
	eng_alias alias[ENG_MAX_ALIASES];
	int chunk_rows;                   /* remat.chunk_rows: head chunk, 0 = engine's choice */
	/* train.freeze: what gets no gradient, in the order written (selectors, "embed",
	 * tensor names or globs), resolved into cfg.frozen by eng_spec_finish */
	int n_freeze;
	char freeze[ENG_MAX_FREEZE][ENG_SELECTOR_LEN];
	/* lora: adapters of rank lora_r (0: none) and alpha on the weights lora_target names
	 * (PEFT's target_modules), resolved by eng_spec_finish into cfg.lora_* */
	int lora_r;
	double lora_alpha;
	int n_lora_target;
	char lora_target[ENG_LORA_UNITS][32];
	/* model.quantize (eng_quant.h): the blocks' frozen linear weights in 4 bits; quant 0
	 * none (an adapter's own, from init_from, then stands). Resolved by eng_spec_finish
	 * into cfg.quant* */
	int quant, quant_dq, quant_block, quant_bf16;
	int remat_profile;                /* remat.profile: probe every section's modes at the
					   * start (remat-profile) */
	size_t mem_limit;                 /* memory.limit: bytes the tracking allocator may
					   * hold at most, 0 none */
	size_t remat_budget;              /* remat.budget: the memory controller keeps the
					   * run under it (bytes), 0 off */
	int remat_budget_cgroup;          /* remat.budget "cgroup": the worker's memory.max */

	/* eval: the validation loss over eval_batches batches of data.val (0: all that fit)
	 * every eval_every steps (0: only at the end) and at the end */
	int eval_every;
	int eval_batches;

	/* sample: sample_tokens new tokens from the prompt every sample_every steps (0: only
	 * at the end), when sample_on; temperature 0 is greedy */
	int sample_on;
	int sample_every;                 /* sample.every, default 0 */
	int sample_tokens;                /* sample.tokens, default 64 */
	float sample_temperature;         /* sample.temperature, default 1 (llm.c's) */
	int sample_top_k;                 /* sample.top_k, default 0: all */
	uint32_t sample_seed;             /* sample.seed, default 1337 */
	int sample_n;                     /* the prompt: bytes of a string (format bytes) or */
	uint32_t sample_prompt[ENG_MAX_PROMPT]; /* token ids (llmc), checked against vocab */
	char sample_text[ENG_PROMPT_TEXT];/* or text for the job's tokenizer (sample_n 0
					   * until the trainer encodes it) */

	/* save */
	char save_dir[ENG_PATH_LEN];      /* "" = no saving */
	int save_every;                   /* default 0 = only at the end */
	int save_keep;                    /* default 3, >= 1 */

	int priority;                     /* "priority", 1..ENG_MAX_PRIORITY, default 1: a job's
					   * weight in rematd's memory pool (srv_pool.h) */
	int threads;                      /* default: online CPUs (data parallel: shared by
					   * the ranks of a host) */
	int has_threads;                  /* 1 when the spec gave it */
	eng_device device;                /* default cpu */
	eng_precision precision;          /* default fp32 (device cuda: bf16 unless given) */
	int has_precision;                /* 1 when the spec gave it */

	/* parallel: data parallel over MPI, every rank the whole model and its own
	 * micro-batches (eng_dp.h) */
	int ranks;                        /* parallel.ranks, default 1 */
	int has_ranks;                    /* 1 when the spec gave it */
	int shard_optimizer;              /* parallel.shard "optimizer": each rank holds the
					   * moments of its part (eng_config.opt_shards) */
	float bucket_mb;                  /* parallel.bucket_mb: MiB of gradient summed at a
					   * time during the backward; 0 all after it */
	char hosts[1024];                 /* parallel.hosts joined by ',' for mpirun --host,
					   * "" none */
	char hostfile[ENG_PATH_LEN];      /* parallel.hostfile, for mpirun --hostfile */
	char mca[ENG_MCA_LEN];            /* parallel.mca: "key=value" pairs joined by ';'
					   * for rematd's mpirun --mca, "" none (the keys
					   * eng_mca_allowed names, values checked) */
	char launcher[8];                 /* parallel.launcher: "ssh", "slurm", "" mpirun's
					   * own choice */

	/* what job-set has changed in this run (never in a spec file) */
	eng_live live;
} eng_spec;

/* What job-set changed (eng_live.set). */
enum {
	ENG_HP_LR = 1u << 0,
	ENG_HP_GRAD_CLIP = 1u << 1,
	ENG_HP_WEIGHT_DECAY = 1u << 2,
	ENG_HP_EVAL_EVERY = 1u << 3,
	ENG_HP_SAVE_EVERY = 1u << 4,
};

/* Parses JSON text into *spec (zeroed first, then defaults). Returns 0, or -1 with a message
 * for the first problem found. */
int eng_spec_parse(eng_spec *spec, const char *json_text, eng_err *err);

/* A spec file in two halves, for a worker that reads its spec before it gives up root
 * and parses it after: the file's bytes (malloc'd, *len of them; a regular file of at
 * most a few MiB), then the parse of len bytes (as eng_spec_parse), path naming them in
 * messages. */
char *eng_spec_read(const char *path, size_t *len, eng_err *err);
int eng_spec_parse_buf(eng_spec *spec, const char *buf, size_t len, const char *path,
	eng_err *err);

/* Whether a backend takes policy p: `offload` needs device cuda. 0, or -1 naming the first
 * block that has it. */
int eng_policy_check_device(eng_device device, const eng_policy *p, eng_err *err);

/* Called once the model shape is known (from the spec or from init_from's config.json):
 * sets it into spec->cfg, fills defaults that depend on it (seq_len) and checks what
 * depends on it: seq_len <= n_positions, data format versus vocab (bytes needs vocab >=
 * 256), aliases and selectors valid for n_layer. */
int eng_spec_finish(eng_spec *spec, const eng_config *cfg, eng_err *err);

/* What is allowed but will not do what the spec hopes, as one line into buf (len bytes):
 * "threads" above the CPUs this process may run on (sched_getaffinity's count, which a
 * cpuset or taskset lowers below the machine's), so that its threads share them and steps
 * are slower. 1 when there is a warning, 0 (buf "") when none. remat-train --check returns
 * it in "warnings" (rematd passes them on in job-start's reply), a run prints it. */
int eng_spec_warning(const eng_spec *spec, char *buf, size_t len);

#endif
