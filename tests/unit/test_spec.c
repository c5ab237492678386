/* test_spec.c - tests of the job spec parser (engine/core/eng_spec*.c).
 *
 * What it covers: defaults, every field read back, the shape rules (preset, overrides,
 * bytes -> vocab 256, init_from), eng_spec_finish's checks against a known shape, file
 * loading, and a table of bad specs that must each give -1 and a message naming the key.
 * What it does not: what the engine does with a spec (training tests cover that).
 */
#include "tests.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_spec.h"

/* The smallest valid spec, with extra top-level fields spliced in. */
#define BASE "\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"t.bin\"}"
#define WITH(x) "{" BASE ", " x "}"

static const eng_config tiny = ENG_GPT2(2, 64, 4, 256, 256);

/* Parses text that must be accepted. */
static void parse_ok(eng_spec *s, const char *text)
{
	eng_err e = {0};
	int rc = eng_spec_parse(s, text, &e);
	ck_assert_msg(rc == 0, "spec %s refused: %s", text, e.msg);
}

/* Parses text that must be refused with a message containing needle. */
static void parse_bad(const char *text, const char *needle)
{
	eng_spec *s = malloc(sizeof *s);
	eng_err e = {0};
	ck_assert_ptr_nonnull(s);
	int rc = eng_spec_parse(s, text, &e);
	ck_assert_msg(rc == -1, "spec %.200s accepted (wanted an error naming '%s')", text,
		needle);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "spec %.200s: message '%s' lacks '%s'",
		text, e.msg, needle);
	size_t n = strlen(e.msg);
	ck_assert_msg(n > 0 && e.msg[n - 1] != '.', "message '%s' ends with a full stop", e.msg);
	free(s);
}

static void finish_bad(const char *text, const eng_config *cfg, const char *needle)
{
	eng_spec s;
	eng_err e = {0};
	parse_ok(&s, text);
	ck_assert_msg(eng_spec_finish(&s, cfg, &e) == -1, "finish accepted %s", text);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "finish of %s: message '%s' lacks '%s'",
		text, e.msg, needle);
}

static int cfg_eq(const eng_config *a, const eng_config *b)
{
	return a->n_layer == b->n_layer && a->n_embd == b->n_embd && a->n_head == b->n_head &&
	       a->n_positions == b->n_positions && a->vocab_size == b->vocab_size;
}

START_TEST(test_eng_spec_parse_defaults)
{
	eng_spec s;
	eng_err e = {0};
	parse_ok(&s, "{" BASE "}");
	ck_assert_str_eq(s.name, "job");
	ck_assert(cfg_eq(&s.cfg, &tiny));
	ck_assert_int_eq(s.has_shape, 1);
	ck_assert_str_eq(s.init_from, "");
	ck_assert_int_eq(s.resume, 0);
	ck_assert_str_eq(s.train_path, "t.bin");
	ck_assert_str_eq(s.val_path, "");
	ck_assert_int_eq(s.data_format, ENG_DATA_LLMC);
	ck_assert_int_eq(s.batch, 4);
	ck_assert_int_eq(s.seq_len, 0);
	ck_assert_int_eq(s.steps, 1000);
	ck_assert_uint_eq(s.seed, 1337);
	ck_assert_float_eq(s.lr, 3e-4f);
	ck_assert_float_eq(s.beta1, 0.9f);
	ck_assert_float_eq(s.beta2, 0.95f);
	ck_assert_float_eq(s.eps, 1e-8f);
	ck_assert_float_eq(s.weight_decay, 0.1f);
	ck_assert_float_eq(s.grad_clip, 1.0f);
	ck_assert_int_eq(s.sched, ENG_SCHED_COSINE);
	ck_assert_int_eq(s.warmup, 0);
	ck_assert_float_eq(s.min_lr_frac, 0.1f);
	ck_assert_str_eq(s.remat_default, "off");
	ck_assert_int_eq(s.n_assign, 0);
	ck_assert_int_eq(s.n_alias, 0);
	ck_assert_int_eq(s.chunk_rows, 0);
	ck_assert_str_eq(s.save_dir, "");
	ck_assert_int_eq(s.save_every, 0);
	ck_assert_int_eq(s.save_keep, 3);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	ck_assert_int_eq(s.threads, cpus < 1 ? 1 : cpus > 256 ? 256 : (int)cpus);
	ck_assert_int_eq(s.device, ENG_DEVICE_CPU);

	/* the shape-dependent default: min(256, n_positions) */
	ck_assert_int_eq(eng_spec_finish(&s, &s.cfg, &e), 0);
	ck_assert_int_eq(s.seq_len, 256);
	parse_ok(&s, "{\"model\": {\"preset\": \"gpt2\"}, \"data\": {\"train\": \"t\"}}");
	ck_assert_int_eq(eng_spec_finish(&s, &s.cfg, &e), 0);
	ck_assert_int_eq(s.seq_len, 256);
	parse_ok(&s, "{\"model\": {\"preset\": \"tiny\", \"n_positions\": 100},"
		     " \"data\": {\"train\": \"t\"}}");
	ck_assert_int_eq(eng_spec_finish(&s, &s.cfg, &e), 0);
	ck_assert_int_eq(s.seq_len, 100);
}
END_TEST

