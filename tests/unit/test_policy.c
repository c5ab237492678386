/* test_policy.c - tests of sections, selectors and recompute modes (engine/eng_policy.c) and
 * of the analytic memory and FLOP counts (engine/eng_plan.c).
 *
 * What it covers: mode names, every selector form and its errors (each error leaves the
 * policy as it was), aliases and their errors, the "SEL=MODE;..." text form, the compact
 * format and equality; the plan's ordering of modes by saved bytes and recomputed FLOPs,
 * and eng_plan_search against an exhaustive search over policies.
 * What it does not: whether the model allocates what the plan counts (test_model.c does).
 */
#include "t_util.h"
#include "tests.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fmt.h"
#include "eng_auto.h"
#include "eng_check_info.h"
#include "eng_plan.h"
#include "eng_policy.h"

#define L12 12 /* layers of the GPT-2 small shape, the one most selectors are tried on */

static const eng_config tiny = ENG_GPT2(2, 64, 4, 256, 256);
static const eng_config gpt2_small = ENG_GPT2(12, 768, 12, 1024, 50257);
static const eng_config four = ENG_GPT2(4, 128, 4, 256, 50257); /* small enough to enumerate */

/* A policy with a bit of everything, so "unchanged" means something. */
static void mixed_policy(eng_policy *p)
{
	eng_policy_init(p, L12);
	p->block[1] = ENG_MODE_FULL;
	p->block[2] = ENG_MODE_SELECTIVE;
	p->block[11] = ENG_MODE_FULL;
	p->head = ENG_MODE_CHUNKED;
}

/* Applies a selector that must be refused; the message must contain needle and the
 * policy must be untouched (bytewise, not just by eng_policy_equal). */
static void apply_bad(const eng_aliases *al, const char *sel, const char *mode,
	const char *needle)
{
	eng_policy p, before;
	eng_err e = {0};
	mixed_policy(&p);
	before = p;
	int rc = eng_policy_apply(&p, al, sel, mode, &e);
	ck_assert_msg(rc == -1, "'%s=%s' accepted", sel, mode);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "'%s=%s': message '%s' lacks '%s'", sel,
		mode, e.msg, needle);
	ck_assert_msg(memcmp(&p, &before, sizeof p) == 0, "'%s=%s' changed the policy", sel,
		mode);
}

static void apply_ok(eng_policy *p, const eng_aliases *al, const char *sel, const char *mode)
{
	eng_err e = {0};
	int rc = eng_policy_apply(p, al, sel, mode, &e);
	ck_assert_msg(rc == 0, "'%s=%s' refused: %s", sel, mode, e.msg);
}

/* Checks blocks [lo, hi] have mode m and every other block has `other`. */
static void check_blocks(const eng_policy *p, int lo, int hi, eng_mode m, eng_mode other)
{
	for (int i = 0; i < p->n_layer; i++) {
		eng_mode want = (i >= lo && i <= hi) ? m : other;
		ck_assert_msg(p->block[i] == want, "block %d is %s, want %s", i,
			eng_mode_name(p->block[i]), eng_mode_name(want));
	}
}

static void parse_bad(const char *text, const char *needle)
{
	eng_policy p, before;
	eng_err e = {0};
	mixed_policy(&p);
	before = p;
	ck_assert_msg(eng_policy_parse(&p, NULL, text, &e) == -1, "policy '%s' accepted", text);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "policy '%s': message '%s' lacks '%s'",
		text, e.msg, needle);
	ck_assert_msg(memcmp(&p, &before, sizeof p) == 0, "policy '%s' changed *p", text);
}

static void alias_bad(eng_aliases *al, const char *name, const char *sel, const char *needle)
{
	eng_err e = {0};
	eng_aliases before = *al;
	ck_assert_msg(eng_aliases_add(al, name, sel, L12, &e) == -1, "alias '%s' -> '%s' accepted",
		name, sel);
	ck_assert_msg(strstr(e.msg, needle) != NULL, "alias '%s': message '%s' lacks '%s'", name,
		e.msg, needle);
	ck_assert_msg(memcmp(al, &before, sizeof *al) == 0, "refused alias '%s' changed the list",
		name);
}

START_TEST(test_eng_mode_parse_names)
{
	static const char *names[] = {"off", "selective", "full", "chunked"};
	static const eng_mode modes[] = {ENG_MODE_OFF, ENG_MODE_SELECTIVE, ENG_MODE_FULL,
		ENG_MODE_CHUNKED};
	eng_err e = {0};
	for (int i = 0; i < 4; i++) {
		eng_mode m = (eng_mode)-1;
		ck_assert_int_eq(eng_mode_parse(names[i], &m, &e), 0);
		ck_assert_int_eq(m, modes[i]);
		ck_assert_str_eq(eng_mode_name(modes[i]), names[i]);
	}
	ck_assert_str_eq(eng_mode_name((eng_mode)42), "unknown");
}
END_TEST

START_TEST(test_eng_mode_parse_unknown)
{
	static const char *bad[] = {"", "Full", "fulll", "on", "off ", "chunk", "none"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		eng_err e = {0};
		eng_mode m = ENG_MODE_SELECTIVE;
		ck_assert_int_eq(eng_mode_parse(bad[i], &m, &e), -1);
		ck_assert_int_eq(m, ENG_MODE_SELECTIVE);
		ck_assert_msg(strstr(e.msg, "unknown mode") != NULL, "'%s': '%s'", bad[i], e.msg);
		/* the message lists what is accepted */
		ck_assert_msg(strstr(e.msg, "selective") && strstr(e.msg, "chunked"), "%s", e.msg);
	}
}
END_TEST

START_TEST(test_eng_policy_init_all_off)
{
	eng_policy p;
	eng_policy_init(&p, L12);
	ck_assert_int_eq(p.n_layer, L12);
	check_blocks(&p, 0, -1, ENG_MODE_OFF, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_OFF);
}
END_TEST

START_TEST(test_eng_policy_apply_single)
{
	eng_policy p;
	eng_policy_init(&p, L12);
	apply_ok(&p, NULL, "h.3", "full");
	check_blocks(&p, 3, 3, ENG_MODE_FULL, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_OFF);
	apply_ok(&p, NULL, "h.0", "selective");
	apply_ok(&p, NULL, "h.11", "selective");
	ck_assert_int_eq(p.block[0], ENG_MODE_SELECTIVE);
	ck_assert_int_eq(p.block[3], ENG_MODE_FULL);
	ck_assert_int_eq(p.block[11], ENG_MODE_SELECTIVE);
	ck_assert_int_eq(p.block[10], ENG_MODE_OFF);
}
END_TEST

START_TEST(test_eng_policy_apply_range_inclusive)
{
	eng_policy p;
	eng_policy_init(&p, L12);
	apply_ok(&p, NULL, "h.0-5", "full");
	check_blocks(&p, 0, 5, ENG_MODE_FULL, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_OFF);
	apply_ok(&p, NULL, "h.6-11", "selective");
	check_blocks(&p, 6, 11, ENG_MODE_SELECTIVE, ENG_MODE_FULL);
	apply_ok(&p, NULL, "h.4-4", "off"); /* a one-block range */
	ck_assert_int_eq(p.block[3], ENG_MODE_FULL);
	ck_assert_int_eq(p.block[4], ENG_MODE_OFF);
	ck_assert_int_eq(p.block[5], ENG_MODE_FULL);
}
END_TEST

START_TEST(test_eng_policy_apply_blocks)
{
	eng_policy p;
	mixed_policy(&p);
	apply_ok(&p, NULL, "blocks", "selective");
	check_blocks(&p, 0, L12 - 1, ENG_MODE_SELECTIVE, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED); /* blocks never touches the head */
	apply_ok(&p, NULL, "blocks", "off");
	check_blocks(&p, 0, L12 - 1, ENG_MODE_OFF, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED);
}
END_TEST

