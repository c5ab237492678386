/* test_model.c - the engine's invariants under recompute policies (design.md §3, §4):
 *  - bitwise: the same job under every policy, and under policies changed between steps,
 *    gives identical losses, gradients, weights and AdamW moments (memcmp), 2 threads;
 *  - memory: saved bytes full < selective < off for every block, measured bytes within 5 %
 *    of the analytic plan per section, the chunked head never holding more than one chunk
 *    of logits, nothing allocated inside a step, and RSS dropping when a policy change
 *    frees activations;
 *  - in float32 and in precision bf16 (oneDNN's bf16 matmuls, bf16 matmul inputs: the
 *    planner's bytes and the fixed part counted for them too), with and without the
 *    weights packed for oneDNN, where the processor has it;
 *  - the activation tables (eng_acts.h): every block field kept or rebuilt under each CPU
 *    mode, never both; the one policy change leaving the old layout whole, and leaking
 *    nothing, whichever of its allocations fails, and naming what it could not allocate. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_ckpt.h"
#include "eng_mem.h"
#include "eng_memtrace.h"
#include "t_util.h"
#include "tests.h"

#define GPL "/usr/share/common-licenses/GPL-3"
#define STEPS 5

static const char *precision = "fp32"; /* of small_trainer's runs (loop tests: both) */
static int llama;                      /* small_trainer's model: 0 GPT-2, 1 Llama */
static int lora;                       /* 1: with LoRA adapters on every weight */

/* Loop tests run GPT-2 (_i 0-2) and Llama (_i 3-5) in float32 (_i % 3 == 0), bf16 (1) and
 * bf16 with the weights packed for oneDNN once a step (2: what AMX processors do by
 * themselves, forced here); 0 when bf16 cannot run here (said). */
#define LOOPS 6
static int set_precision(int i)
{
	llama = i / 3;
	i %= 3;
	precision = i ? "bf16" : "fp32";
	if (i == 2)
		setenv("REMAT_BF16_PACK", "1", 1);
	else
		unsetenv("REMAT_BF16_PACK");
	return !i || t_bf16_here("model");
}

/* 3 layers, C 48, 4 heads (hs 12), byte vocabulary; B*T = 96 rows in chunks of 20, so
 * the head's last chunk is a short one. The Llama: 2 KV heads, SwiGLU 72 wide, untied. */
static void small_trainer(eng_trainer *tr)
{
	t_trainer(tr, "{\"model\":{\"n_layer\":3,\"n_embd\":48,\"n_head\":4,\"n_positions\":64%s},"
		      "\"data\":{\"train\":\"" GPL "\",\"format\":\"bytes\"},\"batch\":3,"
		      "\"seq_len\":32,\"steps\":%d,\"threads\":2,\"seed\":5,"
		      "\"optim\":{\"lr\":3e-3,\"grad_clip\":0.5},\"precision\":\"%s\","
		      "\"schedule\":{\"kind\":\"cosine\",\"warmup\":2},"
		      "\"remat\":{\"chunk_rows\":20,\"aliases\":{\"trunk\":\"h.1-2\"}}%s}",
		llama ? ",\"arch\":\"llama\",\"n_kv_head\":2,\"intermediate_size\":72" : "", STEPS,
		precision, !lora ? "" : llama ?
		",\"lora\":{\"r\":4,\"alpha\":8,\"targets\":[\"q_proj\",\"k_proj\",\"v_proj\","
		"\"o_proj\",\"gate_proj\",\"up_proj\",\"down_proj\"]}" :
		",\"lora\":{\"r\":4,\"alpha\":8,\"targets\":[\"c_attn\",\"c_proj\",\"c_fc\"]}");
}

typedef struct run_result {
	float loss[STEPS];
	size_t nfloats, ngrad;
	float *params, *grads, *m, *v;
} run_result;

/* The trainer's weights, gradients and moments now, into r (malloc'd). */
static void keep_result(const eng_trainer *tr, run_result *r)
{
	size_t bytes = tr->model.nfloats * sizeof(float), gb = tr->model.ngrad * sizeof(float);
	r->nfloats = tr->model.nfloats;
	r->ngrad = tr->model.ngrad;
	r->params = malloc(bytes);
	r->grads = malloc(gb);
	r->m = malloc(gb);
	r->v = malloc(gb);
	ck_assert(r->params && r->grads && r->m && r->v);
	memcpy(r->params, tr->model.params, bytes);
	memcpy(r->grads, tr->model.grads, gb);
	memcpy(r->m, tr->model.m, gb);
	memcpy(r->v, tr->model.v, gb);
}

/* Runs STEPS steps; schedule[s] (may be NULL) is applied before step s+1. */
static void run(const char *const schedule[STEPS], run_result *r)
{
	eng_trainer tr;
	eng_err err;
	small_trainer(&tr);
	for (int s = 0; s < STEPS; s++) {
		if (schedule[s]) {
			eng_policy p;
			ck_assert_msg(eng_trainer_parse_policy(&tr, schedule[s], &p, &err) == 0,
				"%s", err.msg);
			ck_assert_msg(eng_trainer_set_policy(&tr, &p, &err) == 0, "%s", err.msg);
		}
		eng_step_stats st;
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
		r->loss[s] = st.loss;
	}
	keep_result(&tr, r);
	eng_trainer_free(&tr);
}

static void assert_same(const run_result *a, const run_result *b, const char *what)
{
	for (int s = 0; s < STEPS; s++)
		ck_assert_msg(memcmp(&a->loss[s], &b->loss[s], sizeof(float)) == 0,
			"%s: step %d loss %.9g != %.9g", what, s + 1, a->loss[s], b->loss[s]);
	size_t bytes = a->nfloats * sizeof(float), gb = a->ngrad * sizeof(float);
	ck_assert(a->ngrad == b->ngrad);
	ck_assert_msg(memcmp(a->grads, b->grads, gb) == 0, "%s: gradients differ", what);
	ck_assert_msg(memcmp(a->params, b->params, bytes) == 0, "%s: weights differ", what);
	ck_assert_msg(memcmp(a->m, b->m, gb) == 0, "%s: exp_avg differs", what);
	ck_assert_msg(memcmp(a->v, b->v, gb) == 0, "%s: exp_avg_sq differs", what);
}