START_TEST(test_eng_spec_parse_full)
{
	eng_spec s;
	eng_err e = {0};
	parse_ok(&s, "{\"name\": \"demo-1\","
		     " \"model\": {\"n_layer\": 4, \"n_embd\": 128, \"n_head\": 8,"
		     "   \"n_positions\": 512, \"vocab_size\": 50257},"
		     " \"data\": {\"train\": \"/d/train.bin\", \"format\": \"llmc\","
		     "   \"val\": \"/d/val.bin\"},"
		     " \"batch\": 8, \"seq_len\": 128, \"steps\": 5000,"
		     " \"seed\": 9223372036854775807,"
		     " \"optim\": {\"lr\": 1, \"beta1\": 0.8, \"beta2\": 0.99, \"eps\": 1e-6,"
		     "   \"weight_decay\": 0, \"grad_clip\": 0.5},"
		     " \"schedule\": {\"kind\": \"constant\", \"warmup\": 100,"
		     "   \"min_lr_frac\": 0},"
		     " \"remat\": {\"default\": \"selective\","
		     "   \"sections\": {\"trunk\": \"full\", \"h.0\": \"off\","
		     "     \"head\": \"chunked\"},"
		     "   \"aliases\": {\"trunk\": \"h.1-3\", \"first\": \"h.0\"},"
		     "   \"chunk_rows\": 1024},"
		     " \"save\": {\"dir\": \"/ck\", \"every\": 500, \"keep\": 2},"
		     " \"threads\": 3, \"device\": \"cuda\"}");
	eng_config want = ENG_GPT2(4, 128, 8, 512, 50257);
	ck_assert_str_eq(s.name, "demo-1");
	ck_assert(cfg_eq(&s.cfg, &want));
	ck_assert_int_eq(s.has_shape, 1);
	ck_assert_str_eq(s.train_path, "/d/train.bin");
	ck_assert_str_eq(s.val_path, "/d/val.bin");
	ck_assert_int_eq(s.data_format, ENG_DATA_LLMC);
	ck_assert_int_eq(s.batch, 8);
	ck_assert_int_eq(s.seq_len, 128);
	ck_assert_int_eq(s.steps, 5000);
	ck_assert_uint_eq(s.seed, (uint64_t)INT64_MAX);
	ck_assert_float_eq(s.lr, 1.0f);
	ck_assert_float_eq(s.beta1, 0.8f);
	ck_assert_float_eq(s.beta2, 0.99f);
	ck_assert_float_eq(s.eps, 1e-6f);
	ck_assert_float_eq(s.weight_decay, 0.0f);
	ck_assert_float_eq(s.grad_clip, 0.5f);
	ck_assert_int_eq(s.sched, ENG_SCHED_CONSTANT);
	ck_assert_int_eq(s.warmup, 100);
	ck_assert_float_eq(s.min_lr_frac, 0.0f);
	ck_assert_str_eq(s.remat_default, "selective");
	/* in the order written, not sorted */
	ck_assert_int_eq(s.n_assign, 3);
	ck_assert_str_eq(s.assign[0].selector, "trunk");
	ck_assert_str_eq(s.assign[0].mode, "full");
	ck_assert_str_eq(s.assign[1].selector, "h.0");
	ck_assert_str_eq(s.assign[1].mode, "off");
	ck_assert_str_eq(s.assign[2].selector, "head");
	ck_assert_str_eq(s.assign[2].mode, "chunked");
	ck_assert_int_eq(s.n_alias, 2);
	ck_assert_str_eq(s.alias[0].name, "trunk");
	ck_assert_str_eq(s.alias[0].selector, "h.1-3");
	ck_assert_str_eq(s.alias[1].name, "first");
	ck_assert_str_eq(s.alias[1].selector, "h.0");
	ck_assert_int_eq(s.chunk_rows, 1024);
	ck_assert_str_eq(s.save_dir, "/ck");
	ck_assert_int_eq(s.save_every, 500);
	ck_assert_int_eq(s.save_keep, 2);
	ck_assert_int_eq(s.threads, 3);
	ck_assert_int_eq(s.device, ENG_DEVICE_CUDA);

	ck_assert_msg(eng_spec_finish(&s, &s.cfg, &e) == 0, "finish: %s", e.msg);
	ck_assert_int_eq(s.seq_len, 128);
}
END_TEST

START_TEST(test_eng_spec_parse_schedule_string)
{
	eng_spec s;
	parse_ok(&s, WITH("\"schedule\": \"constant\""));
	ck_assert_int_eq(s.sched, ENG_SCHED_CONSTANT);
	ck_assert_int_eq(s.warmup, 0);
	ck_assert_float_eq(s.min_lr_frac, 0.1f);
	parse_ok(&s, WITH("\"schedule\": \"cosine\""));
	ck_assert_int_eq(s.sched, ENG_SCHED_COSINE);
	/* an object without kind keeps the default kind */
	parse_ok(&s, WITH("\"steps\": 10, \"schedule\": {\"warmup\": 10}"));
	ck_assert_int_eq(s.sched, ENG_SCHED_COSINE);
	ck_assert_int_eq(s.warmup, 10);
}
END_TEST

START_TEST(test_eng_spec_parse_preset_override)
{
	eng_spec s;
	parse_ok(&s, "{\"model\": {\"preset\": \"gpt2-small\", \"n_layer\": 4,"
		     " \"n_positions\": 512}, \"data\": {\"train\": \"t\"}}");
	eng_config want = ENG_GPT2(4, 768, 12, 512, 50257);
	ck_assert(cfg_eq(&s.cfg, &want));
	ck_assert_int_eq(s.has_shape, 1);
	/* the five fields alone make a shape too */
	parse_ok(&s, "{\"model\": {\"n_layer\": 1, \"n_embd\": 8, \"n_head\": 2,"
		     " \"n_positions\": 16, \"vocab_size\": 300}, \"data\": {\"train\": \"t\"}}");
	eng_config want2 = ENG_GPT2(1, 8, 2, 16, 300);
	ck_assert(cfg_eq(&s.cfg, &want2));
}
END_TEST

/* The Llama family's keys: a preset, its fields overridden, a shape without one (LlamaConfig's
 * defaults), and what is refused */
START_TEST(test_eng_spec_parse_llama)
{
	eng_spec s;
	parse_ok(&s, "{\"model\": {\"preset\": \"llama-tiny\", \"n_kv_head\": 1, \"rope_theta\": 5e5},"
		     " \"data\": {\"train\": \"t\"}}");
	ck_assert(s.cfg.arch == ENG_ARCH_LLAMA && s.cfg.n_kv_head == 1 && s.cfg.n_head == 4 &&
		s.cfg.intermediate_size == 176 && s.cfg.rope_theta == 5e5 && s.cfg.untied);
	parse_ok(&s, "{\"model\": {\"arch\": \"llama\", \"n_layer\": 2, \"n_embd\": 32, \"n_head\": 4,"
		     " \"n_positions\": 16, \"vocab_size\": 300, \"intermediate_size\": 40,"
		     " \"tie_word_embeddings\": true}, \"data\": {\"train\": \"t\"}}");
	ck_assert(s.cfg.arch == ENG_ARCH_LLAMA && s.cfg.n_kv_head == 4 && !s.cfg.untied &&
		s.cfg.rope_theta == 10000.0 && s.cfg.rms_norm_eps == 1e-6);
	parse_ok(&s, "{\"model\": {\"preset\": \"tiny\", \"arch\": \"gpt2\"}, \"data\": {\"train\": \"t\"}}");
	ck_assert(s.cfg.arch == ENG_ARCH_GPT2);
	parse_bad("{\"model\": {\"preset\": \"tiny\", \"n_kv_head\": 2}, \"data\": {\"train\": \"t\"}}",
		"'model.n_kv_head' is a Llama setting");
	parse_bad("{\"model\": {\"preset\": \"tiny\", \"arch\": \"llama\"}, \"data\": {\"train\": \"t\"}}",
		"is not the preset's");
	parse_bad("{\"model\": {\"arch\": \"mamba\"}, \"data\": {\"train\": \"t\"}}", "'model.arch' must be");
	parse_bad("{\"model\": {\"arch\": \"llama\", \"n_layer\": 2, \"n_embd\": 32, \"n_head\": 4,"
		  " \"n_positions\": 16, \"vocab_size\": 300}, \"data\": {\"train\": \"t\"}}",
		"'model.intermediate_size' is missing");
	parse_bad("{\"model\": {\"preset\": \"llama-tiny\", \"n_kv_head\": 3}, \"data\": {\"train\": \"t\"}}",
		"n_kv_head 3 must divide n_head 4");
	parse_bad("{\"model\": {\"preset\": \"llama-tiny\", \"rms_norm_eps\": 0}, \"data\": {\"train\": \"t\"}}",
		"'model.rms_norm_eps' 0 out of range");
	parse_bad("{\"model\": {\"preset\": \"llama-tiny\", \"tie_word_embeddings\": 1}, \"data\": {\"train\": \"t\"}}",
		"'model.tie_word_embeddings' must be true or false");
	parse_bad("{\"model\": {\"init_from\": \"x\", \"rope_theta\": 1e4}, \"data\": {\"train\": \"t\"}}",
		"cannot be combined with 'model.rope_theta'");
	/* a Llama on a GPU: not yet, said when the job is checked */
	eng_config ll;
	eng_err e;
	ck_assert(eng_config_preset("llama-tiny", &ll, &e) == 0);
	finish_bad("{\"model\": {\"preset\": \"llama-tiny\"}, \"data\": {\"train\": \"t\"},"
		   " \"device\": \"cuda\"}", &ll, "trains GPT-2 models only so far");
}
END_TEST

