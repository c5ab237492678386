/* cli_fmt.h - rematctl's pure helpers: sizes and durations in and out, SEL=MODE arguments,
 * absolute paths in a job spec, the socket path, aligned tables, and careful reads of JSON
 * that came from a server.
 *
 * No I/O, no globals, no main: the unit test runner links this file on its own
 * (tests/e2e/test_client.c). Every function that reads server data copes with any JSON at
 * all (wrong types, missing keys) and never aborts.
 */
#ifndef CLI_FMT_H
#define CLI_FMT_H

#include <jansson.h>
#include <stddef.h>

#define CLI_SIZE_LEN	 32   /* room for any cli_size_format / cli_flops_format result */
#define CLI_TABLE_MAXCOL 8    /* columns of one table */
#define CLI_PATH_MAX	 4096 /* longest path written into a job spec (the engine's limit) */

/* ---- sizes, FLOPs, durations ---- */

/* Bytes for people, binary units with one decimal: "0 B", "512 B", "1.5 KiB", "238.3 MiB",
 * "1.5 GiB"; "-" for NaN or infinity. Returns buf. */
char *cli_size_format(double bytes, char *buf, size_t len);
/* Bytes in MiB whatever their size, one decimal: "370.0 MiB", "1536.0 MiB"; "-" for NaN or
 * infinity. A memory budget's figures, as the worker's messages about it give them.
 * Returns buf. */
char *cli_mib_format(double bytes, char *buf, size_t len);

/* FLOPs with SI prefixes: "0 FLOP", "812.0 MFLOP", "1.2 TFLOP". Returns buf. */
char *cli_flops_format(double flops, char *buf, size_t len);

/* Sizes are parsed by proto_size_parse (proto.h), the spec's and the options' one parser. */

/* Parses a duration: a number and an optional unit ms, s (default), m or h. Returns 0 with
 * seconds > 0, or -1. */
int cli_seconds_parse(const char *text, double *seconds);
/* A duration for people: "850 ms", "12.3 s", "4m05s", "2h07m", "3d04h"; "-" when negative
 * or not finite. Returns buf. */
char *cli_duration_format(double seconds, char *buf, size_t len);

/* 1 when a job in state s has ended: finished, stopped, failed or interrupted (rematd's
 * final states), 0 else or for NULL. */
int cli_state_final(const char *s);

/* ---- arguments ---- */

/* Turns SELECTOR=MODE arguments into the "sections" object of remat-set and remat-plan,
 * keeping the order given: each word is a policy's text as remat-train reads one
 * (proto_policy_parse: items separated by ',' as printed, ';' or blanks; a bare MODE is
 * all=MODE). A selector given twice moves to its last position, so that the server,
 * applying entries in order, gives the later one the last word, as on the command line.
 * A mode's name is checked here (a typo is a usage error); whether it fits the sections
 * named, and the selectors, are the server's to check. Returns 0 with *sections (new
 * reference), or -1 with a message in err. */
int cli_sections_parse(char *const *args, int n, json_t **sections, char *err, size_t errlen);

/* Makes path absolute against cwd (an absolute directory): "." components and repeated
 * slashes dropped, leading ".." components taken off cwd (safe: getcwd's answer has no
 * symbolic links), a ".." after a named component kept as written (it may follow a link).
 * An absolute path is copied as it is. Returns 0, or -1 when out is too small. */
int cli_path_absolute(const char *cwd, const char *path, char *out, size_t outlen);

/* The directory a spec file's relative paths are taken from, as Docker Compose takes its
 * file's: spec_path's own directory, made absolute against cwd ("examples/loop.json" from
 * /home/u: /home/u/examples); cwd itself for "-" (standard input). 0, or -1 when out is
 * too small. */
int cli_spec_dir(const char *cwd, const char *spec_path, char *out, size_t outlen);
/* "data.train: /abs/train.txt\n" for each path field of spec that is set, in the order of
 * cli_spec_absolutize's fields ("" when none). malloc'd; NULL when out of memory. */
char *cli_spec_paths_text(const json_t *spec);

/* Rewrites the relative paths of a job spec (data.train, data.val, model.init_from,
 * save.dir, parallel.hostfile) as absolute paths against dir (cli_spec_dir's), in place,
 * as cli_path_absolute does. Fields that are absent, not strings or empty are left for the
 * server to judge. Returns 0, or -1 with a message. */
int cli_spec_absolutize(json_t *spec, const char *dir, char *err, size_t errlen);

#define CLI_SYSTEM_SOCKET "/run/remat/rematd.sock" /* root's rematd, and systemd's socket */

/* The socket to use: option (--socket or --control) when given, else remat_socket
 * ($REMAT_SOCKET), else xdg_runtime ($XDG_RUNTIME_DIR) + "/remat/rematd.sock" when that
 * exists or CLI_SYSTEM_SOCKET does not, else CLI_SYSTEM_SOCKET (the daemon's place when it
 * runs as root or under systemd). Empty strings count as unset. Returns 0, or -1 with a
 * message when the path does not fit a sockaddr_un. */
int cli_socket_path(const char *option, const char *remat_socket, const char *xdg_runtime,
		    char *out, size_t outlen, char *err, size_t errlen);
/* The same with the system socket as an argument (tests). */
int cli_socket_path_in(const char *option, const char *remat_socket, const char *xdg_runtime,
		       const char *system_socket, char *out, size_t outlen, char *err,
		       size_t errlen);

