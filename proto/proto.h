/* proto.h - the control protocol of remat (design.md §2): framing, requests, replies, events,
 * error classes, and strict validation of every command's arguments.
 *
 * Newline-delimited JSON, one compact object per line, UTF-8, a trailing '\r' tolerated,
 * shaped like QEMU's QMP. Shared by the daemon (rematd), the worker (remat-train's control
 * thread) and the client (rematctl). No I/O and no libuv here, so it can be fuzzed: callers
 * feed bytes in and get lines and JSON out. docs/protocol.md is the full reference.
 *
 * Ownership: json_t pointers returned by parsers are new references the caller releases
 * with json_decref; builders take borrowed references and return a malloc'd, NUL-terminated
 * line ending in '\n' that the caller frees.
 */
#ifndef PROTO_H
#define PROTO_H

#include <jansson.h>
#include <stddef.h>

#define PROTO_VERSION "0.1.0"
#define PROTO_PROTOCOL 1

/* Limits (design.md §2), shared by every peer. */
#define PROTO_MAX_LINE (1u << 20)      /* longest line accepted, newline excluded */
#define PROTO_MAX_INFLIGHT 8           /* requests awaiting a reply per connection */
#define PROTO_MAX_OUTQ (8u << 20)      /* bytes queued for one connection before it is dropped */
#define PROTO_MAX_CONNECTIONS 64       /* clients served at once by one daemon or worker */
#define PROTO_DESC_LEN 512             /* longest error description kept */
#define PROTO_MAX_DEPTH 32             /* deepest JSON nesting accepted in a request */

typedef enum proto_errclass {
	PROTO_ERR_PARSE_ERROR,
	PROTO_ERR_INVALID_REQUEST,
	PROTO_ERR_COMMAND_NOT_FOUND,
	PROTO_ERR_INVALID_PARAMETER,
	PROTO_ERR_JOB_NOT_FOUND,
	PROTO_ERR_INVALID_STATE,
	PROTO_ERR_BUSY,
	PROTO_ERR_IO_ERROR,
	PROTO_ERR_PERMISSION_DENIED,
	PROTO_ERR_MESSAGE_TOO_LARGE,
	PROTO_ERR_INTERNAL,
} proto_errclass;

/* "ParseError", "InvalidRequest", ... as on the wire. */
const char *proto_errclass_name(proto_errclass c);

/* ---- framing ---- */

typedef struct proto_framer {
	char *buf;    /* the line being assembled (malloc'd, at most PROTO_MAX_LINE + 1 bytes) */
	size_t len;   /* bytes in buf */
	size_t cap;   /* allocated */
	int state;    /* 0 assembling a line; 1 buf holds input kept after a callback stopped;
	               * -1 failed (a line too long, or out of memory): every feed returns -1 */
} proto_framer;

/* Called once per complete line: line[0..len) without the '\n' and without a trailing
 * '\r'; NUL-terminated for convenience (line[len] == 0). Return 0 to go on, non-zero to
 * stop feeding (the rest of the input is kept for the next call). */
typedef int (*proto_line_cb)(const char *line, size_t len, void *ud);

void proto_framer_init(proto_framer *f);
void proto_framer_free(proto_framer *f);
/* Splits data into lines, any number per call, partial lines kept across calls. Returns
 * 0; 1 when a callback asked to stop; -1 when a line grows past PROTO_MAX_LINE (the caller
 * replies MessageTooLarge and closes the connection; the framer is then unusable), or when
 * memory runs out. Empty lines (after dropping the '\r') are skipped.
 * A line is refused as soon as it is longer than the limit, so a peer that never sends '\n'
 * costs at most PROTO_MAX_LINE + 1 bytes. After a 1, the lines kept are delivered first by
 * the next call; call with n = 0 (data may be NULL) to deliver them without new input. The
 * kept input is the rest of that one call's data, so the buffer can outgrow the limit by
 * it until the kept lines are delivered. */
int proto_framer_feed(proto_framer *f, const char *data, size_t n, proto_line_cb cb, void *ud);

/* ---- requests ---- */

typedef struct proto_request {
	char execute[64]; /* command name */
	json_t *args;     /* the arguments object (an empty object when absent); new ref */
	json_t *id;       /* any JSON value, or NULL when absent; new ref */
} proto_request;

/* Parses one request line: an object with "execute" (string), optional "arguments"
 * (object) and optional "id" (any value), nothing else. On failure returns -1 with the
 * class (ParseError when the line is not JSON, InvalidRequest for a bad shape) and a
 * description; req->id is still set when the line was an object carrying an id, so the
 * error reply can echo it. Always release with proto_request_free. */