/* data.format by data.train's name when not given (.txt text, .jsonl jsonl, else llmc), as
 * load_dataset picks its loader; field defaults to "text"; a text prompt is kept for the
 * tokenizer to encode when the run starts. */
START_TEST(test_eng_spec_parse_text_data)
{
	eng_spec s;
	parse_ok(&s, "{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"/d/c.txt\","
		     " \"tokenizer\": \"/t\"}, \"save\": {\"dir\": \"/s\"}}");
	ck_assert_int_eq(s.data_format, ENG_DATA_TEXT);
	ck_assert_str_eq(s.data_field, "text");
	ck_assert_str_eq(s.data_cache, "");
	parse_ok(&s, "{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"/d/c.jsonl\","
		     " \"tokenizer\": \"/t\", \"field\": \"body\", \"cache\": \"/c\"},"
		     " \"sample\": {\"prompt\": \"Once upon\"}}");
	ck_assert_int_eq(s.data_format, ENG_DATA_JSONL);
	ck_assert_str_eq(s.data_field, "body");
	ck_assert_str_eq(s.data_cache, "/c");
	ck_assert_str_eq(s.sample_text, "Once upon");
	ck_assert_int_eq(s.sample_n, 0); /* encoded by the run's tokenizer */
	/* a name of neither kind stays llmc; format given wins over the name */
	parse_ok(&s, "{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"/d/c.bin\"}}");
	ck_assert_int_eq(s.data_format, ENG_DATA_LLMC);
	parse_ok(&s, "{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"/d/c.txt\","
		     " \"format\": \"bytes\"}}");
	ck_assert_int_eq(s.data_format, ENG_DATA_BYTES);
	/* a model directory may hold the tokenizer: init_from alone is enough to parse */
	parse_ok(&s, "{\"model\": {\"init_from\": \"/m\"}, \"data\": {\"train\": \"/d/c.txt\"}}");
	ck_assert_int_eq(s.data_format, ENG_DATA_TEXT);
}
END_TEST

START_TEST(test_eng_spec_parse_bytes_vocab)
{
	eng_spec s;
	/* bytes overrides the preset's 50257 ... */
	parse_ok(&s, "{\"model\": {\"preset\": \"gpt2\"},"
		     " \"data\": {\"train\": \"t\", \"format\": \"bytes\"}}");
	ck_assert_int_eq(s.data_format, ENG_DATA_BYTES);
	ck_assert_int_eq(s.cfg.vocab_size, 256);
	ck_assert_int_eq(s.cfg.n_layer, 12);
	/* ... but not an explicit vocab_size */
	parse_ok(&s, "{\"model\": {\"preset\": \"gpt2\", \"vocab_size\": 512},"
		     " \"data\": {\"train\": \"t\", \"format\": \"bytes\"}}");
	ck_assert_int_eq(s.cfg.vocab_size, 512);
	/* and it completes a shape given without vocab_size */
	parse_ok(&s, "{\"model\": {\"n_layer\": 1, \"n_embd\": 8, \"n_head\": 2,"
		     " \"n_positions\": 16}, \"data\": {\"train\": \"t\", \"format\": \"bytes\"}}");
	ck_assert_int_eq(s.has_shape, 1);
	ck_assert_int_eq(s.cfg.vocab_size, 256);
}
END_TEST

START_TEST(test_eng_spec_parse_init_from)
{
	eng_spec s;
	eng_err e = {0};
	eng_config zero = ENG_GPT2(0, 0, 0, 0, 0);
	parse_ok(&s, "{\"model\": {\"init_from\": \"/ck/step-500\", \"resume\": true},"
		     " \"data\": {\"train\": \"t\", \"format\": \"bytes\"}, \"seq_len\": 64}");
	ck_assert_str_eq(s.init_from, "/ck/step-500");
	ck_assert_int_eq(s.resume, 1);
	ck_assert_int_eq(s.has_shape, 0);
	ck_assert(cfg_eq(&s.cfg, &zero));
	/* the checkpoint's config.json decides the shape */
	ck_assert_msg(eng_spec_finish(&s, &tiny, &e) == 0, "finish: %s", e.msg);
	ck_assert(cfg_eq(&s.cfg, &tiny));
	ck_assert_int_eq(s.seq_len, 64);
	parse_ok(&s, "{\"model\": {\"init_from\": \"ck\", \"resume\": false},"
		     " \"data\": {\"train\": \"t\"}}");
	ck_assert_int_eq(s.resume, 0);
}
END_TEST

START_TEST(test_eng_spec_parse_null_text)
{
	eng_spec s;
	eng_err e = {0};
	ck_assert_int_eq(eng_spec_parse(&s, NULL, &e), -1);
	ck_assert_str_ne(e.msg, "");
	/* a NULL err is allowed: the result still says no */
	ck_assert_int_eq(eng_spec_parse(&s, "[]", NULL), -1);
}
END_TEST