static void free_result(run_result *r)
{
	free(r->params);
	free(r->grads);
	free(r->m);
	free(r->v);
}

/* A trainer holds a descriptor only for its save directory's lock: freeing one without
 * save.dir, or a zeroed one, closes none of the process's (it closed descriptor 0, whatever
 * the process had there). */
START_TEST(test_model_free_closes_only_its_own)
{
	eng_trainer tr;
	int was = dup(0), nul = open("/dev/null", O_RDONLY);
	ck_assert(nul >= 0 && dup2(nul, 0) == 0);
	if (nul != 0)
		close(nul);
	memset(&tr, 0, sizeof tr);
	eng_trainer_free(&tr);
	ck_assert_msg(fcntl(0, F_GETFD) != -1, "freeing a zeroed trainer closed descriptor 0");
	small_trainer(&tr);
	eng_trainer_free(&tr);
	ck_assert_msg(fcntl(0, F_GETFD) != -1, "freeing a trainer closed descriptor 0");
	if (was >= 0) {
		dup2(was, 0);
		close(was);
	}
}
END_TEST

/* job-set on a trainer (eng_trainer_set): what goes together is checked and a refused set
 * changes nothing; lr, schedule and warmup start a schedule of their own from the next
 * step; the rest replace the spec's values; each set is logged for checkpoints. */
START_TEST(test_model_job_set)
{
	eng_trainer tr;
	eng_err err;
	eng_step_stats st;
	small_trainer(&tr); /* no val file, no save.dir */
	ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
	static const char *const bad[] = {"{}", "{\"warmup\":2}", "{\"eval.every\":3}",
		"{\"save.every\":3}", "{\"momentum\":1}", "{\"lr\":11}",
		"{\"grad_clip\":0.5,\"eval.every\":3}"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *set = json_loads(bad[i], 0, NULL);
		ck_assert_msg(eng_trainer_set(&tr, set, &err) == -1, "took %s", bad[i]);
		json_decref(set);
	}
	ck_assert(tr.spec.live.set == 0 && tr.spec.grad_clip == 0.5f &&
		tr.spec.live.n_changes == 0);
	json_t *set = json_loads("{\"lr\":0.01,\"schedule\":\"cosine\",\"warmup\":2}", 0,
		NULL);
	ck_assert_msg(eng_trainer_set(&tr, set, &err) == 0, "%s", err.msg);
	json_decref(set);
	const eng_spec *s = &tr.spec;
	const eng_live *l = &s->live;
	ck_assert(l->set == ENG_HP_LR && l->lr_from == 1 && l->lr_kind == ENG_SCHED_COSINE &&
		l->lr_warmup == 2 && l->lr_min_frac == s->min_lr_frac && l->lr_new == 0.01f);
	ck_assert(eng_lr_at(s, 1) == 0.01f * 1 / 2); /* the new schedule's first warm-up step */
	set = json_loads("{\"grad_clip\":0.25}", 0, NULL);
	ck_assert_msg(eng_trainer_set(&tr, set, &err) == 0, "%s", err.msg);
	json_decref(set);
	ck_assert(s->grad_clip == 0.25f && s->live.set == (ENG_HP_LR | ENG_HP_GRAD_CLIP));
	/* the history: both sets, each as given, from the step it applies to */
	ck_assert_int_eq(s->live.n_changes, 2);
	const eng_live_change *ch = s->live.changes;
	ck_assert(ch[0].step == 2 && ch[0].given == (1u << PROTO_HP_LR | 1u << PROTO_HP_SCHEDULE |
		1u << PROTO_HP_WARMUP) && ch[0].value[PROTO_HP_LR] == 0.01 &&
		ch[0].value[PROTO_HP_WARMUP] == 2);
	ck_assert(ch[1].step == 2 && ch[1].given == 1u << PROTO_HP_GRAD_CLIP &&
		ch[1].value[PROTO_HP_GRAD_CLIP] == 0.25);
	eng_trainer_free(&tr);
}
END_TEST

START_TEST(test_model_step_bitwise_every_policy)
{
	if (!set_precision(_i))
		return;
	static const char *const fixed[] = {
		"selective", "full", "head=chunked", "full;head=chunked",
		"h.0=full;h.1=selective;h.2=off;head=chunked", "trunk=full",
	};
	const char *const base_sched[STEPS] = {"off"};
	run_result base, other;
	run(base_sched, &base);
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
		const char *const sched[STEPS] = {fixed[i]};
		run(sched, &other);
		assert_same(&other, &base, fixed[i]);
		free_result(&other);
	}
	free_result(&base);
}
END_TEST

START_TEST(test_model_step_bitwise_policy_changed_mid_run)
{
	if (!set_precision(_i))
		return;
	const char *const base_sched[STEPS] = {"off"};
	const char *const changing[][STEPS] = {
		{"off", "full", NULL, "selective;head=chunked", "h.1=off;head=off"},
		{"full;head=chunked", "off", "h.0=selective", "h.2=full", "trunk=selective"},
	};
	run_result base, other;
	run(base_sched, &base);
	for (size_t i = 0; i < sizeof changing / sizeof changing[0]; i++) {
		run(changing[i], &other);
		assert_same(&other, &base, changing[i][0]);
		free_result(&other);
	}
	free_result(&base);
}
END_TEST

/* LoRA adapters on every weight of a GPT-2 (_i 0) and a Llama (_i 1): every policy, and
 * policies changed between steps, give the bits of off; the base never moves */
