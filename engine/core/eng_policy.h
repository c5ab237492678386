/* eng_policy.h - sections, selectors and recompute modes (design.md §3).
 *
 * A policy gives each block h.0 .. h.{L-1} a mode (off, selective, full; offload, which only
 * the cuda backend accepts) and the head a mode (off, chunked). It is a small value type:
 * the training loop swaps a whole policy in between two steps. Selectors: "h.3", "h.0-5" (inclusive), "blocks", "head", "all", and
 * aliases a job spec defines ("embed" -> "h.0-1"). A selector that covers blocks and head
 * ("all") takes a mode for whichever part the mode is valid for: "all=off" sets both,
 * "all=full" sets the blocks, "all=chunked" sets the head.
 *
 * Nothing here allocates; errors name the bad selector or mode.
 */
#ifndef ENG_POLICY_H
#define ENG_POLICY_H

#include "eng_config.h"
#include "eng_err.h"
#include "proto.h"

/* The protocol's modes (proto.h holds the one table of their names), with their meaning. */
typedef enum eng_mode {
	ENG_MODE_OFF = PROTO_MODE_OFF,             /* keep every activation backward needs */
	ENG_MODE_SELECTIVE = PROTO_MODE_SELECTIVE, /* block: drop LayerNorm outputs and the
						    * GELU output */
	ENG_MODE_FULL = PROTO_MODE_FULL,           /* block: keep only the block input, rerun
						    * its forward in backward */
	ENG_MODE_CHUNKED = PROTO_MODE_CHUNKED,     /* head: never hold more than one chunk of
						    * logits */
	ENG_MODE_OFFLOAD = PROTO_MODE_OFFLOAD,     /* block, device cuda only: what `off`
						    * keeps goes to host memory in forward and
						    * comes back before the block's backward */
} eng_mode;

#define ENG_MAX_ALIASES 32  /* aliases one job may define */
#define ENG_ALIAS_LEN 48    /* longest alias name, with its NUL */
#define ENG_SELECTOR_LEN (PROTO_SELECTOR_MAX + 1) /* longest selector, with its NUL */

typedef struct eng_alias {
	char name[ENG_ALIAS_LEN];         /* "embed" */
	char selector[ENG_SELECTOR_LEN];  /* "h.0-1": a built-in selector, never another alias */
} eng_alias;

typedef struct eng_aliases {
	int n;                           /* entries used in a[] */
	eng_alias a[ENG_MAX_ALIASES];
} eng_aliases;

typedef struct eng_policy {
	int n_layer;                   /* L; block[] entries past it are unused */
	eng_mode block[ENG_MAX_LAYERS]; /* ENG_MODE_OFF, _SELECTIVE, _FULL or _OFFLOAD */
	eng_mode head;                 /* ENG_MODE_OFF or _CHUNKED */
} eng_policy;

/* "off", "selective", "full", "chunked", "offload". */
const char *eng_mode_name(eng_mode m);
/* Parses a mode name; -1 with a message listing the modes when unknown. */
int eng_mode_parse(const char *s, eng_mode *m, eng_err *err);

/* All blocks and the head off. */
void eng_policy_init(eng_policy *p, int n_layer);

/* " (did you mean 'X'?)" when word is within an edit or two of X, one of list (NULL-
 * terminated; proto_nearest), else "": into buf, returned. The one hint of unknown modes
 * and unknown sections. */
const char *eng_hint(const char *word, const char *const *list, char *buf, size_t len);

/* Adds an alias after checking its name (not a built-in selector, not "h.*", unique,
 * [A-Za-z0-9_-]+) and that its selector is a valid built-in one for n_layer blocks. */
int eng_aliases_add(eng_aliases *al, const char *name, const char *selector, int n_layer,
	eng_err *err);

/* The sections a selector names (an alias of al resolved; al may be NULL): blocks
 * *lo .. *hi (none when *lo > *hi), and the head when *head. 0, or -1 with a message. */
int eng_selector_sections(const eng_aliases *al, const char *selector, int n_layer, int *lo,
	int *hi, int *head, eng_err *err);
/* Sets the sections the selector names to mode. Checks the selector (range within the
 * model, alias known) and that the mode fits at least one part it names ("h.3=chunked" is
 * an error). On error *p is unchanged. al may be NULL. */
int eng_policy_apply(eng_policy *p, const eng_aliases *al, const char *selector,
	const char *mode, eng_err *err);

/* Parses a policy's text by the protocol's grammar (proto_policy_parse: items separated by
 * ',' as eng_policy_format writes them, ';' or blanks, each "SEL=MODE" or a bare "MODE",
 * same as all=MODE) and applies the items in order on top of *p: "full,head=chunked". On
 * error *p is unchanged. */
int eng_policy_parse(eng_policy *p, const eng_aliases *al, const char *text, eng_err *err);

/* Writes the one printed form of a policy, runs of equal blocks merged, items separated by
 * commas: "h.0-1=full,h.2-11=off,head=chunked" (what eng_policy_parse and rematctl's
 * "remat set" read back). Returns the length snprintf would have written. */
int eng_policy_format(const eng_policy *p, char *buf, size_t len);

/* Calls fn for each item of the printed form, in order: each run of equal blocks ("h.3",
 * "h.0-5") with its mode, then "head". */
typedef void (*eng_policy_item_fn)(void *ud, const char *selector, eng_mode mode);
void eng_policy_each(const eng_policy *p, eng_policy_item_fn fn, void *ud);

/* "h.3" for block i < n_layer, "head" for i == n_layer, into buf; returns buf. */
const char *eng_section_name(int i, int n_layer, char *buf, size_t len);

/* 1 when both give every section the same mode. */
int eng_policy_equal(const eng_policy *a, const eng_policy *b);

/* The first block in mode m, or -1 when none is. */
int eng_policy_find(const eng_policy *p, eng_mode m);

#endif