/* Each entry: a spec that must be refused, and what the message must contain. */
static const struct {
	const char *text;
	const char *needle;
} bad_specs[] = {
	/* structure */
	{"", "line 1"},
	{"{batch: 4}", "invalid JSON: line 1, column"},
	{"{\n  \"batch\": 4,\n}", "line 3"},
	{"[1, 2]", "array"},
	{"null", "line 1"},
	{"\"job\"", "line 1"},
	{"{" BASE "} {}", "end of input expected"},
	{WITH("\"batch\": 4, \"batch\": 8"), "duplicate"},
	{WITH("\"batch\": 4, \"batch\": 8"), "line 1, column 77: duplicate object key"},
	/* unknown keys, with their path and the known ones */
	{WITH("\"bogus\": 1"), "unknown key 'bogus'"},
	{WITH("\"optim\": {\"betas\": [0.9, 0.95]}"), "unknown key 'optim.betas'"},
	{WITH("\"optim\": {\"betas\": [0.9, 0.95]}"), "beta1"},
	{WITH("\"schedule\": {\"warmup_steps\": 3}"), "'schedule.warmup_steps'"},
	{WITH("\"remat\": {\"policy\": \"full\"}"), "'remat.policy'"},
	{WITH("\"save\": {\"path\": \"x\"}"), "'save.path'"},
	{"{\"model\": {\"preset\": \"tiny\", \"layers\": 2}, \"data\": {\"train\": \"t\"}}",
		"'model.layers'"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"t\", \"test\": \"v\"}}",
		"'data.test'"},
	/* the training loop's keys */
	{WITH("\"grad_accum\": 0"), "'grad_accum' 0 out of range 1..65536"},
	{WITH("\"eval\": {\"every\": 10}"), "'eval' needs 'data.val'"},
	{WITH("\"eval\": {\"often\": 10}"), "unknown key 'eval.often'"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"t\", \"val\": \"v\"}, "
		"\"eval\": {\"every\": -1}}", "'eval.every' -1 out of range"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"t\", \"shuffle\": 1}}",
		"'data.shuffle' must be true or false"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"t\", \"shuffle_seed\": "
		"4294967296}}", "'data.shuffle_seed' 4294967296 out of range"},
	{WITH("\"sample\": {\"prompt\": 5}"), "must be text or an array of 1 to 1024 token ids"},
	{WITH("\"sample\": {\"prompt\": [1, -2]}"), "'sample.prompt[1]' must be a token id"},
	{WITH("\"sample\": {\"tokens\": 0}"), "'sample.tokens' 0 out of range"},
	{WITH("\"sample\": {\"temperature\": -1}"), "'sample.temperature'"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"t\", \"format\": "
		"\"bytes\"}, \"sample\": {\"prompt\": [1]}}", "text of 1 to 1024 bytes"},
	{WITH("\"parallel\": {\"ranks\": 0}"), "'parallel.ranks' 0 out of range"},
	{WITH("\"parallel\": {\"hosts\": [\"a;b\"]}"), "'parallel.hosts[0]' must be a host name"},
	{WITH("\"parallel\": {\"hosts\": [\"$(id)\"]}"), "must be a host name"},
	{WITH("\"parallel\": {\"hosts\": [\"-H\"]}"), "not starting with '-'"},
	{WITH("\"parallel\": {\"hosts\": [\"node1:x\"]}"), "optional ':slots'"},
	{WITH("\"parallel\": {\"hosts\": [\"a\"], \"hostfile\": \"/h\"}"), "not both"},
	{WITH("\"parallel\": {\"hostfile\": \"-x\"}"), "a path, not an option"},
	{WITH("\"parallel\": {\"ranks\": 2, \"bogus\": 1}"), "unknown key 'parallel.bogus'"},
	{WITH("\"parallel\": {\"mca\": {\"plm_rsh_agent\": \"sh\"}}"),
		"'parallel.mca' does not take 'plm_rsh_agent'"},
	{WITH("\"parallel\": {\"mca\": {\"btl\": \"-x\"}}"), "not starting with '-'"},
	{WITH("\"parallel\": {\"mca\": {\"btl\": \"tcp;id\"}}"), "'parallel.mca.btl' must be"},
	{WITH("\"parallel\": {\"mca\": {\"btl\": \"a b\"}}"), "'parallel.mca.btl' must be"},
	{WITH("\"parallel\": {\"mca\": {\"btl\": 1}}"), "'parallel.mca.btl' must be"},
	{WITH("\"parallel\": {\"mca\": [\"btl\"]}"), "'parallel.mca' must be an object"},
	{WITH("\"parallel\": {\"launcher\": \"pbs\"}"), "must be \"ssh\" or \"slurm\""},
	{WITH("\"parallel\": {\"shard\": \"grads\"}"), "\"optimizer\" or \"none\""},
	{WITH("\"parallel\": {\"bucket_mb\": -1}"), "'parallel.bucket_mb' -1 out of range"},
	/* types */
	{WITH("\"batch\": \"8\""), "'batch' must be an integer"},
	{WITH("\"batch\": 2.5"), "'batch' must be an integer"},
	{WITH("\"batch\": null"), "'batch' must be an integer"},
	{WITH("\"steps\": 1e3"), "'steps' must be an integer"},
	{WITH("\"optim\": {\"lr\": \"3e-4\"}"), "'optim.lr' must be a number"},
	{WITH("\"optim\": [1]"), "'optim' must be an object"},
	{WITH("\"name\": 7"), "'name' must be a string"},
	{WITH("\"schedule\": 5"), "'schedule'"},
	{WITH("\"device\": 1"), "'device'"},
	{WITH("\"remat\": {\"sections\": [\"full\"]}"), "'remat.sections'"},
	{WITH("\"remat\": {\"sections\": {\"h.0\": 1}}"), "'remat.sections.h.0'"},
	{WITH("\"remat\": {\"aliases\": {\"x\": 3}}"), "'remat.aliases.x'"},
	{WITH("\"remat\": {\"default\": true}"), "'remat.default'"},
	{"{\"model\": \"tiny\", \"data\": {\"train\": \"t\"}}", "'model' must be an object"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": \"t.bin\"}", "'data' must be an object"},
	{"{\"model\": {\"preset\": 1}, \"data\": {\"train\": \"t\"}}", "'model.preset'"},
	{"{\"model\": {\"init_from\": \"c\", \"resume\": 1}, \"data\": {\"train\": \"t\"}}",
		"'model.resume'"},
	/* ranges */
	{WITH("\"batch\": 0"), "'batch' 0 out of range 1..65536"},
	{WITH("\"batch\": 65537"), "'batch'"},
	{WITH("\"batch\": -3"), "'batch'"},
	{WITH("\"seq_len\": 0"), "'seq_len'"},
	{WITH("\"steps\": 0"), "'steps'"},
	{WITH("\"steps\": 2000000000"), "'steps'"},
	{WITH("\"seed\": -1"), "'seed'"},
	{WITH("\"batch\": 65536, \"seq_len\": 65536"), "'seq_len'"},
	{WITH("\"optim\": {\"lr\": 0}"), "'optim.lr'"},
	{WITH("\"optim\": {\"lr\": -0.001}"), "'optim.lr'"},
	{WITH("\"optim\": {\"lr\": 11}"), "'optim.lr' 11 out of range (0, 10]"},
	{WITH("\"optim\": {\"beta1\": 1}"), "'optim.beta1' 1 out of range [0, 1)"},
	{WITH("\"optim\": {\"beta1\": -0.1}"), "'optim.beta1'"},
	{WITH("\"optim\": {\"beta1\": 0.99999999999}"), "'optim.beta1'"}, /* 1.0f */
	{WITH("\"optim\": {\"beta2\": 1.5}"), "'optim.beta2'"},
	{WITH("\"optim\": {\"eps\": 0}"), "'optim.eps'"},
	{WITH("\"optim\": {\"eps\": 1e-50}"), "'optim.eps'"},      /* 0 as a float */
	{WITH("\"optim\": {\"eps\": 1e39}"), "'optim.eps'"},       /* past FLT_MAX */
	{WITH("\"optim\": {\"weight_decay\": -1}"), "'optim.weight_decay'"},
	{WITH("\"optim\": {\"grad_clip\": -0.5}"), "'optim.grad_clip'"},
	{WITH("\"schedule\": {\"warmup\": 1001}"), "'schedule.warmup' 1001 out of range"},
	{WITH("\"steps\": 10, \"schedule\": {\"warmup\": 11}"), "'schedule.warmup'"},
	{WITH("\"schedule\": {\"warmup\": -1}"), "'schedule.warmup'"},
	{WITH("\"schedule\": {\"min_lr_frac\": 1.5}"), "'schedule.min_lr_frac'"},
	{WITH("\"schedule\": {\"min_lr_frac\": -0.1}"), "'schedule.min_lr_frac'"},
	{WITH("\"threads\": 0"), "'threads' 0 out of range 1..256"},
	{WITH("\"threads\": 257"), "'threads'"},
	{WITH("\"remat\": {\"chunk_rows\": 0}"), "'remat.chunk_rows'"},
	{WITH("\"remat\": {\"chunk_rows\": 1048577}"), "'remat.chunk_rows'"},
	{WITH("\"save\": {\"keep\": 0}"), "'save.keep'"},
	{WITH("\"save\": {\"every\": -1}"), "'save.every'"},
	{WITH("\"save\": {\"dir\": \"\"}"), "'save.dir'"},
	/* numbers too large for anything: jansson refuses them, never a crash */
	{WITH("\"optim\": {\"lr\": 1e400}"), "line 1"},
	{WITH("\"optim\": {\"lr\": -1e400}"), "line 1"},
	{WITH("\"seed\": 99999999999999999999"), "line 1"},
	{WITH("\"batch\": 4294967297"), "'batch'"}, /* 2^32 + 1 must not wrap to 1 */
	{WITH("\"optim\": {\"lr\": NaN}"), "line 1"},
	{WITH("\"optim\": {\"lr\": Infinity}"), "line 1"},
	/* choices */
	{WITH("\"schedule\": \"linear\""), "'schedule' must be \"cosine\" or \"constant\""},
	{WITH("\"schedule\": {\"kind\": \"step\"}"), "'schedule.kind'"},
	{WITH("\"device\": \"tpu\""), "'device'"},
	{WITH("\"precision\": \"fp16\""), "'precision' must be \"fp32\" or \"bf16\", not 'fp16'"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"t\", \"format\": \"csv\"}}",
		"'data.format' must be \"llmc\", \"bytes\", \"text\" or \"jsonl\", not 'csv'"},
	/* text: a tokenizer to read it with; field is JSON Lines', cache text's */
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"t\", \"format\": \"text\"}}",
		"'data.format' is \"text\": give data.tokenizer"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"c.txt\"}}",
		"'data.format' is \"text\": give data.tokenizer"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"c.txt\", "
	 "\"tokenizer\": \"/t\", \"field\": \"body\"}}",
		"'data.field' names the key of a JSON Lines document: it needs data.format"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"c.jsonl\", "
	 "\"tokenizer\": \"/t\", \"field\": \"\"}}",
		"'data.field' must not be empty"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"c.bin\", \"cache\": \"/c\"}}",
		"'data.cache' holds text tokenized: it needs data.format"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"c.jsonl\", "
	 "\"tokenizer\": \"/t\"}, \"sample\": {\"prompt\": \"\"}}",
		"'sample.prompt' must be text of 1 to 4095 bytes"},
	{WITH("\"remat\": {\"default\": \"sometimes\"}"), "'remat.default'"},
	{WITH("\"remat\": {\"default\": \"chunked\"}"), "'remat.default'"},
	{WITH("\"remat\": {\"sections\": {\"h.0\": \"fast\"}}"), "'remat.sections.h.0'"},
	{WITH("\"remat\": {\"sections\": {\"\": \"full\"}}"), "'remat.sections'"},
	{WITH("\"remat\": {\"aliases\": {\"\": \"h.0\"}}"), "'remat.aliases'"},
	{WITH("\"remat\": {\"aliases\": {\"x\": \"\"}}"), "'remat.aliases.x'"},
	/* strings */
	{WITH("\"name\": \"\""), "'name'"},
	{WITH("\"name\": \"a\\u0001b\""), "'name'"},
	{WITH("\"name\": \"a\\u0000b\""), "line 1"}, /* jansson refuses NUL in strings */
	{WITH("\"name\": \"0123456789012345678901234567890123456789012345678901234567890123\""),
		"'name' is too long"},
	/* data */
	{"{\"model\": {\"preset\": \"tiny\"}}", "missing 'data'"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {}}", "missing 'data.train'"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"val\": \"v\"}}", "'data.train'"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"\"}}", "'data.train'"},
	{"{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": 3}}", "'data.train'"},
	/* model */
	{"{\"data\": {\"train\": \"t\"}}", "missing 'model'"},
	{"{\"model\": {}, \"data\": {\"train\": \"t\"}}", "'model' shape is incomplete"},
	{"{\"model\": {\"n_layer\": 2, \"n_embd\": 64}, \"data\": {\"train\": \"t\"}}",
		"n_head, n_positions, vocab_size"},
	{"{\"model\": {\"init_from\": \"ck\", \"preset\": \"tiny\"}, \"data\": {\"train\": \"t\"}}",
		"'model.preset'"},
	{"{\"model\": {\"init_from\": \"ck\", \"n_layer\": 2}, \"data\": {\"train\": \"t\"}}",
		"'model.init_from' cannot be combined with 'model.n_layer'"},
	{"{\"model\": {\"init_from\": \"\"}, \"data\": {\"train\": \"t\"}}", "'model.init_from'"},
	{"{\"model\": {\"preset\": \"tiny\", \"resume\": true}, \"data\": {\"train\": \"t\"}}",
		"'model.resume'"},
	{"{\"model\": {\"preset\": \"gpt5\"}, \"data\": {\"train\": \"t\"}}", "'model.preset'"},
	{"{\"model\": {\"preset\": \"tiny\", \"n_head\": 5}, \"data\": {\"train\": \"t\"}}",
		"n_head"},
	{"{\"model\": {\"preset\": \"tiny\", \"n_layer\": 0}, \"data\": {\"train\": \"t\"}}",
		"'model.n_layer'"},
	{"{\"model\": {\"preset\": \"tiny\", \"n_layer\": 129}, \"data\": {\"train\": \"t\"}}",
		"'model.n_layer'"},
	{"{\"model\": {\"preset\": \"tiny\", \"vocab_size\": 1e3}, \"data\": {\"train\": \"t\"}}",
		"'model.vocab_size' must be an integer"},
};