START_TEST(test_eng_policy_apply_head)
{
	eng_policy p, blocks_before;
	mixed_policy(&p);
	blocks_before = p;
	apply_ok(&p, NULL, "head", "off");
	ck_assert_int_eq(p.head, ENG_MODE_OFF);
	apply_ok(&p, NULL, "head", "chunked");
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED);
	ck_assert(memcmp(p.block, blocks_before.block, sizeof p.block) == 0);
}
END_TEST

START_TEST(test_eng_policy_apply_all)
{
	eng_policy p;
	/* off: both the blocks and the head */
	mixed_policy(&p);
	apply_ok(&p, NULL, "all", "off");
	check_blocks(&p, 0, -1, ENG_MODE_OFF, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_OFF);
	/* full and selective: the blocks only */
	mixed_policy(&p);
	apply_ok(&p, NULL, "all", "full");
	check_blocks(&p, 0, L12 - 1, ENG_MODE_FULL, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED);
	eng_policy_init(&p, L12);
	apply_ok(&p, NULL, "all", "selective");
	check_blocks(&p, 0, L12 - 1, ENG_MODE_SELECTIVE, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_OFF);
	/* chunked: the head only */
	mixed_policy(&p);
	apply_ok(&p, NULL, "all", "off");
	apply_ok(&p, NULL, "all", "chunked");
	check_blocks(&p, 0, -1, ENG_MODE_OFF, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED);
}
END_TEST

START_TEST(test_eng_policy_apply_alias)
{
	eng_aliases al = {0};
	eng_err e = {0};
	eng_policy p;
	ck_assert_int_eq(eng_aliases_add(&al, "embed", "h.0-1", L12, &e), 0);
	ck_assert_int_eq(eng_aliases_add(&al, "trunk", "h.2-11", L12, &e), 0);
	ck_assert_int_eq(eng_aliases_add(&al, "out", "head", L12, &e), 0);
	ck_assert_int_eq(eng_aliases_add(&al, "every_thing", "all", L12, &e), 0);
	ck_assert_int_eq(al.n, 4);
	ck_assert_str_eq(al.a[1].name, "trunk");
	ck_assert_str_eq(al.a[1].selector, "h.2-11");

	eng_policy_init(&p, L12);
	apply_ok(&p, &al, "trunk", "full");
	check_blocks(&p, 2, 11, ENG_MODE_FULL, ENG_MODE_OFF);
	apply_ok(&p, &al, "embed", "selective");
	check_blocks(&p, 0, 1, ENG_MODE_SELECTIVE, ENG_MODE_FULL);
	apply_ok(&p, &al, "out", "chunked");
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED);
	apply_ok(&p, &al, "every_thing", "off");
	check_blocks(&p, 0, -1, ENG_MODE_OFF, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_OFF);
	/* built-in selectors still work next to aliases */
	apply_ok(&p, &al, "h.5", "full");
	check_blocks(&p, 5, 5, ENG_MODE_FULL, ENG_MODE_OFF);
	/* an alias's mode must still fit what it names */
	apply_bad(&al, "out", "full", "does not apply to the head");
	apply_bad(&al, "trunk", "chunked", "does not apply to blocks");
	/* without the alias table an alias is just an unknown section */
	apply_bad(NULL, "trunk", "full", "unknown section 'trunk'");
}
END_TEST

START_TEST(test_eng_policy_apply_later_overrides)
{
	eng_policy p;
	eng_policy_init(&p, L12);
	apply_ok(&p, NULL, "blocks", "full");
	apply_ok(&p, NULL, "h.3-5", "off");
	apply_ok(&p, NULL, "h.4", "selective");
	ck_assert_int_eq(p.block[2], ENG_MODE_FULL);
	ck_assert_int_eq(p.block[3], ENG_MODE_OFF);
	ck_assert_int_eq(p.block[4], ENG_MODE_SELECTIVE);
	ck_assert_int_eq(p.block[5], ENG_MODE_OFF);
	ck_assert_int_eq(p.block[6], ENG_MODE_FULL);
	apply_ok(&p, NULL, "head", "chunked");
	apply_ok(&p, NULL, "all", "off");
	check_blocks(&p, 0, -1, ENG_MODE_OFF, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_OFF);
}
END_TEST

START_TEST(test_eng_policy_apply_out_of_range)
{
	/* the message names the blocks the model does have */
	apply_bad(NULL, "h.12", "full", "h.0-11");
	apply_bad(NULL, "h.12", "full", "h.12");
	apply_bad(NULL, "h.0-12", "full", "h.0-11");
	apply_bad(NULL, "h.999999", "off", "h.0-11");

	eng_policy p;
	eng_err e = {0};
	eng_policy_init(&p, 2);
	ck_assert_int_eq(eng_policy_apply(&p, NULL, "h.2", "full", &e), -1);
	ck_assert_msg(strstr(e.msg, "h.0-1") != NULL, "%s", e.msg);
	ck_assert_int_eq(eng_policy_apply(&p, NULL, "h.1", "full", &e), 0);
}
END_TEST

START_TEST(test_eng_policy_apply_malformed)
{
	apply_bad(NULL, "h.5-3", "full", "h.5-3"); /* an empty range is an error, not a no-op */
	apply_bad(NULL, "h.x", "full", "h.x");
	apply_bad(NULL, "h.", "full", "malformed");
	apply_bad(NULL, "h.1-", "full", "malformed");
	apply_bad(NULL, "h.-1", "full", "malformed");
	apply_bad(NULL, "h.1-2-3", "full", "malformed");
	apply_bad(NULL, "h.+1", "full", "malformed");
	apply_bad(NULL, "h. 1", "full", "malformed");
	apply_bad(NULL, "h.1234567", "full", "h.1234567");
	apply_bad(NULL, "foo", "full", "unknown section 'foo'");
	apply_bad(NULL, "", "full", "unknown section");
	apply_bad(NULL, "H.1", "full", "unknown section");
	apply_bad(NULL, "Blocks", "full", "unknown section");
	apply_bad(NULL, "h1", "full", "unknown section");
}
END_TEST

START_TEST(test_eng_policy_apply_mode_mismatch)
{
	apply_bad(NULL, "head", "full", "does not apply to the head");
	apply_bad(NULL, "head", "selective", "does not apply to the head");
	apply_bad(NULL, "h.0", "chunked", "does not apply to blocks");
	apply_bad(NULL, "h.0-11", "chunked", "does not apply to blocks");
	apply_bad(NULL, "blocks", "chunked", "does not apply to blocks");
	/* a bad mode is named, a bad selector first */
	apply_bad(NULL, "h.0", "fast", "unknown mode 'fast'");
	apply_bad(NULL, "head", "", "unknown mode");
	apply_bad(NULL, "h.99", "fast", "h.99");
}
END_TEST

START_TEST(test_eng_aliases_add_errors)
{
	eng_aliases al = {0};
	eng_err e = {0};
	ck_assert_int_eq(eng_aliases_add(&al, "trunk", "h.2-11", L12, &e), 0);

	alias_bad(&al, "all", "h.0", "built-in");
	alias_bad(&al, "head", "h.0", "built-in");
	alias_bad(&al, "blocks", "h.0", "built-in");
	alias_bad(&al, "h.1", "h.0", "h.1"); /* '.' is not allowed either */
	alias_bad(&al, "trunk", "h.0", "twice");
	alias_bad(&al, "", "h.0", "1 to");
	alias_bad(&al, "a b", "h.0", "letters, digits");
	alias_bad(&al, "a/b", "h.0", "letters, digits");
	alias_bad(&al, "a=b", "h.0", "letters, digits");
	alias_bad(&al, "a;b", "h.0", "letters, digits");
	alias_bad(&al, "caf\xc3\xa9", "h.0", "letters, digits");
	char long_name[ENG_ALIAS_LEN + 1];
	memset(long_name, 'a', ENG_ALIAS_LEN);
	long_name[ENG_ALIAS_LEN] = '\0';
	alias_bad(&al, long_name, "h.0", "1 to");
	/* the selector: a valid built-in one for this model, never another alias */
	alias_bad(&al, "x", "h.12", "h.0-11");
	alias_bad(&al, "x", "h.5-3", "h.5-3");
	alias_bad(&al, "x", "h.", "malformed");
	alias_bad(&al, "x", "trunk", "unknown section");
	alias_bad(&al, "x", "", "unknown section");
	char long_sel[ENG_SELECTOR_LEN + 8];
	memset(long_sel, '1', sizeof long_sel - 1);
	memcpy(long_sel, "h.", 2);
	long_sel[sizeof long_sel - 1] = '\0';
	alias_bad(&al, "x", long_sel, "too long");
	ck_assert_int_eq(al.n, 1);
}
END_TEST

