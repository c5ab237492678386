/* eng_err.h - error messages returned by the engine.
 *
 * Engine functions that can fail on outside input (job spec, checkpoint files, data files,
 * hyperparameters) return 0 on success and -1 on failure, and write one line into an
 * eng_err owned by the caller. Messages follow git's style: lower case, no full stop,
 * problem first ("cannot open checkpoint 'x': No such file or directory").
 * Internal invariants are checked with ENG_ASSERT, which stays on in release builds.
 */
#ifndef ENG_ERR_H
#define ENG_ERR_H

#include <stdio.h>
#include <stdlib.h>

#define ENG_ERR_LEN 512 /* longest message kept; longer ones are cut */

/* What the caller can do about an error. */
typedef enum eng_err_kind {
	ENG_ERR_BAD,  /* the input is wrong: as it is, it will fail again */
	ENG_ERR_BUSY, /* something is in use (another job's save directory): try again later */
	ENG_ERR_NOMEM, /* an allocation was refused (the system, memory.limit, the device):
			* a policy of less memory may fit */
	ENG_ERR_PEER, /* data parallel: another rank's try at the step failed, not this one's;
		       * the step is taken again on every rank, or given up on every rank */
} eng_err_kind;

typedef struct eng_err {
	char msg[ENG_ERR_LEN]; /* the last error, NUL-terminated; "" when none */
	eng_err_kind kind;     /* ENG_ERR_BAD unless the code that failed said otherwise */
} eng_err;

/* Formats a message into err (err may be NULL), marks it ENG_ERR_BAD and returns -1, so
 * callers write `return eng_errf(err, "bad %s", x);`. */
int eng_errf(eng_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same, marked ENG_ERR_NOMEM: an allocation was refused. */
int eng_err_nomem(eng_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "invalid <kind> '<path>': <problem>" (problem formatted from fmt), returns -1: the one
 * shape of message for a file whose contents are wrong. */
int eng_err_invalid(eng_err *err, const char *kind, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

struct json_error_t; /* jansson's */

/* What jansson said about a file's text that does not parse, without its bytes: "line L,
 * column C: KIND" (KIND from json_error_code: "invalid syntax", "premature end of input",
 * "duplicate object key", ...), into buf (n bytes); returns buf. jansson's own text quotes
 * the token at fault ("near 'notjson'"), which may be anything the file holds, so it is
 * never shown: every message about a file's JSON goes through here. */
const char *eng_err_json(const struct json_error_t *je, char *buf, size_t n);

/* A name a file holds (a tensor's, a key, a dtype) as a message may show it: itself when it
 * is 1..128 characters of [A-Za-z0-9._-] (every name a model file's format uses), else
 * "(a name not shown)", so that a message never carries other bytes of the file. */
const char *eng_err_plain(const char *name);
/* A path a file holds (adapter_config.json's base_model_name_or_path, and the paths made
 * from it) as a message may show it: itself when it is 1..200 characters of
 * [A-Za-z0-9._/+@=,-], else "(a path not shown)": a downloaded file's bytes never reach a
 * message, nor a terminal's escapes. */
const char *eng_err_path(const char *path);

/* Internal invariant: prints file:line and aborts. Never used on outside input. */
#define ENG_ASSERT(cond)                                                                   \
	do {                                                                                   \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "BUG: %s:%d: assertion '%s' failed\n", __FILE__, __LINE__,     \
				#cond);                                                                    \
			abort();                                                                       \
		}                                                                                  \
	} while (0)

#endif