START_TEST(test_eng_spec_parse_bad)
{
	parse_bad(bad_specs[_i].text, bad_specs[_i].needle);
}
END_TEST

/* Builds a spec whose one field holds a string of n copies of c. */
static char *long_field(const char *before, char c, size_t n, const char *after)
{
	size_t a = strlen(before), b = strlen(after);
	char *t = malloc(a + n + b + 1);
	ck_assert_ptr_nonnull(t);
	memcpy(t, before, a);
	memset(t + a, c, n);
	memcpy(t + a + n, after, b + 1);
	return t;
}

START_TEST(test_eng_spec_parse_long_strings)
{
	eng_spec s;
	char *t;
	/* the longest path kept, then one byte more */
	t = long_field("{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"", 'p',
		ENG_PATH_LEN - 1, "\"}}");
	parse_ok(&s, t);
	ck_assert_uint_eq(strlen(s.train_path), ENG_PATH_LEN - 1);
	free(t);
	t = long_field("{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"", 'p',
		ENG_PATH_LEN, "\"}}");
	parse_bad(t, "'data.train' is too long");
	free(t);
	t = long_field("{" BASE ", \"save\": {\"dir\": \"", 'd', 100000, "\"}}");
	parse_bad(t, "'save.dir' is too long");
	free(t);
	t = long_field("{" BASE ", \"remat\": {\"sections\": {\"", 'h', ENG_SELECTOR_LEN,
		"\": \"full\"}}}");
	parse_bad(t, "selector too long");
	free(t);
	t = long_field("{" BASE ", \"remat\": {\"aliases\": {\"", 'a', ENG_ALIAS_LEN,
		"\": \"h.0\"}}}");
	parse_bad(t, "alias name too long");
	free(t);
	t = long_field("{" BASE ", \"remat\": {\"aliases\": {\"a\": \"", 'h', ENG_SELECTOR_LEN,
		"\"}}}");
	parse_bad(t, "'remat.aliases.a'");
	free(t);
	/* a huge unknown key is quoted cut short, and the message still fits */
	t = long_field("{" BASE ", \"", 'k', 1 << 20, "\": 1}");
	parse_bad(t, "unknown key 'kkkk");
	free(t);
}
END_TEST

