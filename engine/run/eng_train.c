/* eng_train.c - a training run (see eng_train.h): its start (weights, data, the save
 * directory, a resume), its end, and what the worker asks of it (the backend's names, the
 * validation loss, saved bytes). Not here: the spec's files resolved and the shape decided
 * (eng_train_spec.c), --check and the run's fixed bytes (eng_train_check.c), what fits and
 * out of memory as a retry (eng_train_fit.c), the step (eng_train_step.c), the model's
 * maths (behind eng_backend.h: eng_model.c, eng_cuda_step.c), the checkpoint files
 * (eng_ckpt_*.c), the control protocol (worker/). */
#include "eng_train_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_train_ckpt.h"
#include "eng_peft.h"
#include "eng_dp.h"
#include "eng_fs.h"
#include "eng_import.h"
#include "eng_mem.h"
#include "eng_tok.h"
#include "kn.h"

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
		return eng_errf(err, "the base model '%s': %s", eng_err_path(base),
			strerror(errno));
	size_t n = strlen(real);
	if (n >= sizeof tr->lora_base)
		return eng_errf(err, "the base model's path is too long");
	/* a base the checkpoints cannot name: an llm.c file (no directory), another LoRA
	 * run's checkpoint holding its base (an adapter directory itself, or the base
	 * directory inside one), or any run's checkpoint (they come and go as save.keep
	 * says): copied in. Its entries looked at through its descriptor, never a link's. */
	int fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR ? 0 : eng_errf(err, "the base model '%s': %s",
						   eng_err_path(real), strerror(errno));
	d.fd = fd;
	memcpy(d.path, real, n + 1);
	int up = openat(d.fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int copy = eng_peft_is_adapter_at(&d) ||
		   fstatat(d.fd, "trainer_state.json", &st, AT_SYMLINK_NOFOLLOW) == 0 ||
		   (up >= 0 && fstatat(up, "trainer_state.json", &st, AT_SYMLINK_NOFOLLOW) == 0);
	if (up >= 0)
		close(up);
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
	if (!s->init_from[0])
		return eng_model_init_weights(&tr->model, s->seed, err);
	int rc = eng_import_load(&tr->model, s->init_from, err);
	eng_model_load_end(&tr->model); /* the 4-bit weights' stage */
	if (rc < 0)
		return -1;
	if (s->lora_r && !eng_peft_is_adapter(s->init_from))
		eng_model_init_adapters(&tr->model, s->seed);
	return 0;
}

/* The host model the backend works over (ops->host_init: the whole model on the cpu, the
 * host mirror on the GPU); a memory.limit too small for it says so. */
static int trainer_model(eng_trainer *tr, const eng_backend_ops *ops, eng_err *err)
{
	const eng_spec *s = &tr->spec;
	if (ops->host_init(&tr->model, s, err) >= 0)
		return 0;
	if (ops->tracked_host && s->mem_limit) {
		size_t fx[ENG_MEM_NCAT], need = 0;
		eng_model_fixed_bytes(&s->cfg, s->batch, s->seq_len, s->chunk_rows,
			s->threads, NULL, fx);
		for (int c = 0; c < ENG_MEM_NCAT; c++)
			need += fx[c];
		eng_errf(err, "memory.limit %.1f MiB is too small: this run needs %.1f MiB "
			      "for its weights, gradients, moments and workspace before any "
			      "activation", s->mem_limit / 1048576.0, need / 1048576.0);
	}
	return -1;
}

/* The data files opened (this rank's part, shuffled as the spec says), the batch buffers. */
static int trainer_data(eng_trainer *tr, eng_err *err)
{
	const eng_spec *s = &tr->spec;
	eng_data_file f;
	/* every token under the vocabulary before the first step, as --check does: a file
	 * made for another model never starts (one changed later fails the batch that meets
	 * it); read a chunk at a time, whatever its size */
	if (eng_data_check(s->train_path, s->data_format, s->batch, s->seq_len,
		    s->cfg.vocab_size, &f, err) < 0 ||
		(s->val_path[0] && eng_data_check(s->val_path, s->data_format, s->batch,
			s->seq_len, s->cfg.vocab_size, &f, err) < 0))
		return -1;
	if (eng_data_open(&tr->train, s->train_path, s->data_format, s->cfg.vocab_size, s->batch,
		    s->seq_len, err) < 0)
		return -1;
	if (s->val_path[0] && eng_data_open(&tr->val, s->val_path, s->data_format,
				      s->cfg.vocab_size, s->batch, s->seq_len, err) < 0)
		return -1;
	if (s->ranks > 1 && eng_data_set_ranks(&tr->train, s->ranks, eng_dp_rank(), err) < 0)
		return -1;
	if (s->shuffle && eng_data_shuffle(&tr->train, s->shuffle_seed, err) < 0)
		return -1;
	size_t n = (size_t)s->batch * s->seq_len * sizeof(uint32_t);
	tr->inp = eng_mem_alloc(ENG_MEM_DATA, n);
	tr->tgt = eng_mem_alloc(ENG_MEM_DATA, n);
	if (!tr->inp || !tr->tgt)
		return eng_errf(err, "out of memory for the batch buffers");
	return 0;
}

int eng_trainer_init(eng_trainer *tr, const eng_spec *spec, eng_err *err)
{
	return eng_trainer_init_hooks(tr, spec, NULL, err);
}

