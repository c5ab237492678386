/* test_qlora_daemon.c - a QLoRA job through rematd: job-start and job-status say its 4-bit
 * base (weights, bytes), mem-stats' params hold exactly what remat-plan counts for them
 * (the 4-bit block, not float32 weights), a memory controller takes the job's budget (its
 * least under it),
 * and rematctl status names the 4-bit base. The engine's side: tests/unit/test_qlora.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t_daemon.h"
#include "t_util.h"
#include "tests.h"

#define TIMEOUT 120

/* o[key] (objects along the path a.b), as an integer; -1 when absent */
static long long int_at(json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(json_object_get(o, a), b);
	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

START_TEST(test_qlora_daemon_counts_4bit)
{
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	char *base = t_data("reference/lora_llama"), spec[4096], id[16], *out;
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	snprintf(spec, sizeof spec, "{\"model\":{\"init_from\":\"%s\",\"quantize\":{\"type\":"
		"\"nf4\",\"double_quant\":true}},\"data\":{\"train\":\"%s/train.bin\"},\"batch\":2,"
		"\"seq_len\":20,\"steps\":1000000,\"threads\":2,\"lora\":{\"r\":4,\"targets\":"
		"[\"q_proj\",\"down_proj\"]},\"remat\":{\"budget\":\"1GiB\"}}", base, base);
	json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}", spec);
	json_t *ret = td_expect_return(r);
	snprintf(id, sizeof id, "%s", td_str(ret, "job"));
	long long bytes = int_at(ret, "quantized", "bytes");
	ck_assert_msg(bytes > 0 && int_at(ret, "quantized", "weights") > 0, "job-start: no "
		"quantized in %s", json_dumps(ret, 0));
	ck_assert(bytes < int_at(ret, "quantized", "weights")); /* under a byte a weight */
	json_decref(r);
	td_wait_step(&c, id);
	json_t *st = td_job_status(&c, id);
	ck_assert_int_eq(int_at(st, "quantized", "bytes"), bytes);
	ck_assert_msg(json_is_object(json_object_get(st, "auto")), "no controller");
	ck_assert_int_eq(int_at(st, "auto", "budget_bytes"), 1LL << 30);
	long long least = int_at(st, "auto", "least_bytes");
	ck_assert_msg(least > 0 && least <= 1LL << 30, "least %lld", least);
	json_decref(st);
	/* the plan's params are what the allocator holds for them, 4-bit block included */
	r = td_request(&c, "{\"execute\":\"remat-plan\",\"arguments\":{\"job\":\"%s\"}}", id);
	ret = td_expect_return(r);
	long long planned = int_at(ret, "memory", "params");
	ck_assert_int_eq(int_at(ret, "quantize", "bytes"), bytes);
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"mem-stats\",\"arguments\":{\"job\":\"%s\"}}", id);
	json_t *cats = json_object_get(td_expect_return(r), "categories");
	ck_assert_int_eq(int_at(cats, "params", "current"), planned);
	json_decref(r);
	int rc = td_ctl(&d, &out, "status", id, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "4-bit base (nf4)"), "rematctl status: %d %s", rc,
		out);
	free(out);
	rc = td_ctl(&d, &out, "remat", "plan", id, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "4-bit base:") && strstr(out, "double-quantized") &&
			      strstr(out, "in float32: saves"),
		"rematctl remat plan: %d %s", rc, out);
	free(out);
	json_decref(td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\"}}",
		id));
	td_close(&c);
	td_daemon_stop(&d);
	free(base);
}
END_TEST

Suite *suite_qlora_daemon(void)
{
	Suite *s = suite_create("qlora-daemon");
	TCase *tc = tcase_create("qlora-daemon");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_qlora_daemon_counts_4bit);
	suite_add_tcase(s, tc);
	return s;
}