START_TEST(test_eng_spec_parse_deep_nesting)
{
	/* {BASE, "name": [[[...]]]} */
	size_t depth = 100000;
	char *t;
	const char *head = "{" BASE ", \"name\": ";
	size_t h = strlen(head);
	t = malloc(h + 2 * depth + 2);
	ck_assert_ptr_nonnull(t);
	memcpy(t, head, h);
	memset(t + h, '[', depth);
	memset(t + h + depth, ']', depth);
	memcpy(t + h + 2 * depth, "}", 2);
	parse_bad(t, "line 1"); /* past jansson's depth limit */
	free(t);
	/* within the limit: parsed, then refused for its type */
	depth = 1000;
	t = malloc(h + 2 * depth + 2);
	ck_assert_ptr_nonnull(t);
	memcpy(t, head, h);
	memset(t + h, '[', depth);
	memset(t + h + depth, ']', depth);
	memcpy(t + h + 2 * depth, "}", 2);
	parse_bad(t, "'name' must be a string");
	free(t);
}
END_TEST

START_TEST(test_eng_spec_parse_too_many)
{
	eng_spec s;
	char *t = malloc(64 * 1024);
	ck_assert_ptr_nonnull(t);
	for (int pass = 0; pass < 4; pass++) {
		/* pass 0/1: sections at and past the limit; 2/3: aliases */
		int aliases = pass >= 2;
		int n = (aliases ? ENG_MAX_ALIASES : ENG_MAX_ASSIGN) + (pass & 1);
		size_t len = (size_t)sprintf(t, "{" BASE ", \"remat\": {\"%s\": {",
			aliases ? "aliases" : "sections");
		for (int i = 0; i < n; i++)
			len += (size_t)sprintf(t + len, "%s\"x%d\": \"%s\"", i ? ", " : "", i,
				aliases ? "h.0" : "full");
		sprintf(t + len, "}}}");
		if (pass & 1) {
			parse_bad(t, aliases ? "'remat.aliases'" : "'remat.sections'");
		} else {
			parse_ok(&s, t);
			ck_assert_int_eq(aliases ? s.n_alias : s.n_assign, n);
		}
	}
	free(t);
}
END_TEST

/* The loop's defaults, and what a prompt becomes: bytes of text, or ids checked against
 * the vocabulary once it is known. */
START_TEST(test_eng_spec_parse_loop)
{
	eng_spec s;
	eng_err e;
	parse_ok(&s, "{" BASE "}");
	ck_assert_int_eq(s.grad_accum, 1);
	ck_assert_int_eq(s.has_grad_accum, 0);
	ck_assert_int_eq(s.shuffle, 0);
	ck_assert_uint_eq(s.shuffle_seed, 42);
	ck_assert_int_eq(s.eval_every, 0);
	ck_assert_int_eq(s.sample_on, 0);
	parse_ok(&s, "{\"model\": {\"preset\": \"tiny\"}, \"data\": {\"train\": \"t\", "
		"\"format\": \"bytes\", \"shuffle\": true}, \"grad_accum\": 4, "
		"\"sample\": {\"prompt\": \"Hi\", \"every\": 50}}");
	ck_assert(s.grad_accum == 4 && s.has_grad_accum && s.shuffle);
	ck_assert(s.sample_on && s.sample_every == 50 && s.sample_tokens == 64);
	ck_assert(s.sample_n == 2 && s.sample_prompt[0] == 'H' && s.sample_prompt[1] == 'i');
	parse_ok(&s, WITH("\"sample\": {\"prompt\": [3, 300]}"));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), -1); /* tiny's vocabulary is 256 */
	ck_assert_msg(strstr(e.msg, "'sample.prompt[1]' is 300, out of range for vocab_size 256"),
		"%s", e.msg);
	parse_ok(&s, WITH("\"sample\": {}"));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), 0);
	finish_bad(WITH("\"sample\": {}, \"device\": \"cuda\""), &tiny,
		"device cuda does not sample yet");
	/* device cuda accumulates and runs ranks as the CPU does */
	parse_ok(&s, WITH("\"grad_accum\": 2, \"parallel\": {\"ranks\": 2}, \"device\": "
			  "\"cuda\""));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), 0);
	ck_assert(s.grad_accum == 2 && s.ranks == 2 && s.device == ENG_DEVICE_CUDA);
	/* precision bf16 is the CPU's matmuls (cfg.mm_bf16); a GPU's bf16 is its own */
	parse_ok(&s, WITH("\"precision\": \"bf16\""));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), 0);
	ck_assert(s.precision == ENG_PREC_BF16 && s.has_precision && s.cfg.mm_bf16 == 1);
	parse_ok(&s, WITH("\"precision\": \"bf16\", \"device\": \"cuda\""));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), 0);
	ck_assert(s.precision == ENG_PREC_BF16 && s.cfg.mm_bf16 == 0);
	parse_ok(&s, WITH("\"threads\": 1"));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), 0);
	ck_assert(s.precision == ENG_PREC_FP32 && !s.has_precision && s.cfg.mm_bf16 == 0);
	parse_ok(&s, WITH("\"sample\": {}"));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), 0);
	ck_assert(s.sample_n == 1 && s.sample_prompt[0] == 0); /* no <|endoftext|> in 256 */
	parse_ok(&s, WITH("\"parallel\": {\"ranks\": 4, \"hosts\": [\"node-1:2\", \"node_2\"]}"));
	ck_assert(s.ranks == 4 && s.has_ranks && strcmp(s.hosts, "node-1:2,node_2") == 0);
	parse_ok(&s, WITH("\"parallel\": {\"ranks\": 2, \"mca\": {\"btl\": \"self,tcp\", "
			  "\"btl_tcp_if_include\": \"10.0.0.0/24\", \"pml\": \"^ucx\"}}"));
	ck_assert_str_eq(s.mca, "btl=self,tcp;btl_tcp_if_include=10.0.0.0/24;pml=^ucx");
	parse_ok(&s, WITH("\"parallel\": {\"ranks\": 2, \"launcher\": \"slurm\"}"));
	ck_assert_str_eq(s.launcher, "slurm");
	/* ZeRO-1: each rank's part of the optimizer, whole slices of the norm's 64 */
	parse_ok(&s, WITH("\"parallel\": {\"ranks\": 3, \"shard\": \"optimizer\"}"));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), 0);
	ck_assert(s.shard_optimizer && s.cfg.opt_shards == 3 && s.bucket_mb == ENG_BUCKET_MB);
	parse_ok(&s, WITH("\"parallel\": {\"ranks\": 2, \"bucket_mb\": 0.5}"));
	ck_assert(s.bucket_mb == 0.5f);
	parse_ok(&s, WITH("\"parallel\": {\"ranks\": 1, \"shard\": \"optimizer\"}"));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), 0);
	ck_assert_int_eq(s.cfg.opt_shards, 0); /* one rank holds it all */
	finish_bad(WITH("\"parallel\": {\"ranks\": 65, \"shard\": \"optimizer\"}"), &tiny,
		"at most 64 ranks");
	finish_bad(WITH("\"device\": \"cuda\", \"parallel\": {\"ranks\": 2, \"shard\": "
			"\"optimizer\"}"), &tiny, "device cuda holds the whole optimizer");
}
END_TEST