int proto_request_parse(const char *line, size_t len, proto_request *req, proto_errclass *ec,
	char *desc, size_t desclen);
void proto_request_free(proto_request *req);

/* ---- commands ---- */

typedef enum proto_scope {
	PROTO_SCOPE_DAEMON, /* answered by rematd itself */
	PROTO_SCOPE_JOB,    /* carries "job"; rematd forwards it to that job's worker */
	PROTO_SCOPE_CONN,   /* subscribe / unsubscribe: state of the connection */
} proto_scope;

/* Every command, by id: servers keep their handlers in tables indexed by it. */
typedef enum proto_cmd_id {
	PROTO_CMD_DAEMON_INFO,
	PROTO_CMD_DAEMON_SHUTDOWN,
	PROTO_CMD_JOB_START,
	PROTO_CMD_JOB_LIST,
	PROTO_CMD_JOB_STATUS,
	PROTO_CMD_JOB_PAUSE,
	PROTO_CMD_JOB_RESUME,
	PROTO_CMD_JOB_STOP,
	PROTO_CMD_REMAT_GET,
	PROTO_CMD_REMAT_SET,
	PROTO_CMD_REMAT_PLAN,
	PROTO_CMD_MEM_STATS,
	PROTO_CMD_MEM_RESET_PEAK,
	PROTO_CMD_CKPT_SAVE,
	PROTO_CMD_JOB_REMOVE,
	PROTO_CMD_REMAT_COSTS,
	PROTO_CMD_REMAT_PROFILE,
	PROTO_CMD_REMAT_AUTO,
	PROTO_CMD_REMAT_MEMLOG,
	PROTO_CMD_JOB_EVAL,
	PROTO_CMD_JOB_SET,
	PROTO_CMD_JOB_METRICS,
	PROTO_CMD_JOB_KILL,
	PROTO_CMD_SUBSCRIBE,
	PROTO_CMD_UNSUBSCRIBE,
	PROTO_CMD_COUNT
} proto_cmd_id;

typedef struct proto_command {
	const char *name;   /* "remat-set" */
	proto_cmd_id id;
	proto_scope scope;
	int deferred;       /* 1 when the reply waits for the step boundary (job-stop, ckpt-save) */
	int query;          /* 1 when it only looks: anyone who may connect may send it about
			     * any job, and it is not logged (job-status, remat-get, ...) */
	const struct proto_schema *schema; /* its arguments (proto_cmd.c) */
} proto_command;

/* The command called name, or NULL (CommandNotFound). */
const proto_command *proto_command_find(const char *name);
/* All commands, NULL-name terminated, in id order: proto_commands()[id].id == id. */
const proto_command *proto_commands(void);
/* Argument i (from 0) of cmd's schema: its name, *optional 1 when it may be left out (a
 * job's id, which a worker spoken to directly does without, is not); NULL past the last. */
const char *proto_command_arg(const proto_command *cmd, int i, int *optional);

/* Checks args strictly against the command's schema (docs/protocol.md): required keys,
 * types, ranges, enumerations, and no unknown key. Returns 0, or -1 with class
 * InvalidParameter and a description naming the argument. */
int proto_args_validate(const proto_command *cmd, const json_t *args, char *desc,
	size_t desclen);
/* The same; with job_optional non-zero, "job" may be absent (a worker spoken to directly
 * accepts its own id or none; whether a given id is its own is the worker's check). A
 * "job" that is present is checked either way. proto_args_validate is job_optional 0. */
int proto_args_validate_ex(const proto_command *cmd, const json_t *args, int job_optional,
	char *desc, size_t desclen);

/* ---- events ---- */

/* The events of docs/protocol.md; a subscription's bit for event e is 1u << e. */
typedef enum proto_event {
	PROTO_EV_STEP,              /* a step ended: its figures */
	PROTO_EV_REMAT_APPLIED,     /* a policy took effect */
	PROTO_EV_CHECKPOINT_SAVED,  /* a checkpoint was written */
	PROTO_EV_JOB_STATE_CHANGED, /* a job's state changed */
	PROTO_EV_MEMORY,            /* the periodic memory summary */
	PROTO_EV_CHECKPOINT_FAILED, /* a save failed; the run goes on */
	PROTO_EV_REMAT_AUTO,        /* the memory controller changed the policy */
	PROTO_EV_EVAL,              /* a validation loss was computed */
	PROTO_EV_HPARAMS_APPLIED,   /* a job-set took effect */
	PROTO_EV_SAMPLE,            /* text sampled from the model */
	PROTO_EV_REMAT_FAILED,      /* a policy asked for could not be applied: why, and the
				     * policy the step ran under instead */
	PROTO_EV_TOKENIZE,          /* a starting job's text data: hashed, tokenized so far,
				     * done (or found in the cache) */
	PROTO_EV_POOL_CHANGED,      /* rematd --memory told a job its share of the pool */
	PROTO_EV_COUNT
} proto_event;

