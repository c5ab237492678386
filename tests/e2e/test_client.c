/* test_client.c - tests of rematctl: its pure helpers (client/cli_fmt.c, linked into the
 * runner) and the binary's exit statuses against a small fake server.
 *
 * What it covers: size and FLOP formatting, size and duration parsing with their refusals,
 * SEL=MODE arguments into an ordered sections object (a repeated selector moves to its
 * last place), paths made absolute in a job spec, the socket path's order of choice and
 * its length check, table layout, the cleaning of control characters; then the rematctl
 * binary (REMATCTL) on usage errors (2), a missing socket (3), an error reply (1), a good
 * reply (0) and every kind of bad server line (3, never a signal).
 * Then, against the real rematd and worker: a spec's relative paths taken from its own
 * directory and printed resolved, what trains (a LoRA job against a full one) in start's
 * and status' output, and watch's moving ETA at the rate --interval sets.
 * What it does not: the rest of rematctl against the real rematd (test_e2e.c,
 * test_lifecycle.c).
 */
#include "proto.h"
#include "tests.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/cli_fmt.h"
#include "t_daemon.h"
#include "t_util.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

/* ---- sizes, FLOPs, durations ---- */

START_TEST(test_cli_size_format_units)
{
	static const struct {
		double bytes;
		const char *want;
	} c[] = {
	    {0, "0 B"},
	    {512, "512 B"},
	    {1023, "1023 B"},
	    {1024, "1.0 KiB"},
	    {1536, "1.5 KiB"},
	    {238.3 * MIB, "238.3 MiB"},
	    {1.5 * GIB, "1.5 GiB"},
	    {1024 * 1023.97, "1.0 MiB"},
	    {-2 * MIB, "-2.0 MiB"},
	    {3.0 * 1024 * GIB, "3.0 TiB"},
	    {NAN, "-"},
	    {INFINITY, "-"},
	};
	char buf[CLI_SIZE_LEN];
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
		ck_assert_str_eq(cli_size_format(c[i].bytes, buf, sizeof buf), c[i].want);
}
END_TEST

START_TEST(test_cli_flops_format_units)
{
	char buf[CLI_SIZE_LEN];
	ck_assert_str_eq(cli_flops_format(0, buf, sizeof buf), "0 FLOP");
	ck_assert_str_eq(cli_flops_format(812e6, buf, sizeof buf), "812.0 MFLOP");
	ck_assert_str_eq(cli_flops_format(1.23e12, buf, sizeof buf), "1.2 TFLOP");
	ck_assert_str_eq(cli_flops_format(999.97e9, buf, sizeof buf), "1.0 TFLOP");
}
END_TEST

START_TEST(test_cli_size_parse_forms)
{
	static const struct {
		const char *text;
		long long want;
	} c[] = {
	    {"2GiB", 2LL << 30},
	    {"512M", 512LL << 20},
	    {"1e9", 1000000000LL},
	    {"7", 7},
	    {"0", 0},
	    {"1.5K", 1536},
	    {"2 GiB", 2LL << 30},
	    {"10MB", 10000000LL},
	    {"1kib", 1024},
	    {"3t", 3LL << 40},
	    {"100b", 100},
	    {".5g", 1LL << 29},
	    {"2.5E3", 2500},
	    {"1GB", 1000000000LL},
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		long long v = -1;
		ck_assert_msg(proto_size_parse(c[i].text, &v) == 0, "'%s' refused", c[i].text);
		ck_assert_msg(v == c[i].want, "'%s' gave %lld, want %lld", c[i].text, v, c[i].want);
	}
}
END_TEST

START_TEST(test_cli_size_parse_bad)
{
	static const char *const bad[] = {"",	    "-1", "+1",	 "0x10", "inf",	 "nan",
					  "2GiBs",  "2 ", " 2",	 "1e30", "GiB",	 "1..5",
					  "2  GiB", "1e", "2XB", "1,5M", "9e18K"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		long long v = 42;
		ck_assert_msg(proto_size_parse(bad[i], &v) == -1, "'%s' accepted as %lld", bad[i], v);
		ck_assert_msg(v == 42, "'%s' changed the result though refused", bad[i]);
	}
}
END_TEST

START_TEST(test_cli_seconds_parse_forms)
{
	double s = 0;
	ck_assert_int_eq(cli_seconds_parse("30", &s), 0);
	ck_assert(s == 30.0);
	ck_assert_int_eq(cli_seconds_parse("2.5s", &s), 0);
	ck_assert(s == 2.5);
	ck_assert_int_eq(cli_seconds_parse("250ms", &s), 0);
	ck_assert(fabs(s - 0.25) < 1e-12);
	ck_assert_int_eq(cli_seconds_parse("10m", &s), 0);
	ck_assert(s == 600.0);
	ck_assert_int_eq(cli_seconds_parse("1h", &s), 0);
	ck_assert(s == 3600.0);
	static const char *const bad[] = {"", "0", "-1", "1d", "25h", "s", "1 s", "inf"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(cli_seconds_parse(bad[i], &s) == -1, "'%s' accepted", bad[i]);
}
END_TEST

/* watch's and status' durations: ms below a second, tenths below a minute, then two
 * units; "-" for what is not one. */
START_TEST(test_cli_duration_format)
{
	char b[32];
	ck_assert_str_eq(cli_duration_format(0.85, b, sizeof b), "850 ms");
	ck_assert_str_eq(cli_duration_format(12.34, b, sizeof b), "12.3 s");
	ck_assert_str_eq(cli_duration_format(245, b, sizeof b), "4m05s");
	ck_assert_str_eq(cli_duration_format(7620, b, sizeof b), "2h07m");
	ck_assert_str_eq(cli_duration_format(273600, b, sizeof b), "3d04h");
	ck_assert_str_eq(cli_duration_format(-1, b, sizeof b), "-");
	ck_assert_str_eq(cli_duration_format(NAN, b, sizeof b), "-");
}
END_TEST

/* The states logs -f and watch stop at: rematd's final ones, interrupted included. */
START_TEST(test_cli_state_final)
{
	static const char *const ended[] = {"finished", "stopped", "failed", "interrupted"};
	static const char *const live[] = {"queued", "starting", "running", "paused", "stopping",
		"", "FINISHED"};
	for (size_t i = 0; i < sizeof ended / sizeof ended[0]; i++)
		ck_assert_msg(cli_state_final(ended[i]), "%s", ended[i]);
	for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
		ck_assert_msg(!cli_state_final(live[i]), "%s", live[i]);
	ck_assert(!cli_state_final(NULL));
}
END_TEST

/* ---- SEL=MODE ---- */

/* Parses args into a sections object and returns its compact JSON (malloc'd). */
static char *sections_json(int n, char **args)
{
	json_t *obj = NULL;
	char err[256] = "";
	int rc = cli_sections_parse(args, n, &obj, err, sizeof err);
	ck_assert_msg(rc == 0, "refused: %s", err);
	char *text = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	return text;
}

START_TEST(test_cli_sections_parse_order)
{
	char *a[] = {"h.0-5=full", "head=chunked", "trunk=selective"};
	char *text = sections_json(3, a);
	ck_assert_str_eq(text, "{\"h.0-5\":\"full\",\"head\":\"chunked\",\"trunk\":\"selective\"}");
	free(text);
	/* h.0-5 again: it must come after h.3 so that, applied in order, it wins there too */
	char *b[] = {"h.0-5=full", "h.3=off", "h.0-5=selective"};
	text = sections_json(3, b);
	ck_assert_str_eq(text, "{\"h.3\":\"off\",\"h.0-5\":\"selective\"}");
	free(text);
	text = sections_json(0, NULL);
	ck_assert_str_eq(text, "{}");
	free(text);
	/* joined by commas, as policies are printed, and mixed with separate words */
	char *c[] = {"h.0-5=full,head=chunked", "trunk=selective"};
	text = sections_json(2, c);
	ck_assert_str_eq(text, "{\"h.0-5\":\"full\",\"head\":\"chunked\",\"trunk\":\"selective\"}");
	free(text);
	/* the one grammar of a policy's text (proto_policy_parse), as remat-train reads it:
	 * ';' and blanks too, empty items skipped, a bare mode is all=MODE */
	char *d[] = {"h.0-5=full;head=chunked,", "full h.1=off"};
	text = sections_json(2, d);
	ck_assert_str_eq(text, "{\"h.0-5\":\"full\",\"head\":\"chunked\",\"all\":\"full\","
		"\"h.1\":\"off\"}");
	free(text);
}
END_TEST

START_TEST(test_cli_sections_parse_bad)
{
	static const char *const bad[] = {"=full", "h.0=", "h.0=full=off", "", ";;", "\xff=full",
		"h.0=\xc3", "h.0=full,=off", "h.0=full,head=", "h.0=full;=off", "h.0", "h.0=ful",
		"h.0=full,head"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *args[] = {"head=off", (char *)bad[i]};
		json_t *obj = (json_t *)1;
		char err[256] = "";
		ck_assert_msg(cli_sections_parse(args, 2, &obj, err, sizeof err) == -1,
			      "'%s' accepted", bad[i]);
		ck_assert_msg(strstr(err, "bad section setting") != NULL, "message '%s'", err);
		ck_assert_msg(obj == (json_t *)1, "'%s': result set though refused", bad[i]);
	}
}
END_TEST

/* ---- paths ---- */

START_TEST(test_cli_path_absolute_cases)
{
	static const struct {
		const char *cwd, *path, *want;
	} c[] = {
	    {"/home/u/run", "data/x.bin", "/home/u/run/data/x.bin"},
	    {"/home/u/run", "./data//x.bin/", "/home/u/run/data/x.bin"},
	    {"/home/u/run", "../d", "/home/u/d"},
	    {"/home/u/run", "./../../d", "/home/d"},
	    {"/home/u/run", "../../../../d", "/d"},
	    {"/home/u/run", "a/../b", "/home/u/run/a/../b"}, /* a may be a link: kept */
	    {"/home/u/run", "a/./b", "/home/u/run/a/b"},
	    {"/home/u/run", "/abs/./x", "/abs/./x"},
	    {"/home/u/run", ".", "/home/u/run"},
	    {"/home/u/run", "..", "/home/u"},
	    {"/", "x", "/x"},
	    {"/", "..", "/"},
	    {"//a//b/", "c", "/a/b/c"},
	};
	char out[256];
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		ck_assert_int_eq(cli_path_absolute(c[i].cwd, c[i].path, out, sizeof out), 0);
		ck_assert_msg(strcmp(out, c[i].want) == 0, "'%s' in '%s' gave '%s', want '%s'",
			      c[i].path, c[i].cwd, out, c[i].want);
	}
	ck_assert_int_eq(cli_path_absolute("/home/u/run", "data", out, 15), -1);
	ck_assert_int_eq(cli_path_absolute("/home/u/run", "data", out, 17), 0);
	ck_assert_str_eq(out, "/home/u/run/data");
}
END_TEST

START_TEST(test_cli_spec_absolutize_fields)
{
	json_error_t je;
	json_t *spec =
	    json_loads("{\"name\": \"data/x\", \"model\": {\"preset\": \"tiny\", "
		       "\"init_from\": \"../ck\"}, \"data\": {\"train\": \"t.bin\", \"val\": "
		       "\"/v.bin\", \"format\": \"bytes\"}, \"save\": {\"dir\": \"out/\", "
		       "\"every\": 5}}",
		       0, &je);
	char err[256] = "";
	ck_assert_ptr_nonnull(spec);
	ck_assert_int_eq(cli_spec_absolutize(spec, "/w/job", err, sizeof err), 0);
	char *text = json_dumps(spec, JSON_COMPACT);
	ck_assert_str_eq(text,
			 "{\"name\":\"data/x\",\"model\":{\"preset\":\"tiny\",\"init_from\":"
			 "\"/w/ck\"},\"data\":{\"train\":\"/w/job/t.bin\",\"val\":\"/v.bin\","
			 "\"format\":\"bytes\"},\"save\":{\"dir\":\"/w/job/out\",\"every\":5}}");
	free(text);
	json_decref(spec);

	/* wrong types, empty and missing fields are left for the server to refuse */
	spec = json_loads("{\"data\": {\"train\": 5, \"val\": \"\"}, \"save\": \"out\"}", 0, &je);
	ck_assert_int_eq(cli_spec_absolutize(spec, "/w", err, sizeof err), 0);
	text = json_dumps(spec, JSON_COMPACT);
	ck_assert_str_eq(text, "{\"data\":{\"train\":5,\"val\":\"\"},\"save\":\"out\"}");
	free(text);
	json_decref(spec);

	spec = json_loads("[1]", 0, &je);
	ck_assert_int_eq(cli_spec_absolutize(spec, "/w", err, sizeof err), -1);
	ck_assert_msg(strstr(err, "object") != NULL, "message '%s'", err);
	json_decref(spec);

	/* a path that would not fit the engine's limit once absolute */
	char *lng = malloc(CLI_PATH_MAX);
	ck_assert_ptr_nonnull(lng);
	memset(lng, 'a', CLI_PATH_MAX - 4);
	lng[CLI_PATH_MAX - 4] = '\0';
	spec = json_pack("{s:{s:s}}", "data", "train", lng);
	ck_assert_int_eq(cli_spec_absolutize(spec, "/work/dir", err, sizeof err), -1);
	ck_assert_msg(strstr(err, "data.train") && strstr(err, "too long"), "message '%s'", err);
	json_decref(spec);
	free(lng);
}
END_TEST

