/* eng_policy.c - selectors and recompute modes (see eng_policy.h). No allocation. */
#include "eng_policy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

const char *eng_mode_name(eng_mode m)
{
	return proto_mode_name((int)m);
}

const char *eng_hint(const char *word, const char *const *list, char *buf, size_t len)
{
	const char *near = proto_nearest(word, list);
	if (len > 0)
		buf[0] = '\0';
	if (near)
		snprintf(buf, len, " (did you mean '%.64s'?)", near);
	return buf;
}

int eng_mode_parse(const char *s, eng_mode *m, eng_err *err)
{
	const char *names[PROTO_MODE_COUNT + 1] = {NULL};
	int i = proto_mode_find(s);
	if (i >= 0) {
		*m = (eng_mode)i;
		return 0;
	}
	for (int k = 0; k < PROTO_MODE_COUNT; k++)
		names[k] = proto_mode_name(k);
	char hint[96], modes[160];
	return eng_errf(err, "unknown mode '%.32s'%s (modes: %s)", s,
		eng_hint(s, names, hint, sizeof hint), proto_modes_text(modes, sizeof modes));
}

const char *eng_section_name(int i, int n_layer, char *buf, size_t len)
{
	if (i < n_layer)
		snprintf(buf, len, "h.%d", i);
	else
		snprintf(buf, len, "head");
	return buf;
}

void eng_policy_init(eng_policy *p, int n_layer)
{
	memset(p, 0, sizeof *p);
	p->n_layer = n_layer;
	for (int i = 0; i < ENG_MAX_LAYERS; i++)
		p->block[i] = ENG_MODE_OFF;
	p->head = ENG_MODE_OFF;
}

/* What a built-in selector names: blocks lo..hi (none when lo > hi) and maybe the head. */
typedef struct sel_range {
	int lo, hi;
	int head;
} sel_range;