START_TEST(test_model_lora_bitwise)
{
	static const char *const fixed[] = {"selective", "full", "full;head=chunked",
		"h.0=full;h.1=selective;h.2=off;head=chunked"};
	const char *const base_sched[STEPS] = {"off"};
	const char *const changing[STEPS] = {"full", "off", "h.1=selective", "h.2=full",
		"trunk=selective;head=chunked"};
	run_result base, other;
	set_precision(3 * _i);
	lora = 1;
	run(base_sched, &base);
	for (size_t i = 0; i <= sizeof fixed / sizeof fixed[0]; i++) {
		if (i < sizeof fixed / sizeof fixed[0]) {
			const char *const sched[STEPS] = {fixed[i]};
			run(sched, &other);
		} else {
			run(changing, &other);
		}
		assert_same(&other, &base, i < sizeof fixed / sizeof fixed[0] ? fixed[i] : "changing");
		free_result(&other);
	}
	free_result(&base);
	lora = 0;
}
END_TEST

static void set(eng_trainer *tr, const char *text)
{
	eng_policy p;
	eng_err err;
	ck_assert_msg(eng_trainer_parse_policy(tr, text, &p, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_trainer_set_policy(tr, &p, &err) == 0, "%s", err.msg);
}

START_TEST(test_model_saved_bytes_order_and_plan)
{
	if (!set_precision(_i))
		return;
	eng_trainer tr;
	small_trainer(&tr);
	eng_model *m = &tr.model;
	int L = m->cfg.n_layer;
	size_t bytes[3][ENG_MAX_LAYERS];
	static const char *modes[] = {"off", "selective", "full"};
	for (int k = 0; k < 3; k++) {
		set(&tr, modes[k]);
		for (int l = 0; l < L; l++)
			bytes[k][l] = eng_model_saved_bytes(m, l);
	}
	for (int l = 0; l < L; l++)
		ck_assert_msg(bytes[2][l] < bytes[1][l] && bytes[1][l] < bytes[0][l],
			"block %d: full %zu, selective %zu, off %zu", l, bytes[2][l], bytes[1][l],
			bytes[0][l]);

	/* measured against the analytic plan, per section, for several policies */
	static const char *policies[] = {"off", "selective", "full;head=chunked",
		"h.0=full;h.1=selective;head=chunked", "h.2=full"};
	for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
		set(&tr, "off;head=off");
		set(&tr, policies[i]);
		eng_plan plan;
		eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, &m->lay.policy, &plan);
		size_t sum = 0;
		for (int s = 0; s <= L; s++) {
			size_t meas = eng_model_saved_bytes(m, s);
			size_t pred = s < L ? plan.block[s].saved_bytes : plan.head.saved_bytes;
			double rel = fabs((double)meas - (double)pred) / (double)pred;
			ck_assert_msg(rel <= 0.05, "%s: section %d measured %zu, planned %zu (%.2f%%)",
				policies[i], s, meas, pred, 100 * rel);
			sum += meas;
		}
		eng_mem_stats ms;
		eng_mem_get_stats(&ms);
		ck_assert_msg(ms.current[ENG_MEM_ACTIVATIONS] == sum,
			"%s: activations category %zu != sum of sections %zu", policies[i],
			ms.current[ENG_MEM_ACTIVATIONS], sum);
		double rel = fabs((double)ms.current[ENG_MEM_RECOMPUTE] - plan.recompute_bytes) /
			     (plan.recompute_bytes ? plan.recompute_bytes : 1);
		ck_assert_msg(rel <= 0.05, "%s: recompute pool %zu, planned %zu", policies[i],
			ms.current[ENG_MEM_RECOMPUTE], plan.recompute_bytes);
	}
	eng_trainer_free(&tr);
}
END_TEST

START_TEST(test_model_chunked_head_holds_one_chunk)
{
	eng_trainer tr;
	small_trainer(&tr);
	eng_model *m = &tr.model;
	set(&tr, "off;head=chunked");
	size_t N = (size_t)m->B * m->T, V = m->cfg.vocab_size;
	size_t one_chunk = (size_t)m->chunk_rows * V * sizeof(float);
	ck_assert_msg((size_t)m->chunk_rows < N, "the test needs more than one chunk");
	ck_assert_ptr_null(m->lay.head.logits);
	eng_mem_stats before, after;
	eng_mem_get_stats(&before);
	eng_mem_reset_peak();
	eng_step_stats st;
	eng_err err;
	ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
	eng_mem_get_stats(&after);
	/* nothing is allocated inside a step: the step's peak is what was there before */
	ck_assert_uint_eq(after.peak_reset[ENG_MEM_ACTIVATIONS], before.current[ENG_MEM_ACTIVATIONS]);
	ck_assert_uint_eq(after.peak_reset[ENG_MEM_RECOMPUTE], before.current[ENG_MEM_RECOMPUTE]);
	/* the only logits buffer is one chunk (rounded to a 64-byte slot) in the pool */
	ck_assert_msg(eng_mem_size(m->lay.head.chunk) >= one_chunk && eng_mem_size(m->lay.head.chunk) < one_chunk + 64,
		"chunk buffer %zu bytes for %zu", eng_mem_size(m->lay.head.chunk), one_chunk);
	ck_assert_msg(after.peak_reset[ENG_MEM_RECOMPUTE] < N * V * sizeof(float),
		"recompute pool %zu holds as much as all logits", after.peak_reset[ENG_MEM_RECOMPUTE]);
	ck_assert_msg(eng_model_saved_bytes(m, m->cfg.n_layer) < N * V * sizeof(float),
		"head keeps %zu bytes", eng_model_saved_bytes(m, m->cfg.n_layer));
	set(&tr, "head=off");
	ck_assert_ptr_nonnull(m->lay.head.logits);
	ck_assert_ptr_null(m->lay.head.chunk);
	ck_assert_uint_ge(eng_model_saved_bytes(m, m->cfg.n_layer), N * V * sizeof(float));
	eng_trainer_free(&tr);
}
END_TEST