START_TEST(test_cli_socket_path_order)
{
	char out[256], err[256];
	ck_assert_int_eq(
	    cli_socket_path("/o.sock", "/e.sock", "/run/user/1", out, sizeof out, err, sizeof err),
	    0);
	ck_assert_str_eq(out, "/o.sock");
	ck_assert_int_eq(
	    cli_socket_path(NULL, "/e.sock", "/run/user/1", out, sizeof out, err, sizeof err), 0);
	ck_assert_str_eq(out, "/e.sock");
	ck_assert_int_eq(cli_socket_path(NULL, "", "/run/user/1", out, sizeof out, err, sizeof err),
			 0);
	ck_assert_str_eq(out, "/run/user/1/remat/rematd.sock");
	ck_assert_int_eq(cli_socket_path(NULL, NULL, "", out, sizeof out, err, sizeof err), 0);
	ck_assert_str_eq(out, "/run/remat/rematd.sock");

	/* no daemon of the user's own but a system one: the system's; with the user's socket
	 * present, or an explicit choice, never */
	char dir[256], sys_sock[300], own[300];
	snprintf(dir, sizeof dir, "%s/sockpath", t_env("REMAT_TMP"));
	snprintf(sys_sock, sizeof sys_sock, "%s/system.sock", dir);
	snprintf(own, sizeof own, "%s/remat/rematd.sock", dir);
	ck_assert(mkdir(dir, 0700) == 0 || errno == EEXIST);
	unlink(sys_sock), unlink(own);
	ck_assert_int_eq(cli_socket_path_in(NULL, NULL, dir, sys_sock, out, sizeof out, err,
				 sizeof err), 0);
	ck_assert_str_eq(out, own); /* neither exists: the user's */
	FILE *f = fopen(sys_sock, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(cli_socket_path_in(NULL, NULL, dir, sys_sock, out, sizeof out, err,
				 sizeof err), 0);
	ck_assert_str_eq(out, sys_sock);
	ck_assert_int_eq(cli_socket_path_in(NULL, "/e.sock", dir, sys_sock, out, sizeof out, err,
				 sizeof err), 0);
	ck_assert_str_eq(out, "/e.sock");
	char sub[300];
	snprintf(sub, sizeof sub, "%s/remat", dir);
	ck_assert(mkdir(sub, 0700) == 0 || errno == EEXIST);
	f = fopen(own, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(cli_socket_path_in(NULL, NULL, dir, sys_sock, out, sizeof out, err,
				 sizeof err), 0);
	ck_assert_str_eq(out, own);

	char lng[200];
	const size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	memset(lng, 'x', sizeof lng);
	lng[0] = '/';
	lng[max] = '\0'; /* just fits */
	ck_assert_int_eq(cli_socket_path(lng, NULL, NULL, out, sizeof out, err, sizeof err), 0);
	lng[max] = 'x';
	lng[max + 1] = '\0'; /* one byte over */
	ck_assert_int_eq(cli_socket_path(lng, NULL, NULL, out, sizeof out, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "too long") != NULL, "message '%s'", err);
}
END_TEST

/* ---- tables and server text ---- */

START_TEST(test_cli_table_render_aligned)
{
	static const char *const head[] = {"JOB", "NAME", "STEP", "LOSS"};
	cli_table t;
	cli_table_init(&t, 4, head, "llrr");
	ck_assert_int_eq(cli_table_add(&t, "j1", "demo", "120/1000", "2.3456"), 0);
	ck_assert_int_eq(cli_table_add(&t, "j10", "\xc3\xa9t\xc3\xa9", "5/10", NULL), 0);
	ck_assert_int_eq(cli_table_add(&t, "j2", "a\x1b[2Jb", "0/1", "-"), 0);
	char *text = cli_table_render(&t);
	ck_assert_ptr_nonnull(text);
	/* "été" is three columns wide; the escape is cleaned before it is measured */
	ck_assert_str_eq(text, "JOB  NAME        STEP    LOSS\n"
			       "j1   demo    120/1000  2.3456\n"
			       "j10  \xc3\xa9t\xc3\xa9         5/10       -\n"
			       "j2   a?[2Jb       0/1       -\n");
	free(text);
	cli_table_free(&t);

	/* no rows: the titles alone; a last column never leaves trailing blanks */
	static const char *const h2[] = {"A", "LONGER"};
	cli_table_init(&t, 2, h2, "rl");
	text = cli_table_render(&t);
	ck_assert_str_eq(text, "A  LONGER\n");
	free(text);
	cli_table_add(&t, "12345", "");
	text = cli_table_render(&t);
	ck_assert_str_eq(text, "    A  LONGER\n12345\n");
	free(text);
	cli_table_free(&t);
}
END_TEST

START_TEST(test_cli_str_clean_controls)
{
	char out[16];
	ck_assert_str_eq(cli_str_clean("a\x1b[31mb\x07\x7f", out, sizeof out), "a?[31mb??");
	ck_assert_str_eq(cli_str_clean("x\xc2\x9b"
				       "1m",
				       out, sizeof out),
			 "x?1m");						 /* C1 CSI */
	ck_assert_str_eq(cli_str_clean("\xc3\xa9\xc3\xa9", out, 4), "\xc3\xa9"); /* no half é */
	ck_assert_str_eq(cli_str_clean("abcdef", out, 4), "abc");
	ck_assert_str_eq(cli_str_clean("", out, sizeof out), "");
}
END_TEST

START_TEST(test_cli_policy_format_forms)
{
	char buf[64];
	json_t *p = json_pack("{s:s,s:s,s:i}", "h.0-5", "full", "h.6-11", "off", "head", 3);
	ck_assert_str_eq(cli_policy_format(p, buf, sizeof buf), "h.0-5=full,h.6-11=off,head=?");
	char small[16];
	cli_policy_format(p, small, sizeof small);
	ck_assert_msg(strlen(small) < sizeof small && strstr(small, "...") != NULL, "'%s'", small);
	json_decref(p);
	ck_assert_str_eq(cli_policy_format(NULL, buf, sizeof buf), "-");
	p = json_object();
	ck_assert_str_eq(cli_policy_format(p, buf, sizeof buf), "-");
	json_decref(p);
}
END_TEST

START_TEST(test_cli_json_readers_types)
{
	json_t *o = json_pack("{s:s,s:i,s:f,s:n,s:{}}", "s", "x", "i", 3, "f", 2.5, "n", "o");
	double v = 0;
	ck_assert_str_eq(cli_jstr(o, "s"), "x");
	ck_assert_ptr_null(cli_jstr(o, "i"));
	ck_assert_ptr_null(cli_jstr(NULL, "s"));
	ck_assert_int_eq(cli_jnum(o, "i", &v), 1);
	ck_assert(v == 3.0);
	ck_assert_int_eq(cli_jnum(o, "f", &v), 1);
	ck_assert(v == 2.5);
	ck_assert_int_eq(cli_jnum(o, "n", &v), 0);
	ck_assert_int_eq(cli_jnum(o, "s", &v), 0);
	ck_assert_ptr_nonnull(cli_jobj(o, "o"));
	ck_assert_ptr_null(cli_jobj(o, "s"));
	json_decref(o);
}
END_TEST

/* ---- numbers in their shortest text (proto_units.c, shared with the engine) ---- */

/* proto_real_text: the shortest %.Ng that reads back to the same double, integral values
 * whole; every result reads back to its value's bits. */
START_TEST(test_num_real_shortest)
{
	static const struct {
		double v;
		const char *want;
	} c[] = {
	    {3e-4, "0.0003"}, {0.1, "0.1"}, {1e-8, "1e-08"}, {0.0, "0"}, {-0.0, "-0"},
	    {10.0, "10"}, {1e6, "1000000"}, {1e17, "1e+17"}, {0.1 + 0.2, "0.30000000000000004"},
	    {5e-324, "5e-324"}, {2.2250738585072014e-308, "2.2250738585072014e-308"},
	    {0.9, "0.9"}, {(double)0.9f, "0.8999999761581421"}, {1.5, "1.5"},
	};
	char buf[PROTO_NUM_LEN];
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		ck_assert_str_eq(proto_real_text(c[i].v, buf, sizeof buf), c[i].want);
		double back = strtod(buf, NULL);
		ck_assert_msg(memcmp(&back, &c[i].v, sizeof back) == 0, "%s", buf);
	}
	/* any double: the same bits back, never longer than %.17g */
	unsigned long long x = 88172645463325252ULL;
	for (int i = 0; i < 20000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		double v;
		memcpy(&v, &x, sizeof v);
		if (!isfinite(v))
			continue;
		char full[40];
		snprintf(full, sizeof full, "%.17g", v);
		proto_real_text(v, buf, sizeof buf);
		double back = strtod(buf, NULL);
		ck_assert_msg(memcmp(&back, &v, sizeof v) == 0 && strlen(buf) <= strlen(full) + 2,
			"%s for %s", buf, full);
	}
}
END_TEST

/* proto_f32_text / proto_f32_double: a float32's shortest text, read back by strtof and
 * by strtod then a cast (the engine's JSON readers) to the same bits. */
START_TEST(test_num_f32_shortest)
{
	static const struct {
		float v;
		const char *want;
	} c[] = {
	    {0.1f, "0.1"}, {3e-4f, "0.0003"}, {0.9f, "0.9"}, {0.95f, "0.95"}, {1e-8f, "1e-08"},
	    {0.0f, "0"}, {1.0f, "1"}, {1e-45f, "1e-45"}, {1.17549435e-38f, "1.1754944e-38"},
	    {16777216.0f, "16777216"}, {3.4028235e38f, "3.4028235e+38"},
	};
	char buf[PROTO_NUM_LEN];
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		ck_assert_str_eq(proto_f32_text(c[i].v, buf, sizeof buf), c[i].want);
		float a = (float)proto_f32_double(c[i].v);
		ck_assert_msg(memcmp(&a, &c[i].v, sizeof a) == 0, "%s", buf);
	}
	ck_assert(proto_f32_double(0.9f) == 0.9);
	ck_assert(proto_f32_double(3e-4f) == 3e-4);
	/* every float of a sweep, denormals included: both readers give its bits back */
	for (uint32_t bits = 1; bits < 0x7f800000u; bits += 0x0001f3a7u) {
		float v, a, b;
		memcpy(&v, &bits, sizeof v);
		proto_f32_text(v, buf, sizeof buf);
		a = strtof(buf, NULL);
		b = (float)strtod(buf, NULL);
		ck_assert_msg(memcmp(&a, &v, sizeof v) == 0 && memcmp(&b, &v, sizeof v) == 0 &&
			strlen(buf) <= 15, "%s for %a", buf, (double)v);
	}
}
END_TEST

/* proto_json_shorten: reals in JSON text rewritten, integers, strings and keys alone, a
 * real stays a real. */