START_TEST(test_eng_spec_finish_seq_len)
{
	eng_spec s;
	eng_err e = {0};
	/* tiny has n_positions 256 */
	finish_bad(WITH("\"seq_len\": 257"), &tiny, "'seq_len' 257 out of range");
	parse_ok(&s, WITH("\"seq_len\": 256"));
	ck_assert_int_eq(eng_spec_finish(&s, &tiny, &e), 0);
	ck_assert_int_eq(s.seq_len, 256);
	/* a shape from outside is checked before anything is sized by it */
	eng_config huge = tiny;
	huge.n_layer = ENG_MAX_LAYERS + 1;
	finish_bad("{\"model\": {\"init_from\": \"c\"}, \"data\": {\"train\": \"t\"}}", &huge,
		"n_layer");
}
END_TEST

START_TEST(test_eng_spec_finish_bytes_vocab)
{
	eng_config small = tiny;
	small.vocab_size = 100;
	finish_bad("{\"model\": {\"init_from\": \"c\"}, \"data\": {\"train\": \"t\","
		   " \"format\": \"bytes\"}}",
		&small, "'data.format'");
	finish_bad("{\"model\": {\"preset\": \"tiny\", \"vocab_size\": 100}, \"data\": "
		   "{\"train\": \"t\", \"format\": \"bytes\"}}",
		&small, "vocab_size is 100");
}
END_TEST

START_TEST(test_eng_spec_finish_policy)
{
	eng_spec s;
	eng_err e = {0};
	/* tiny has blocks h.0-1 */
	parse_ok(&s, WITH("\"remat\": {\"default\": \"full\", \"aliases\": {\"trunk\": \"h.1\"},"
			  " \"sections\": {\"trunk\": \"selective\", \"head\": \"chunked\","
			  " \"all\": \"off\", \"h.0-1\": \"full\"}}"));
	ck_assert_msg(eng_spec_finish(&s, &tiny, &e) == 0, "finish: %s", e.msg);
	finish_bad(WITH("\"remat\": {\"sections\": {\"nosuch\": \"full\"}}"), &tiny,
		"'remat.sections.nosuch'");
	finish_bad(WITH("\"remat\": {\"sections\": {\"h.5\": \"full\"}}"), &tiny,
		"'remat.sections.h.5'");
	finish_bad(WITH("\"remat\": {\"sections\": {\"h.x\": \"full\"}}"), &tiny,
		"'remat.sections.h.x'");
	/* a typo gets a "did you mean", as a mode's does */
	finish_bad(WITH("\"remat\": {\"sections\": {\"hed\": \"chunked\"}}"), &tiny,
		"'remat.sections.hed': unknown section 'hed' (did you mean 'head'?)");
	finish_bad(WITH("\"remat\": {\"aliases\": {\"trunk\": \"h.1\"}, \"sections\": "
			"{\"trnk\": \"full\"}}"), &tiny, "(did you mean 'trunk'?)");
	finish_bad(WITH("\"remat\": {\"sections\": {\"h.x\": \"full\"}}"), &tiny,
		"(did you mean h.N or h.N-M, N a block of h.0-1?)");
	finish_bad(WITH("\"remat\": {\"sections\": {\"h.1\": \"chunked\"}}"), &tiny,
		"'remat.sections.h.1'");
	finish_bad(WITH("\"remat\": {\"sections\": {\"head\": \"full\"}}"), &tiny,
		"'remat.sections.head'");
	finish_bad(WITH("\"remat\": {\"aliases\": {\"trunk\": \"h.0-9\"}}"), &tiny,
		"'remat.aliases.trunk'");
	finish_bad(WITH("\"remat\": {\"aliases\": {\"trunk\": \"other\"}}"), &tiny,
		"'remat.aliases.trunk'");
	finish_bad(WITH("\"remat\": {\"aliases\": {\"head\": \"h.0\"}}"), &tiny,
		"'remat.aliases.head'");
	finish_bad(WITH("\"remat\": {\"aliases\": {\"a b\": \"h.0\"}}"), &tiny,
		"'remat.aliases.a b'");
	/* the same alias fits a deeper model */
	eng_config deep = tiny;
	deep.n_layer = 12;
	parse_ok(&s, WITH("\"remat\": {\"aliases\": {\"trunk\": \"h.2-11\"},"
			  " \"sections\": {\"trunk\": \"full\"}}"));
	ck_assert_msg(eng_spec_finish(&s, &deep, &e) == 0, "finish: %s", e.msg);
	finish_bad(WITH("\"remat\": {\"aliases\": {\"trunk\": \"h.2-11\"}}"), &tiny,
		"'remat.aliases.trunk'");
}
END_TEST

