/* rematctl.c - the command-line client of rematd: argument parsing, one request per
 * subcommand, human or --json output (see usage() below and docs/protocol.md).
 *
 *   rematctl [--socket PATH | --control PATH] [--json] [--timeout DUR] COMMAND [ARGS]
 *
 * Options may come anywhere on the line ("rematctl stop j1 --save"); "--" ends them.
 * Exit status: 0 success, 1 an error reply or a command that failed, 2 bad usage,
 * 3 cannot connect, timeout, connection lost or a protocol error.
 * Not here: the commands' requests (cli_cmd.c), the connection (cli_conn.c), output
 * (cli_show.c), the live view (cli_watch.c), remat set --wait (cli_wait.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_cmd.h"
#include "cli_conn.h"
#include "cli_fmt.h"
#include "cli_show.h"
#include "cli_wait.h"
#include "cli_watch.h"
#include "proto.h"

static volatile sig_atomic_t interrupted; /* set by SIGINT/SIGTERM in watch and events */

static void on_signal(int sig)
{
	interrupted = sig;
}

/* The exit status and message for a cli_conn result. */
static int fail_conn(const cli_conn *c, int rc)
{
	if (rc == CLI_EREPLY) {
		fprintf(stderr, CLI_NAME ": %s (%s)\n", c->err, c->err_class);
		return CLI_EXIT_FAIL;
	}
	if (rc == CLI_EINTR)
		return CLI_EXIT_OK;
	fprintf(stderr, CLI_NAME ": %s\n", c->err);
	return CLI_EXIT_CONN;
}

static int reply_timeout(const char *execute, const cli_args *a)
{
	const proto_command *pc = proto_command_find(execute);
	if (a->timeout_ms > 0)
		return a->timeout_ms;
	return pc && pc->deferred ? CLI_DEFERRED_TIMEOUT_MS : CLI_TIMEOUT_MS;
}

/* Sends the request, prints the reply (human or --json), returns the exit status. */
static int run_request(cli_conn *c, const cli_command *cmd, const cli_args *a, json_t *req)
{
	json_t *ret = NULL;
	const char *job = a->job ? a->job : cli_conn_job(c);
	int rc =
	    cli_conn_call(c, cmd->execute, req, reply_timeout(cmd->execute, a), &ret, NULL, NULL);

	if (rc != CLI_OK)
		return fail_conn(c, rc);
	if (a->json) {
		char *text = cli_json_text(ret, JSON_COMPACT);
		if (text)
			printf("%s\n", text);
		free(text);
	} else {
		cmd->show(stdout, job ? job : "job", ret);
	}
	/* a plan under a budget that no policy fits is a failed command (status 1) */
	int fails = json_is_false(json_object_get(ret, "fits"));
	int after = cmd->after ? cmd->after(a, ret) : CLI_EXIT_OK;
	json_decref(ret);
	return fails ? CLI_EXIT_FAIL : after;
}

/* Prints events as JSON lines until interrupted, --count events, or the end of the
 * connection (status 3: the server went away). */