/* "STEP", "REMAT_APPLIED", ... as on the wire. */
const char *proto_event_name(proto_event e);
/* The event called name, or -1. */
int proto_event_find(const char *name);
/* 1 when name is an event's name. */
int proto_event_known(const char *name);

/* ---- live hyperparameters (job-set) ---- */

/* What job-set may change, at a step boundary: the one table the worker, the client's help
 * and docs/protocol.md follow. */
typedef enum proto_hparam {
	PROTO_HP_LR,           /* number > 0: constant from the step on, or with schedule the
				* new schedule's peak */
	PROTO_HP_SCHEDULE,     /* "cosine" or "constant": a new schedule from the step on */
	PROTO_HP_WARMUP,       /* integer >= 0: the new schedule's warm-up (with schedule) */
	PROTO_HP_MIN_LR_FRAC,  /* number in [0, 1]: the new cosine's floor (with schedule) */
	PROTO_HP_GRAD_CLIP,    /* number >= 0, 0 = off */
	PROTO_HP_WEIGHT_DECAY, /* number >= 0 */
	PROTO_HP_EVAL_EVERY,   /* integer >= 0, 0 = only at the end */
	PROTO_HP_SAVE_EVERY,   /* integer >= 0, 0 = only at the end */
	PROTO_HP_COUNT
} proto_hparam;

#define PROTO_LR_MAX 10.0 /* the most lr may be, in job-set and a spec's optim.lr: a larger
			   * learning rate is a typo, not a choice */

/* job-set's "priority" is no hyperparameter: rematd takes it (given alone), the weight of
 * the job in its memory pool, as a spec's "priority" is: an integer 1..PROTO_PRIORITY_MAX. */
#define PROTO_PRIORITY "priority"
#define PROTO_PRIORITY_MAX 1000

/* "lr", "schedule", ..., "eval.every", "save.every" */
const char *proto_hparam_name(proto_hparam h);
/* The hyperparameter called name, or -1. */
int proto_hparam_find(const char *name);
/* Checks one value for h: 0, or -1 with a description naming it. */
int proto_hparam_check(proto_hparam h, const json_t *v, char *desc, size_t desclen);

#define PROTO_METRICS_MAX_LINES 20000 /* job-metrics: lines one reply carries at most */
#define PROTO_METRICS_MAX_BYTES (PROTO_MAX_LINE - 8192) /* and bytes of them: the reply
						* is one line */

/* ---- recompute modes (design.md §3) ---- */

/* The modes, in the engine's eng_mode order (engine/eng_policy.h asserts it). */
typedef enum proto_mode {
	PROTO_MODE_OFF,
	PROTO_MODE_SELECTIVE,
	PROTO_MODE_FULL,
	PROTO_MODE_CHUNKED,  /* the head's only */
	PROTO_MODE_OFFLOAD,  /* blocks, device cuda */
	PROTO_MODE_COUNT
} proto_mode;

/* "off", "selective", ...; "unknown" out of range. */
const char *proto_mode_name(int m);
/* The mode called name, or -1. */
int proto_mode_find(const char *name);
/* 1 when mode m applies to a block (off, selective, full, offload) / to the head (off,
 * chunked). */
int proto_mode_for_block(int m);
int proto_mode_for_head(int m);
/* From the same table, for help texts and errors: the block modes ("off, selective, full,
 * offload") or the head's ("off, chunked") into buf; returns buf. */
const char *proto_modes_of(int head, char *buf, size_t len);
/* "off, selective, full, offload (blocks); off, chunked (head)" into buf; returns buf. */
const char *proto_modes_text(char *buf, size_t len);

/* remat-profile: each round runs every section once in each of its modes (3 steps) */
#define PROTO_PROFILE_ROUNDS 4      /* rounds when not given: 4 samples a cell */
/* steps each pattern of modes runs: the first after a change is no sample (its buffers
 * are new), the next is */
#define PROTO_PROFILE_HOLD 2
#define PROTO_PROFILE_STEPS(rounds) (3 * PROTO_PROFILE_HOLD * (rounds))
#define PROTO_PROFILE_MAX_ROUNDS 16