START_TEST(test_eng_aliases_add_too_many)
{
	eng_aliases al = {0};
	eng_err e = {0};
	char name[16];
	for (int i = 0; i < ENG_MAX_ALIASES; i++) {
		snprintf(name, sizeof name, "a%d", i);
		ck_assert_msg(eng_aliases_add(&al, name, "h.0", L12, &e) == 0, "%s: %s", name,
			e.msg);
	}
	ck_assert_int_eq(al.n, ENG_MAX_ALIASES);
	alias_bad(&al, "one_more", "h.0", "too many");
	ck_assert_int_eq(al.n, ENG_MAX_ALIASES);
}
END_TEST

START_TEST(test_eng_policy_parse_forms)
{
	eng_policy p, want;
	eng_err e = {0};

	/* a bare mode is all=MODE: full sets the blocks, leaves the head */
	mixed_policy(&p);
	ck_assert_int_eq(eng_policy_parse(&p, NULL, "full", &e), 0);
	check_blocks(&p, 0, L12 - 1, ENG_MODE_FULL, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED);
	ck_assert_int_eq(eng_policy_parse(&p, NULL, "off", &e), 0);
	check_blocks(&p, 0, -1, ENG_MODE_OFF, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_OFF);

	eng_policy_init(&p, L12);
	ck_assert_msg(eng_policy_parse(&p, NULL, "h.0-1=full;head=chunked", &e) == 0, "%s", e.msg);
	check_blocks(&p, 0, 1, ENG_MODE_FULL, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED);

	eng_policy_init(&p, L12);
	ck_assert_msg(eng_policy_parse(&p, NULL, "full;head=chunked", &e) == 0, "%s", e.msg);
	check_blocks(&p, 0, L12 - 1, ENG_MODE_FULL, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED);

	/* in order, later items win; on top of what *p held */
	ck_assert_int_eq(eng_policy_parse(&p, NULL, "h.0-5=selective;h.5=off", &e), 0);
	eng_policy_init(&want, L12);
	for (int i = 0; i < L12; i++)
		want.block[i] = i < 5 ? ENG_MODE_SELECTIVE : i == 5 ? ENG_MODE_OFF : ENG_MODE_FULL;
	want.head = ENG_MODE_CHUNKED;
	ck_assert(eng_policy_equal(&p, &want));

	/* empty items between separators are skipped */
	eng_policy_init(&p, L12);
	ck_assert_int_eq(eng_policy_parse(&p, NULL, "h.1=full;;head=chunked;", &e), 0);
	check_blocks(&p, 1, 1, ENG_MODE_FULL, ENG_MODE_OFF);
	ck_assert_int_eq(p.head, ENG_MODE_CHUNKED);

	/* aliases */
	eng_aliases al = {0};
	ck_assert_int_eq(eng_aliases_add(&al, "trunk", "h.2-11", L12, &e), 0);
	eng_policy_init(&p, L12);
	ck_assert_int_eq(eng_policy_parse(&p, &al, "trunk=full;h.2=selective", &e), 0);
	ck_assert_int_eq(p.block[1], ENG_MODE_OFF);
	ck_assert_int_eq(p.block[2], ENG_MODE_SELECTIVE);
	ck_assert_int_eq(p.block[3], ENG_MODE_FULL);
	ck_assert_int_eq(p.block[11], ENG_MODE_FULL);
}
END_TEST

START_TEST(test_eng_policy_parse_errors)
{
	parse_bad("=full", "malformed");
	parse_bad("h.0=", "malformed");
	parse_bad(";", "empty policy");
	parse_bad(";;;", "empty policy");
	parse_bad("", "empty policy");
	parse_bad("fast", "unknown mode 'fast'");
	parse_bad("h.0=ful", "unknown mode 'ful' (did you mean 'full'?)");
	parse_bad("h.0=selctive", "(did you mean 'selective'?)");
	parse_bad("head=chunk", "(did you mean 'chunked'?)");
	parse_bad("h.0=full=off", "malformed policy item");
	parse_bad(",,", "empty policy");
	parse_bad("h.12=full", "h.0-11");
	parse_bad("head=full", "does not apply to the head");
	/* a later bad item: the good items before it must not have been applied either */
	parse_bad("h.0-11=full;head=off;h.3=chunked", "does not apply to blocks");
	parse_bad("blocks=off;head=off;=full", "malformed");
	parse_bad("off;trunk=full", "unknown section 'trunk'");

	char big[2048];
	memset(big, ';', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	memcpy(big, "full", 4);
	parse_bad(big, "too long");
}
END_TEST

/* rematctl's SEL=MODE words and the engine's policy text are one grammar
 * (proto_policy_parse): what the engine reads, rematctl reads too, and the sections it
 * sends, applied in order as the worker applies them, give the engine's policy; what one
 * refuses as malformed, the other refuses. (rematctl once took ',' only, and refused a
 * bare mode and empty items, which the engine took.) */
START_TEST(test_eng_policy_parse_same_as_client)
{
	static const char *const good[] = {"h.0-5=full,head=chunked", "h.0-5=full;head=chunked",
		"h.0-5=full head=chunked", "full", "full;head=chunked", "h.1=full;;head=chunked;",
		"h.0-3=full,h.2=off h.3=selective;head=chunked",
		"h.0-5=full,h.3=off,h.0-5=selective"};
	static const char *const bad[] = {"", ";;", "=full", "h.0=", "h.0=full=off",
		"h.0=full,=off"};
	char err[256];
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		eng_policy want, got;
		eng_err e = {0};
		json_t *sections = NULL, *v;
		const char *sel;
		char *args[] = {(char *)good[i]};
		mixed_policy(&want);
		mixed_policy(&got);
		ck_assert_msg(eng_policy_parse(&want, NULL, good[i], &e) == 0, "engine: '%s': %s",
			good[i], e.msg);
		ck_assert_msg(cli_sections_parse(args, 1, &sections, err, sizeof err) == 0,
			"rematctl: '%s': %s", good[i], err);
		json_object_foreach(sections, sel, v)
			ck_assert_msg(eng_policy_apply(&got, NULL, sel, json_string_value(v),
				&e) == 0, "'%s': %s=%s: %s", good[i], sel,
				json_string_value(v), e.msg);
		json_decref(sections);
		ck_assert_msg(eng_policy_equal(&want, &got), "'%s' read two ways", good[i]);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		eng_policy p;
		eng_err e = {0};
		json_t *sections = NULL;
		char *args[] = {(char *)bad[i]};
		mixed_policy(&p);
		ck_assert_msg(eng_policy_parse(&p, NULL, bad[i], &e) < 0, "engine took '%s'",
			bad[i]);
		ck_assert_msg(cli_sections_parse(args, 1, &sections, err, sizeof err) < 0,
			"rematctl took '%s'", bad[i]);
		ck_assert_msg(strstr(err, e.msg) != NULL,
			"'%s': rematctl says '%s', the engine '%s'", bad[i], err, e.msg);
	}
}
END_TEST