static int run_events(cli_conn *c, const cli_args *a, json_t *req)
{
	json_t *msg = NULL;
	proto_kind kind;
	long seen = 0;
	int rc =
	    cli_conn_call(c, "subscribe", req, reply_timeout("subscribe", a), NULL, NULL, NULL);

	if (rc != CLI_OK)
		return fail_conn(c, rc);
	while (a->count <= 0 || seen < a->count) {
		rc = cli_conn_next(c, -1, &msg, &kind);
		if (rc != CLI_OK)
			return fail_conn(c, rc);
		if (kind == PROTO_KIND_EVENT) {
			char *text = cli_json_text(msg, JSON_COMPACT);
			if (text)
				printf("%s\n", text);
			free(text);
			seen++;
		} else if (kind == PROTO_KIND_ERROR && !json_object_get(msg, "id")) {
			/* the server gave up on this connection (Busy, MessageTooLarge) */
			json_t *e = json_object_get(msg, "error");
			char d[PROTO_DESC_LEN], k[32];
			const char *desc = cli_jstr(e, "desc"), *cls = cli_jstr(e, "class");
			fprintf(stderr, CLI_NAME ": %s (%s)\n",
				cli_str_clean(desc ? desc : "-", d, sizeof d),
				cli_str_clean(cls ? cls : "?", k, sizeof k));
			json_decref(msg);
			return CLI_EXIT_FAIL;
		}
		json_decref(msg);
		/* a reader that went away (| head) ends us here, or through SIGPIPE */
		if (fflush(stdout) != 0)
			return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

static int run_watch(cli_conn *c, const cli_args *a)
{
	cli_watch_opts o = {a->job, a->interval > 0 ? a->interval : 1.0, a->count, a->json,
			    a->timeout_ms > 0 ? a->timeout_ms : CLI_TIMEOUT_MS};
	return cli_watch_run(c, &o);
}

static void usage(FILE *f)
{
	char modes[160];
	fprintf(f, "usage: " CLI_NAME " [--socket PATH | --control PATH] [--json] "
		   "[--timeout DUR] COMMAND [ARGS]\n\ncommands:\n");
	for (const cli_command *c = cli_commands; c->name; c++)
		fprintf(f, "  %s%s%s\n      %s\n", c->name, *c->args ? " " : "", c->args, c->help);
	fprintf(
	    f, "\noptions (anywhere on the line):\n"
	       "  --socket PATH   rematd's socket; default $REMAT_SOCKET, else\n"
	       "                  $XDG_RUNTIME_DIR/remat/rematd.sock if it exists, else\n"
	       "                  /run/remat/rematd.sock (root's and systemd's)\n"
	       "  --control PATH  talk to one worker (remat-train --control PATH); JOB may be left "
	       "out\n"
	       "  --json          print the reply as one JSON line (watch: one per update)\n"
	       "  --timeout DUR   longest wait for a reply (default 30s; stop and save: 10m)\n"
	       "  --version, -h, --help\n"
	       "SIZE: 2GiB, 512M, 1e9 (K M G T and KiB.. are powers of 1024; KB MB GB TB of 1000)\n"
	       "MODE: %s\n"
	       "SELECTOR: h.3, h.0-5, blocks, head, all, or an alias of the job\n"
	       "exit status: 0 ok, 1 error reply or failed command, 2 usage, 3 cannot connect, "
	       "timeout\n  or protocol error\n", proto_modes_text(modes, sizeof modes));
}

/* The value of an option: "--opt=value" or the next argument. */
static const char *opt_value(int argc, char **argv, int *i, const char *arg, size_t n)
{
	if (arg[n] == '=')
		return arg + n + 1;
	if (arg[n] == '\0' && *i + 1 < argc)
		return argv[++*i];
	return NULL;
}

/* The options, by position in opts[]. */
enum { O_SOCKET, O_CONTROL, O_JSON, O_TIMEOUT, O_HELP, O_VERSION, O_SAVE, O_NO_SAVE, O_NAME,
	O_DEFAULT,
	O_BUDGET, O_INTERVAL, O_COUNT, O_EVENT, O_TRACE, O_FORMAT, O_FOLLOW, O_PNG, O_FORCE, O_WAIT,
	O_SVG, O_COUNT_ };

static const struct {
	const char *name;
	unsigned bit; /* 0: a global option */
	int value;    /* 1: takes a value */
} opts[O_COUNT_] = {
	[O_SOCKET] = {"--socket", 0, 1},
	[O_CONTROL] = {"--control", 0, 1},
	[O_JSON] = {"--json", 0, 0},
	[O_TIMEOUT] = {"--timeout", 0, 1},
	[O_HELP] = {"--help", 0, 0},
	[O_VERSION] = {"--version", 0, 0},
	[O_SAVE] = {"--save", CLI_OPT_SAVE, 0},
	[O_NO_SAVE] = {"--no-save", CLI_OPT_SAVE, 0},
	[O_NAME] = {"--name", CLI_OPT_NAME, 1},
	[O_DEFAULT] = {"--default", CLI_OPT_DEFAULT, 1},
	[O_BUDGET] = {"--budget", CLI_OPT_BUDGET, 1},
	[O_INTERVAL] = {"--interval", CLI_OPT_INTERVAL, 1},
	[O_COUNT] = {"--count", CLI_OPT_COUNT, 1},
	[O_EVENT] = {"--event", CLI_OPT_EVENT, 1},
	[O_TRACE] = {"--trace", CLI_OPT_TRACE, 1},
	[O_FORMAT] = {"--format", CLI_OPT_FORMAT, 1},
	[O_FOLLOW] = {"--follow", CLI_OPT_FOLLOW, 0},
	[O_PNG] = {"--png", CLI_OPT_PNG, 1},
	[O_FORCE] = {"--force", CLI_OPT_FORCE, 0},
	[O_WAIT] = {"--wait", CLI_OPT_WAIT, 0},
	[O_SVG] = {"--svg", CLI_OPT_SVG, 1},
};

/* --event's value: one of the protocol's events. */
static int set_event(cli_args *a, const char *v)
{
	char msg[256] = "";
	if (a->nevents == CLI_MAX_EVENTS)
		return cli_fail_usage(NULL, "too many --event options (at most %s)", "16");
	if (proto_event_known(v)) {
		a->events[a->nevents++] = v;
		return CLI_EXIT_OK;
	}
	/* the events, from the protocol's table; '%' cannot be in a name, but v may hold one */
	snprintf(msg, sizeof msg, "unknown event '%%s' (");
	for (int e = 0; e < PROTO_EV_COUNT; e++)
		snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "%s%s", e ? ", " : "",
			proto_event_name((proto_event)e));
	snprintf(msg + strlen(msg), sizeof msg - strlen(msg), ")");
	return cli_fail_usage(NULL, msg, v);
}

/* Option k with its value v (NULL for a flag) into a. */
static int set_option(int k, const char *v, cli_args *a, int *version)
{
	double secs;
	char *end;
	switch (k) {
	case O_SOCKET:
		a->socket = v;
		break;
	case O_CONTROL:
		a->control = v;
		break;
	case O_JSON:
		a->json = 1;
		break;
	case O_TIMEOUT:
		if (cli_seconds_parse(v, &secs) < 0)
			return cli_fail_usage(NULL, "bad --timeout '%s' (e.g. 30, 2.5s, 10m)", v);
		a->timeout_ms = secs < 0.001 ? 1 : (int)(secs * 1000.0);
		break;
	case O_HELP:
		a->help = 1;
		break;
	case O_VERSION:
		*version = 1;
		break;
	case O_SAVE:
		a->save = 1;
		break;
	case O_NO_SAVE:
		a->no_save = 1;
		break;
	case O_NAME:
		a->name = v;
		break;
	case O_DEFAULT:
		a->deflt = v;
		break;
	case O_BUDGET:
		if (!strcmp(v, "cgroup") || !strcmp(v, "device") || !strcmp(v, "off"))
			a->budget_word = v; /* remat auto's; the command checks */
		else if (proto_size_parse(v, &a->budget) < 0)
			return cli_fail_usage(NULL, "bad --budget '%s' (e.g. 2GiB, 512M, 1e9)", v);
		break;
	case O_INTERVAL:
		if (cli_seconds_parse(v, &a->interval) < 0 || a->interval < 0.05)
			return cli_fail_usage(NULL, "bad --interval '%s' (at least 0.05 s)", v);
		break;
	case O_COUNT:
		errno = 0;
		a->count = strtol(v, &end, 10);
		if (errno || end == v || *end || a->count < 1)
			return cli_fail_usage(NULL, "bad --count '%s' (a whole number >= 1)", v);
		break;
	case O_EVENT:
		return set_event(a, v);
	case O_TRACE:
		a->trace = v;
		break;
	case O_FORMAT:
		if (strcmp(v, "pytorch") && strcmp(v, "chrome"))
			return cli_fail_usage(NULL, "bad --format '%s' (pytorch or chrome)", v);
		a->format = v;
		break;
	case O_FOLLOW:
		break;
	case O_PNG:
		a->png = v;
		break;
	case O_SVG:
		a->svg = v;
		break;
	case O_FORCE:
		a->force = 1;
		break;
	case O_WAIT:
		a->wait = 1;
		break;
	}
	return CLI_EXIT_OK;
}

/* Splits argv into options and positionals. Returns CLI_EXIT_OK or CLI_EXIT_USAGE. */
static int parse_args(int argc, char **argv, cli_args *a, int *version)
{
	int options = 1;
	for (int i = 1; i < argc; i++) {
		char *arg = argv[i];
		if (!options || arg[0] != '-' || strcmp(arg, "-") == 0) {
			if (a->npos == CLI_MAX_POS)
				return cli_fail_usage(NULL, "too many arguments (at most %s)", "64");
			a->pos[a->npos++] = arg;
			continue;
		}
		if (strcmp(arg, "--") == 0) {
			options = 0;
			continue;
		}
		if (strcmp(arg, "-h") == 0) {
			a->help = 1;
			continue;
		}
		if (strcmp(arg, "-f") == 0)
			arg = "--follow"; /* tail -f's */
		int k;
		size_t n = 0;
		for (k = 0; k < O_COUNT_; k++) {
			n = strlen(opts[k].name);
			if (strncmp(arg, opts[k].name, n) == 0 &&
				(arg[n] == '\0' || (arg[n] == '=' && opts[k].value)))
				break;
		}
		if (k == O_COUNT_)
			return cli_fail_usage(NULL, "unknown option '%s'", arg);
		const char *v = NULL;
		if (opts[k].value && !(v = opt_value(argc, argv, &i, arg, n)))
			return cli_fail_usage(NULL, "option '%s' needs a value", opts[k].name);
		a->given |= opts[k].bit;
		int rc = set_option(k, v, a, version);
		if (rc != CLI_EXIT_OK)
			return rc;
	}
	return CLI_EXIT_OK;
}

/* The command named by the first positionals; two-word commands ("mem reset") first, so
 * that "mem reset j1" is not read as "mem" of job "reset". */
static const cli_command *find_command(cli_args *a, int *words)
{
	for (int pass = 2; pass >= 1; pass--) {
		for (const cli_command *c = cli_commands; c->name; c++) {
			const char *sp = strchr(c->name, ' ');
			size_t n = sp ? (size_t)(sp - c->name) : strlen(c->name);
			if ((sp != NULL) != (pass == 2) || strncmp(a->pos[0], c->name, n) != 0 ||
			    a->pos[0][n] != '\0')
				continue;
			if (sp && (a->npos < 2 || strcmp(a->pos[1], sp + 1) != 0))
				continue;
			*words = pass;
			return c;
		}
	}
	return NULL;
}

/* Checks the command's options and positionals, sets a->job and a->rest. */
static int check_args(const cli_command *cmd, int words, cli_args *a)
{
	char **p = a->pos + words;
	int n = a->npos - words;

	for (int k = 0; k < O_COUNT_; k++)
		if ((a->given & opts[k].bit) && !(cmd->opts & opts[k].bit))
			return cli_fail_usage(cmd, "this command takes no %s option", opts[k].name);
	if (cmd->job == CLI_JOB_NEEDED) {
		/* SEL=MODE can never be a job id: "remat set h.0=full" on a worker has no JOB */
		if (n > 0 && !strchr(p[0], '=')) {
			a->job = p[0];
			p++;
			n--;
		} else if (!a->control) {
			return cli_fail_usage(cmd, "%s",
					      "missing JOB (a job id such as j1; see 'ls')");
		}
	}
	if (n < cmd->min_rest)
		return cli_fail_usage(cmd, "%s", "missing arguments");
	if (n > cmd->max_rest)
		return cli_fail_usage(cmd, "unexpected argument '%s'", p[cmd->max_rest]);
	a->rest = p;
	a->nrest = n;
	return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
	cli_args a = {.budget = -1};
	cli_conn c;
	const cli_command *cmd;
	json_t *req = NULL;
	char path[256], err[256];
	int version = 0, words = 0, rc;

	memset(&c, 0, sizeof c);
	c.fd = -1;
	c.stop = &interrupted; /* kept by cli_conn_open */
	rc = parse_args(argc, argv, &a, &version);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (version) {
		printf(CLI_NAME " %s (protocol %d)\n", PROTO_VERSION, PROTO_PROTOCOL);
		return CLI_EXIT_OK;
	}
	if (a.npos > 0 && strcmp(a.pos[0], "help") == 0)
		a.help = 1;
	if (a.help || a.npos == 0) {
		usage(a.help ? stdout : stderr);
		return a.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
	}
	cmd = find_command(&a, &words);
	if (!cmd && strcmp(a.pos[0], "remat") == 0)
		return cli_fail_usage(NULL, "'remat' needs a subcommand: %s", "get, set or plan");
	if (!cmd)
		return cli_fail_usage(NULL, "unknown command '%s'", a.pos[0]);
	rc = check_args(cmd, words, &a);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (a.socket && a.control)
		return cli_fail_usage(NULL, "%s", "give --socket or --control, not both");
	if (cli_socket_path(a.control ? a.control : a.socket, getenv("REMAT_SOCKET"),
			    getenv("XDG_RUNTIME_DIR"), path, sizeof path, err, sizeof err) < 0) {
		fprintf(stderr, CLI_NAME ": %s\n", err);
		return CLI_EXIT_CONN;
	}
	/* everything that can fail here (a spec file, an argument) fails before connecting */
	if (!cmd->run && (cmd->build || cmd->execute)) {
		rc = (cmd->build ? cmd->build : cli_build_job)(cmd, &a, &req);
		if (rc != CLI_EXIT_OK)
			return rc;
	}
	if (!cmd->execute) {
		/* watch and events end on a signal: no SA_RESTART, so it ends the poll() too */
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	rc = cli_conn_open(&c, path, a.control ? "the worker" : "rematd",
			   a.timeout_ms > 0 ? a.timeout_ms : CLI_TIMEOUT_MS);
	if (rc != CLI_OK) {
		rc = fail_conn(&c, rc);
		goto out;
	}
	if (cmd->run)
		rc = cmd->run(&c, &a);
	else if (cmd->execute && a.wait)
		rc = cli_wait_run(&c, cmd, &a, req); /* remat set --wait: the change's outcome */
	else if (cmd->execute)
		rc = run_request(&c, cmd, &a, req);
	else if (req)
		rc = run_events(&c, &a, req);
	else
		rc = run_watch(&c, &a);
	if (fflush(stdout) != 0 && rc == CLI_EXIT_OK) {
		fprintf(stderr, CLI_NAME ": cannot write the output: %s\n", strerror(errno));
		rc = CLI_EXIT_FAIL;
	}
out:
	json_decref(req);
	cli_conn_close(&c);
	return rc;
}
