/* cli_cmd.h - rematctl's commands: the parsed command line, the table of subcommands and
 * how each one builds its request from the arguments (cli_cmd.c).
 *
 * Each request is built before any connection is made, so that a bad argument or an
 * unreadable spec file fails at once with its own exit status. Not here: parsing argv
 * and running the requests (rematctl.c).
 */
#ifndef CLI_CMD_H
#define CLI_CMD_H

#include <jansson.h>

#include "cli_show.h"

#define CLI_MAX_POS    64 /* positional arguments one command line may carry */
#define CLI_MAX_EVENTS 16 /* --event options */

/* Options a command accepts (bits). */
#define CLI_OPT_SAVE	 (1u << 0)
#define CLI_OPT_NAME	 (1u << 1)
#define CLI_OPT_DEFAULT	 (1u << 2)
#define CLI_OPT_BUDGET	 (1u << 3)
#define CLI_OPT_INTERVAL (1u << 4)
#define CLI_OPT_COUNT	 (1u << 5)
#define CLI_OPT_EVENT	 (1u << 6)
#define CLI_OPT_TRACE	 (1u << 7)
#define CLI_OPT_FORMAT	 (1u << 8)
#define CLI_OPT_FOLLOW	 (1u << 9)
#define CLI_OPT_PNG	 (1u << 10)
#define CLI_OPT_FORCE	 (1u << 11)
#define CLI_OPT_WAIT	 (1u << 12)
#define CLI_OPT_SVG	 (1u << 13)

/* How a command takes a job. */
enum { CLI_JOB_NONE, CLI_JOB_NEEDED };

typedef struct cli_args {
	const char *socket;		    /* --socket */
	const char *control;		    /* --control: a worker's socket, JOB may be left out */
	int json;			    /* --json */
	int timeout_ms;			    /* --timeout, 0 when not given */
	int help;			    /* --help */
	unsigned given;			    /* CLI_OPT_* bits seen */
	int save;			    /* --save (stop and shutdown save anyway) */
	int no_save;			    /* --no-save */
	const char *name;		    /* --name */
	const char *deflt;		    /* --default */
	long long budget;		    /* --budget in bytes, -1 when not given */
	const char *budget_word;	    /* --budget cgroup, device or off (remat auto) */
	double interval;		    /* --interval in seconds */
	long count;			    /* --count */
	const char *events[CLI_MAX_EVENTS]; /* --event, in order */
	int nevents;
	const char *trace;		    /* --trace FILE (remat memlog) */
	const char *format;		    /* --format pytorch|chrome */
	const char *png;		    /* --png FILE (plot) */
	const char *svg;		    /* --svg FILE (plot) */
	int force;			    /* --force (remat set: past the memory budget) */
	int wait;			    /* --wait (remat set: until the change applies or fails) */
	char *pos[CLI_MAX_POS]; /* positional arguments, the command's words first */
	int npos;
	const char *job; /* the JOB argument, NULL when left out */
	char **rest;	 /* positionals after the command and JOB */
	int nrest;
} cli_args;

struct cli_conn;
typedef struct cli_command cli_command;
struct cli_command {
	const char *name;	/* "remat set" */
	const char *args;	/* usage after the name */
	int job;		/* CLI_JOB_* */
	unsigned opts;		/* CLI_OPT_* accepted */
	int min_rest, max_rest; /* positionals after JOB */
	const char *execute;	/* the request it sends; NULL: watch and events, which run */
	/* builds the request's arguments before connecting (NULL: {"job": JOB}); returns an
	 * exit status, CLI_EXIT_OK with *req */
	int (*build)(const cli_command *cmd, const cli_args *a, json_t **req);
	cli_show_fn *show; /* human output of the reply */
	const char *help;  /* one line */
	/* after the reply is shown (NULL: nothing): what the command does with it besides,
	 * returning an exit status (remat memlog --trace writes its file) */
	int (*after)(const cli_args *a, const json_t *ret);
	/* a command that runs requests of its own (logs, plot; execute NULL): its exit
	 * status */
	int (*run)(struct cli_conn *c, const cli_args *a);
};

/* The subcommands, in the order usage lists them; a NULL name ends the table. */
extern const cli_command cli_commands[];

/* {"job": JOB}, or {} when JOB was left out (a worker's own socket): the default build. */
int cli_build_job(const cli_command *cmd, const cli_args *a, json_t **req);

/* Prints "rematctl: " fmt (with arg) and the command's usage line (or a pointer to
 * --help when cmd is NULL) to stderr; returns CLI_EXIT_USAGE. */
int cli_fail_usage(const cli_command *cmd, const char *fmt, const char *arg);

#endif