int eng_trainer_init_hooks(eng_trainer *tr, const eng_spec *spec, const eng_train_hooks *h,
	eng_err *err)
{
	memset(tr, 0, sizeof *tr);
	tr->spec = *spec;
	eng_spec *s = &tr->spec;
	eng_config cfg;
	eng_policy p;
	/* what runs the model: the spec's device picks its table, asked nothing else after */
	const eng_backend_ops *ops = eng_backend_ops_for(s->device);
	if (eng_train_plan(s, &cfg, err) < 0)
		goto fail;
	if (s->cfg.opt_shards) /* this rank's part of the optimizer */
		s->cfg.opt_rank = eng_dp_rank();
	eng_costs_init(&tr->costs, s->cfg.n_layer);
	if (eng_memtrace_init(&tr->trace, ENG_MEMTRACE_CAP) < 0) {
		eng_errf(err, "out of memory for the step's memory timeline");
		goto fail;
	}
	eng_mem_set_limit(ops->tracked_host ? s->mem_limit : 0); /* it bounds the host's */
	kn_set_threads(s->threads);
	/* the text data before the model: a corpus that cannot be read fails before minutes
	 * of loading, and tokenizing holds no weights */
	if (eng_train_tokenizer(s, tr->tokenizer, &tr->tok, &tr->tok_files, err) < 0 ||
		eng_train_prompt(s, tr->tok, err) < 0 ||
		eng_train_text_prepare(s, tr->tokenizer, &tr->tok_files, h, err) < 0 ||
		trainer_model(tr, ops, err) < 0 || trainer_weights(tr, err) < 0 ||
		eng_train_policy(s, &tr->aliases, &p, err) < 0)
		goto fail;
	/* the data before the activations: all the run holds besides them is allocated when
	 * a memory limit picks the policy */
	if (trainer_data(tr, err) < 0 || ops->create(&tr->be, &tr->model, s, err) < 0)
		goto fail;
	/* under a budget the first step lays out the controller's policy: the run never holds
	 * one over it, not even before that step (on the device as on the host: laying out
	 * the spec's policy here put off's activations on the GPU before the controller's
	 * first choice, and step 1's peak was off's whatever the budget) */
	int tries = 0;
	if (s->remat_budget || s->remat_budget_cgroup)
		tr->policy = p;
	else if (eng_train_lay_out(tr, &p, &tries, err) < 0)
		goto fail;
	/* what the process holds beyond the tracked bytes, before a step has measured it:
	 * what loading freed (init_from's tensors read in pieces, the tokenizer's files) goes
	 * back to the system first, as glibc keeps freed heap pages resident */
	malloc_trim(0);
	if (ops->tracked_host)
		tr->untracked = eng_train_untracked_now(&s->cfg, tr->model.chunk_rows, s->threads);
	/* data parallel: rank 0 writes the checkpoints */
	if (s->save_dir[0] && eng_dp_rank() == 0 && open_save_dir(tr, err) < 0)
		goto fail;
	if (s->resume && eng_trainer_resume(tr, s->init_from, err) < 0)
		goto fail;
	malloc_trim(0); /* and what the optimizer's state, read, freed */
	if (eng_backend_sync_device(tr->be, err) < 0)
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
	eng_data_close(&tr->val);
	eng_data_close(&tr->train);
	eng_backend_free(tr->be);
	eng_model_free(&tr->model);
	eng_memtrace_free(&tr->trace);
	eng_tok_free(tr->tok);
	eng_ckpt_tok_free(&tr->tok_files);
	if (tr->has_save_lock)
		close(tr->save_lock); /* the save directory is free for another job */
	if (tr->spec.mem_limit)
		eng_mem_set_limit(0); /* the process's next trainer sets its own */
	memset(tr, 0, sizeof *tr);
}

int eng_trainer_parse_policy(const eng_trainer *tr, const char *text, eng_policy *out,
	eng_err *err)
{
	*out = tr->policy;
	return eng_policy_parse(out, &tr->aliases, text, err);
}

size_t eng_trainer_saved_bytes(const eng_trainer *tr, int i)
{
	return tr->be->ops->saved_bytes(tr->be, i);
}

int eng_trainer_sync_host(eng_trainer *tr, eng_err *err)
{
	return eng_backend_sync_host(tr->be, err);
}

const char *eng_trainer_backend(const eng_trainer *tr)
{
	return tr->be->ops->describe(tr->be);
}

const char *eng_trainer_precision(const eng_trainer *tr)
{
	return tr->be->ops->precision(tr->be);
}

const char *eng_trainer_allreduce(const eng_trainer *tr)
{
	if (tr->spec.ranks == 1)
		return NULL;
	return tr->be->ops->allreduce(tr->be);
}

float eng_trainer_val_loss(eng_trainer *tr, int batches)
{
	if (!eng_data_opened(&tr->val))
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
		if (eng_data_next(d, tr->inp, tr->tgt, &e) < 0 ||
			tr->be->ops->loss(tr->be, tr->inp, tr->tgt, &l, &e) < 0)
			l = NAN; /* a failure: the mean says so, the next step reports it */
		sum += l;
	}
	eng_data_seek(d, &saved);
	return (float)(sum / batches);
}
