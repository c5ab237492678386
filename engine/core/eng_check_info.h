/* eng_check_info.h - remat-train --check's answer: one definition of what it says, one
 * writer (the worker prints it as one JSON line, wk_main.c) and one reader (rematd keeps a
 * job's answer in this struct: job-start, job-resume, a restarted rematd's look at a save
 * directory, remat-plan of a job without a worker or of a spec; and the job's record).
 *
 * The line, docs/protocol.md's job-start checks:
 *   {"ok":false, "error":MESSAGE, "class":"Busy"|"InvalidParameter"}, or
 *   {"ok":true, "name", "steps", "config" (eng_config_json), "batch", "seq_len",
 *    "chunk_rows", "policy" (eng_policy_json), "aliases" {NAME: SELECTOR}, "init_from",
 *    "save_dir", "device" "cpu"|"cuda", "tokens", ["resume_step"], ["warnings" [TEXT]],
 *    "model" {"arch", "params", "trainable_params"}, "precision", "parallel" {"ranks",
 *    "hosts", "hostfile", "mca", "launcher"}, device cpu: "fixed_bytes" {CATEGORY: BYTES} and
 *    "untracked_bytes", "snapshot_bytes"}
 * Not here: how the check is made (eng_trainer_check, engine/run), or what rematd does with
 * the answer.
 */
#ifndef ENG_CHECK_INFO_H
#define ENG_CHECK_INFO_H

#include <jansson.h>
#include <stddef.h>

#include "eng_config.h"
#include "eng_err.h"
#include "eng_mem.h"
#include "eng_policy.h"
#include "eng_spec.h"

#define ENG_CHECK_WARNING_LEN 256 /* longest warning kept */

typedef struct eng_check_info {
	int ok;                         /* 1: the job would start; 0: error says why */
	char error[ENG_ERR_LEN];        /* ok 0: the check's message */
	int busy;                       /* ok 0: 1 when what it needs is held by another
					 * process (class Busy: try again), 0 when the spec must
					 * change (InvalidParameter) */
	char name[ENG_NAME_LEN];        /* the job's name */
	int steps;                      /* where the run ends */
	eng_config cfg;                 /* the model's shape */
	int batch, seq_len, chunk_rows; /* the step's shape, the head's chunk */
	eng_policy policy;              /* the policy the run starts with */
	eng_aliases aliases;            /* the spec's aliases */
	char init_from[ENG_PATH_LEN];   /* the checkpoint it starts from, "" none */
	char save_dir[ENG_PATH_LEN];    /* where it saves, "" none */
	eng_device device;
	long long tokens;               /* tokens of the training data */
	int has_resume_step;            /* 1 with model.resume: */
	int resume_step;                /* the step its checkpoint is at */
	char warning[ENG_CHECK_WARNING_LEN]; /* allowed, but not what the spec hopes; "" none */
	long long params;               /* what trains: all parameters (0: not said) */
	long long trainable_params;     /* and those the optimizer updates */
	eng_precision precision;        /* the matmuls' operands */
	int ranks;                      /* data parallel: mpirun -np */
	char hosts[1024];               /* parallel.hosts joined by ',', "" none */
	char hostfile[ENG_PATH_LEN];    /* parallel.hostfile, "" none */
	char mca[ENG_MCA_LEN];          /* parallel.mca, "k=v;k=v" (eng_spec.h), "" none */
	char launcher[8];               /* parallel.launcher: "ssh", "slurm", "" mpirun's */
	int has_fixed;                  /* device cpu: 1 when fixed[] was counted */
	size_t fixed[ENG_MEM_NCAT];     /* held whatever the policy (the planner's fixed part) */
	int has_untracked;              /* device cpu: 1 when untracked was measured */
	size_t untracked;               /* the process's resident bytes beyond the tracked ones */
	size_t snapshot;                /* a save's snapshot */
} eng_check_info;

/* The answer as its JSON line's object (above; a failure's three keys when !ci->ok). New
 * reference, or NULL when out of memory. */
json_t *eng_check_info_json(const eng_check_info *ci);

/* Reads an answer (or a job record's copy of one: a missing "ok" is taken as true) into
 * *ci, zeroed first; keys an older answer lacks stay 0 or "". 0, or -1 with err when o is
 * no object or its aliases or policy do not read back on its model. */
int eng_check_info_read(const json_t *o, eng_check_info *ci, eng_err *err);

#endif