/* remat-train --check's answer has one writer and one reader (eng_check_info.h): what the
 * worker writes reads back to the same struct and is written again to the same JSON; a
 * failure keeps its class; a job record's copy without "ok" (an earlier rematd's) reads as
 * a good answer, keys it lacks as 0; aliases or a policy that do not fit the model are
 * refused. */
START_TEST(test_eng_check_info_round_trip)
{
	static eng_check_info ci, back;
	eng_err e = {0};
	memset(&ci, 0, sizeof ci);
	ci.ok = 1;
	snprintf(ci.name, sizeof ci.name, "small");
	ci.steps = 100;
	ci.cfg = gpt2_small;
	ci.batch = 4;
	ci.seq_len = 64;
	ci.chunk_rows = 32;
	ck_assert_int_eq(eng_aliases_add(&ci.aliases, "trunk", "h.2-11", L12, &e), 0);
	eng_policy_init(&ci.policy, L12);
	ck_assert_int_eq(eng_policy_parse(&ci.policy, &ci.aliases, "trunk=full,head=chunked", &e),
		0);
	snprintf(ci.save_dir, sizeof ci.save_dir, "/tmp/ckpt");
	ci.tokens = 1 << 20;
	ci.has_resume_step = 1;
	ci.resume_step = 40;
	snprintf(ci.warning, sizeof ci.warning, "threads 64 above the 2 CPUs");
	ci.params = 124439808;
	ci.trainable_params = 124439808;
	ci.ranks = 2;
	snprintf(ci.hosts, sizeof ci.hosts, "a,b");
	ci.has_fixed = ci.has_untracked = 1;
	ci.fixed[ENG_MEM_PARAMS] = 1000;
	ci.untracked = 77;
	ci.snapshot = 5000;
	json_t *o = eng_check_info_json(&ci);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(eng_check_info_read(o, &back, &e), 0);
	ck_assert(eng_policy_equal(&back.policy, &ci.policy));
	ck_assert_int_eq(back.aliases.n, 1);
	ck_assert_int_eq(back.resume_step, 40);
	ck_assert_int_eq(back.fixed[ENG_MEM_PARAMS], 1000);
	ck_assert_str_eq(back.warning, ci.warning);
	ck_assert_str_eq(back.hosts, "a,b");
	ck_assert_int_eq(back.params, ci.params);
	json_t *again = eng_check_info_json(&back);
	ck_assert_msg(json_equal(o, again), "the answer does not write back the same");
	json_decref(again);

	/* a record's copy without "ok" or the keys it did not have yet */
	json_object_del(o, "ok");
	json_object_del(o, "model");
	json_object_del(o, "fixed_bytes");
	ck_assert_int_eq(eng_check_info_read(o, &back, &e), 0);
	ck_assert_int_eq(back.ok, 1);
	ck_assert_int_eq(back.params, 0);
	ck_assert_int_eq(back.has_fixed, 0);
	/* an alias past the model's blocks is refused */
	json_object_set_new(json_object_get(o, "aliases"), "far", json_string("h.40"));
	ck_assert_int_eq(eng_check_info_read(o, &back, &e), -1);
	json_decref(o);

	memset(&ci, 0, sizeof ci);
	snprintf(ci.error, sizeof ci.error, "save directory held by pid 7");
	ci.busy = 1;
	o = eng_check_info_json(&ci);
	ck_assert_str_eq(json_string_value(json_object_get(o, "class")), "Busy");
	ck_assert_int_eq(eng_check_info_read(o, &back, &e), 0);
	ck_assert_int_eq(back.ok, 0);
	ck_assert_int_eq(back.busy, 1);
	ck_assert_str_eq(back.error, ci.error);
	json_decref(o);
	ck_assert_int_eq(eng_check_info_read(NULL, &back, &e), -1);
}
END_TEST

/* A section typo gets a "did you mean", as a mode's does: the nearest built-in name or
 * alias, or h.N for a block number after another prefix */
START_TEST(test_eng_policy_section_hint)
{
	parse_bad("hed=full", "unknown section 'hed' (did you mean 'head'?)");
	parse_bad("blcoks=full", "(did you mean 'blocks'?)");
	parse_bad("Blocks=full", "(did you mean 'blocks'?)");
	parse_bad("al=off", "(did you mean 'all'?)");
	parse_bad("h3=full", "unknown section 'h3' (did you mean 'h.3'?)");
	parse_bad("H.1=full", "(did you mean 'h.1'?)");
	parse_bad("layer.11=full", "(did you mean 'h.11'?)");
	parse_bad("h.x=full", "malformed section 'h.x' (did you mean h.N or h.N-M, N a block of "
		"h.0-11?)");
	eng_aliases al = {0};
	eng_err e = {0};
	ck_assert_int_eq(eng_aliases_add(&al, "trunk", "h.2-11", L12, &e), 0);
	apply_bad(&al, "trnk", "full", "unknown section 'trnk' (did you mean 'trunk'?)");
	/* nothing near: no guess */
	eng_policy p;
	eng_policy_init(&p, L12);
	ck_assert_int_eq(eng_policy_apply(&p, &al, "layer.12", "full", &e), -1);
	ck_assert_msg(!strstr(e.msg, "did you mean"), "%s", e.msg);
	ck_assert_int_eq(eng_policy_apply(&p, &al, "zzzzzz", "full", &e), -1);
	ck_assert_msg(!strstr(e.msg, "did you mean"), "%s", e.msg);
}
END_TEST

START_TEST(test_eng_policy_format_runs)
{
	eng_policy p;
	char buf[256];
	eng_policy_init(&p, L12);
	p.block[0] = p.block[1] = ENG_MODE_FULL;
	p.head = ENG_MODE_CHUNKED;
	const char *want = "h.0-1=full,h.2-11=off,head=chunked";
	int n = eng_policy_format(&p, buf, sizeof buf);
	ck_assert_str_eq(buf, want);
	ck_assert_int_eq(n, (int)strlen(want));

	eng_policy_init(&p, L12);
	n = eng_policy_format(&p, buf, sizeof buf);
	ck_assert_str_eq(buf, "h.0-11=off,head=off");
	ck_assert_int_eq(n, (int)strlen(buf));

	/* one-block runs print as h.N */
	mixed_policy(&p);
	eng_policy_format(&p, buf, sizeof buf);
	ck_assert_str_eq(buf, "h.0=off,h.1=full,h.2=selective,h.3-10=off,h.11=full,head=chunked");

	eng_policy_init(&p, 1);
	eng_policy_format(&p, buf, sizeof buf);
	ck_assert_str_eq(buf, "h.0=off,head=off");
}
END_TEST

START_TEST(test_eng_policy_format_truncated)
{
	eng_policy p;
	char full[512], small[12];
	mixed_policy(&p);
	int n = eng_policy_format(&p, full, sizeof full);
	ck_assert_int_eq(n, (int)strlen(full));
	/* snprintf's contract: the length it needed, a NUL-terminated prefix */
	memset(small, 'X', sizeof small);
	ck_assert_int_eq(eng_policy_format(&p, small, sizeof small), n);
	ck_assert_int_eq(small[sizeof small - 1], '\0');
	ck_assert(strncmp(small, full, sizeof small - 1) == 0);
	/* nothing written at all with len 0 */
	char one = 'X';
	ck_assert_int_eq(eng_policy_format(&p, &one, 0), n);
	ck_assert_int_eq(one, 'X');

	/* the longest format: every block different from its neighbour */
	eng_policy_init(&p, ENG_MAX_LAYERS);
	for (int i = 0; i < ENG_MAX_LAYERS; i++)
		p.block[i] = i % 2 ? ENG_MODE_SELECTIVE : ENG_MODE_FULL;
	char big[8192];
	n = eng_policy_format(&p, big, sizeof big);
	ck_assert_int_eq(n, (int)strlen(big));
	ck_assert(strstr(big, "h.127=selective,head=off") != NULL);
}
END_TEST