START_TEST(test_num_json_shorten)
{
	static const char *in =
	    "{\"lr\":0.00029999999999999997,\"beta1\":0.90000000000000002,\"n\":3,"
	    "\"s\":\"0.10000000000000001 \\\"1.0000000000000000\",\"1.5\":[1.0,-2.5000000000000001e-05,"
	    "10.0,1e+17,-0.0],\"big\":12345678901234567}";
	static const char *want =
	    "{\"lr\":0.0003,\"beta1\":0.9,\"n\":3,"
	    "\"s\":\"0.10000000000000001 \\\"1.0000000000000000\",\"1.5\":[1.0,-2.5e-05,"
	    "10.0,1e+17,-0.0],\"big\":12345678901234567}";
	char *out = proto_json_shorten(in, strlen(in));
	ck_assert_str_eq(out, want);
	free(out);
	/* jansson writes %.17g; the dump through the helper reads back to the same values */
	json_t *o = json_pack("{s:f,s:f,s:i}", "lr", 3e-4, "x", proto_f32_double(0.9f), "k", 7);
	out = proto_json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	ck_assert_str_eq(out, "{\"lr\":0.0003,\"x\":0.9,\"k\":7}");
	json_t *back = json_loads(out, 0, NULL);
	ck_assert(json_equal(back, o));
	json_decref(back);
	json_decref(o);
	free(out);
}
END_TEST

/* A reply's values as people read them: set's lr=0.0003. */
START_TEST(test_cli_value_format)
{
	char buf[64];
	json_t *v = json_real(3e-4);
	ck_assert_str_eq(cli_value_format(v, buf, sizeof buf), "0.0003");
	json_decref(v);
	v = json_real(1.0);
	ck_assert_str_eq(cli_value_format(v, buf, sizeof buf), "1");
	json_decref(v);
	v = json_integer(200);
	ck_assert_str_eq(cli_value_format(v, buf, sizeof buf), "200");
	json_decref(v);
	v = json_string("cosine\x1b");
	ck_assert_str_eq(cli_value_format(v, buf, sizeof buf), "cosine?");
	json_decref(v);
	v = json_pack("[f]", 0.1);
	ck_assert_str_eq(cli_value_format(v, buf, sizeof buf), "[0.1]");
	json_decref(v);
	ck_assert_str_eq(cli_value_format(NULL, buf, sizeof buf), "-");
}
END_TEST

/* remat costs: the noise is the most a mode came out faster than off; figures within it
 * are "~0 (noise)"; the blocks' workspace is one buffer, the head's its own. */
START_TEST(test_cli_costs_noise_workspace)
{
	char buf[32];
	json_t *secs = json_loads(
	    "[{\"name\":\"h.0\",\"modes\":{\"off\":{\"added_ms\":0.0},"
	    "\"selective\":{\"added_ms\":0.34},\"full\":{\"added_ms\":7.79}}},"
	    "{\"name\":\"h.1\",\"modes\":{\"full\":{\"added_ms\":-0.76},\"off\":{\"added_ms\":null}}},"
	    "{\"name\":\"head\",\"modes\":{\"chunked\":{\"added_ms\":0.16}}}]", 0, NULL);
	ck_assert_ptr_nonnull(secs);
	double noise = cli_costs_noise(secs);
	ck_assert(fabs(noise - 0.76) < 1e-12);
	ck_assert_str_eq(cli_added_ms_format(-0.76, noise, buf, sizeof buf), "~0 (noise)");
	ck_assert_str_eq(cli_added_ms_format(0.34, noise, buf, sizeof buf), "~0 (noise)");
	ck_assert_str_eq(cli_added_ms_format(7.79, noise, buf, sizeof buf), "+7.79");
	ck_assert_str_eq(cli_added_ms_format(0.0, noise, buf, sizeof buf), "+0.00");
	ck_assert_str_eq(cli_added_ms_format(0.34, 0, buf, sizeof buf), "+0.34");
	ck_assert_str_eq(cli_added_ms_format(NAN, noise, buf, sizeof buf), "-");
	json_decref(secs);
	secs = json_loads("[]", 0, NULL);
	ck_assert(cli_costs_noise(secs) == 0);
	json_decref(secs);

	double head = -1;
	secs = json_loads(
	    "[{\"name\":\"h.0\",\"workspace_bytes\":0},{\"name\":\"h.1\",\"workspace_bytes\":786432},"
	    "{\"name\":\"h.2\",\"workspace_bytes\":786432},{\"name\":\"h.3\",\"workspace_bytes\":"
	    "524288},{\"name\":\"head\",\"workspace_bytes\":65536}]", 0, NULL);
	ck_assert(cli_block_workspace(secs, &head) == 786432.0);
	ck_assert(head == 65536.0);
	json_decref(secs);
}
END_TEST

/* A spec's relative paths are its directory's (as Docker Compose's file's), "-" the
 * current directory's; the resolved paths as printed. */