/* threads above the CPUs this process may use (sched_getaffinity's count): accepted, with a
 * warning that names both; none at or below it, nor for the default */
START_TEST(test_eng_spec_threads_warning)
{
	cpu_set_t set;
	ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
	int cpus = CPU_COUNT(&set);
	eng_spec s;
	char text[512], w[256], want[128];
	snprintf(text, sizeof text, WITH("\"threads\": %d"), cpus + 1);
	parse_ok(&s, text);
	ck_assert_int_eq(s.threads, cpus + 1);
	ck_assert_int_eq(eng_spec_warning(&s, w, sizeof w), 1);
	snprintf(want, sizeof want, "threads %d exceeds the %d CPU", cpus + 1, cpus);
	ck_assert_msg(strstr(w, want) && strstr(w, "sched_getaffinity") && strstr(w, "slower"),
		"%s", w);
	snprintf(text, sizeof text, WITH("\"threads\": %d"), cpus);
	parse_ok(&s, text);
	ck_assert_int_eq(eng_spec_warning(&s, w, sizeof w), 0);
	ck_assert_str_eq(w, "");
	parse_ok(&s, "{" BASE "}");
	ck_assert_int_eq(eng_spec_warning(&s, w, sizeof w), 0);
}
END_TEST

/* A spec file read and parsed as remat-train reads its own: eng_spec_read, then
 * eng_spec_parse_buf. */
static int load_file(eng_spec *s, const char *path, eng_err *e)
{
	size_t len = 0;
	char *text = eng_spec_read(path, &len, e);
	int rc = text ? eng_spec_parse_buf(s, text, len, path, e) : -1;
	free(text);
	return rc;
}

START_TEST(test_eng_spec_load_ok)
{
	eng_spec s;
	eng_err e = {0};
	char *path = t_write_tmp("spec_ok.json", WITH("\"name\": \"from-file\", \"batch\": 2"));
	ck_assert_msg(load_file(&s, path, &e) == 0, "load: %s", e.msg);
	ck_assert_str_eq(s.name, "from-file");
	ck_assert_int_eq(s.batch, 2);
	ck_assert(cfg_eq(&s.cfg, &tiny));
	free(path);
}
END_TEST

START_TEST(test_eng_spec_load_missing)
{
	eng_spec s;
	eng_err e = {0};
	const char *dir = t_env("REMAT_TMP");
	char path[4096];
	snprintf(path, sizeof path, "%s/no-such-spec.json", dir);
	ck_assert_int_eq(load_file(&s, path, &e), -1);
	ck_assert_msg(strstr(e.msg, "cannot open job spec") && strstr(e.msg, "no-such-spec.json") &&
			      strstr(e.msg, "No such file"),
		"message: %s", e.msg);
	/* a directory is refused before anything reads it */
	ck_assert_int_eq(load_file(&s, dir, &e), -1);
	ck_assert_msg(strstr(e.msg, "cannot read job spec") && strstr(e.msg, "a directory"),
		"message: %s", e.msg);
}
END_TEST

START_TEST(test_eng_spec_load_bad)
{
	eng_spec s;
	eng_err e = {0};
	char *path = t_write_tmp("spec_bad.json", WITH("\"optim\": {\"betas\": 1}"));
	ck_assert_int_eq(load_file(&s, path, &e), -1);
	ck_assert_msg(strstr(e.msg, "spec_bad.json") && strstr(e.msg, "'optim.betas'"),
		"message: %s", e.msg);
	free(path);
	path = t_write_tmp("spec_syntax.json", "{\n\"batch\": 4\n\"steps\": 3}");
	ck_assert_int_eq(load_file(&s, path, &e), -1);
	ck_assert_msg(strstr(e.msg, "spec_syntax.json") && strstr(e.msg, "line 3"),
		"message: %s", e.msg);
	free(path);
	/* jansson's own text quotes the token ("near 'notjson'"): the file's bytes, never
	 * shown; where and what kind of error instead */
	path = t_write_tmp("spec_garbage.json", "{\"batch\": notjson}");
	ck_assert_int_eq(load_file(&s, path, &e), -1);
	ck_assert_msg(strstr(e.msg, "spec_garbage.json") && strstr(e.msg, "line 1, column") &&
		strstr(e.msg, "invalid") && !strstr(e.msg, "notjson"), "message: %s", e.msg);
	free(path);
	path = t_write_tmp("spec_empty.json", "");
	ck_assert_int_eq(load_file(&s, path, &e), -1);
	ck_assert_msg(strstr(e.msg, "spec_empty.json"), "message: %s", e.msg);
	free(path);
	/* a NUL byte ends a C string but not the file: the JSON after it is still seen */
	path = t_write_tmp("spec_nul.json", "");
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	static const char text[] = "{" BASE "}\0garbage";
	ck_assert_uint_eq(fwrite(text, 1, sizeof text - 1, f), sizeof text - 1);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(load_file(&s, path, &e), -1);
	ck_assert_msg(strstr(e.msg, "spec_nul.json"), "message: %s", e.msg);
	free(path);
}
END_TEST

Suite *suite_spec(void)
{
	Suite *s = suite_create("spec");
	TCase *tc = tcase_create("parse");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_eng_spec_parse_defaults);
	tcase_add_test(tc, test_eng_spec_parse_full);
	tcase_add_test(tc, test_eng_spec_parse_schedule_string);
	tcase_add_test(tc, test_eng_spec_parse_preset_override);
	tcase_add_test(tc, test_eng_spec_parse_bytes_vocab);
	tcase_add_test(tc, test_eng_spec_parse_text_data);
	tcase_add_test(tc, test_eng_spec_parse_llama);
	tcase_add_test(tc, test_eng_spec_parse_init_from);
	tcase_add_test(tc, test_eng_spec_parse_null_text);
	tcase_add_test(tc, test_eng_spec_parse_loop);
	tcase_add_loop_test(tc, test_eng_spec_parse_bad, 0,
		(int)(sizeof bad_specs / sizeof bad_specs[0]));
	tcase_add_test(tc, test_eng_spec_parse_long_strings);
	tcase_add_test(tc, test_eng_spec_parse_deep_nesting);
	tcase_add_test(tc, test_eng_spec_parse_too_many);
	suite_add_tcase(s, tc);

	tc = tcase_create("finish");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_eng_spec_finish_seq_len);
	tcase_add_test(tc, test_eng_spec_finish_bytes_vocab);
	tcase_add_test(tc, test_eng_spec_finish_policy);
	suite_add_tcase(s, tc);

	tc = tcase_create("load");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_eng_spec_threads_warning);
	tcase_add_test(tc, test_eng_spec_load_ok);
	tcase_add_test(tc, test_eng_spec_load_missing);
	tcase_add_test(tc, test_eng_spec_load_bad);
	suite_add_tcase(s, tc);
	return s;
}