/* Parses a non-negative decimal layer index that fills s[0..n); -1 when not one. */
static int parse_index(const char *s, size_t n)
{
	if (n == 0 || n > 6)
		return -1;
	int v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* " (did you mean 'X'?)" for a section name sel that is none: X the nearest of the
 * built-in names, al's aliases (al may be NULL) and, for "h3", "h_3" or "layer.3", "h.3". */
static const char *section_hint(const char *sel, const eng_aliases *al, int n_layer,
	char *buf, size_t len)
{
	const char *names[ENG_MAX_ALIASES + 5] = {"all", "blocks", "head"};
	char block[24];
	int n = 3;
	for (int i = 0; al && i < al->n; i++)
		names[n++] = al->a[i].name;
	/* a block number after a prefix that is not "h.": what it would be as a section */
	const char *d = sel + strcspn(sel, "0123456789");
	int k = *d && d > sel ? parse_index(d, strlen(d)) : -1;
	if (k >= 0 && k < n_layer && strncmp(sel, "h.", 2) != 0 &&
		(tolower((unsigned char)sel[0]) == 'h' || tolower((unsigned char)sel[0]) == 'l')) {
		snprintf(block, sizeof block, "h.%d", k);
		return snprintf(buf, len, " (did you mean '%s'?)", block), buf;
	}
	return eng_hint(sel, names, buf, len);
}

static int parse_builtin(const char *sel, int n_layer, const eng_aliases *al, sel_range *r,
	eng_err *err)
{
	char hint[96];
	r->lo = 0;
	r->hi = -1;
	r->head = 0;
	if (strcmp(sel, "all") == 0) {
		r->hi = n_layer - 1;
		r->head = 1;
		return 0;
	}
	if (strcmp(sel, "blocks") == 0) {
		r->hi = n_layer - 1;
		return 0;
	}
	if (strcmp(sel, "head") == 0) {
		r->head = 1;
		return 0;
	}
	if (strncmp(sel, "h.", 2) != 0)
		return eng_errf(err, "unknown section '%.64s'%s (sections: h.N, h.N-M, blocks, head, "
				     "all, or an alias of the job)", sel,
			section_hint(sel, al, n_layer, hint, sizeof hint));
	const char *s = sel + 2;
	const char *dash = strchr(s, '-');
	int lo, hi;
	if (dash) {
		lo = parse_index(s, (size_t)(dash - s));
		hi = parse_index(dash + 1, strlen(dash + 1));
	} else {
		lo = hi = parse_index(s, strlen(s));
	}
	if (lo < 0 || hi < 0)
		return eng_errf(err, "malformed section '%.64s' (did you mean h.N or h.N-M, N a "
				     "block of h.0-%d?)", sel, n_layer - 1);
	if (lo > hi)
		return eng_errf(err, "empty section range '%.64s' (%d > %d)", sel, lo, hi);
	if (hi >= n_layer)
		return eng_errf(err, "unknown section '%.64s': the model has blocks h.0-%d", sel,
			n_layer - 1);
	r->lo = lo;
	r->hi = hi;
	return 0;
}

static int is_builtin_name(const char *name)
{
	return strcmp(name, "all") == 0 || strcmp(name, "blocks") == 0 ||
	       strcmp(name, "head") == 0 || strncmp(name, "h.", 2) == 0;
}

int eng_aliases_add(eng_aliases *al, const char *name, const char *selector, int n_layer,
	eng_err *err)
{
	size_t n = strlen(name);
	if (n == 0 || n >= ENG_ALIAS_LEN)
		return eng_errf(err, "alias name '%.64s' must have 1 to %d characters", name,
			ENG_ALIAS_LEN - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!isalnum(c) && c != '_' && c != '-')
			return eng_errf(err, "alias name '%.64s' may only use letters, digits, "
					     "'_' and '-'", name);
	}
	if (is_builtin_name(name))
		return eng_errf(err, "alias name '%.64s' is a built-in section name", name);
	for (int i = 0; i < al->n; i++)
		if (strcmp(al->a[i].name, name) == 0)
			return eng_errf(err, "alias '%.64s' defined twice", name);
	if (al->n >= ENG_MAX_ALIASES)
		return eng_errf(err, "too many aliases (at most %d)", ENG_MAX_ALIASES);
	if (strlen(selector) >= ENG_SELECTOR_LEN)
		return eng_errf(err, "alias '%s': selector too long", name);
	sel_range r;
	eng_err e2;
	if (parse_builtin(selector, n_layer, NULL, &r, &e2) < 0)
		return eng_errf(err, "alias '%s': %s", name, e2.msg);
	snprintf(al->a[al->n].name, ENG_ALIAS_LEN, "%s", name);
	snprintf(al->a[al->n].selector, ENG_SELECTOR_LEN, "%s", selector);
	al->n++;
	return 0;
}

int eng_selector_sections(const eng_aliases *al, const char *selector, int n_layer, int *lo,
	int *hi, int *head, eng_err *err)
{
	const char *sel = selector;
	for (int i = 0; al && i < al->n; i++) {
		if (strcmp(al->a[i].name, selector) == 0) {
			sel = al->a[i].selector;
			break;
		}
	}
	sel_range r;
	if (parse_builtin(sel, n_layer, al, &r, err) < 0)
		return -1;
	*lo = r.lo;
	*hi = r.hi;
	*head = r.head;
	return 0;
}