START_TEST(test_eng_policy_format_parse_round_trip)
{
	/* the format is "SEL=MODE" items separated by commas, and it parses back as printed;
	 * ';' and blanks separate items as well */
	eng_policy p, q;
	eng_err e = {0};
	char buf[512];
	mixed_policy(&p);
	eng_policy_format(&p, buf, sizeof buf);
	for (int sep = 0; sep < 3; sep++) {
		for (char *c = buf; *c; c++)
			if (*c == ',' || *c == ';' || *c == ' ')
				*c = ",; "[sep];
		eng_policy_init(&q, L12);
		ck_assert_msg(eng_policy_parse(&q, NULL, buf, &e) == 0, "'%s': %s", buf, e.msg);
		ck_assert(eng_policy_equal(&p, &q));
	}
}
END_TEST

START_TEST(test_eng_policy_equal_cases)
{
	eng_policy a, b;
	mixed_policy(&a);
	mixed_policy(&b);
	ck_assert_int_eq(eng_policy_equal(&a, &b), 1);
	b.block[7] = ENG_MODE_SELECTIVE;
	ck_assert_int_eq(eng_policy_equal(&a, &b), 0);
	mixed_policy(&b);
	b.head = ENG_MODE_OFF;
	ck_assert_int_eq(eng_policy_equal(&a, &b), 0);
	mixed_policy(&b);
	b.n_layer = L12 - 1;
	ck_assert_int_eq(eng_policy_equal(&a, &b), 0);
	/* entries past n_layer are unused and do not count */
	mixed_policy(&b);
	b.block[L12 + 3] = ENG_MODE_FULL;
	ck_assert_int_eq(eng_policy_equal(&a, &b), 1);
	ck_assert_int_eq(eng_policy_equal(&a, &a), 1);
}
END_TEST

/* --- eng_plan ------------------------------------------------------------------------- */

typedef struct plan_shape {
	const char *name;
	const eng_config *cfg;
	int B, T;
} plan_shape;