/* remat-memlog: the worker keeps the last PROTO_MEMLOG_STEPS steps' peaks */
#define PROTO_MEMLOG_STEPS 256
#define PROTO_MEMLOG_DEFAULT 16 /* steps returned when not given */

/* Longest section selector ("h.0-5", an alias), in bytes: the protocol's limit, and the
 * engine's (ENG_SELECTOR_LEN is it with the NUL). */
#define PROTO_SELECTOR_MAX 63

/* The entry of list (NULL-terminated) nearest to word when it is near enough to be what
 * was meant (an edit distance of at most 1, or 2 for longer words, or a prefix of at
 * least 3 letters): "ful" gives "full". NULL otherwise. For "did you mean" hints. */
const char *proto_nearest(const char *word, const char *const *list);
/* ' (did you mean 'full'?)' into buf for word against the modes, or "" when none is
 * near; returns buf. */
const char *proto_mode_hint(const char *word, char *buf, size_t len);

/* ---- jobs (proto_job.c) ---- */

/* The states of a job (docs/protocol.md), one table for rematd and the worker: a worker
 * goes starting .. failed; queued and interrupted (alive when the rematd that ran it ended)
 * are rematd's alone. */
typedef enum proto_job_state {
	PROTO_JOB_QUEUED,      /* waiting for a free worker slot */
	PROTO_JOB_STARTING,    /* worker spawned, loading its model and data */
	PROTO_JOB_RUNNING,
	PROTO_JOB_PAUSED,
	PROTO_JOB_STOPPING,
	PROTO_JOB_FINISHED,    /* reached its steps */
	PROTO_JOB_STOPPED,     /* job-stop, or shut down with the daemon */
	PROTO_JOB_FAILED,      /* spawn failed, the worker crashed, or it reported a failure */
	PROTO_JOB_INTERRUPTED, /* alive when the rematd that ran it ended */
	PROTO_JOB_NSTATES
} proto_job_state;

/* "queued", "starting", ... as on the wire; "unknown" out of range. */
const char *proto_job_state_name(int s);
/* The state called name (may be NULL), or -1. */
int proto_job_state_find(const char *name);
/* 1 for finished, stopped, failed, interrupted: no worker, none to come unless resumed. */
int proto_job_state_final(int s);

/* What changed a job's policy, as REMAT_APPLIED's and REMAT_FAILED's `cause` says: one
 * table for the worker and the clients. */
typedef enum proto_cause {
	PROTO_CAUSE_START,      /* the run's first step: the spec's policy, or a resume's */
	PROTO_CAUSE_SET,        /* a remat-set request (its `change` number) */
	PROTO_CAUSE_SCHEDULE,   /* a --remat-schedule entry */
	PROTO_CAUSE_CONTROLLER, /* the memory controller (its REMAT_AUTO says why) */
	PROTO_CAUSE_PROFILE,    /* remat-profile's patterns, and its return to the policy */
	PROTO_CAUSE_OOM,        /* an allocation refused: a smaller policy instead */
	PROTO_CAUSE_N
} proto_cause;

/* "start", "remat-set", ... as on the wire; "unknown" out of range. */
const char *proto_cause_name(int c);

/* Every key of a job-status reply, NULL-terminated: whoever answers (a worker, or rematd
 * from its record) gives each of them in every state, null where it has no value
 * (docs/protocol.md's table says which); rematd's stale answer adds `stale`. */
extern const char *const proto_status_keys[];
/* The keys of proto_status_keys that ret lacks, set to null. */
void proto_status_complete(json_t *ret);

/* The keys of a job spec that name files, as {section, key}: rematd refuses relative ones
 * (the worker runs in the job's directory), rematctl makes them absolute first. */
#define PROTO_SPEC_PATHS 7
extern const char *const proto_spec_paths[PROTO_SPEC_PATHS][2];

/* A policy as text, the one grammar of remat-train's --remat-schedule and the spec's
 * remat.policy (eng_policy_parse) and of rematctl's SEL=MODE words (cli_sections_parse):
 * items separated by ',' (as policies are printed), ';' or blanks (space, tab), each
 * SEL=MODE or a bare MODE (all=MODE); empty items between separators are skipped. */
#define PROTO_POLICY_TEXT_MAX 1023 /* longest policy text read, in bytes */

/* Called for each item in order with its selector ("all" for a bare mode) and its mode,
 * both non-empty and NUL-terminated. 0 to go on, or -1 to stop (with desc, or with the
 * caller's own error in ud). */