START_TEST(test_model_set_policy_returns_memory_to_os)
{
	/* 4 blocks of C 256 at 8 x 128: about 19 MiB saved per block under off */
	eng_trainer tr;
	t_trainer(&tr, "{\"model\":{\"n_layer\":4,\"n_embd\":256,\"n_head\":4,\"n_positions\":128},"
		       "\"data\":{\"train\":\"" GPL "\",\"format\":\"bytes\"},\"batch\":8,"
		       "\"seq_len\":128,\"steps\":2,\"threads\":2}");
	eng_step_stats st;
	eng_err err;
	ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
	eng_mem_stats before, after;
	eng_mem_get_stats(&before);
	set(&tr, "full");
	eng_mem_get_stats(&after);
	size_t freed = before.current[ENG_MEM_ACTIVATIONS] - after.current[ENG_MEM_ACTIVATIONS];
	ck_assert_msg(freed > 60u << 20, "only %zu bytes of activations freed", freed);
	ck_assert_msg(after.rss + freed / 2 < before.rss,
		"RSS %zu -> %zu after freeing %zu bytes of activations", before.rss, after.rss,
		freed);
	/* and the run goes on under the new policy */
	ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
	ck_assert(st.activation_bytes == after.current[ENG_MEM_ACTIVATIONS]);
	eng_trainer_free(&tr);
}
END_TEST

START_TEST(test_acts_tables_consistent)
{
	const unsigned cpu_blocks[] = {ENG_K_OFF, ENG_K_SEL, ENG_K_FULL};
	for (int k = 0; k < ENG_ACT_N; k++) {
		const eng_act_field *f = &eng_block_fields[k];
		ck_assert_msg((f->keep & f->pool) == 0, "block field %s both kept and rebuilt", f->name);
		for (size_t i = 0; i < sizeof cpu_blocks / sizeof cpu_blocks[0]; i++)
			ck_assert_msg((f->keep | f->pool) & cpu_blocks[i],
				"block field %s neither kept nor rebuilt under mode bit %#x", f->name,
				cpu_blocks[i]);
		ck_assert_msg(!(f->pool & ENG_K_OFFLOAD), "offload rebuilds %s", f->name);
		/* every field has a size under GPT-2; under llama all but LayerNorm's means */
		const eng_config g2 = ENG_GPT2(2, 64, 4, 256, 256);
		eng_config ll;
		eng_err err;
		ck_assert(eng_config_preset("llama-tiny", &ll, &err) == 0);
		eng_config g2l = g2;
		g2l.lora_r = 4;
		g2l.lora_units = 1;
		ck_assert_msg(eng_act_elems(f, &g2l, 2, 8, 4) > 0, "block field %s has no size",
			f->name);
		ck_assert_msg((eng_act_elems(f, &g2, 2, 8, 4) == 0) == (f->width == ENG_W_LORA),
			"block field %s without adapters", f->name);
		ck_assert_msg((eng_act_elems(f, &ll, 2, 8, 4) == 0) ==
			(f->width == ENG_W_MEAN || f->width == ENG_W_LORA),
			"llama's block field %s", f->name);
	}
	ck_assert_msg(eng_block_fields[ENG_ACT_x].keep == ENG_K_BLOCK, "x is kept under every mode");
	for (int k = 0; k < ENG_HEAD_N; k++) {
		const eng_act_field *f = &eng_head_fields[k];
		ck_assert_msg((f->keep & f->pool) == 0, "head field %s both kept and rebuilt", f->name);
		ck_assert_msg(((f->keep | f->pool) & ~ENG_K_HEAD) == 0, "head field %s under a block "
			      "mode", f->name);
	}
	/* the table's names are the struct's members, in order */
	eng_acts a;
	ck_assert_ptr_eq(&a.f[ENG_ACT_qkv], (void *)&a.qkv);
	ck_assert_ptr_eq(&a.f[ENG_ACT_gelu], (void *)&a.gelu);
	ck_assert_str_eq(eng_block_fields[ENG_ACT_att_lse].name, "att_lse");
}
END_TEST

/* An allocator that fails its n-th call (counting from 1), or every call from the n-th on
 * (fail_from), and counts what is live. */
static int fail_at, fail_from, calls, live;
static void *failing_alloc(eng_mem_cat cat, size_t bytes)
{
	++calls;
	if (calls == fail_at || (fail_from && calls >= fail_from))
		return NULL;
	void *p = eng_mem_alloc(cat, bytes);
	live += p != NULL;
	return p;
}
static void counted_free(void *p)
{
	live -= p != NULL;
	eng_mem_free(p);
}

START_TEST(test_layout_change_rolls_back_every_failure)
{
	eng_trainer tr;
	small_trainer(&tr);
	eng_layout_mem mem = tr.model.mem;
	mem.alloc = failing_alloc;
	mem.free = counted_free;
	eng_policy from, to;
	eng_err err = {0};
	ck_assert_int_eq(eng_trainer_parse_policy(&tr, "h.0=full,h.1=selective,head=chunked", &from,
				 &err), 0);
	ck_assert_int_eq(eng_trainer_parse_policy(&tr, "h.0=off,h.1=full,h.2=selective,head=off",
				 &to, &err), 0);
	eng_layout lay;
	memset(&lay, 0, sizeof lay);
	fail_at = 0;
	calls = live = 0;
	ck_assert_int_eq(eng_layout_set(&lay, &mem, &from, &err), 0);
	int base = live, nfail = 0;
	eng_layout before = lay;
	for (fail_at = 1;; fail_at++) {
		calls = 0;
		if (eng_layout_set(&lay, &mem, &to, &err) == 0)
			break;
		nfail++;
		/* the previous policy is laid out again: the same buffers held, maybe elsewhere */
		ck_assert(eng_policy_equal(&lay.policy, &before.policy));
		for (int i = 0; i <= tr.model.cfg.n_layer; i++)
			ck_assert_msg(eng_layout_saved_bytes(&lay, &mem, i) ==
					      eng_layout_saved_bytes(&before, &mem, i),
				"failure at allocation %d: section %d holds other bytes", fail_at, i);
		for (int k = 0; k < ENG_ACT_N; k++)
			ck_assert_msg(!lay.pool.f[k] == !before.pool.f[k],
				"failure at allocation %d: pool field %s", fail_at,
				eng_block_fields[k].name);
		ck_assert_msg(live == base, "failure at allocation %d leaked %d buffers", fail_at,
			live - base);
		ck_assert_msg(strstr(err.msg, "cannot allocate ") && strstr(err.msg, " MiB of memory for ")
			&& strstr(err.msg, "the previous policy stays"), "%s", err.msg);
	}
	ck_assert_msg(nfail >= 5, "only %d allocations to fail", nfail);
	ck_assert(eng_policy_equal(&lay.policy, &to));
	fail_at = 0;
	eng_layout_free(&lay, &mem);
	ck_assert_int_eq(live, 0);
	eng_trainer_free(&tr);
}
END_TEST