START_TEST(test_cli_spec_dir_paths)
{
	char dir[128];
	ck_assert_int_eq(cli_spec_dir("/home/u", "examples/loop.json", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/home/u/examples");
	ck_assert_int_eq(cli_spec_dir("/home/u", "loop.json", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/home/u");
	ck_assert_int_eq(cli_spec_dir("/home/u", "/srv/jobs/a.json", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/srv/jobs");
	ck_assert_int_eq(cli_spec_dir("/home/u", "../x/a.json", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/home/x");
	ck_assert_int_eq(cli_spec_dir("/home/u", "/a.json", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/");
	ck_assert_int_eq(cli_spec_dir("/home/u", "-", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/home/u");
	ck_assert_int_eq(cli_spec_dir("/home/u", "examples/loop.json", dir, 8), -1);

	char err[128];
	json_t *spec = json_loads("{\"data\":{\"train\":\"train.txt\",\"val\":\"../v.txt\"},"
		"\"save\":{\"dir\":\"/abs/out\"}}", 0, NULL);
	ck_assert_int_eq(cli_spec_dir("/w", "examples/loop.json", dir, sizeof dir), 0);
	ck_assert_int_eq(cli_spec_absolutize(spec, dir, err, sizeof err), 0);
	char *text = cli_spec_paths_text(spec);
	ck_assert_str_eq(text, "data.train: /w/examples/train.txt\ndata.val: /w/v.txt\n"
		"save.dir: /abs/out\n");
	free(text);
	json_decref(spec);
}
END_TEST

/* What trains, as PEFT prints it, with the architecture. */
START_TEST(test_cli_model_text)
{
	char buf[256];
	json_t *r = json_pack("{s:s,s:i,s:i}", "arch", "gpt2", "params", 125248,
		"trainable_params", 4096);
	ck_assert_str_eq(cli_model_text(r, buf, sizeof buf),
		"gpt2, trainable params: 4,096 || all params: 125,248 || trainable%: 3.2703");
	json_decref(r);
	r = json_pack("{s:s,s:I,s:I}", "arch", "llama", "params", (json_int_t)134515008,
		"trainable_params", (json_int_t)134515008);
	ck_assert_str_eq(cli_model_text(r, buf, sizeof buf), "llama, trainable params: "
		"134,515,008 || all params: 134,515,008 || trainable%: 100.0000");
	json_decref(r);
	r = json_pack("{s:s}", "arch", "gpt2");
	ck_assert_ptr_null(cli_model_text(r, buf, sizeof buf));
	json_decref(r);
	ck_assert_str_eq(proto_params_text(0, 999, buf, sizeof buf),
		"trainable params: 0 || all params: 999 || trainable%: 0.0000");
}
END_TEST

/* The memory controller of a job-status reply: "auto" first, auto_budget_bytes where a
 * server sends no "auto", none when "auto" is null; budgets in MiB whatever their size. */
START_TEST(test_cli_auto_text)
{
	char buf[256];
	double b = 0;
	ck_assert_str_eq(cli_mib_format(1.5 * GIB, buf, sizeof buf), "1536.0 MiB");
	ck_assert_str_eq(cli_mib_format(NAN, buf, sizeof buf), "-");
	json_t *st = json_loads("{\"auto\":{\"budget_bytes\":387973120,\"source\":\"device\","
		"\"pinned\":true},\"auto_budget_bytes\":1}", 0, NULL);
	ck_assert(cli_auto_budget(st, &b) && b == 387973120);
	ck_assert_str_eq(cli_auto_text(st, 0, buf, sizeof buf), "370.0 MiB (the device's free "
		"memory; holding the policy set by remat set)");
	ck_assert_str_eq(cli_auto_text(st, 1, buf, sizeof buf), "370.0 MiB (device; remat set's "
		"policy held)");
	json_decref(st);
	st = json_loads("{\"auto\":null,\"auto_budget_bytes\":387973120}", 0, NULL);
	ck_assert(!cli_auto_budget(st, &b) && !cli_auto_text(st, 0, buf, sizeof buf));
	json_decref(st);
	st = json_loads("{\"auto_budget_bytes\":387973120}", 0, NULL);
	ck_assert(cli_auto_budget(st, &b) && b == 387973120);
	json_decref(st);
	/* rematd's record of a stopped job under its cgroup's limit: on, its bytes not known */
	st = json_loads("{\"auto\":{\"budget_bytes\":null,\"source\":\"cgroup\",\"pinned\":"
		"false,\"least_bytes\":null},\"auto_budget_bytes\":null}", 0, NULL);
	ck_assert(!cli_auto_budget(st, &b));
	ck_assert_str_eq(cli_auto_text(st, 0, buf, sizeof buf), "not known until it runs (cgroup "
		"memory.max; the controller picks the policy)");
	json_decref(st);
	st = json_loads("{\"auto\":{\"budget_bytes\":\"x\",\"source\":7}}", 0, NULL);
	ck_assert(!cli_auto_budget(st, &b) && !cli_auto_text(NULL, 0, buf, sizeof buf));
	json_decref(st);
}
END_TEST

/* ---- the binary ---- */

/* Runs rematctl with the arguments given (NULL-terminated, at most 12); returns the status
 * and the output (malloc'd). */
static int ctl(char **out, ...)
{
	char *argv[14] = {(char *)t_env("REMATCTL")};
	va_list ap;
	va_start(ap, out);
	for (int i = 1; i < 13 && (argv[i] = va_arg(ap, char *)) != NULL; i++)
		;
	va_end(ap);
	return t_run(argv, out);
}

/* Counts the lines of text. */
static int lines(const char *text)
{
	int n = 0;
	for (; *text; text++)
		n += *text == '\n';
	return n;
}

START_TEST(test_rematctl_usage_errors)
{
	static const char *const bad[][5] = {
	    {"frobnicate", NULL},
	    {"status", NULL},
	    {"remat", NULL},
	    {"remat", "set", "j1", NULL},
	    {"ls", "--save", NULL},
	    {"remat", "set", "j1", "h.0"},
	    {"remat", "set", "j1", "=full"},
	    {"remat", "plan", "--budget=lots", NULL},
	    {"ls", "--bogus", NULL},
	    {"events", "--event", "NOPE", NULL},
	    {"watch", "j1", "--count=0", NULL},
	    {"status", "j1", "j2", NULL},
	    {"ls", "--timeout", NULL},
	    {"ls", "--timeout=-1", NULL},
	    {"ls", "--control", "/a", "--socket", "/b"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *out = NULL;
		/* the socket does not exist: a usage error must be found before connecting */
		int rc = ctl(&out, "--socket", "/nonexistent/remat.sock", bad[i][0], bad[i][1],
			     bad[i][2], bad[i][3], bad[i][4], NULL);
		ck_assert_msg(rc == 2, "%s %s %s: status %d, output:\n%s", bad[i][0],
			      bad[i][1] ? bad[i][1] : "", bad[i][2] ? bad[i][2] : "", rc, out);
		ck_assert_msg(strncmp(out, "rematctl: ", 10) == 0, "output:\n%s", out);
		free(out);
	}
	char *out = NULL;
	ck_assert_int_eq(ctl(&out, "--help", NULL), 0);
	ck_assert_msg(strstr(out, "remat plan") && strstr(out, "exit status"), "%s", out);
	/* both help texts list every mode, from the protocol's table */
	char cmd[512], train_help[4096];
	snprintf(cmd, sizeof cmd, "'%s' --help 2>&1", t_env("REMAT_TRAIN"));
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(train_help, 1, sizeof train_help - 1, p);
	train_help[n] = '\0';
	pclose(p);
	const char *ml = strstr(out, "\nMODE: "), *tl = strstr(train_help, "\nMODE: ");
	ck_assert_msg(ml && tl, "no MODE line:\n%s\n%s", out, train_help);
	for (int m = 0; m < PROTO_MODE_COUNT; m++) {
		char word[32];
		snprintf(word, sizeof word, " %s", proto_mode_name(m));
		ck_assert_msg(strstr(ml, word) && strstr(tl, word), "help omits mode '%s'",
			proto_mode_name(m));
	}
	free(out);
}
END_TEST

/* A spec file that is not JSON: rematctl says where jansson stopped and why, never the
 * file's bytes (jansson's own text quotes the token at fault) */
START_TEST(test_rematctl_spec_bytes_not_echoed)
{
	char *dir = t_tmp_dir("ctl_spec"), path[600], *out = NULL;
	snprintf(path, sizeof path, "%s/job.json", dir);
	t_write_file(path, "{\"model\": SECRETTOKEN}", 22);
	int rc = ctl(&out, "--socket", "/nonexistent/remat.sock", "start", path, NULL);
	ck_assert_msg(rc != 0 && strstr(out, "cannot parse") && strstr(out, "line 1") &&
		!strstr(out, "SECRET"), "status %d:\n%s", rc, out);
	free(out);
	free(dir);
}
END_TEST

START_TEST(test_rematctl_cannot_connect)
{
	char *out = NULL;
	char path[128];
	snprintf(path, sizeof path, "%s/none.sock", t_env("REMAT_TMP"));
	int rc = ctl(&out, "--socket", path, "ls", NULL);
	ck_assert_msg(rc == 3, "status %d: %s", rc, out);
	ck_assert_msg(strstr(out, "cannot connect to") && strstr(out, "No such file") &&
			  strstr(out, "is rematd running?") && lines(out) == 1,
		      "output:\n%s", out);
	free(out);
	/* a missing spec file fails before any connection is tried: status 1, not 3 */
	rc = ctl(&out, "--socket", path, "start", "/nonexistent/job.json", NULL);
	ck_assert_msg(rc == 1 && strstr(out, "cannot open '/nonexistent/job.json'"),
		      "status %d: %s", rc, out);
	free(out);
}
END_TEST

/* A fake server for one connection: sends greeting and reads one request line (into the
 * file reqlog when it is not NULL), then sends reply verbatim and closes (without a
 * greeting it sends reply at once). Returns the child's pid; path gets the socket's. */
static pid_t fake_server_log(const char *name, const char *greeting, const char *reply,
			     char *path, size_t pathlen, const char *reqlog)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	snprintf(path, pathlen, "%s/%s.sock", t_env("REMAT_TMP"), name);
	unlink(path);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
	strcpy(sa.sun_path, path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		signal(SIGPIPE, SIG_IGN);
		int c = accept(fd, NULL, NULL);
		char ch;
		if (c < 0)
			_exit(1);
		if (greeting && write(c, greeting, strlen(greeting)) < 0)
			_exit(1);
		FILE *log = reqlog ? fopen(reqlog, "w") : NULL;
		while (greeting && read(c, &ch, 1) == 1 && ch != '\n')
			if (log)
				fputc(ch, log);
		if (log && fclose(log) != 0)
			_exit(1);
		for (size_t off = 0, n = strlen(reply); off < n;) {
			ssize_t w = write(c, reply + off, n - off);
			if (w <= 0)
				_exit(1);
			off += (size_t)w;
		}
		_exit(0);
	}
	close(fd);
	return pid;
}

static pid_t fake_server(const char *name, const char *greeting, const char *reply, char *path,
			 size_t pathlen)
{
	return fake_server_log(name, greeting, reply, path, pathlen, NULL);
}

#define GREETING                                                                                   \
	"{\"remat\":{\"version\":\"0.1.0\",\"protocol\":1,\"capabilities\":[\"events\"],"          \
	"\"role\":\"daemon\"}}\n"

/* rematctl ls against one canned reply: its status and output. */
static int ls_against(const char *name, const char *greeting, const char *reply, char **out)
{
	char path[128];
	pid_t pid = fake_server(name, greeting, reply, path, sizeof path);
	int rc = ctl(out, "--socket", path, "--timeout", "5", "ls", NULL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);
	return rc;
}

START_TEST(test_rematctl_replies)
{
	char *out = NULL;
	/* a stray event and a reply to another id come first: both skipped */
	int rc = ls_against(
	    "ok", GREETING,
	    "{\"event\":\"STEP\",\"data\":{},\"timestamp\":{\"seconds\":1,\"microseconds\":2}}\n"
	    "{\"return\":{},\"id\":99}\n"
	    "{\"return\":{\"jobs\":[{\"job\":\"j1\",\"name\":\"demo\",\"state\":\"running\","
	    "\"step\":12,\"steps\":100,\"loss\":2.5,\"future\":[1]}],\"more\":1},\"id\":1}\n",
	    &out);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "JOB  NAME  STATE      STEP    LOSS\n"
			      "j1   demo  running  12/100  2.5000\n");
	free(out);
	rc = ls_against(
	    "err", GREETING,
	    "{\"error\":{\"class\":\"InvalidState\",\"desc\":\"job 'j1' is paused\"},\"id\":1}\n",
	    &out);
	ck_assert_msg(rc == 1, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "rematctl: job 'j1' is paused (InvalidState)\n");
	free(out);
}
END_TEST

/* rematctl mem of a job on device cuda: the host table, then the device's (a canned
 * mem-stats reply in the shape of docs/protocol.md) */
START_TEST(test_rematctl_mem_device)
{
	char path[128], *out = NULL;
	pid_t pid = fake_server(
	    "memdev", GREETING,
	    "{\"return\":{\"categories\":{\"params\":{\"current\":1048576,\"peak\":1048576,"
	    "\"peak_since_reset\":1048576}},\"total\":{\"current\":1048576,\"peak\":1048576,"
	    "\"peak_since_reset\":1048576},\"sections\":[],\"rss\":2097152,\"rss_peak\":2097152,"
	    "\"step\":7,\"device\":{\"categories\":{\"activations\":{\"current\":3145728,"
	    "\"peak\":4194304,\"peak_since_reset\":3145728}},\"total\":{\"current\":3145728,"
	    "\"peak\":4194304,\"peak_since_reset\":3145728},\"reserved\":5242880,"
	    "\"reserved_peak\":6291456,\"arenas\":2,\"free\":1073741824,"
	    "\"total_memory\":2147483648,\"pinned_host\":0,\"pinned_host_peak\":7340032}},"
	    "\"id\":1}\n",
	    path, sizeof path);
	int rc = ctl(&out, "--socket", path, "--timeout", "5", "mem", "j1", NULL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	const char *host = strstr(out, "CATEGORY"), *dev = strstr(out, "DEVICE");
	ck_assert_msg(host && dev && host < dev, "output:\n%s", out);
	ck_assert_msg(strstr(dev, "activations") && strstr(dev, "3.0 MiB") &&
			  strstr(dev, "4.0 MiB") && strstr(dev, "5.0 MiB (peak 6.0 MiB) in 2 arenas") &&
			  strstr(dev, "1.0 GiB free of 2.0 GiB") && strstr(dev, "0 B (peak 7.0 MiB)"),
		      "output:\n%s", out);
	free(out);
}
END_TEST

/* rematctl ARGS... against one canned reply (a fake server named name): its status and
 * output; args NULL-terminated, at most 6. */
static int ctl_against(const char *name, const char *reply, char **out, ...)
{
	char path[128];
	char *argv[14] = {(char *)t_env("REMATCTL"), "--socket", path, "--timeout", "5"};
	int n = 5;
	va_list ap;
	va_start(ap, out);
	for (char *a; n < 12 && (a = va_arg(ap, char *));)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	pid_t pid = fake_server(name, GREETING, reply, path, sizeof path);
	int rc = t_run(argv, out);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);
	return rc;
}

/* Floats as they read back, not with 17 digits: set's lr, --json's reals. */
START_TEST(test_rematctl_floats_shortest)
{
	char *out = NULL;
	int rc = ctl_against("setlr", "{\"return\":{\"applies_at_step\":5,\"set\":{\"lr\":"
		"0.00029999999999999997,\"schedule\":\"cosine\"}},\"id\":1}\n", &out, "set", "j1",
		"lr=3e-4", "schedule=cosine", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "j1: from step 5: lr=0.0003 schedule=cosine\n");
	free(out);
	rc = ctl_against("jsonlr", "{\"return\":{\"job\":\"j1\",\"state\":\"running\",\"lr\":"
		"0.00029999999999999997,\"loss\":2.5,\"step\":3},\"id\":1}\n", &out, "--json",
		"status", "j1", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "{\"job\":\"j1\",\"state\":\"running\",\"lr\":0.0003,\"loss\":2.5,"
		"\"step\":3}\n");
	free(out);
}
END_TEST

/* remat costs: a negative ADDED-MS, and a positive one within that noise, shown as noise,
 * with a footer that says so. */
START_TEST(test_rematctl_costs_noise)
{
	char *out = NULL;
	int rc = ctl_against("costs", "{\"return\":{\"step\":100,\"probing_until\":null,"
		"\"sections\":[{\"name\":\"h.0\",\"kind\":\"block\",\"modes\":{"
		"\"off\":{\"samples\":372,\"forward_ms\":3,\"recompute_ms\":0,\"backward_ms\":5.99,"
		"\"saved_bytes\":4194304,\"workspace_bytes\":0,\"added_ms\":0.0,"
		"\"ms_per_mib_saved\":null},"
		"\"selective\":{\"samples\":4,\"forward_ms\":3,\"recompute_ms\":1.03,"
		"\"backward_ms\":8.66,\"saved_bytes\":2621440,\"workspace_bytes\":1,\"added_ms\":0.34,"
		"\"ms_per_mib_saved\":0.229},"
		"\"full\":{\"samples\":4,\"forward_ms\":3,\"recompute_ms\":4.63,\"backward_ms\":9.14,"
		"\"saved_bytes\":262144,\"workspace_bytes\":1,\"added_ms\":7.79,"
		"\"ms_per_mib_saved\":2.059}}},"
		"{\"name\":\"h.1\",\"kind\":\"block\",\"modes\":{"
		"\"full\":{\"samples\":372,\"forward_ms\":3,\"recompute_ms\":3.2,\"backward_ms\":5.39,"
		"\"saved_bytes\":262144,\"workspace_bytes\":1,\"added_ms\":-0.76,"
		"\"ms_per_mib_saved\":-0.201}}}]},\"id\":1}\n", &out, "remat", "costs", "j1", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_msg(!strstr(out, "-0.76") && !strstr(out, "-0.201") && !strstr(out, "+0.34") &&
		strstr(out, "+7.79") && strstr(out, "2.059"), "output:\n%s", out);
	const char *h1 = strstr(out, "\nh.1"), *sel = strstr(out, "\nh.0      selective");
	ck_assert_msg(h1 && strstr(h1, "~0 (noise)") && sel && strstr(sel, "~0 (noise)") < h1,
		"output:\n%s", out);
	ck_assert_msg(strstr(out, "within the measured noise (0.76 ms") &&
		strstr(out, "shown as ~0 (noise)"), "output:\n%s", out);
	free(out);
}
END_TEST

/* mem: the blocks' one recompute workspace shown once, not on every full row (whose sum,
 * 22.5 MiB here, was never held). */
START_TEST(test_rematctl_mem_workspace_once)
{
	char *out = NULL;
	int rc = ctl_against("memws", "{\"return\":{\"categories\":{\"params\":{\"current\":1048576,"
		"\"peak\":1048576,\"peak_since_reset\":1048576}},\"total\":{\"current\":1048576,"
		"\"peak\":1048576,\"peak_since_reset\":1048576},\"rss\":2097152,\"rss_peak\":2097152,"
		"\"step\":44,\"sections\":["
		"{\"name\":\"h.0\",\"mode\":\"off\",\"saved_bytes\":8388608,\"workspace_bytes\":0},"
		"{\"name\":\"h.1\",\"mode\":\"full\",\"saved_bytes\":524288,\"workspace_bytes\":7864320},"
		"{\"name\":\"h.2\",\"mode\":\"full\",\"saved_bytes\":524288,\"workspace_bytes\":7864320},"
		"{\"name\":\"h.3\",\"mode\":\"full\",\"saved_bytes\":524288,\"workspace_bytes\":7864320},"
		"{\"name\":\"head\",\"mode\":\"off\",\"saved_bytes\":2097152,\"workspace_bytes\":0}]},"
		"\"id\":1}\n", &out, "mem", "j1", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_msg(!strstr(out, "WORKSPACE") && !strstr(out, "22.5 MiB") &&
		strstr(out, "total           11.5 MiB") &&
		strstr(out, "shared recompute workspace: 7.5 MiB (one buffer for all full and "
			"selective blocks, not one each)"), "output:\n%s", out);
	/* 7.5 MiB once, in the footer */
	const char *first = strstr(out, "7.5 MiB");
	ck_assert_msg(first && !strstr(first + 1, "7.5 MiB"), "output:\n%s", out);
	free(out);
}
END_TEST

/* status: the architecture and what trains, as PEFT counts it. */
START_TEST(test_rematctl_status_model)
{
	char *out = NULL;
	int rc = ctl_against("stmodel", "{\"return\":{\"job\":\"j1\",\"name\":\"lora\",\"state\":"
		"\"running\",\"step\":3,\"steps\":10,\"arch\":\"gpt2\",\"params\":125248,"
		"\"trainable_params\":4096},\"id\":1}\n", &out, "status", "j1", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_msg(strstr(out, "\nmodel:           gpt2, trainable params: 4,096 || all "
		"params: 125,248 || trainable%: 3.2703\n"), "output:\n%s", out);
	free(out);
}
END_TEST

/* status: the memory controller of job-status' "auto" (its budget, where it came from,
 * whether it holds the user's policy, the least any policy needs); an older server's
 * auto_budget_bytes alone; nothing with none on; --json as it came. */
START_TEST(test_rematctl_status_budget)
{
	static const struct {
		const char *fields, *want; /* want NULL: no memory budget line */
	} c[] = {
	    {"\"auto\":{\"budget_bytes\":387973120,\"source\":\"size\",\"pinned\":false,"
	     "\"least_bytes\":314572800},\"auto_budget_bytes\":387973120",
	     "\nmemory budget:   370.0 MiB (a size; the controller picks the policy; least 300.0 "
	     "MiB)\n"},
	    {"\"auto\":{\"budget_bytes\":2147483648,\"source\":\"cgroup\",\"pinned\":true,"
	     "\"least_bytes\":1073741824},\"auto_budget_bytes\":2147483648",
	     "\nmemory budget:   2048.0 MiB (cgroup memory.max; holding the policy set by remat "
	     "set; least 1024.0 MiB)\n"},
	    {"\"auto_budget_bytes\":5242880", "\nmemory budget:   5.0 MiB (the controller picks "
	     "the policy)\n"},
	    {"\"auto\":null,\"auto_budget_bytes\":null", NULL},
	    {"\"auto_budget_bytes\":null", NULL},
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char reply[1024], *out = NULL;
		snprintf(reply, sizeof reply, "{\"return\":{\"job\":\"j1\",\"state\":\"running\","
			"\"step\":3,\"steps\":10,\"policy\":{\"h.0-1\":\"full\"},%s},\"id\":1}\n",
			c[i].fields);
		int rc = ctl_against("stbudget", reply, &out, "status", "j1", NULL);
		ck_assert_msg(rc == 0, "%zu: status %d: %s", i, rc, out);
		if (c[i].want)
			ck_assert_msg(strstr(out, c[i].want), "%zu: no '%s' in:\n%s", i, c[i].want, out);
		else
			ck_assert_msg(!strstr(out, "budget"), "%zu: output:\n%s", i, out);
		/* the budget after the policy it governs */
		ck_assert_msg(!c[i].want || strstr(out, "\npolicy:") < strstr(out, "\nmemory budget"),
			"%zu: output:\n%s", i, out);
		free(out);
	}
	char *out = NULL;
	int rc = ctl_against("stbudgetj", "{\"return\":{\"job\":\"j1\",\"auto\":{\"budget_bytes\":"
		"387973120,\"source\":\"size\",\"pinned\":false,\"least_bytes\":314572800}},\"id\":1}\n",
		&out, "--json", "status", "j1", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "{\"job\":\"j1\",\"auto\":{\"budget_bytes\":387973120,\"source\":"
		"\"size\",\"pinned\":false,\"least_bytes\":314572800}}\n");
	free(out);
}
END_TEST

/* remat set: --force sends "force": true (and only remat set takes it); the reply's
 * "controller" said: on (the policy held under the budget, predicted and budget in MiB),
 * off (the policy is the user's), null (no controller: the line as before). */
START_TEST(test_rematctl_remat_set_controller)
{
	char path[128], log[600], *out = NULL;
	snprintf(log, sizeof log, "%s/remat-set.req", t_env("REMAT_TMP"));
	pid_t pid = fake_server_log("rsforce", GREETING, "{\"return\":{\"applies_at_step\":8,"
		"\"policy\":{\"h.0-1\":\"off\",\"head\":\"off\"},\"controller\":\"off\"},\"id\":1}\n",
		path, sizeof path, log);
	int rc = ctl(&out, "--socket", path, "--timeout", "5", "remat", "set", "j1", "blocks=off",
		"--force", NULL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "j1: applies at step 8: h.0-1=off,head=off; the memory controller is "
		"off: the policy is yours (remat auto --budget turns it on again)\n");
	free(out);
	json_t *req = json_load_file(log, 0, NULL);
	ck_assert_msg(req != NULL, "the request logged in %s is not JSON", log);
	json_t *args = json_object_get(req, "arguments");
	ck_assert_msg(json_is_true(json_object_get(args, "force")) &&
		!strcmp(json_string_value(json_object_get(req, "execute")), "remat-set"),
		"request: %s", td_slurp(log));
	json_decref(req);

	/* without --force, no "force" at all: the server's default (refuse what does not fit) */
	pid = fake_server_log("rson", GREETING, "{\"return\":{\"applies_at_step\":9,\"policy\":"
		"{\"h.0-1\":\"full\",\"head\":\"chunked\"},\"controller\":\"on\","
		"\"predicted_peak_bytes\":356515840,\"budget_bytes\":387973120},\"id\":1}\n", path,
		sizeof path, log);
	rc = ctl(&out, "--socket", path, "--timeout", "5", "remat", "set", "j1", "blocks=full",
		"head=chunked", NULL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "j1: applies at step 9: h.0-1=full,head=chunked; the memory "
		"controller holds it under the budget (predicted 340.0 MiB of 370.0 MiB)\n");
	free(out);
	ck_assert_msg(!strstr(td_slurp(log), "force"), "request: %s", td_slurp(log));

	rc = ctl_against("rsnull", "{\"return\":{\"applies_at_step\":4,\"policy\":{\"h.0\":"
		"\"full\"},\"controller\":null},\"id\":1}\n", &out, "remat", "set", "j1", "h.0=full",
		NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "j1: applies at step 4: h.0=full\n");
	free(out);
	/* refused for the budget: an error reply, status 1 as every error reply */
	rc = ctl_against("rsrefused", "{\"error\":{\"class\":\"InvalidParameter\",\"desc\":"
		"\"policy h.0-1=off predicts 400.0 MiB, which does not fit the budget of 370.0 MiB; "
		"--force hands control back\"},\"id\":1}\n", &out, "remat", "set", "j1", "blocks=off",
		NULL);
	ck_assert_msg(rc == 1 && strstr(out, "does not fit the budget") &&
		strstr(out, "(InvalidParameter)") && lines(out) == 1, "status %d: %s", rc, out);
	free(out);
	/* --force and --wait are remat set's alone */
	rc = ctl(&out, "--socket", "/nonexistent/remat.sock", "remat", "plan", "j1", "--force",
		NULL);
	ck_assert_msg(rc == 2 && strstr(out, "takes no --force"), "status %d: %s", rc, out);
	free(out);
	rc = ctl(&out, "--socket", "/nonexistent/remat.sock", "remat", "auto", "j1", "--budget",
		"1G", "--wait", NULL);
	ck_assert_msg(rc == 2 && strstr(out, "takes no --wait"), "status %d: %s", rc, out);
	free(out);
}
END_TEST

/* remat auto: a budget no policy fits is an error reply (status 1, nothing printed to
 * stdout as if it held); one that fits says the budget and the least any policy needs. */
START_TEST(test_rematctl_remat_auto_budget)
{
	char *out = NULL;
	int rc = ctl_against("autono", "{\"error\":{\"class\":\"InvalidParameter\",\"desc\":"
		"\"no policy fits a budget of 5.0 MiB: the least any needs is 11.3 MiB (process "
		"memory)\"},\"id\":1}\n", &out, "remat", "auto", "j3", "--budget", "5MiB", NULL);
	ck_assert_msg(rc == 1, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "rematctl: no policy fits a budget of 5.0 MiB: the least any needs "
		"is 11.3 MiB (process memory) (InvalidParameter)\n");
	free(out);
	rc = ctl_against("autook", "{\"return\":{\"applies_at_step\":925,\"budget_bytes\":"
		"387973120,\"least_bytes\":314572800},\"id\":1}\n", &out, "remat", "auto", "j3",
		"--budget", "370MiB", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "j3: keeping the process's memory under 370.0 MiB from step 925 on; "
		"the least any policy needs is 300.0 MiB (REMAT_AUTO events say each change)\n");
	free(out);
	rc = ctl_against("autooff", "{\"return\":{\"applies_at_step\":926,\"budget_bytes\":null},"
		"\"id\":1}\n", &out, "remat", "auto", "j3", "--budget", "off", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_str_eq(out, "j3: the memory controller is off from step 926 on; the policy is "
		"yours\n");
	free(out);
}
END_TEST

/* plan: the fixed part as the sum of its terms (what the engine counts, the process's
 * untracked memory, a save's snapshot where it is held) and how saves go; a reply without
 * the process's terms as before. */
START_TEST(test_rematctl_plan_terms)
{
	static const char *const reply = "{\"return\":{\"policy\":{\"h.0-1\":\"full\"},"
		"\"sections\":[],\"saved_bytes\":0,\"recompute_bytes\":0,\"fixed_bytes\":%s,"
		"\"peak_bytes\":20971520,\"memory\":{\"params\":1048576,\"grads\":1048576,"
		"\"optimizer\":2097152,\"workspace\":0,\"data\":0,%s\"fixed_source\":\"engine\"},"
		"%s\"extra_flops\":0,\"model_flops\":1e6},\"id\":1}\n";
	char text[2048], *out = NULL;
	snprintf(text, sizeof text, reply, "19922944", "\"untracked\":14680064,\"snapshot\":"
		"1048576,\"untracked_source\":\"measured\",", "\"saves\":{\"way\":\"snapshot\","
		"\"snapshot_bytes\":1048576,\"snapshot_stall_ms\":3.2,\"live_stall_ms\":null},");
	int rc = ctl_against("planterms", text, &out, "remat", "plan", "j1", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_msg(strstr(out, "\nfixed:           19.0 MiB = 4.0 MiB counted (params, grads, "
		"optimizer, workspace, data; engine) + 14.0 MiB untracked (measured) + 1.0 MiB a "
		"save's snapshot\n") && strstr(out, "\nsaves:           a snapshot (1.0 MiB) is held: "
		"training goes on while a save writes; its copy took 3 ms\n"), "output:\n%s", out);
	free(out);
	snprintf(text, sizeof text, reply, "18874368", "\"untracked\":14680064,\"snapshot\":0,"
		"\"untracked_source\":\"check\",", "\"saves\":{\"way\":\"live\",\"snapshot_bytes\":"
		"1048576,\"snapshot_stall_ms\":null,\"live_stall_ms\":250},");
	rc = ctl_against("planlive", text, &out, "remat", "plan", "j1", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	ck_assert_msg(strstr(out, "\nfixed:           18.0 MiB = 4.0 MiB counted (params, grads, "
		"optimizer, workspace, data; engine) + 14.0 MiB untracked (check)\n") &&
		strstr(out, "\nsaves:           live: no room for a snapshot (1.0 MiB), so a save "
		"writes from the live tensors and training waits for it (the last save: 250 ms)\n"),
		"output:\n%s", out);
	free(out);
	snprintf(text, sizeof text, reply, "4194304", "", "");
	rc = ctl_against("planold", text, &out, "remat", "plan", "j1", NULL);
	ck_assert_msg(rc == 0 && strstr(out, "\nfixed:           4.0 MiB (params, grads, "
		"optimizer, workspace, data; engine)\n") && !strstr(out, "saves:"), "status %d:\n%s",
		rc, out);
	free(out);
}
END_TEST

/* mem: the process's untracked memory, a category of the reply after the tracked ones,
 * shown in its place and said to be outside the tracked total. */
START_TEST(test_rematctl_mem_untracked)
{
	char *out = NULL;
	int rc = ctl_against("memun", "{\"return\":{\"categories\":{"
		"\"params\":{\"current\":1048576,\"peak\":1048576,\"peak_since_reset\":1048576},"
		"\"data\":{\"current\":2097152,\"peak\":2097152,\"peak_since_reset\":2097152},"
		"\"untracked\":{\"current\":15728640,\"peak\":16777216,\"peak_since_reset\":16252928}},"
		"\"total\":{\"current\":3145728,\"peak\":3145728,\"peak_since_reset\":3145728},"
		"\"rss\":18874368,\"rss_peak\":19922944,\"step\":44,\"sections\":[]},\"id\":1}\n",
		&out, "mem", "j1", NULL);
	ck_assert_msg(rc == 0, "status %d: %s", rc, out);
	const char *data = strstr(out, "\ndata "), *un = strstr(out, "\nuntracked "),
		*tot = strstr(out, "\ntotal tracked ");
	ck_assert_msg(data && un && tot && data < un && un < tot, "output:\n%s", out);
	ck_assert_msg(strstr(un, "15.0 MiB") && strstr(un, "16.0 MiB") && strstr(un, "15.5 MiB") &&
		strstr(un, "16.0 MiB") < tot, "output:\n%s", out);
	ck_assert_msg(strstr(out, "\nuntracked: the process's resident memory beyond the tracked "
		"categories"), "output:\n%s", out);
	free(out);
}
END_TEST

/* Server lines rematctl must refuse with status 3 and one line, never a crash. */
static const struct {
	const char *name, *greeting, *reply, *needle;
} bad_servers[] = {
    {"garbage", GREETING, "this is not json\n", "protocol error"},
    {"nogreet", NULL, "{\"return\":{},\"id\":1}\n", "greeting"},
    {"proto2", "{\"remat\":{\"version\":\"9\",\"protocol\":2}}\n", "", "protocol"},
    {"array", GREETING, "[1,2,3]\n", "protocol error"},
    {"retarray", GREETING, "{\"return\":[1],\"id\":1}\n", "protocol error"},
    {"closed", GREETING, "", "connection closed"},
    {"half", GREETING, "{\"return\":{\"jobs\":[", "connection closed"},
    {"nul", GREETING, "{\"return\":{}\x01,\"id\":1}\n", "protocol error"},
    {"twogreet", GREETING, GREETING, "greeting"},
    {"deep", GREETING,
     "{\"return\":{\"jobs\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
     "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},\"id\":1}\n",
     NULL},
    {"types", GREETING,
     "{\"return\":{\"jobs\":[{\"job\":1,\"name\":null,\"state\":[],"
     "\"step\":\"x\",\"loss\":{}},7,\"s\"]},\"id\":1}\n",
     NULL},
};

START_TEST(test_rematctl_bad_server)
{
	char *out = NULL;
	int rc =
	    ls_against(bad_servers[_i].name, bad_servers[_i].greeting, bad_servers[_i].reply, &out);
	if (!bad_servers[_i].needle) {
		/* odd but well-formed: shown as best it can (0), or refused (3), never a crash */
		ck_assert_msg(rc == 0 || (rc == 3 && lines(out) == 1), "%s: status %d: %s",
			      bad_servers[_i].name, rc, out);
	} else {
		ck_assert_msg(rc == 3, "%s: status %d: %s", bad_servers[_i].name, rc, out);
		ck_assert_msg(strstr(out, bad_servers[_i].needle) && lines(out) == 1 &&
				  strncmp(out, "rematctl: ", 10) == 0,
			      "%s: output:\n%s", bad_servers[_i].name, out);
	}
	free(out);
}
END_TEST

/* ---- against the real rematd and remat-train ---- */

/* A rematd that runs the real worker, on fresh paths. */
static void real_daemon(td_daemon *d)
{
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_paths(d);
	td_daemon_start(d, extra);
}

/* rematctl --socket d's ARGS... (NULL-terminated, at most 10): status, output in *out. */
static int ctl_d(const td_daemon *d, char **out, ...)
{
	char *argv[14] = {(char *)t_env("REMATCTL"), "--socket", (char *)d->sock};
	int n = 3;
	va_list ap;
	va_start(ap, out);
	for (char *a; n < 13 && (a = va_arg(ap, char *));)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	return t_run(argv, out);
}

static void write_text(const char *path, const char *text)
{
	t_write_file(path, text, strlen(text));
}

/* `rematctl start sub/job.json` from another directory: the spec's relative paths are its
 * directory's (train.txt beside it), printed resolved; start and status say what trains,
 * a LoRA job's adapters against the full model's every parameter. */
START_TEST(test_rematctl_start_spec_dir)
{
	td_daemon d;
	char base[600], sub[700], path[800], want[1200], old[4096], *out = NULL;
	real_daemon(&d);
	snprintf(base, sizeof base, "%s/specdir", d.dir);
	snprintf(sub, sizeof sub, "%s/sub", base);
	ck_assert(mkdir(base, 0700) == 0 && mkdir(sub, 0700) == 0);
	/* the data beside the spec: 20 kB of the GPL */
	FILE *g = fopen(T_GPL, "rb");
	char bytes[20000];
	ck_assert(g && fread(bytes, 1, sizeof bytes, g) == sizeof bytes);
	fclose(g);
	snprintf(path, sizeof path, "%s/train.txt", sub);
	t_write_file(path, bytes, sizeof bytes);
	static const char *const spec = "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":"
		"\"train.txt\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":20,"
		"\"threads\":1,\"save\":{\"dir\":\"%s\"}%s}";
	char text[1024];
	snprintf(text, sizeof text, spec, "out", "");
	snprintf(path, sizeof path, "%s/full.json", sub);
	write_text(path, text);
	snprintf(text, sizeof text, spec, "out-lora",
		",\"lora\":{\"r\":4,\"alpha\":8,\"targets\":[\"c_attn\"]}");
	snprintf(path, sizeof path, "%s/lora.json", sub);
	write_text(path, text);

	ck_assert_ptr_nonnull(getcwd(old, sizeof old));
	ck_assert_int_eq(chdir(base), 0);
	ck_assert_ptr_nonnull(getcwd(base, sizeof base)); /* as the client sees it */
	int rc = ctl_d(&d, &out, "start", "sub/full.json", NULL);
	ck_assert_msg(rc == 0, "start sub/full.json from %s: status %d: %s", base, rc, out);
	snprintf(want, sizeof want, "data.train: %s/sub/train.txt\n", base);
	ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
	snprintf(want, sizeof want, "save.dir: %s/sub/out\n", base);
	ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
	/* the tiny preset: 2 blocks of 64, 256 positions, 256 bytes, every tensor trains */
	ck_assert_msg(strstr(out, "j1: gpt2, trainable params: 132,864 || all params: 132,864 "
		"|| trainable%: 100.0000\n"), "output:\n%s", out);
	free(out);
	/* LoRA r 4 on c_attn: A 4 x 64 and B 192 x 4 in each of 2 blocks train, the base not */
	rc = ctl_d(&d, &out, "start", "sub/lora.json", NULL);
	ck_assert_msg(rc == 0, "start sub/lora.json: status %d: %s", rc, out);
	ck_assert_msg(strstr(out, "j2: gpt2, trainable params: 2,048 || all params: 134,912 || "
		"trainable%: 1.5180\n"), "output:\n%s", out);
	free(out);
	ck_assert_int_eq(chdir(old), 0);
	rc = ctl_d(&d, &out, "status", "j2", NULL);
	ck_assert_msg(rc == 0 && strstr(out, "\nmodel:           gpt2, trainable params: 2,048 "
		"|| all params: 134,912 || trainable%: 1.5180\n"), "status %d: %s", rc, out);
	free(out);
	rc = ctl_d(&d, &out, "status", "j1", NULL);
	ck_assert_msg(rc == 0 && strstr(out, "\nmodel:           gpt2, trainable params: 132,864 "
		"|| all params: 132,864 || trainable%: 100.0000\n"), "status %d: %s", rc, out);
	free(out);
	td_daemon_stop(&d);
}
END_TEST

/* The ETA values of watch's plain lines ("eta 2m06s"), how many differ. */
static int distinct_etas(const char *out, int *lines_seen)
{
	char seen[16][32];
	int n = 0, lines = 0;
	for (const char *p = out; (p = strstr(p, " eta ")); p += 5) {
		char e[32];
		if (sscanf(p + 5, "%31s", e) != 1)
			continue;
		lines++;
		int dup = 0;
		for (int i = 0; i < n; i++)
			dup |= strcmp(seen[i], e) == 0;
		if (!dup && n < 16)
			snprintf(seen[n++], sizeof seen[0], "%s", e);
	}
	*lines_seen = lines;
	return n;
}

/* watch, piped: the ETA moves with the job (job-status' eta_s, asked every interval, not
 * the one of the first reply), and --interval sets how often a line comes. */
START_TEST(test_rematctl_watch_eta_interval)
{
	td_daemon d;
	char *out = NULL, id[16];
	real_daemon(&d);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	snprintf(id, sizeof id, "%s", td_job_start(&c, "{\"model\":{\"preset\":\"tiny\"},"
		"\"data\":{\"train\":\"" T_GPL "\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,"
		"\"steps\":20000,\"threads\":2}", "starting"));
	td_wait_step(&c, id);
	long t0 = td_ms();
	int rc = ctl_d(&d, &out, "watch", id, "--interval", "0.5", "--count", "5", NULL);
	long took = td_ms() - t0;
	ck_assert_msg(rc == 0, "watch: status %d: %s", rc, out);
	int lines = 0, etas = distinct_etas(out, &lines);
	ck_assert_msg(lines == 5 && etas >= 2, "%d lines, %d distinct ETAs:\n%s", lines, etas,
		out);
	/* 5 updates: the first at once, then one every 0.5 s */
	ck_assert_msg(took >= 1800, "5 lines at --interval 0.5 in %ld ms:\n%s", took, out);
	free(out);
	t0 = td_ms();
	rc = ctl_d(&d, &out, "watch", id, "--interval", "1", "--count", "3", NULL);
	took = td_ms() - t0;
	ck_assert_msg(rc == 0 && took >= 1800, "3 lines at --interval 1 in %ld ms: %d:\n%s", took,
		rc, out);
	free(out);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* ---- the memory controller, against rematd and a stand-in worker ---- */

/* A job's canned figures (the stand-in's job-status, mem-stats and remat-get): a controller
 * on at 370 MiB, the process at 340 MiB resident, 15 MiB of it untracked. */
#define SW_STATUS                                                                          \
	"{\"return\":{\"job\":\"%s\",\"name\":\"b\",\"state\":\"running\",\"step\":10,"    \
	"\"steps\":100,\"loss\":2.5,\"policy\":{\"h.0-1\":\"full\",\"head\":\"off\"},"     \
	"\"auto\":{\"budget_bytes\":387973120,\"source\":\"size\",\"pinned\":false,"       \
	"\"least_bytes\":314572800},\"auto_budget_bytes\":387973120},\"id\":%s}\\n"
#define SW_MEM                                                                             \
	"{\"return\":{\"categories\":{\"params\":{\"current\":104857600,\"peak\":104857600," \
	"\"peak_since_reset\":104857600},\"untracked\":{\"current\":15728640,\"peak\":"    \
	"15728640,\"peak_since_reset\":15728640}},\"total\":{\"current\":104857600,"        \
	"\"peak\":104857600,\"peak_since_reset\":104857600},\"sections\":[],\"rss\":"      \
	"356515840,\"rss_peak\":377487360,\"step\":10},\"id\":%s}\\n"
#define SW_POLICY(m) "{\"h.0-1\":\"" m "\",\"head\":\"off\"}"

/* The stand-in: answers from the canned figures (each job-status followed by a REMAT_FAILED
 * of step 12: the view must say it), and remat-set by what it asks for: h.0=full applies at
 * step 7 (after an earlier step's REMAT_APPLIED and another step's REMAT_FAILED, which
 * decide nothing), h.1=full answers change 5 and is carried out by change 6 at step 8
 * (after the controller's change at step 7 and change 4's REMAT_FAILED, which decide
 * nothing), h.0=off is refused at step 7, h.0=selective is answered and then the
 * worker says it is the policy a resume runs under (REMAT_APPLIED at_resume) and exits 3
 * (the job fails first), --force answers "controller":"off" and applies,
 * anything else does not fit the budget. Every outcome follows its reply at once: a client
 * that subscribed after sending would miss it. */
static const char stand_in[] =
	TD_WORKER_RUNNING
	"job=$4\n"
	"ev() { printf '{\"event\":\"%s\",\"data\":{\"job\":\"%s\",%s},\"timestamp\":"
	"{\"seconds\":0,\"microseconds\":0}}\\n' \"$1\" \"$job\" \"$2\" >&3; }\n"
	"ret() { printf '{\"return\":%s,\"id\":%s}\\n' \"$1\" \"$id\" >&3; }\n"
	"while IFS= read -r line <&3; do\n"
	"id=$(printf '%s\\n' \"$line\" | sed -n 's/.*\"id\":\\([0-9][0-9]*\\).*/\\1/p')\n"
	"case $line in\n"
	"*'\"job-status\"'*) printf '" SW_STATUS "' \"$job\" \"$id\" >&3\n"
	"  ev REMAT_FAILED '\"step\":12,\"asked\":" SW_POLICY("off") ",\"policy\":"
	SW_POLICY("full") ",\"reason\":\"memory refused\"' ;;\n"
	"*'\"mem-stats\"'*) printf '" SW_MEM "' \"$id\" >&3 ;;\n"
	"*'\"remat-get\"'*) ret '{\"policy\":" SW_POLICY("full") ",\"sections\":[]}' ;;\n"
	"*'\"remat-set\"'*'\"force\":true'*) ret '{\"applies_at_step\":7,\"policy\":"
	SW_POLICY("off") ",\"controller\":\"off\"}'\n"
	"  ev REMAT_APPLIED '\"step\":7,\"policy\":" SW_POLICY("off") "' ;;\n"
	"*'\"remat-set\"'*'\"h.0\":\"full\"'*) ret '{\"applies_at_step\":7,\"policy\":"
	SW_POLICY("full") ",\"controller\":\"on\",\"predicted_peak_bytes\":356515840,"
	"\"budget_bytes\":387973120}'\n"
	"  ev REMAT_APPLIED '\"step\":5,\"policy\":" SW_POLICY("off") "'\n"
	"  ev REMAT_FAILED '\"step\":6,\"asked\":" SW_POLICY("off") ",\"policy\":"
	SW_POLICY("full") ",\"reason\":\"another change\"'\n"
	"  ev REMAT_APPLIED '\"step\":7,\"policy\":" SW_POLICY("full") "' ;;\n"
	"*'\"remat-set\"'*'\"h.1\":\"full\"'*) ret '{\"applies_at_step\":7,\"change\":5,"
	"\"policy\":" SW_POLICY("full") ",\"controller\":null}'\n"
	"  ev REMAT_APPLIED '\"step\":7,\"policy\":" SW_POLICY("off") ",\"cause\":\"controller\","
	"\"change\":null'\n"
	"  ev REMAT_FAILED '\"step\":7,\"asked\":" SW_POLICY("off") ",\"policy\":"
	SW_POLICY("off") ",\"reason\":\"an earlier set\",\"cause\":\"remat-set\",\"change\":4'\n"
	"  ev REMAT_APPLIED '\"step\":8,\"policy\":" SW_POLICY("full") ",\"cause\":\"remat-set\","
	"\"change\":6' ;;\n"
	"*'\"remat-set\"'*'\"h.0\":\"off\"'*) ret '{\"applies_at_step\":7,\"policy\":"
	SW_POLICY("off") ",\"controller\":null}'\n"
	"  ev REMAT_FAILED '\"step\":7,\"asked\":" SW_POLICY("off") ",\"policy\":"
	SW_POLICY("full") ",\"reason\":\"memory refused: 400.0 MiB over memory.limit\"' ;;\n"
	"*'\"remat-set\"'*'\"h.0\":\"selective\"'*) ret '{\"applies_at_step\":7,\"policy\":"
	SW_POLICY("selective") ",\"controller\":null}'\n"
	"  ev REMAT_APPLIED '\"step\":7,\"policy\":" SW_POLICY("selective") ",\"at_resume\":true'\n"
	"  exit 3 ;;\n"
	"*'\"remat-set\"'*) printf '{\"error\":{\"class\":\"InvalidParameter\",\"desc\":"
	"\"policy predicts 400.0 MiB, which does not fit the budget of 370.0 MiB; --force hands "
	"control back\"},\"id\":%s}\\n' \"$id\" >&3 ;;\n"
	"*'\"job-stop\"'*) ret '{\"step\":10,\"checkpoint\":null}'; exit 0 ;;\n"
	"*) ret '{}' ;;\n"
	"esac\n"
	"done\n";

/* A rematd whose worker is the stand-in, and its job j1 running. */
static void stand_in_job(td_daemon *d)
{
	td_daemon_paths(d);
	char *w = td_script(d, "worker.sh", stand_in);
	const char *extra[] = {"--worker", w, "--stop-timeout", "2", NULL};
	td_daemon_start(d, extra);
	free(w);
	td_conn c = td_open(d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	ck_assert_str_eq(td_job_start(&c, T_TINY_SPEC, NULL), "j1");
	json_decref(td_wait_state(&c, "j1", "running", T_READ_MS));
	td_close(&c);
}

/* remat set --wait: subscribed before it sends, so an outcome right behind the reply is
 * seen; applied (0, an earlier step's REMAT_APPLIED and another step's REMAT_FAILED passed
 * over; by the reply's change number, the controller's change and an earlier change's
 * failure passed over), refused at its step (1, the reason and the policy the step ran
 * under), an error reply (1), --force (the controller off, then applied), the job ending
 * first (1). */
START_TEST(test_rematctl_remat_set_wait)
{
	td_daemon d;
	char *out = NULL;
	stand_in_job(&d);
	int rc = ctl_d(&d, &out, "--timeout", "20", "remat", "set", "j1", "h.0=full", "--wait",
		NULL);
	ck_assert_msg(rc == 0, "applied: status %d: %s", rc, out);
	ck_assert_str_eq(out, "j1: applies at step 7: h.0-1=full,head=off; the memory controller "
		"holds it under the budget (predicted 340.0 MiB of 370.0 MiB)\n"
		"j1: applied at step 7: h.0-1=full,head=off\n");
	free(out);
	/* by its change number: change 6, a later set built on it, carries it out */
	rc = ctl_d(&d, &out, "--timeout", "20", "remat", "set", "j1", "h.1=full", "--wait",
		NULL);
	ck_assert_msg(rc == 0 && strstr(out, "\nj1: applied at step 8: h.0-1=full,head=off\n"),
		"by change: status %d: %s", rc, out);
	free(out);
	rc = ctl_d(&d, &out, "--timeout", "20", "remat", "set", "j1", "h.0=off", "--wait", NULL);
	ck_assert_msg(rc == 1, "refused: status %d: %s", rc, out);
	ck_assert_str_eq(out, "j1: applies at step 7: h.0-1=off,head=off\n"
		"rematctl: j1: not applied at step 7: memory refused: 400.0 MiB over memory.limit; "
		"the step ran under h.0-1=full,head=off (asked: h.0-1=off,head=off)\n");
	free(out);
	/* --json: the reply, then the event that decided, each one line */
	rc = ctl_d(&d, &out, "--json", "--timeout", "20", "remat", "set", "j1", "h.0=off",
		"--wait", NULL);
	ck_assert_msg(rc == 1 && lines(out) == 2 && strstr(out, "\"applies_at_step\":7") &&
		strstr(out, "\n{\"event\":\"REMAT_FAILED\"") && strstr(out, "\"step\":7"),
		"--json refused: status %d: %s", rc, out);
	free(out);
	rc = ctl_d(&d, &out, "--timeout", "20", "remat", "set", "j1", "head=chunked", "--wait",
		NULL);
	ck_assert_msg(rc == 1 && strstr(out, "does not fit the budget") && lines(out) == 1,
		"error reply: status %d: %s", rc, out);
	free(out);
	rc = ctl_d(&d, &out, "--timeout", "20", "remat", "set", "j1", "h.0=full", "--force",
		"--wait", NULL);
	ck_assert_msg(rc == 0, "--force: status %d: %s", rc, out);
	ck_assert_str_eq(out, "j1: applies at step 7: h.0-1=off,head=off; the memory controller is "
		"off: the policy is yours (remat auto --budget turns it on again)\n"
		"j1: applied at step 7: h.0-1=off,head=off\n");
	free(out);
	rc = ctl_d(&d, &out, "--timeout", "20", "remat", "set", "j1", "h.0=selective", "--wait",
		NULL);
	ck_assert_msg(rc == 1 && strstr(out, "rematctl: j1: the job failed") &&
		strstr(out, "before step 7: the change was not applied; a resume runs under it\n") &&
		!strstr(out, "applied at step"), "ended: status %d: %s", rc, out);
	free(out);
	td_daemon_stop(&d);
}
END_TEST

/* plot: the memory plot has the process's own peak of each step (rss_peak_bytes, what a
 * budget counts) beside the tracked peak; a log without it, the tracked one alone. */
START_TEST(test_rematctl_plot_process_peak)
{
	td_daemon d;
	char *out = NULL;
	td_daemon_paths(&d);
	/* a stand-in that logs 20 steps (metrics.jsonl is its fd 4), the last 10 without the
	 * process's peak as a worker before it wrote them, then fails */
	char *w = td_script(&d, "worker.sh",
		"i=1; while [ $i -le 10 ]; do printf '{\"step\":%d,\"loss\":2.5,\"tokens_per_s\":900,"
		"\"peak_bytes\":%d,\"rss_peak_bytes\":%d}\\n' $i $((3145728 + i * 1024)) "
		"$((18874368 + i * 2048)) >&4; i=$((i+1)); done\nexit 3");
	const char *extra[] = {"--worker", w, NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	const char *job = td_job_start(&c, T_TINY_SPEC, NULL);
	json_decref(td_wait_state(&c, job, "failed", T_JOB_MS));
	int rc = ctl_d(&d, &out, "plot", job, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "peak memory (MiB)") && strstr(out, "tracked peak MiB")
		&& strstr(out, "process peak MiB"), "plot: status %d:\n%s", rc, out);
	free(out);
	td_close(&c);
	free(w);
	td_daemon_stop(&d);
}
END_TEST

/* plot --svg at: refused, saying why, and the file kept still begins with head */
static void plot_refused(const td_daemon *d, const char *job, const char *at, const char *why,
	const char *kept, const char *head, size_t len)
{
	char *out = NULL;
	size_t n;
	int rc = ctl_d(d, &out, "plot", job, "--svg", at, NULL);
	ck_assert_msg(rc == 1 && strstr(out, "cannot write") && strstr(out, why),
		"plot: status %d:\n%s", rc, out);
	free(out);
	char *img = t_read_file(kept, &n);
	ck_assert(n >= len && memcmp(img, head, len) == 0);
	free(img);
}

/* plot --png and --svg: both images written, the SVG well marked where the log shows a
 * setting changed (the worker's REMAT_APPLIED and HPARAMS_APPLIED lines; a resume, which
 * drops the marks of the steps logged again); a link at the path is refused, not
 * followed. */
START_TEST(test_rematctl_plot_images_marked)
{
	td_daemon d;
	char *out = NULL, png[700], svg[700], sym[700];
	size_t n;
	td_daemon_paths(&d);
	/* steps 1-12 (a policy from step 6, a job-set from 11), then a resume from step 9 to
	 * 20 (a policy from 15) */
	char *w = td_script(&d, "worker.sh",
		"line() { printf '{\"step\":%d,\"loss\":2.5}\\n' $1 >&4; }\n"
		"pol() { printf '{\"event\":\"REMAT_APPLIED\",\"step\":%d,\"policy\":"
		"{\"h.0\":\"%s\",\"head\":\"off\"}}\\n' $1 $2 >&4; }\n"
		"i=1; while [ $i -le 12 ]; do [ $i -eq 6 ] && pol 6 full; "
		"[ $i -eq 11 ] && printf '{\"event\":\"HPARAMS_APPLIED\",\"step\":11,"
		"\"set\":{\"lr\":0.001}}\\n' >&4; line $i; i=$((i+1)); done\n"
		"i=9; while [ $i -le 20 ]; do [ $i -eq 15 ] && pol 15 selective; line $i; "
		"i=$((i+1)); done\nexit 3");
	const char *extra[] = {"--worker", w, NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	const char *job = td_job_start(&c, T_TINY_SPEC, NULL);
	json_decref(td_wait_state(&c, job, "failed", T_JOB_MS));
	snprintf(png, sizeof png, "%s/loss.png", d.dir);
	snprintf(svg, sizeof svg, "%s/loss.svg", d.dir);
	int rc = ctl_d(&d, &out, "plot", job, "--png", png, "--svg", svg, NULL);
	ck_assert_msg(rc == 0, "plot: status %d:\n%s", rc, out);
	free(out);
	char *img = t_read_file(png, &n);
	ck_assert_msg(n > 1000 && memcmp(img, "\x89PNG\r\n\x1a\n", 8) == 0, "%s: no PNG", png);
	free(img);
	img = t_read_file(svg, &n);
	ck_assert_msg(strstr(img, "<svg") && strstr(img, "</svg>") &&
		strstr(img, "policy h.0=full, head=off at step 6") &&
		strstr(img, "resumed at step 9") &&
		strstr(img, "policy h.0=selective, head=off at step 15") &&
		!strstr(img, "at step 11"), "%s:\n%.3000s", svg, img);
	free(img);
	/* a link where the image goes: refused, its target left alone */
	snprintf(sym, sizeof sym, "%s/link.svg", d.dir);
	ck_assert_int_eq(symlink(png, sym), 0);
	plot_refused(&d, job, sym, "symbolic link", png, "\x89PNG", 4);
	/* a hard link there (another name of a file elsewhere): refused, that file unchanged */
	char other[600], hard[600];
	snprintf(other, sizeof other, "%s/other.svg", d.dir);
	t_write_file(other, "keep", 4);
	snprintf(hard, sizeof hard, "%s/hard.svg", d.dir);
	ck_assert_int_eq(link(other, hard), 0);
	plot_refused(&d, job, hard, "hard link", other, "keep", 4);
	td_close(&c);
	free(w);
	td_daemon_stop(&d);
}
END_TEST

/* remat set --wait against the real worker: a change applies, and so does one that asks
 * for the policy the job already runs under (the step takes it: REMAT_APPLIED says so, or
 * --wait would wait for an outcome that never comes). */
START_TEST(test_rematctl_remat_set_wait_real)
{
	td_daemon d;
	char id[16], *out = NULL;
	td_conn c = td_real_job(&d, id);
	int rc = ctl_d(&d, &out, "--timeout", "30", "remat", "set", id, "h.0=full", "--wait",
		NULL);
	ck_assert_msg(rc == 0 && strstr(out, ": applied at step "), "a change: status %d: %s",
		rc, out);
	free(out);
	rc = ctl_d(&d, &out, "--timeout", "30", "remat", "set", id, "h.0=full", "--wait", NULL);
	ck_assert_msg(rc == 0 && strstr(out, ": applied at step "), "the same policy again: "
		"status %d: %s", rc, out);
	free(out);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* Runs argv on a pseudo-terminal 100 columns wide, in the C locale (ASCII bars), until it
 * exits (at most 30 s): its status, and all it wrote in *out (malloc'd). */
static int run_on_pty(char *const argv[], char **out)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	ck_assert_int_ge(m, 0);
	ck_assert(grantpt(m) == 0 && unlockpt(m) == 0);
	char slave[128];
	snprintf(slave, sizeof slave, "%s", ptsname(m));
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setsid();
		int s = open(slave, O_RDWR);
		struct winsize ws = {.ws_row = 60, .ws_col = 100};
		if (s < 0 || ioctl(s, TIOCSWINSZ, &ws) < 0)
			_exit(126);
		dup2(s, 0);
		dup2(s, 1);
		dup2(s, 2);
		setenv("LC_ALL", "C", 1);
		execv(argv[0], argv);
		_exit(127);
	}
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	long end = td_ms() + 30000;
	for (;;) {
		struct pollfd p = {m, POLLIN, 0};
		int left = (int)(end - td_ms());
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break; /* a watch that does not end: killed below */
		if (len + 1 >= cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
		ssize_t r = read(m, buf + len, cap - len - 1);
		if (r <= 0)
			break; /* EIO: the terminal's last holder is gone */
		len += (size_t)r;
	}
	buf[len] = '\0';
	close(m);
	int status = td_wait_pid(pid, 1000);
	if (status < 0) {
		kill(pid, SIGKILL);
		status = td_wait_pid(pid, T_READ_MS);
	}
	*out = buf;
	return status;
}

/* The line of text that starts with prefix (after a redraw's escapes), or NULL. */
static const char *line_of(const char *text, const char *prefix)
{
	for (const char *p = text; (p = strstr(p, prefix)); p++)
		if (p == text || p[-1] == '\n' || p[-1] == 'H' || p[-1] == 'K')
			return p;
	return NULL;
}

/* watch: with the controller on, the process's resident memory against the budget (a '|'
 * at the budget's column of the rss bar, the budget in MiB under it); the untracked memory
 * among the bars; a REMAT_FAILED said under the view, and piped on a line of its own. */
START_TEST(test_rematctl_watch_budget)
{
	td_daemon d;
	char *out = NULL;
	stand_in_job(&d);
	char *argv[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "watch", "j1",
		"--interval", "0.3", "--count", "3", NULL};
	int rc = run_on_pty(argv, &out);
	ck_assert_msg(rc == 0, "watch on a terminal: status %d:\n%s", rc, out);
	/* 40 columns of bar for 370 MiB: 340 MiB is 37 of them, the budget the last */
	const char *rss = line_of(out, "rss          ");
	ck_assert_msg(rss && !strncmp(rss + 13, "#####################################..|", 40),
		"no rss bar with the budget marked:\n%s", out);
	ck_assert_msg(line_of(out, "budget       | 370.0 MiB (size; the controller's policy; "
		"least 300.0 MiB)\033[K"), "no budget line:\n%s", out);
	/* untracked after the tracked total, which leaves it out */
	const char *un = line_of(out, "untracked    "), *total = line_of(out, "total    ");
	ck_assert_msg(un && strstr(un, "15.0 MiB") && total && total < un, "no untracked bar "
		"after the total:\n%s", out);
	ck_assert_msg(strstr(out, "policy for step 12 not applied: memory refused; it ran under "
		"h.0-1=full,head=off"), "no REMAT_FAILED note:\n%s", out);
	free(out);

	rc = ctl_d(&d, &out, "watch", "j1", "--interval", "0.3", "--count", "3", NULL);
	ck_assert_msg(rc == 0, "watch piped: status %d: %s", rc, out);
	ck_assert_msg(strstr(out, " rss 340.0 MiB ") && strstr(out, " budget 370.0 MiB"),
		"piped:\n%s", out);
	ck_assert_msg(strstr(out, "\nj1 policy for step 12 not applied: memory refused; it ran "
		"under h.0-1=full,head=off\n"), "piped, no REMAT_FAILED line:\n%s", out);
	free(out);
	/* --json: the controller as job-status gave it, untracked among the memory, and the
	 * refused change's event data on its update */
	rc = ctl_d(&d, &out, "--json", "watch", "j1", "--interval", "0.3", "--count", "3", NULL);
	ck_assert_msg(rc == 0 && strstr(out, "\"auto\":{\"budget_bytes\":387973120,\"source\":"
		"\"size\"") && strstr(out, "\"untracked\":15728640") &&
		strstr(out, "\"update\":\"REMAT_FAILED\",\"remat_failed\":{\"job\":\"j1\",\"step\":12"),
		"--json: status %d:\n%s", rc, out);
	free(out);
	td_daemon_stop(&d);
}
END_TEST

/* watch: a sample's text under the view (its newline shown as '?'), piped on a line of its
 * own; a sample without text says the job has no tokenizer. The stand-in sends one after
 * each job-status, with text and without by turns. */
START_TEST(test_rematctl_watch_sample)
{
	td_daemon d;
	char *out = NULL;
	td_daemon_paths(&d);
	char *w = td_script(&d, "worker.sh",
		TD_WORKER_RUNNING
		"job=$4\n"
		"ev() { printf '{\"event\":\"SAMPLE\",\"data\":{\"job\":\"%s\",%s},"
		"\"timestamp\":{\"seconds\":0,\"microseconds\":0}}\\n' \"$job\" \"$1\" >&3; }\n"
		"n=0\n"
		"while IFS= read -r line <&3; do\n"
		"id=$(printf '%s\\n' \"$line\" | sed -n 's/.*\"id\":\\([0-9][0-9]*\\).*/\\1/p')\n"
		"case $line in\n"
		"*'\"job-status\"'*) printf '" SW_STATUS "' \"$job\" \"$id\" >&3; n=$((n+1))\n"
		"  if [ $((n % 2)) -eq 1 ]; then ev '\"step\":10,\"prompt\":[1],\"tokens\":[2,3],"
		"\"text\":\"Hello\\nworld\"'; else ev '\"step\":20,\"prompt\":[1],"
		"\"tokens\":[2,3]'; fi ;;\n"
		"*'\"mem-stats\"'*) printf '" SW_MEM "' \"$id\" >&3 ;;\n"
		"*) printf '{\"return\":{},\"id\":%s}\\n' \"$id\" >&3 ;;\n"
		"esac\n"
		"done\n");
	const char *extra[] = {"--worker", w, "--stop-timeout", "2", NULL};
	td_daemon_start(&d, extra);
	free(w);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	ck_assert_str_eq(td_job_start(&c, T_TINY_SPEC, NULL), "j1");
	json_decref(td_wait_state(&c, "j1", "running", T_READ_MS));
	td_close(&c);
	int rc = ctl_d(&d, &out, "watch", "j1", "--interval", "0.3", "--count", "6", NULL);
	ck_assert_msg(rc == 0 && strstr(out, "\nj1 sample after step 10: Hello?world\n") &&
		strstr(out, "\nj1 sample after step 20: (token ids only: the job has no "
		"tokenizer)\n"), "watch piped: status %d:\n%s", rc, out);
	free(out);
	td_daemon_stop(&d);
}
END_TEST

Suite *suite_client(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("fmt");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_cli_size_format_units);
	tcase_add_test(tc, test_cli_flops_format_units);
	tcase_add_test(tc, test_cli_size_parse_forms);
	tcase_add_test(tc, test_cli_size_parse_bad);
	tcase_add_test(tc, test_cli_seconds_parse_forms);
	tcase_add_test(tc, test_cli_duration_format);
	tcase_add_test(tc, test_cli_state_final);
	tcase_add_test(tc, test_cli_sections_parse_order);
	tcase_add_test(tc, test_cli_sections_parse_bad);
	tcase_add_test(tc, test_cli_path_absolute_cases);
	tcase_add_test(tc, test_cli_spec_absolutize_fields);
	tcase_add_test(tc, test_cli_socket_path_order);
	tcase_add_test(tc, test_cli_table_render_aligned);
	tcase_add_test(tc, test_cli_str_clean_controls);
	tcase_add_test(tc, test_cli_policy_format_forms);
	tcase_add_test(tc, test_cli_json_readers_types);
	tcase_add_test(tc, test_num_real_shortest);
	tcase_add_test(tc, test_num_f32_shortest);
	tcase_add_test(tc, test_num_json_shorten);
	tcase_add_test(tc, test_cli_value_format);
	tcase_add_test(tc, test_cli_costs_noise_workspace);
	tcase_add_test(tc, test_cli_spec_dir_paths);
	tcase_add_test(tc, test_cli_model_text);
	tcase_add_test(tc, test_cli_auto_text);
	suite_add_tcase(s, tc);

	tc = tcase_create("binary");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_rematctl_usage_errors);
	tcase_add_test(tc, test_rematctl_cannot_connect);
	tcase_add_test(tc, test_rematctl_spec_bytes_not_echoed);
	tcase_add_test(tc, test_rematctl_replies);
	tcase_add_test(tc, test_rematctl_mem_device);
	tcase_add_test(tc, test_rematctl_floats_shortest);
	tcase_add_test(tc, test_rematctl_costs_noise);
	tcase_add_test(tc, test_rematctl_mem_workspace_once);
	tcase_add_test(tc, test_rematctl_status_model);
	tcase_add_test(tc, test_rematctl_status_budget);
	tcase_add_test(tc, test_rematctl_remat_set_controller);
	tcase_add_test(tc, test_rematctl_remat_auto_budget);
	tcase_add_test(tc, test_rematctl_mem_untracked);
	tcase_add_test(tc, test_rematctl_plan_terms);
	tcase_add_loop_test(tc, test_rematctl_bad_server, 0,
			    (int)(sizeof bad_servers / sizeof bad_servers[0]));
	suite_add_tcase(s, tc);

	tc = tcase_create("daemon");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rematctl_start_spec_dir);
	tcase_add_test(tc, test_rematctl_watch_eta_interval);
	tcase_add_test(tc, test_rematctl_remat_set_wait);
	tcase_add_test(tc, test_rematctl_watch_sample);
	tcase_add_test(tc, test_rematctl_watch_budget);
	tcase_add_test(tc, test_rematctl_plot_process_peak);
	tcase_add_test(tc, test_rematctl_plot_images_marked);
	tcase_add_test(tc, test_rematctl_remat_set_wait_real);
	suite_add_tcase(s, tc);
	return s;
}
