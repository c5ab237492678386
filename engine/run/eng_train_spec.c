/* eng_train_spec.c - the parts of a run's start that read the spec's files and decide the
 * model's shape, before anything is allocated (eng_trainer_init and eng_trainer_check
 * both begin here): init_from resolved and verified, the shape known and the spec
 * finished, the aliases and the policy built. Not here: the allocations (eng_train.c), the
 * check's memory figures (eng_train_check.c).
 */
#include "eng_train_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eng_ckpt.h"
#include "eng_import.h"
#include "eng_peft.h"
#include "eng_tok.h"
#include "eng_tokfile.h"
#include "kn.h"

/* init_from may name a checkpoint or a save directory (then its newest checkpoint that
 * verifies). A remat checkpoint (with trainer_state.json) must verify; when it does not,
 * the message offers the newest one that does. Rewrites s->init_from to the checkpoint. */
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

/* The parts of eng_trainer_init that read the spec's files and decide the model's shape,
 * before anything is allocated: init_from resolved and verified, the shape known and the
 * spec finished, the policy built. */
int eng_train_plan(eng_spec *s, eng_config *cfg, eng_err *err)
{
	/* before any file is read: a run that cannot start says so at once */
	if (eng_backend_usable(s->device, err) < 0)
		return -1;
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
int eng_train_policy(const eng_spec *s, eng_aliases *al, eng_policy *p, eng_err *err)
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

int eng_train_tokenizer(const eng_spec *s, char path[ENG_PATH_LEN], struct eng_tok **tok,
	eng_ckpt_tok *files, eng_err *err)
{
	eng_tok *t = NULL;
	path[0] = '\0';
	if (tok)
		*tok = NULL;
	if (files)
		memset(files, 0, sizeof *files);
	if (s->tokenizer[0])
		snprintf(path, ENG_PATH_LEN, "%s", s->tokenizer);
	else if (s->init_from[0] && eng_tok_present(s->init_from))
		snprintf(path, ENG_PATH_LEN, "%s", s->init_from);
	if (!path[0])
		return 0;
	if (!(t = eng_tok_load(path, err)))
		return -1;
	uint32_t n = eng_tok_vocab_size(t);
	if (n > (uint32_t)s->cfg.vocab_size) {
		eng_errf(err, "tokenizer '%s' has %u ids, more than the model's vocab_size %d",
			path, n, s->cfg.vocab_size);
		eng_tok_free(t);
		return -1;
	}
	if (files && eng_ckpt_tok_read(files, path, err) < 0) {
		eng_tok_free(t);
		return -1;
	}
	if (tok)
		*tok = t;
	else
		eng_tok_free(t);
	return 0;
}

int eng_train_prompt(eng_spec *s, eng_tok *tok, eng_err *err)
{
	if (!s->sample_on || s->sample_n > 0)
		return 0;
	if (!tok && s->sample_text[0])
		return eng_errf(err, "'sample.prompt' is text, but the job has no tokenizer to "
				     "encode it: give data.tokenizer, or the prompt as token ids");
	if (!tok)
		return 0; /* eng_spec_finish gave the prompt */
	uint32_t sep = eng_tokfile_sep(tok), *ids = NULL;
	size_t n = 0;
	if (sep == ENG_TOK_NONE)
		return eng_errf(err, "'sample': the tokenizer has no BOS or EOS token to begin "
				     "a sample with");
	eng_err e;
	if (eng_tok_encode(tok, s->sample_text, strlen(s->sample_text), &ids, &n, &e) < 0)
		return eng_errf(err, "'sample.prompt': %s", e.msg);
	if (n + 1 > ENG_MAX_PROMPT) {
		free(ids);
		return eng_errf(err, "'sample.prompt' is %zu tokens, more than %d", n,
			ENG_MAX_PROMPT - 1);
	}
	s->sample_prompt[0] = sep;
	memcpy(s->sample_prompt + 1, ids, n * sizeof *ids);
	s->sample_n = (int)n + 1;
	free(ids);
	return 0;
}