/* When not even the previous policy fits again, nothing is laid out, the message says so,
 * and a step refuses to run instead of touching memory that is not there. */
START_TEST(test_layout_lost_refuses_steps)
{
	eng_trainer tr;
	small_trainer(&tr);
	eng_layout_mem mem = tr.model.mem;
	eng_policy to;
	eng_err err = {0};
	ck_assert_int_eq(eng_trainer_parse_policy(&tr, "off", &to, &err), 0);
	set(&tr, "full,head=chunked");
	/* from full to off: the new buffers fail, and so does the way back */
	tr.model.mem.alloc = failing_alloc;
	tr.model.mem.free = counted_free;
	fail_at = 0;
	fail_from = 1;
	calls = live = 0;
	ck_assert_int_eq(eng_model_set_policy(&tr.model, &to, &err), -1);
	ck_assert_msg(strstr(err.msg, "no activations are laid out"), "%s", err.msg);
	ck_assert_int_eq(tr.model.lay.policy.n_layer, 0);
	float loss;
	ck_assert_int_eq(eng_model_step(&tr.model, tr.inp, tr.tgt, &loss, &err), -1);
	ck_assert_msg(strstr(err.msg, "no activations are laid out"), "%s", err.msg);
	/* memory back: the next change lays the policy out and training goes on */
	fail_from = 0;
	tr.model.mem = mem;
	ck_assert_msg(eng_trainer_set_policy(&tr, &to, &err) == 0, "%s", err.msg);
	eng_step_stats st;
	ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
	eng_trainer_free(&tr);
}
END_TEST

/* A switch never raises the peak: the tracked total over a policy change and the step
 * after it stays within the larger of the two policies' steady peaks, both ways. */
START_TEST(test_layout_switch_peak)
{
	static const char *const pairs[][2] = {{"full,head=chunked", "off"},
		{"off", "full,head=chunked"}, {"selective", "h.0=full,h.1-2=off,head=chunked"}};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		eng_trainer tr;
		eng_step_stats st;
		eng_err err = {0};
		eng_mem_stats ms;
		size_t steady[2], over_switch;
		small_trainer(&tr);
		for (int k = 0; k < 2; k++) {
			set(&tr, pairs[i][k]);
			ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
			eng_mem_reset_peak();
			ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
			eng_mem_get_counters(&ms);
			steady[k] = ms.total_peak_reset;
		}
		set(&tr, pairs[i][0]);
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
		eng_mem_reset_peak();
		set(&tr, pairs[i][1]);
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
		eng_mem_get_counters(&ms);
		over_switch = ms.total_peak_reset;
		size_t larger = steady[0] > steady[1] ? steady[0] : steady[1];
		ck_assert_msg(over_switch <= larger, "%s -> %s: peak %zu over the switch, steady %zu "
			      "and %zu", pairs[i][0], pairs[i][1], over_switch, steady[0], steady[1]);
		/* and as the controller switches, inside the step: the step's own peak */
		eng_policy back;
		ck_assert_int_eq(eng_trainer_parse_policy(&tr, pairs[i][0], &back, &err), 0);
		ck_assert_msg(eng_trainer_step_as(&tr, &back, &st, &err) == 0, "%s", err.msg);
		ck_assert_msg(st.peak_bytes <= larger, "%s -> %s in a step: peak %zu, steady %zu and "
			      "%zu", pairs[i][1], pairs[i][0], st.peak_bytes, steady[0], steady[1]);
		ck_assert(eng_policy_equal(&tr.policy, &back));
		eng_trainer_free(&tr);
	}
}
END_TEST

/* The planner's peak for a run, fixed part included, is what a steady step of that run
 * peaks at: the fixed part exactly (eng_trainer_check counts what eng_trainer_init
 * allocates), the whole within 5 % (chunk alignment) under several policies. */
START_TEST(test_plan_peak_matches_measured)
{
	if (!set_precision(_i))
		return;
	static const char *const policies[] = {"off", "selective", "full,head=chunked",
		"h.0=full,h.1=selective,h.2=off"};
	eng_mem_stats before, now;
	eng_trainer tr;
	eng_check ck;
	eng_err err = {0};
	eng_mem_get_counters(&before);
	small_trainer(&tr);
	eng_spec spec = tr.spec;
	ck_assert_msg(eng_trainer_check(&spec, &ck, &err) == 0, "%s", err.msg);
	eng_mem_get_counters(&now);
	size_t fixed = 0;
	for (int c = 0; c < ENG_MEM_NCAT; c++) {
		if (c == ENG_MEM_ACTIVATIONS || c == ENG_MEM_RECOMPUTE)
			continue;
		ck_assert_msg(ck.fixed[c] == now.current[c] - before.current[c],
			"%s: counted %zu, allocated %zu", eng_mem_cat_name((eng_mem_cat)c), ck.fixed[c],
			now.current[c] - before.current[c]);
		fixed += ck.fixed[c];
	}
	for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
		eng_step_stats st;
		eng_plan pl;
		set(&tr, policies[i]);
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
		eng_mem_reset_peak();
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
		eng_mem_get_counters(&now);
		double measured = (double)(now.total_peak_reset - before.total_current);
		eng_plan_policy(&tr.model.cfg, tr.model.B, tr.model.T, tr.model.chunk_rows,
			&tr.policy, &pl);
		double predicted = (double)(fixed + pl.peak_bytes);
		ck_assert_msg(fabs(measured - predicted) <= 0.05 * predicted,
			"%s: predicted %.0f, measured %.0f", policies[i], predicted, measured);
	}
	eng_trainer_free(&tr);
}
END_TEST

