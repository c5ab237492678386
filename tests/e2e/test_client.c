/* test_client.c - tests of rematctl: its pure helpers (client/cli_fmt.c, linked into the
 * runner) and the binary's exit statuses against a small fake server.
 *
 * What it covers: size and FLOP formatting, size and duration parsing with their refusals,
 * SEL=MODE arguments into an ordered sections object (a repeated selector moves to its
 * last place), paths made absolute in a job spec, the socket path's order of choice and
 * its length check, table layout, the cleaning of control characters; then the rematctl
 * binary (REMATCTL) on usage errors (2), a missing socket (3), an error reply (1), a good
 * reply (0) and every kind of bad server line (3, never a signal).
 * What it does not: rematctl against the real rematd (the end-to-end tests do that).
 */
#include "proto.h"
#include "tests.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/cli_fmt.h"

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
}
END_TEST

START_TEST(test_cli_sections_parse_bad)
{
	static const char *const bad[] = {"h.0", "=full", "h.0=", "h.0=full=off", "", "\xff=full",
		"h.0=\xc3", "h.0=full,", ",h.0=full", "h.0=full,,head=off", "h.0=full,head"};
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

/* A fake server for one connection: sends greeting and reads one request line, then sends
 * reply verbatim and closes (without a greeting it sends reply at once). Returns the
 * child's pid; path gets the socket's. */
static pid_t fake_server(const char *name, const char *greeting, const char *reply, char *path,
			 size_t pathlen)
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
		while (greeting && read(c, &ch, 1) == 1 && ch != '\n')
			;
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
	suite_add_tcase(s, tc);

	tc = tcase_create("binary");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_rematctl_usage_errors);
	tcase_add_test(tc, test_rematctl_cannot_connect);
	tcase_add_test(tc, test_rematctl_replies);
	tcase_add_test(tc, test_rematctl_mem_device);
	tcase_add_loop_test(tc, test_rematctl_bad_server, 0,
			    (int)(sizeof bad_servers / sizeof bad_servers[0]));
	suite_add_tcase(s, tc);
	return s;
}