typedef int (*proto_policy_item_fn)(void *ud, const char *sel, const char *mode, char *desc,
	size_t desclen);
/* Reads text by the grammar above, calling fn for each item; what selectors and modes mean
 * is fn's to check. 0, or -1 with desc: text longer than PROTO_POLICY_TEXT_MAX, no item, an
 * item with nothing before or after its '=' or a second '=', or fn's -1. Items before a bad
 * one have been passed to fn. */
int proto_policy_parse(const char *text, proto_policy_item_fn fn, void *ud, char *desc,
	size_t desclen);

/* ---- sizes and numbers as people write them ---- */

/* A plain decimal number at the start of s ("12", "1.5", ".5", "1e9"): no sign, hex, inf or
 * nan. Returns the characters used (0: none) and *v. */
size_t proto_number_scan(const char *s, double *v);
/* A size: a decimal number (fraction and exponent allowed: "1.5", "1e9") and an optional
 * unit, case-insensitive, a space allowed before it: B; K, M, G, T and KiB, MiB, GiB, TiB
 * are powers of 1024; KB, MB, GB, TB powers of 1000 ("2GiB", "512M", "64 KB"). Rounds to
 * whole bytes. 0, or -1 for anything else (negative, hex, inf, an unknown unit, > 2^63). */
int proto_size_parse(const char *text, long long *bytes);

/* ---- numbers as remat prints them: the shortest text that reads back ---- */

#define PROTO_NUM_LEN 32 /* room for any proto_real_text / proto_f32_text result */

/* The shortest "%.Ng" text (N = 1..17) that strtod reads back to v's very bits: 3e-4 is
 * "0.0003", not "0.00029999999999999997"; an integral value shown whole as %.17g would
 * ("10", not "1e+01"). "nan"/"inf" as printf writes them. Returns buf. */
char *proto_real_text(double v, char *buf, size_t len);
/* The same for a float32: the shortest text (N = 1..9) that strtof, and strtod then a cast
 * to float (how a JSON reader of the engine reads it), both read back to v's bits: 0.9f is
 * "0.9", not "0.89999997615814209". Returns buf. */
char *proto_f32_text(float v, char *buf, size_t len);
/* The double of v's shortest text (strtod(proto_f32_text(v))): what to put in JSON for a
 * float32 value, so that it is written as the float's short decimal and read back to the
 * float's bits. */
double proto_f32_double(float v);
/* Rewrites every real number of JSON text (outside strings; integers are left alone) as
 * its proto_real_text, keeping it a real ("1.0", not "1"): jansson writes reals with %.17g.
 * A new NUL-terminated buffer from malloc, or NULL when out of memory. */
char *proto_json_shorten(const char *text, size_t len);
/* What trains, as PEFT's print_trainable_parameters() says it: "trainable params: 4,096 ||
 * all params: 125,248 || trainable%: 3.2704". Returns buf. */
char *proto_params_text(long long trainable, long long all, char *buf, size_t len);
/* json_dumps(j, flags) with every real in its shortest text (proto_json_shorten), in a
 * buffer from malloc (free it with free()); NULL when it cannot be dumped. */
char *proto_json_dumps(const json_t *j, size_t flags);

/* ---- building lines ---- */

/* {"remat":{"version":..,"protocol":1,"capabilities":["events"],"role":role[,"job":job]}} */
char *proto_greeting(const char *role, const char *job);
/* {"execute":name,"arguments":args,"id":id}; args and id may be NULL (omitted) */
char *proto_request_line(const char *name, const json_t *args, const json_t *id);
/* {"return":ret,"id":id}; ret NULL means {}; id NULL omits it */
char *proto_reply_line(const json_t *ret, const json_t *id);
/* {"error":{"class":..,"desc":..},"id":id}; id NULL omits it */
char *proto_error_line(proto_errclass c, const char *desc, const json_t *id);
/* {"event":name,"data":data,"timestamp":{"seconds":s,"microseconds":us}} with the current
 * wall-clock time */
char *proto_event_line(const char *name, const json_t *data);

/* ---- reading lines (client side, and the daemon reading its workers) ---- */

typedef enum proto_kind {
	PROTO_KIND_GREETING,
	PROTO_KIND_RETURN,
	PROTO_KIND_ERROR,
	PROTO_KIND_EVENT,
} proto_kind;

/* Parses a line a server sent. Returns 0 with *obj (new ref) and *kind, or -1 with desc when
 * it is none of the four shapes. */
int proto_message_parse(const char *line, size_t len, json_t **obj, proto_kind *kind,
	char *desc, size_t desclen);

#endif