/* The check counts one snapshot of the weights and both moments, in either precision
 * (bf16's bf16 weight copy is not snapshotted), as a term of its own, with or without
 * save.dir (rematd gives every job one): the fixed part does not hold it (a save can do
 * without a copy). */
START_TEST(test_plan_fixed_counts_one_snapshot)
{
	if (!set_precision(_i))
		return;
	eng_trainer tr;
	eng_check a, b;
	eng_err err;
	small_trainer(&tr);
	eng_spec spec = tr.spec;
	ck_assert_msg(eng_trainer_check(&spec, &a, &err) == 0, "%s", err.msg);
	spec = tr.spec;
	snprintf(spec.save_dir, sizeof spec.save_dir, "%s/fixed-snap-%d", t_env("REMAT_TMP"), _i);
	ck_assert_msg(eng_trainer_check(&spec, &b, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(b.fixed[ENG_MEM_WORKSPACE], a.fixed[ENG_MEM_WORKSPACE]);
	ck_assert_uint_eq(a.snapshot, b.snapshot);
	ck_assert_uint_eq(b.snapshot, eng_ckpt_snap_bytes(tr.model.nfloats, tr.model.ngrad));
	eng_trainer_free(&tr);
}
END_TEST

/* STEPS steps, step s+1 asking for want[s] (NULL: the policy there is) and forcing the
 * attention scratch to be allocated again at step 4 (as a change of thread count does);
 * with fail_n, the fail_n-th allocation from the first step on is refused. */
static void run_wanting(const char *const want[STEPS], unsigned long fail_n, run_result *r,
	int *retries, unsigned long *allocs)
{
	eng_trainer tr;
	eng_err err;
	small_trainer(&tr);
	unsigned long a0 = eng_mem_allocs();
	eng_mem_fail_nth(fail_n);
	for (int s = 0; s < STEPS; s++) {
		eng_policy p;
		if (want[s])
			ck_assert_msg(eng_trainer_parse_policy(&tr, want[s], &p, &err) == 0, "%s",
				err.msg);
		if (s == 3)
			tr.model.scratch_threads = 0;
		eng_step_stats st;
		ck_assert_msg(eng_trainer_step_as(&tr, want[s] ? &p : NULL, &st, &err) == 0,
			"allocation %lu refused: step %d: %s", fail_n, s + 1, err.msg);
		r->loss[s] = st.loss;
	}
	eng_mem_fail_nth(0);
	*allocs = eng_mem_allocs() - a0;
	*retries = tr.oom_retries;
	keep_result(&tr, r);
	eng_trainer_free(&tr);
}

/* Out of memory is a retry: an allocation refused at each of the sites a step allocates
 * at (every buffer of each policy change the steps make, and the attention scratch) is
 * retried under a policy that fits, counted, and the run ends with an uninterrupted run's
 * losses, weights and moments, bit for bit. */
START_TEST(test_oom_retry_every_site)
{
	static const char *const want[STEPS] = {NULL, "full,head=chunked", "off",
		"h.0=full,h.1=selective,h.2=off", "selective,head=chunked"};
	run_result ref, got;
	int retries;
	unsigned long allocs, n;
	run_wanting(want, 0, &ref, &retries, &allocs);
	ck_assert_int_eq(retries, 0);
	ck_assert_msg(allocs >= 10, "the steps allocate only %lu times", allocs);
	for (n = 1; n <= allocs; n++) {
		unsigned long a;
		char what[64];
		run_wanting(want, n, &got, &retries, &a);
		snprintf(what, sizeof what, "allocation %lu of %lu refused", n, allocs);
		ck_assert_msg(retries >= 1, "%s: no retry counted", what);
		assert_same(&ref, &got, what);
		free_result(&got);
	}
	free_result(&ref);
}
END_TEST

/* When not even the policy of the least memory fits, the step fails with the least the run
 * needs, as out of memory, and changes nothing: the weights and the data position are the
 * last step's, and with memory back the same step goes on as if nothing had happened. */
START_TEST(test_oom_least_fails_cleanly)
{
	eng_trainer tr;
	eng_step_stats st;
	eng_err err = {0};
	eng_mem_stats ms;
	small_trainer(&tr);
	set(&tr, "full,head=chunked");
	ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
	size_t bytes = tr.model.nfloats * sizeof(float);
	eng_data_pos pos = tr.train.pos;
	float *w = malloc(bytes);
	memcpy(w, tr.model.params, bytes);
	eng_mem_get_counters(&ms);
	eng_mem_set_limit(ms.total_current); /* nothing more: the scratch cannot come back */
	tr.model.scratch_threads = 0;
	ck_assert_int_eq(eng_trainer_step_as(&tr, NULL, &st, &err), -1);
	ck_assert_int_eq(err.kind, ENG_ERR_NOMEM);
	ck_assert_msg(strstr(err.msg, "step 2: ") && strstr(err.msg, "out of memory: this run "
		"needs at least ") && strstr(err.msg, "every block full and the head chunked"),
		"%s", err.msg);
	ck_assert_int_ge(tr.oom_retries, 1);
	ck_assert_int_eq(tr.step, 1);
	ck_assert(memcmp(&tr.train.pos, &pos, sizeof pos) == 0);
	ck_assert_msg(memcmp(w, tr.model.params, bytes) == 0, "a failed step changed the weights");
	eng_mem_set_limit(0);
	ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(st.step, 2);
	free(w);
	eng_trainer_free(&tr);
}
END_TEST

/* A step's memory timeline: every buffer a section makes live dies in the same step, none
 * is live twice; at the end of the forward the live activations are what the sections
 * hold; recompute buffers come alive in the backward only under a mode that rebuilds;
 * both exports carry it (PyTorch's alloc/free_completed pairs, Chrome's passes). */
START_TEST(test_memtrace_step)
{
	static const char *const policies[] = {"off", "full,head=chunked", "selective"};
	for (size_t pi = 0; pi < sizeof policies / sizeof policies[0]; pi++) {
		eng_trainer tr;
		eng_step_stats st;
		eng_err err = {0};
		small_trainer(&tr);
		set(&tr, policies[pi]);
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
		const eng_memtrace *t = &tr.trace;
		int L = tr.model.cfg.n_layer, lives = 0, deads = 0, rebuilt_in_bwd = 0, in_bwd = 0;
		size_t act = 0, act_at_fwd_end = 0, saved = 0;
		ck_assert_int_eq(t->step, 1);
		ck_assert_int_eq(t->dropped, 0);
		for (int i = 0; i <= L; i++)
			saved += eng_trainer_saved_bytes(&tr, i);
		for (int i = 0; i < t->n; i++) {
			const eng_mt_ev *e = &t->ev[i];
			if (e->kind == ENG_MT_END && e->section == L && e->field == ENG_SEC_FWD)
				act_at_fwd_end = act;
			if (e->kind == ENG_MT_BEGIN && e->field == ENG_SEC_BWD)
				in_bwd = 1;
			if (e->kind != ENG_MT_LIVE && e->kind != ENG_MT_DEAD)
				continue;
			if (e->section < 0) /* what every step holds: live all along */
				continue;
			int live = 0;
			for (int j = 0; j < i; j++) /* live already? */
				if (t->ev[j].addr == e->addr && (t->ev[j].kind == ENG_MT_LIVE ||
							      t->ev[j].kind == ENG_MT_DEAD))
					live = t->ev[j].kind == ENG_MT_LIVE;
			ck_assert_msg(live == (e->kind == ENG_MT_DEAD), "%s: event %d: %s twice",
				policies[pi], i, live ? "live" : "dead");
			if (e->kind == ENG_MT_LIVE) {
				lives++;
				rebuilt_in_bwd += in_bwd && e->cat == ENG_MEM_RECOMPUTE && e->section < L;
			} else {
				deads++;
			}
			if (e->cat == ENG_MEM_ACTIVATIONS)
				act = e->kind == ENG_MT_LIVE ? act + e->size : act - e->size;
		}
		ck_assert_msg(lives == deads && lives > 0, "%s: %d live, %d dead", policies[pi], lives,
			deads);
		ck_assert_msg(act_at_fwd_end == saved, "%s: %zu live at the forward's end, sections "
			      "hold %zu", policies[pi], act_at_fwd_end, saved);
		ck_assert_msg((rebuilt_in_bwd > 0) == (pi != 0), "%s: %d buffers rebuilt in backward",
			policies[pi], rebuilt_in_bwd);
		json_t *py = eng_memtrace_pytorch(t, 0), *ch = eng_memtrace_chrome(t, 0);
		json_t *pyc = eng_memtrace_pytorch(t, 1);
		/* merged by section: fewer buffers, and at the step's end what every step holds
		 * is all that is left alive, as unmerged */
		json_t *ct = json_array_get(json_object_get(pyc, "device_traces"), 0), *cev;
		size_t ci;
		long long live_now = 0, fixed_live = 0;
		json_array_foreach(ct, ci, cev) {
			long long sz = json_integer_value(json_object_get(cev, "size"));
			live_now += strcmp(json_string_value(json_object_get(cev, "action")), "alloc")
					    ? -sz : sz;
		}
		for (int i = 0; i < t->n; i++)
			if (t->ev[i].section < 0 && t->ev[i].kind == ENG_MT_LIVE)
				fixed_live += (long long)t->ev[i].size;
		ck_assert_int_eq(live_now, fixed_live);
		ck_assert_uint_lt(json_array_size(ct), (size_t)(lives + deads + 5));
		json_decref(pyc);
		ck_assert_ptr_nonnull(py);
		ck_assert_ptr_nonnull(ch);
		json_t *trace = json_array_get(json_object_get(py, "device_traces"), 0);
		ck_assert_uint_eq(json_array_size(trace), (size_t)(lives + deads + 5));
		size_t slices = 0, k;
		json_t *ev;
		json_array_foreach(json_object_get(ch, "traceEvents"), k, ev)
			slices += !strcmp(json_string_value(json_object_get(ev, "ph")), "X");
		/* forward and backward of every section, and a recompute of every block that
		 * rebuilds */
		ck_assert_uint_eq(slices, (size_t)(2 * (L + 1) + (pi != 0 ? L : 0)));
		json_decref(py);
		json_decref(ch);
		eng_trainer_free(&tr);
	}
}
END_TEST

/* REMAT_FP32_DNNL=0: every float32 product on OpenBLAS, no packed wte (params' bytes the
 * gradients'), and the same training to float rounding (the head's sums in another order);
 * by default, where oneDNN runs, its two head products hold the packed copy */
START_TEST(test_fp32_openblas_routes)
{
	run_result dflt, blas;
	const char *const sched[STEPS] = {"off"};
	eng_trainer tr;
	size_t fx[ENG_MEM_NCAT];
	precision = "fp32";
	unsetenv("REMAT_FP32_DNNL");
	small_trainer(&tr);
	int dnnl = kn_dnnl_available(NULL, 0);
	eng_trainer_fixed_bytes(&tr, fx);
	ck_assert_msg(dnnl ? fx[ENG_MEM_PARAMS] > fx[ENG_MEM_GRADS] :
			     fx[ENG_MEM_PARAMS] == fx[ENG_MEM_GRADS],
		"params %zu, grads %zu bytes (oneDNN %d)", fx[ENG_MEM_PARAMS], fx[ENG_MEM_GRADS], dnnl);
	eng_trainer_free(&tr);
	if (!dnnl) { /* both runs would be OpenBLAS's: nothing to compare */
		fprintf(stderr, "model: oneDNN's float32 routes skipped: no oneDNN here\n");
		return;
	}
	run(sched, &dflt);
	setenv("REMAT_FP32_DNNL", "0", 1);
	small_trainer(&tr);
	for (int i = 0; i < tr.model.nprod; i++)
		ck_assert_msg(tr.model.prod[i].route == ENG_ROUTE_OPENBLAS, "%s not OpenBLAS's",
			tr.model.prod[i].name);
	eng_trainer_fixed_bytes(&tr, fx);
	ck_assert_uint_eq(fx[ENG_MEM_PARAMS], fx[ENG_MEM_GRADS]);
	ck_assert_ptr_null(tr.model.wpack);
	eng_trainer_free(&tr);
	run(sched, &blas);
	unsetenv("REMAT_FP32_DNNL");
	for (int k = 0; k < STEPS; k++)
		ck_assert_msg(fabsf(blas.loss[k] - dflt.loss[k]) <= 1e-5f * dflt.loss[k],
			"step %d: loss %.9g on OpenBLAS alone, %.9g by default", k + 1, blas.loss[k],
			dflt.loss[k]);
	ck_assert_msg(t_rel_l2(blas.params, dflt.params, dflt.nfloats) < 1e-5, "weights apart");
	free_result(&blas);
	free_result(&dflt);
}
END_TEST

/* ---- precision bf16: refused where it cannot run, and as good as float32 where it can ---- */

/* ONEDNN_MAX_CPU_ISA hides the bf16 instructions from oneDNN (read once per process: the
 * test's own, forked): the job is refused at its start and at --check, saying why. */
START_TEST(test_bf16_refused_without_isa)
{
	eng_spec spec;
	eng_trainer tr;
	eng_check ck;
	eng_err err;
	setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE", 1);
	const char *text = "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" GPL "\","
			   "\"format\":\"bytes\"},\"precision\":\"bf16\"}";
	ck_assert_int_eq(eng_spec_parse(&spec, text, &err), 0);
	ck_assert_int_eq(eng_trainer_init(&tr, &spec, &err), -1);
	ck_assert_msg(strstr(err.msg, "'precision' \"bf16\" is refused: ") &&
		(strstr(err.msg, "no bf16 matmul instructions") || strstr(err.msg, "no oneDNN")),
		"%s", err.msg);
	ck_assert_int_eq(eng_spec_parse(&spec, text, &err), 0);
	ck_assert_int_eq(eng_trainer_check(&spec, &ck, &err), -1);
	ck_assert_msg(strstr(err.msg, "is refused"), "%s", err.msg);
}
END_TEST

/* tiny, 300 steps: the validation loss of a bf16 run within 2 % of the float32 run's at
 * every evaluation (every 50 steps), both from the same weights and batches. */
START_TEST(test_bf16_follows_fp32)
{
	if (!t_bf16_here("model"))
		return;
	eng_trainer a, b;
	eng_step_stats st;
	eng_err err;
	const char *fmt = "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" GPL "\","
			  "\"val\":\"/usr/share/common-licenses/Apache-2.0\",\"format\":\"bytes\"},"
			  "\"batch\":4,\"seq_len\":64,\"steps\":300,\"threads\":2,\"seed\":3,"
			  "\"optim\":{\"lr\":2e-3},\"precision\":\"%s\"}";
	t_trainer(&a, fmt, "fp32");
	t_trainer(&b, fmt, "bf16");
	double worst = 0;
	for (int s = 1; s <= 300; s++) {
		ck_assert_msg(eng_trainer_step_as(&a, NULL, &st, &err) == 0, "%s", err.msg);
		ck_assert_msg(eng_trainer_step_as(&b, NULL, &st, &err) == 0, "%s", err.msg);
		if (s % 50)
			continue;
		float va = eng_trainer_val_loss(&a, 8), vb = eng_trainer_val_loss(&b, 8);
		double e = fabs((double)vb - va) / va;
		if (getenv("REMAT_VERBOSE"))
			fprintf(stderr, "model: step %d val loss fp32 %.5f bf16 %.5f (%.3f %%)\n", s,
				va, vb, 100 * e);
		ck_assert_msg(e <= 0.02, "step %d: val loss bf16 %.5f, fp32 %.5f: %.2f %% apart", s,
			vb, va, 100 * e);
		worst = e > worst ? e : worst;
		/* the weights' bf16 copy, which AdamW writes as it steps, is theirs */
		const eng_model *m = &b.model;
		for (size_t i = 0; i < m->nfloats; i++)
			ck_assert_msg(m->wbf[i] == kn_bf16_from_f32(m->params[i]), "step %d: float "
				"%zu's bf16 copy 0x%04x, its rounding 0x%04x", s, i, m->wbf[i],
				kn_bf16_from_f32(m->params[i]));
	}
	ck_assert(worst > 0); /* two precisions, not one run twice */
	eng_trainer_free(&a);
	eng_trainer_free(&b);
}
END_TEST

Suite *suite_model(void)
{
	Suite *s = suite_create("model");
	TCase *tc = tcase_create("policy");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_model_step_bitwise_every_policy, 0, LOOPS);
	tcase_add_loop_test(tc, test_model_step_bitwise_policy_changed_mid_run, 0, LOOPS);
	tcase_add_loop_test(tc, test_model_lora_bitwise, 0, 2);
	tcase_add_loop_test(tc, test_model_saved_bytes_order_and_plan, 0, LOOPS);
	tcase_add_test(tc, test_model_chunked_head_holds_one_chunk);
	tcase_add_test(tc, test_model_free_closes_only_its_own);
	tcase_add_test(tc, test_model_job_set);
	tcase_add_test(tc, test_model_set_policy_returns_memory_to_os);
	tcase_add_test(tc, test_acts_tables_consistent);
	tcase_add_test(tc, test_layout_change_rolls_back_every_failure);
	tcase_add_test(tc, test_layout_lost_refuses_steps);
	tcase_add_test(tc, test_layout_switch_peak);
	tcase_add_loop_test(tc, test_plan_peak_matches_measured, 0, LOOPS);
	tcase_add_loop_test(tc, test_plan_fixed_counts_one_snapshot, 0, LOOPS);
	tcase_add_test(tc, test_oom_retry_every_site);
	tcase_add_test(tc, test_oom_least_fails_cleanly);
	tcase_add_test(tc, test_memtrace_step);
	tcase_add_test(tc, test_fp32_openblas_routes);
	tcase_add_test(tc, test_bf16_refused_without_isa);
	tcase_add_test(tc, test_bf16_follows_fp32);
	suite_add_tcase(s, tc);
	return s;
}