int eng_policy_apply(eng_policy *p, const eng_aliases *al, const char *selector,
	const char *mode, eng_err *err)
{
	sel_range r;
	if (eng_selector_sections(al, selector, p->n_layer, &r.lo, &r.hi, &r.head, err) < 0)
		return -1;
	eng_mode m = ENG_MODE_OFF;
	if (eng_mode_parse(mode, &m, err) < 0)
		return -1;
	int blocks = r.lo <= r.hi;
	/* which modes go where: the protocol's one rule */
	int block_ok = blocks && proto_mode_for_block((int)m);
	int head_ok = r.head && proto_mode_for_head((int)m);
	if (!block_ok && !head_ok) {
		char modes[96];
		int head = r.head && !blocks;
		return eng_errf(err, "mode '%s' does not apply to %s (%s)", mode,
			head ? "the head" : "blocks", proto_modes_of(head, modes, sizeof modes));
	}
	if (block_ok)
		for (int i = r.lo; i <= r.hi; i++)
			p->block[i] = m;
	if (head_ok)
		p->head = m;
	return 0;
}

/* What eng_policy_parse's items apply to, for policy_item. */
typedef struct policy_parse {
	eng_policy *p;          /* the policy being built (a copy of the caller's) */
	const eng_aliases *al;  /* the job's aliases, or NULL */
	eng_err *err;           /* the caller's: an item's error, as eng_policy_apply said it */
	int failed;             /* 1 once an item was refused (the error is in err) */
} policy_parse;

/* One SEL=MODE item of a policy's text (proto_policy_parse's fn), applied to u->p. */
static int policy_item(void *ud, const char *sel, const char *mode, char *desc,
	size_t desclen)
{
	policy_parse *u = ud;
	(void)desc;
	(void)desclen;
	if (eng_policy_apply(u->p, u->al, sel, mode, u->err) < 0) {
		u->failed = 1;
		return -1;
	}
	return 0;
}

int eng_policy_parse(eng_policy *p, const eng_aliases *al, const char *text, eng_err *err)
{
	eng_policy tmp = *p;
	char desc[PROTO_DESC_LEN];
	policy_parse u = {&tmp, al, err, 0};
	/* the protocol's one grammar (rematctl's SEL=MODE words read the same) */
	if (proto_policy_parse(text, policy_item, &u, desc, sizeof desc) < 0)
		return u.failed ? -1 : eng_errf(err, "%s", desc);
	*p = tmp;
	return 0;
}

void eng_policy_each(const eng_policy *p, eng_policy_item_fn fn, void *ud)
{
	char sel[32];
	for (int i = 0; i < p->n_layer;) {
		int j = i;
		while (j + 1 < p->n_layer && p->block[j + 1] == p->block[i])
			j++;
		if (i == j)
			snprintf(sel, sizeof sel, "h.%d", i);
		else
			snprintf(sel, sizeof sel, "h.%d-%d", i, j);
		fn(ud, sel, p->block[i]);
		i = j + 1;
	}
	fn(ud, "head", p->head);
}

/* What eng_policy_format's items write into. */
typedef struct fmt_buf {
	char *buf;
	size_t len, used;
	int total;      /* what snprintf would have written */
} fmt_buf;

static void fmt_item(void *ud, const char *sel, eng_mode m)
{
	fmt_buf *f = ud;
	int w = snprintf(f->buf + f->used, f->used < f->len ? f->len - f->used : 0, "%s%s=%s",
		f->total ? "," : "", sel, eng_mode_name(m));
	f->total += w;
	f->used = f->used + (size_t)w < f->len ? f->used + (size_t)w : f->len;
}

int eng_policy_format(const eng_policy *p, char *buf, size_t len)
{
	fmt_buf f = {buf, len, 0, 0};
	if (len > 0)
		buf[0] = '\0';
	eng_policy_each(p, fmt_item, &f);
	return f.total;
}

int eng_policy_equal(const eng_policy *a, const eng_policy *b)
{
	if (a->n_layer != b->n_layer || a->head != b->head)
		return 0;
	for (int i = 0; i < a->n_layer; i++)
		if (a->block[i] != b->block[i])
			return 0;
	return 1;
}

int eng_policy_find(const eng_policy *p, eng_mode m)
{
	for (int i = 0; i < p->n_layer; i++)
		if (p->block[i] == m)
			return i;
	return -1;
}