static const plan_shape shapes[] = {
	{"tiny", &tiny, 4, 64},
	{"gpt2-small", &gpt2_small, 8, 1024},
	{"gpt2-small B1 T128", &gpt2_small, 1, 128},
	{"four", &four, 2, 128},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static size_t plan_bytes(const eng_plan *pl)
{
	return pl->saved_bytes + pl->recompute_bytes;
}

/* The planner as its users ask it (eng_plan_search), on the analytic FLOPs with nothing
 * fixed: the cheapest policy whose saved + recompute bytes fit budget. */
static int plan_fit(const eng_config *cfg, int B, int T, int chunk_rows, size_t budget,
	eng_policy *p, eng_plan *out)
{
	eng_plan_query q = {cfg, B, T, chunk_rows, 0, NULL, budget, 0, 0.0};
	return eng_plan_search(&q, p, out);
}

START_TEST(test_eng_plan_block_order)
{
	for (int k = 0; k < NSHAPES; k++) {
		const plan_shape *s = &shapes[k];
		eng_plan_section off, sel, full;
		eng_plan_block(s->cfg, s->B, s->T, ENG_MODE_OFF, &off);
		eng_plan_block(s->cfg, s->B, s->T, ENG_MODE_SELECTIVE, &sel);
		eng_plan_block(s->cfg, s->B, s->T, ENG_MODE_FULL, &full);
		ck_assert_msg(full.saved_bytes < sel.saved_bytes &&
				sel.saved_bytes < off.saved_bytes,
			"%s: saved full %zu selective %zu off %zu", s->name, full.saved_bytes,
			sel.saved_bytes, off.saved_bytes);
		/* full keeps exactly the block input, B*T*C floats */
		ck_assert_uint_eq(full.saved_bytes, 4 * (size_t)s->B * s->T * s->cfg->n_embd);
		ck_assert(off.extra_flops == 0 && off.workspace_bytes == 0);
		ck_assert_msg(0 < sel.extra_flops && sel.extra_flops < full.extra_flops,
			"%s: flops selective %g full %g", s->name, sel.extra_flops,
			full.extra_flops);
		ck_assert(0 < sel.workspace_bytes && sel.workspace_bytes <= full.workspace_bytes);
		/* recompute never costs more than the block's own forward FLOPs */
		eng_config one = *s->cfg;
		one.n_layer = 1;
		eng_plan pl;
		eng_policy p;
		eng_policy_init(&p, 1);
		eng_plan_policy(&one, s->B, s->T, 64, &p, &pl);
		ck_assert(full.extra_flops < pl.model_flops);
	}
}
END_TEST

START_TEST(test_eng_plan_head_order)
{
	for (int k = 0; k < NSHAPES; k++) {
		const plan_shape *s = &shapes[k];
		int rows = eng_plan_chunk_rows(s->cfg, s->B, s->T);
		eng_plan_section off, ch;
		eng_plan_head(s->cfg, s->B, s->T, rows, ENG_MODE_OFF, &off);
		eng_plan_head(s->cfg, s->B, s->T, rows, ENG_MODE_CHUNKED, &ch);
		ck_assert_msg(ch.saved_bytes < off.saved_bytes, "%s: chunked %zu off %zu", s->name,
			ch.saved_bytes, off.saved_bytes);
		/* off holds the B*T*V logits */
		ck_assert_uint_eq(off.saved_bytes - ch.saved_bytes,
			4 * (size_t)s->B * s->T * s->cfg->vocab_size);
		ck_assert_uint_eq(ch.workspace_bytes, 4 * (size_t)rows * s->cfg->vocab_size);
		ck_assert(off.extra_flops == 0 && off.workspace_bytes == 0 && ch.extra_flops > 0);
	}
}
END_TEST

START_TEST(test_eng_plan_chunk_rows_bounds)
{
	for (int k = 0; k < NSHAPES; k++) {
		const plan_shape *s = &shapes[k];
		int r = eng_plan_chunk_rows(s->cfg, s->B, s->T);
		int N = s->B * s->T;
		ck_assert_msg(r >= (N < 16 ? N : 16) && r <= N, "%s: %d rows of %d", s->name, r, N);
		ck_assert_msg((size_t)r * s->cfg->vocab_size * 4 <= ((size_t)64 << 20) || r == 16,
			"%s: a chunk of %d rows is over 64 MiB", s->name, r);
	}
	/* fewer than 256 rows in all: one chunk of all of them */
	ck_assert_int_eq(eng_plan_chunk_rows(&gpt2_small, 1, 16), 16);
	/* GPT-2's vocabulary: 256 rows (51 MB of logits) */
	ck_assert_int_eq(eng_plan_chunk_rows(&gpt2_small, 8, 1024), 256);
	/* a huge vocabulary: capped at 64 MiB of logits */
	eng_config big = gpt2_small;
	big.vocab_size = 1 << 20;
	ck_assert_int_eq(eng_plan_chunk_rows(&big, 8, 1024), (64 << 20) / (4 << 20));
}
END_TEST

START_TEST(test_eng_plan_policy_sums)
{
	const plan_shape *s = &shapes[1];
	int rows = eng_plan_chunk_rows(s->cfg, s->B, s->T);
	eng_policy p;
	eng_plan pl;
	eng_err e = {0};
	eng_policy_init(&p, s->cfg->n_layer);
	ck_assert_int_eq(eng_policy_parse(&p, NULL, "h.0-3=full;h.4-7=selective;head=chunked", &e),
		0);
	eng_plan_policy(s->cfg, s->B, s->T, rows, &p, &pl);
	size_t saved = pl.head.saved_bytes, pool = 0;
	double flops = pl.head.extra_flops;
	for (int i = 0; i < s->cfg->n_layer; i++) {
		eng_plan_section want;
		eng_plan_block(s->cfg, s->B, s->T, p.block[i], &want);
		ck_assert_uint_eq(pl.block[i].saved_bytes, want.saved_bytes);
		saved += want.saved_bytes;
		flops += want.extra_flops;
		pool = want.workspace_bytes > pool ? want.workspace_bytes : pool;
	}
	ck_assert_uint_eq(pl.saved_bytes, saved);
	ck_assert_uint_eq(pl.recompute_bytes, pool + pl.head.workspace_bytes);
	ck_assert(fabs(pl.extra_flops - flops) <= 1e-9 * flops);
	/* model FLOPs: about 6 per parameter and token, plus attention */
	double approx = 6.0 * s->B * s->T * (double)eng_config_num_params(s->cfg);
	ck_assert_msg(pl.model_flops > 0.8 * approx && pl.model_flops < 1.6 * approx, "%g vs %g",
		pl.model_flops, approx);
}
END_TEST

/* Policy number `code` of the 3^L * 2 (the head's mode, then each block's), and its cost
 * under c when c is not NULL. */
static double policy_of_code(int code, int L, eng_policy *p, const eng_plan_costs *c)
{
	double cost = 0;
	eng_policy_init(p, L);
	p->head = (code % 2) ? ENG_MODE_CHUNKED : ENG_MODE_OFF;
	cost += c ? c->head[code % 2] : 0;
	code /= 2;
	for (int i = 0; i < L; i++, code /= 3) {
		p->block[i] = (eng_mode)(code % 3); /* off, selective, full */
		cost += c ? c->block[i][code % 3] : 0;
	}
	return cost;
}

/* The cheapest policy under budget by brute force: every one of the 3^L * 2 policies. */
static int brute_fit(const plan_shape *s, int rows, size_t budget, double *best_flops)
{
	int L = s->cfg->n_layer, found = 0, total = 2;
	for (int i = 0; i < L; i++)
		total *= 3;
	for (int code = 0; code < total; code++) {
		eng_policy p;
		eng_plan pl;
		policy_of_code(code, L, &p, NULL);
		eng_plan_policy(s->cfg, s->B, s->T, rows, &p, &pl);
		if (plan_bytes(&pl) <= budget && (!found || pl.extra_flops < *best_flops)) {
			found = 1;
			*best_flops = pl.extra_flops;
		}
	}
	return found;
}

START_TEST(test_eng_plan_fit_huge_budget)
{
	for (int k = 0; k < NSHAPES; k++) {
		const plan_shape *s = &shapes[k];
		int rows = eng_plan_chunk_rows(s->cfg, s->B, s->T);
		eng_policy p, off;
		eng_plan pl;
		ck_assert_int_eq(plan_fit(s->cfg, s->B, s->T, rows, SIZE_MAX, &p, &pl), 0);
		eng_policy_init(&off, s->cfg->n_layer);
		ck_assert_msg(eng_policy_equal(&p, &off), "%s: not all off", s->name);
		ck_assert(pl.extra_flops == 0);
	}
}
END_TEST

START_TEST(test_eng_plan_fit_tiny_budget)
{
	for (int k = 0; k < NSHAPES; k++) {
		const plan_shape *s = &shapes[k];
		int rows = eng_plan_chunk_rows(s->cfg, s->B, s->T);
		eng_policy p, want;
		eng_plan pl, want_pl;
		eng_err e = {0};
		ck_assert_int_eq(plan_fit(s->cfg, s->B, s->T, rows, 1024, &p, &pl), -1);
		/* what it returns then: the smallest policy there is, and its counts */
		eng_policy_init(&want, s->cfg->n_layer);
		ck_assert_int_eq(eng_policy_parse(&want, NULL, "full;head=chunked", &e), 0);
		ck_assert_msg(eng_policy_equal(&p, &want), "%s: not every block full", s->name);
		eng_plan_policy(s->cfg, s->B, s->T, rows, &want, &want_pl);
		ck_assert_uint_eq(plan_bytes(&pl), plan_bytes(&want_pl));
		/* one byte short of that smallest policy still does not fit */
		ck_assert_int_eq(plan_fit(s->cfg, s->B, s->T, rows, plan_bytes(&want_pl) - 1,
					 &p, &pl), -1);
		ck_assert_int_eq(plan_fit(s->cfg, s->B, s->T, rows, plan_bytes(&want_pl), &p,
					 &pl), 0);
	}
}
END_TEST

START_TEST(test_eng_plan_fit_between)
{
	for (int k = 0; k < NSHAPES; k++) {
		const plan_shape *s = &shapes[k];
		int rows = eng_plan_chunk_rows(s->cfg, s->B, s->T);
		eng_policy p, off, full;
		eng_plan pl, off_pl, full_pl;
		eng_err e = {0};
		eng_policy_init(&off, s->cfg->n_layer);
		eng_plan_policy(s->cfg, s->B, s->T, rows, &off, &off_pl);
		eng_policy_init(&full, s->cfg->n_layer);
		ck_assert_int_eq(eng_policy_parse(&full, NULL, "full;head=chunked", &e), 0);
		eng_plan_policy(s->cfg, s->B, s->T, rows, &full, &full_pl);
		/* just under all-off: something cheap must fit, far from everything full */
		size_t budget = plan_bytes(&off_pl) - 1;
		ck_assert_int_eq(plan_fit(s->cfg, s->B, s->T, rows, budget, &p, &pl), 0);
		ck_assert_msg(plan_bytes(&pl) <= budget, "%s: %zu > %zu", s->name, plan_bytes(&pl),
			budget);
		ck_assert(!eng_policy_equal(&p, &off) && !eng_policy_equal(&p, &full));
		ck_assert_msg(pl.extra_flops > 0 && pl.extra_flops < full_pl.extra_flops,
			"%s: %g recomputed, everything full is %g", s->name, pl.extra_flops,
			full_pl.extra_flops);
		/* *out holds the counts of *p */
		eng_plan again;
		eng_plan_policy(s->cfg, s->B, s->T, rows, &p, &again);
		ck_assert_uint_eq(plan_bytes(&again), plan_bytes(&pl));
		ck_assert(again.extra_flops == pl.extra_flops);
	}
}
END_TEST

START_TEST(test_eng_plan_fit_minimal)
{
	/* against brute force over every policy, at budgets spread from the smallest
	 * policy to all off; tiny (2 layers) and four (4 layers): 18 and 162 policies */
	const plan_shape *cases[] = {&shapes[0], &shapes[3]};
	for (int k = 0; k < 2; k++) {
		const plan_shape *s = cases[k];
		int rows = eng_plan_chunk_rows(s->cfg, s->B, s->T);
		eng_policy p;
		eng_plan lo_pl, hi_pl, pl;
		eng_err e = {0};
		eng_policy_init(&p, s->cfg->n_layer);
		eng_plan_policy(s->cfg, s->B, s->T, rows, &p, &hi_pl);
		ck_assert_int_eq(eng_policy_parse(&p, NULL, "full;head=chunked", &e), 0);
		eng_plan_policy(s->cfg, s->B, s->T, rows, &p, &lo_pl);
		size_t lo = plan_bytes(&lo_pl), hi = plan_bytes(&hi_pl);
		const int steps = 200;
		for (int i = 0; i <= steps; i++) {
			size_t budget = lo + (size_t)((double)(hi - lo) * i / steps);
			double want = 0;
			ck_assert(brute_fit(s, rows, budget, &want));
			int rc = plan_fit(s->cfg, s->B, s->T, rows, budget, &p, &pl);
			ck_assert_int_eq(rc, 0);
			ck_assert_msg(plan_bytes(&pl) <= budget, "%s budget %zu: %zu", s->name,
				budget, plan_bytes(&pl));
			ck_assert_msg(fabs(pl.extra_flops - want) <= 1e-9 * (want + 1),
				"%s budget %zu: %g FLOPs recomputed, %g possible", s->name, budget,
				pl.extra_flops, want);
		}
	}
}
END_TEST

/* The search with per-block costs of its own (as measured costs are: every block its own)
 * and memory held whatever the policy, against brute force over all 3^L * 2 policies, at
 * budgets across the whole range. Costs are integers so that sums compare exactly. */
START_TEST(test_eng_plan_search_measured_costs)
{
	const plan_shape *s = &shapes[3]; /* four layers: 162 policies */
	int L = s->cfg->n_layer, rows = eng_plan_chunk_rows(s->cfg, s->B, s->T), total = 2;
	for (int i = 0; i < L; i++)
		total *= 3;
	uint64_t seed = 42;
	for (int round = 0; round < 20; round++) {
		eng_plan_costs c;
		memset(&c, 0, sizeof c);
		for (int i = 0; i < L; i++)
			for (int m = 0; m < 3; m++) {
				seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
				c.block[i][m] = m == 0 ? 0 : (double)(1 + (seed >> 40) % 50);
			}
		c.head[1] = (double)(round % 7);
		size_t fixed = 1000000u * (size_t)(round + 1);
		size_t lo = SIZE_MAX, hi = 0;
		for (int code = 0; code < total; code++) {
			eng_policy p;
			eng_plan pl;
			policy_of_code(code, L, &p, NULL);
			eng_plan_policy(s->cfg, s->B, s->T, rows, &p, &pl);
			size_t peak = fixed + plan_bytes(&pl);
			lo = peak < lo ? peak : lo;
			hi = peak > hi ? peak : hi;
		}
		for (int step = -1; step <= 10; step++) {
			size_t budget = step < 0 ? lo - 1 : lo + (hi - lo) * (size_t)step / 10;
			double want = HUGE_VAL;
			for (int code = 0; code < total; code++) {
				eng_policy p;
				eng_plan pl;
				double cost = policy_of_code(code, L, &p, &c);
				eng_plan_policy(s->cfg, s->B, s->T, rows, &p, &pl);
				if (fixed + plan_bytes(&pl) <= budget && cost < want)
					want = cost;
			}
			eng_plan_query q = {s->cfg, s->B, s->T, rows, fixed, &c, budget, 0, 0.0};
			eng_policy got;
			eng_plan pl;
			int rc = eng_plan_search(&q, &got, &pl);
			if (want == HUGE_VAL) {
				ck_assert_int_eq(rc, -1);
				ck_assert_uint_eq(pl.peak_bytes, lo); /* the least any policy needs */
				continue;
			}
			ck_assert_int_eq(rc, 0);
			ck_assert_uint_eq(pl.fixed_bytes, fixed);
			ck_assert_uint_eq(pl.peak_bytes, fixed + plan_bytes(&pl));
			ck_assert_msg(pl.peak_bytes <= budget, "round %d: peak %zu over %zu", round,
				pl.peak_bytes, budget);
			ck_assert_msg(pl.cost == want, "round %d budget %zu: cost %g, %g possible",
				round, budget, pl.cost, want);
		}
	}
}
END_TEST

/* The controller: the budget applies at once; pressure (a measured peak within the
 * headroom) moves to a smaller policy at once; room moves back to a faster one only after
 * ENG_AUTO_CALM calm steps and ENG_AUTO_GAP steps since the last change. */
START_TEST(test_eng_auto_hysteresis)
{
	const plan_shape *s = &shapes[1]; /* gpt2-small, 8 x 1024: the blocks weigh */
	int rows = eng_plan_chunk_rows(s->cfg, s->B, s->T);
	eng_policy off, least, cur, next;
	eng_plan lo, hi, pred;
	eng_err e = {0};
	char why[256];
	eng_policy_init(&off, s->cfg->n_layer);
	eng_plan_policy(s->cfg, s->B, s->T, rows, &off, &hi);
	eng_policy_init(&least, s->cfg->n_layer);
	ck_assert_int_eq(eng_policy_parse(&least, NULL, "full;head=chunked", &e), 0);
	eng_plan_policy(s->cfg, s->B, s->T, rows, &least, &lo);
	size_t fixed = 4096; /* small beside the activations, so that modes matter */
	eng_plan_query q = {s->cfg, s->B, s->T, rows, fixed, NULL, 0, 0, 0.0};
	eng_auto a;
	eng_auto_set(&a, fixed + hi.peak_bytes - (hi.peak_bytes - lo.peak_bytes) / 5);
	cur = off;
	/* step 1: the budget is new, off does not fit: a change at once */
	ck_assert_int_eq(eng_auto_decide(&a, &q, &cur, 0, 1, &next, &pred, why, sizeof why), 1);
	ck_assert_msg(strstr(why, "budget"), "%s", why);
	ck_assert(pred.peak_bytes <= a.budget);
	cur = next;
	/* steady, as predicted: no change */
	for (int step = 2; step < 10; step++)
		ck_assert_int_eq(eng_auto_decide(&a, &q, &cur, pred.peak_bytes, step, &next,
					 &pred, why, sizeof why), 0);
	/* a peak within the headroom (the budget shrinks to it): smaller at once, however
	 * recent the last change */
	eng_plan was;
	eng_plan_policy(s->cfg, s->B, s->T, rows, &cur, &was);
	size_t now_peak = fixed + was.peak_bytes;
	a.budget = now_peak;
	int rr = eng_auto_decide(&a, &q, &cur, now_peak, 10, &next, &pred, why, sizeof why);
	ck_assert_msg(rr == 1, "%d %s: now %zu lo %zu hi %zu margin %zu", rr, why, now_peak,
		lo.peak_bytes, hi.peak_bytes, a.margin);
	ck_assert_msg(strstr(why, "within"), "%s", why);
	ck_assert(pred.peak_bytes <= now_peak);
	/* a measured peak above the prediction is kept as a margin */
	eng_auto b;
	eng_auto_set(&b, 10 * now_peak);
	eng_auto_decide(&b, &q, &cur, now_peak + 12345, 1, &next, &pred, why, sizeof why);
	ck_assert_uint_eq(b.margin, 12345);
	eng_auto_decide(&a, &q, &cur, now_peak, 10, &next, &pred, why, sizeof why);
	ck_assert(pred.saved_bytes + pred.recompute_bytes < was.saved_bytes + was.recompute_bytes);
	/* and the budget grows: room for a faster policy, taken only after a calm spell */
	eng_policy small = next;
	a.budget *= 2;
	a.margin = 0;
	int changed_at = 0;
	for (int step = 11; step < 30 && !changed_at; step++) {
		int r = eng_auto_decide(&a, &q, &small, 0, step, &next, &pred, why, sizeof why);
		if (r == 1)
			changed_at = step;
	}
	ck_assert_msg(changed_at >= 10 + ENG_AUTO_GAP && changed_at >= 11 + ENG_AUTO_CALM - 1,
		"went faster at step %d", changed_at);
	ck_assert_msg(strstr(why, "faster"), "%s", why);
	/* nothing fits: the least there is, and -1 */
	eng_auto_set(&a, fixed + lo.peak_bytes / 2);
	ck_assert_int_eq(eng_auto_decide(&a, &q, &off, 0, 1, &next, &pred, why, sizeof why), -1);
	ck_assert(eng_policy_equal(&next, &least));
}
END_TEST

/* The cgroup budget from a fake tree: memory.max of the process's cgroup; "max" (no limit)
 * and a process in no cgroup v2 are errors. */
START_TEST(test_eng_auto_cgroup)
{
	char root[512], proc[600], dir[700], max[800];
	snprintf(root, sizeof root, "%s/cgroup-fake", t_env("REMAT_TMP"));
	snprintf(dir, sizeof dir, "%s/job.slice/j1", root);
	snprintf(proc, sizeof proc, "%s/self-cgroup", root);
	snprintf(max, sizeof max, "%s/memory.max", dir);
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", root, dir);
	ck_assert_int_eq(system(cmd), 0);
	t_write_file(proc, "1:name=systemd:/x\n0::/job.slice/j1\n", 35);
	t_write_file(max, "1073741824\n", 11);
	size_t b = 0;
	eng_err e = {0};
	ck_assert_msg(eng_cgroup_limit(root, proc, &b, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(b, 1073741824u); /* the headroom is the controller's, once */
	t_write_file(max, "max\n", 4);
	ck_assert_int_eq(eng_cgroup_limit(root, proc, &b, &e), -1);
	ck_assert_msg(strstr(e.msg, "no memory limit"), "%s", e.msg);
	t_write_file(proc, "1:name=systemd:/x\n", 18);
	ck_assert_int_eq(eng_cgroup_limit(root, proc, &b, &e), -1);
	ck_assert_msg(strstr(e.msg, "no cgroup v2"), "%s", e.msg);
}
END_TEST

/* A budget from the cgroup measures the cgroup too: memory.current, and memory.peak over
 * a step where a descriptor can reset it; a cgroup without memory.current is refused. */
START_TEST(test_eng_auto_cgroup_usage)
{
	char root[512], proc[600], dir[700], path[800], cmd[2048];
	snprintf(root, sizeof root, "%s/cgroup-usage", t_env("REMAT_TMP"));
	snprintf(dir, sizeof dir, "%s/job.slice/j2", root);
	snprintf(proc, sizeof proc, "%s/self-cgroup", root);
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", root, dir);
	ck_assert_int_eq(system(cmd), 0);
	t_write_file(proc, "0::/job.slice/j2\n", 17);
	eng_auto_cg cg;
	eng_err e = {0};
	ck_assert_int_eq(eng_auto_cg_open(&cg, root, proc, &e), -1);
	ck_assert_msg(strstr(e.msg, "memory.current"), "%s", e.msg);
	eng_auto_cg_close(&cg);
	snprintf(path, sizeof path, "%s/memory.current", dir);
	t_write_file(path, "123456789\n", 10);
	ck_assert_msg(eng_auto_cg_open(&cg, root, proc, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(cg.peak_fd, -1); /* no memory.peak: the current bytes alone */
	eng_auto_cg_begin(&cg);
	ck_assert_uint_eq(eng_auto_cg_peak(&cg), 123456789u);
	eng_auto_cg_close(&cg);
	/* a memory.peak: reset at the step's start (here a file: what is written is read) */
	snprintf(path, sizeof path, "%s/memory.peak", dir);
	t_write_file(path, "987654321\n", 10);
	ck_assert_msg(eng_auto_cg_open(&cg, root, proc, &e) == 0, "%s", e.msg);
	ck_assert_int_ge(cg.peak_fd, 0);
	ck_assert_uint_eq(eng_auto_cg_peak(&cg), 123456789u); /* no window yet: not read */
	eng_auto_cg_begin(&cg);
	ck_assert(cg.windowed);
	t_write_file(path, "223456789\n", 10); /* the kernel's count during the step */
	ck_assert_uint_eq(eng_auto_cg_peak(&cg), 223456789u);
	eng_auto_cg_close(&cg);
}
END_TEST

START_TEST(test_eng_plan_fit_gpt2_small)
{
	/* 12 layers, 3^12 * 2 policies: too many for brute force, but blocks of one model
	 * cost the same, so counts of full and selective blocks (in any positions) cover
	 * every distinct cost */
	const plan_shape *s = &shapes[1];
	int L = s->cfg->n_layer, rows = eng_plan_chunk_rows(s->cfg, s->B, s->T);
	eng_policy p, q;
	eng_plan pl, ql;
	eng_policy_init(&q, L);
	eng_plan_policy(s->cfg, s->B, s->T, rows, &q, &ql);
	size_t hi = plan_bytes(&ql); /* all off */
	for (int frac = 1; frac < 10; frac++) {
		size_t budget = hi / 10 * frac;
		int rc = plan_fit(s->cfg, s->B, s->T, rows, budget, &p, &pl);
		double best = 0;
		int found = 0;
		for (int h = 0; h < 2; h++)
			for (int nf = 0; nf <= L; nf++)
				for (int ns = 0; nf + ns <= L; ns++) {
					eng_policy_init(&q, L);
					/* selective first this time: positions do not matter */
					for (int i = 0; i < ns; i++)
						q.block[i] = ENG_MODE_SELECTIVE;
					for (int i = ns; i < ns + nf; i++)
						q.block[i] = ENG_MODE_FULL;
					q.head = h ? ENG_MODE_CHUNKED : ENG_MODE_OFF;
					eng_plan_policy(s->cfg, s->B, s->T, rows, &q, &ql);
					if (plan_bytes(&ql) <= budget &&
						(!found || ql.extra_flops < best)) {
						found = 1;
						best = ql.extra_flops;
					}
				}
		ck_assert_int_eq(rc, found ? 0 : -1);
		if (!found)
			continue;
		ck_assert(plan_bytes(&pl) <= budget);
		ck_assert_msg(fabs(pl.extra_flops - best) <= 1e-9 * best, "budget %zu: %g vs %g",
			budget, pl.extra_flops, best);
	}
}
END_TEST

Suite *suite_policy(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("selectors");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_eng_mode_parse_names);
	tcase_add_test(tc, test_eng_mode_parse_unknown);
	tcase_add_test(tc, test_eng_policy_init_all_off);
	tcase_add_test(tc, test_eng_policy_apply_single);
	tcase_add_test(tc, test_eng_policy_apply_range_inclusive);
	tcase_add_test(tc, test_eng_policy_apply_blocks);
	tcase_add_test(tc, test_eng_policy_apply_head);
	tcase_add_test(tc, test_eng_policy_apply_all);
	tcase_add_test(tc, test_eng_policy_parse_same_as_client);
	tcase_add_test(tc, test_eng_check_info_round_trip);
	tcase_add_test(tc, test_eng_policy_apply_alias);
	tcase_add_test(tc, test_eng_policy_apply_later_overrides);
	tcase_add_test(tc, test_eng_policy_apply_out_of_range);
	tcase_add_test(tc, test_eng_policy_apply_malformed);
	tcase_add_test(tc, test_eng_policy_apply_mode_mismatch);
	tcase_add_test(tc, test_eng_aliases_add_errors);
	tcase_add_test(tc, test_eng_aliases_add_too_many);
	tcase_add_test(tc, test_eng_policy_parse_forms);
	tcase_add_test(tc, test_eng_policy_parse_errors);
	tcase_add_test(tc, test_eng_policy_section_hint);
	tcase_add_test(tc, test_eng_policy_format_runs);
	tcase_add_test(tc, test_eng_policy_format_truncated);
	tcase_add_test(tc, test_eng_policy_format_parse_round_trip);
	tcase_add_test(tc, test_eng_policy_equal_cases);
	suite_add_tcase(s, tc);

	tc = tcase_create("plan");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_eng_plan_block_order);
	tcase_add_test(tc, test_eng_plan_head_order);
	tcase_add_test(tc, test_eng_plan_chunk_rows_bounds);
	tcase_add_test(tc, test_eng_plan_policy_sums);
	tcase_add_test(tc, test_eng_plan_fit_huge_budget);
	tcase_add_test(tc, test_eng_plan_fit_tiny_budget);
	tcase_add_test(tc, test_eng_plan_fit_between);
	tcase_add_test(tc, test_eng_plan_fit_minimal);
	tcase_add_test(tc, test_eng_plan_search_measured_costs);
	tcase_add_test(tc, test_eng_auto_hysteresis);
	tcase_add_test(tc, test_eng_auto_cgroup);
	tcase_add_test(tc, test_eng_auto_cgroup_usage);
	tcase_add_test(tc, test_eng_plan_fit_gpt2_small);
	suite_add_tcase(s, tc);
	return s;
}