/* ---- tables ---- */

typedef struct cli_table {
	int ncol;			    /* columns, 1..CLI_TABLE_MAXCOL */
	const char *head[CLI_TABLE_MAXCOL]; /* column titles (borrowed, usually literals) */
	char align[CLI_TABLE_MAXCOL];	    /* 'l' left or 'r' right (numbers, sizes) */
	int nrow;			    /* rows added */
	int caprow;			    /* rows allocated */
	char **cell;			    /* nrow * ncol cleaned, malloc'd copies, row-major */
} cli_table;

/* align is one letter per column, "llrr"; a missing letter means 'l'. */
void cli_table_init(cli_table *t, int ncol, const char *const *head, const char *align);
/* Adds a row of t->ncol strings (NULL shows as "-"); control characters are replaced.
 * Returns 0, or -1 when out of memory. */
int cli_table_add(cli_table *t, ...);
/* The table as text: a title line and one line per row, columns two spaces apart, no
 * trailing blanks. malloc'd, caller frees; NULL when out of memory. */
char *cli_table_render(const cli_table *t);
void cli_table_free(cli_table *t);

/* ---- reading server JSON ---- */

/* Copies text into out with control characters (C0, DEL, C1) replaced by '?', so that a
 * server cannot send escape sequences to the terminal; cut to fit. Returns out. */
char *cli_str_clean(const char *text, char *out, size_t outlen);

/* obj[key] when obj is an object and the value a string, else NULL. */
const char *cli_jstr(const json_t *obj, const char *key);
/* 1 with *v when obj[key] is a number (integer or real), else 0. */
int cli_jnum(const json_t *obj, const char *key, double *v);
/* obj[key] when it is an object, else NULL. */
json_t *cli_jobj(const json_t *obj, const char *key);

/* A value from a reply as a person reads it: a real in the shortest text that reads back
 * to the same double (proto_real_text: 3e-4 is "0.0003", not "0.00029999999999999997"),
 * an integer as it is, a string cleaned, anything else as compact JSON with its reals so.
 * Returns buf. */
char *cli_value_format(const json_t *v, char *buf, size_t len);
/* JSON text of j (flags as json_dumps') with every real in its shortest text: --json
 * output and the watch's JSON lines. malloc'd; NULL when it cannot be dumped. */
char *cli_json_text(const json_t *j, size_t flags);

/* ---- what trains ---- */

/* "gpt2, trainable params: 4,096 || all params: 125,248 || trainable%: 3.2704" from a reply
 * with arch, params and trainable_params (job-start's, job-status'): PEFT's
 * print_trainable_parameters() and the architecture. NULL when the reply has no counts. */
char *cli_model_text(const json_t *ret, char *buf, size_t len);

/* ---- remat costs, and the sections' workspace ---- */

/* The noise of a remat-costs reply's sections (docs/protocol.md): the most any mode's
 * added_ms came out below 0, i.e. faster than keeping everything, which only noise does;
 * 0 when none did. */
double cli_costs_noise(const json_t *sections);
/* An ADDED-MS cell: "+3.81"; "~0 (noise)" for a figure below 0 or not above noise (a
 * measured difference that noise alone can make); exactly 0 (off against itself) as
 * "+0.00". Returns buf. */
char *cli_added_ms_format(double added_ms, double noise, char *buf, size_t len);
/* The recompute workspace of sections (array of {name, workspace_bytes, ...}): the blocks
 * share one buffer, the largest any of them needs (returned); the head's own goes to
 * *head (may be NULL). A sum over the rows would count the shared one once per block. */
double cli_block_workspace(const json_t *sections, double *head);

/* A policy object in the one printed form, "h.0-5=full,h.6-11=off,head=chunked" (as the
 * worker prints it and "remat set" reads it), cleaned and cut to fit ("..." at the end
 * when cut); "-" when it is not an object. Returns buf. */
char *cli_policy_format(const json_t *policy, char *buf, size_t len);

/* ---- the memory controller ---- */

/* 1 with *budget (bytes of process memory) when job-status' reply st says a memory
 * controller is on: its "auto" object's budget_bytes, or where a server sends no "auto"
 * (older than it) "auto_budget_bytes"; 0 when none is on ("auto" null). */
int cli_auto_budget(const json_t *st, double *budget);
/* The controller of st for people, or NULL when none is on: "370.0 MiB (a size; the
 * controller picks the policy; least 300.0 MiB)", "... (cgroup memory.max; holding the
 * policy set by remat set)" (pinned); "not known until it runs (cgroup memory.max; ...)"
 * for an "auto" without bytes (rematd's record of a job without a worker); without an
 * "auto" object the budget alone. brief:
 * short words, to fit a line of watch in 80 columns ("370.0 MiB (size; the controller's
 * policy; least 300.0 MiB)"). Returns buf or NULL. */
char *cli_auto_text(const json_t *st, int brief, char *buf, size_t len);

/* The job's part of rematd's memory pool (job-status' "memory") for people, or NULL when
 * rematd runs none: "61.0 MiB of the pool (least 47.0 MiB, off 80.0 MiB, priority 4)";
 * brief, to fit a line of watch: "61.0 MiB (least 47.0 MiB, off 80.0 MiB, priority 4)".
 * Returns buf or NULL. */
char *cli_pool_text(const json_t *st, int brief, char *buf, size_t len);

#endif
