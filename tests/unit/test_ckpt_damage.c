/* test_ckpt_damage.c - the checkpoint tests of damaged, found, round-tripped, refused and
 * pruned checkpoints (the rest of suite "ckpt"; see test_ckpt.c for what the suite covers). */
#include "tests.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eng_train_ckpt.h"
#include "eng_hfconfig.h"
#include "eng_sha256.h"
#include "eng_st.h"
#include "t_daemon.h"
#include "t_ckpt.h"
#include "t_util.h"

/* Debian's copy of the GPL, 35 kB of English: a byte-level corpus every Debian system has. */

static size_t st_hlen(const char *buf)
{
	uint64_t h = 0;
	for (int i = 0; i < 8; i++)
		h |= (uint64_t)(unsigned char)buf[i] << (8 * i);
	return (size_t)h;
}

typedef void (*header_edit)(json_t *header);

/* Rewrites the JSON header of the safetensors file at path with edit (the data section
 * unchanged; the header re-padded with spaces to a multiple of 8, as the writer does). */
static void edit_header(const char *path, header_edit edit)
{
	size_t len;
	char *buf = t_read_file(path, &len);
	size_t hlen = st_hlen(buf);
	ck_assert(hlen + 8 <= len);
	json_t *h = json_loadb(buf + 8, hlen, 0, NULL);
	ck_assert_ptr_nonnull(h);
	edit(h);
	char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	size_t n = strlen(text), padded = (n + 7) / 8 * 8;
	size_t out_len = 8 + padded + (len - 8 - hlen);
	char *out = malloc(out_len);
	ck_assert_ptr_nonnull(out);
	for (int i = 0; i < 8; i++)
		out[i] = (char)((uint64_t)padded >> (8 * i));
	memcpy(out + 8, text, n);
	memset(out + 8 + n, ' ', padded - n);
	memcpy(out + 8 + padded, buf + 8 + hlen, len - 8 - hlen);
	t_write_file(path, out, out_len);
	free(out);
	free(text);
	json_decref(h);
	free(buf);
}

/* Sets entry[key] of tensor name in a header. */
static void set_entry(json_t *h, const char *name, const char *key, json_t *value)
{
	json_t *t = json_object_get(h, name);
	ck_assert_msg(t != NULL, "no tensor '%s' in the header", name);
	json_object_set_new(t, key, value);
}

static void edit_overlap(json_t *h)
{
	/* wpe starts right after wte; 4 bytes earlier, it overlaps wte's last float */
	json_t *o = json_object_get(json_object_get(h, "transformer.wpe.weight"), "data_offsets");
	json_int_t b = json_integer_value(json_array_get(o, 0));
	json_int_t e = json_integer_value(json_array_get(o, 1));
	set_entry(h, "transformer.wpe.weight", "data_offsets", json_pack("[I,I]", b - 4, e - 4));
}

static void edit_dtype_i32(json_t *h)
{
	set_entry(h, "transformer.h.0.ln_1.weight", "dtype", json_string("I32"));
}

static void edit_dtype_f16(json_t *h)
{
	set_entry(h, "exp_avg.transformer.ln_f.bias", "dtype", json_string("F16"));
}

/* Shapes with the right number of elements but the wrong layout for config.json. */
static void edit_shape_wte(json_t *h)
{
	set_entry(h, "transformer.wte.weight", "shape", json_pack("[i,i]", 64, 256));
}

static void edit_shape_fc(json_t *h)
{
	set_entry(h, "transformer.h.1.mlp.c_fc.weight", "shape", json_pack("[i,i]", 256, 64));
}

static void edit_shape_moment(json_t *h)
{
	set_entry(h, "exp_avg_sq.transformer.h.0.attn.c_attn.weight", "shape",
		json_pack("[i,i]", 192, 64));
}

/* One kind of damage, done to file of a copy of a good checkpoint. */
typedef struct damage {
	const char *what;
	const char *file;     /* the file damaged, which the message must name */
	int op;               /* what is done to it (enum below) */
	header_edit edit;     /* DMG_HEADER */
	const char *needle;   /* in the message with the recorded checksums */
	const char *needle2;  /* with the checksums recomputed; NULL: then it verifies */
} damage;

enum { DMG_TRUNCATE, DMG_FLIP_DATA, DMG_FLIP_HEADER, DMG_HLEN, DMG_HEADER, DMG_NEMBD,
	DMG_REMOVE, DMG_TEXT, DMG_FORMAT, DMG_SUM, DMG_LINK };

#define SUM_MSG "does not match its SHA-256"
static const damage damages[] = {
	{"truncated model", "model.safetensors", DMG_TRUNCATE, NULL, "trainer_state.json says",
		"past the end"},
	/* a flipped data byte is a valid file: only the checksum can tell */
	{"flipped data byte", "optimizer.safetensors", DMG_FLIP_DATA, NULL, SUM_MSG, NULL},
	{"flipped header byte", "model.safetensors", DMG_FLIP_HEADER, NULL, SUM_MSG,
		"not valid JSON"},
	{"header length past the end", "model.safetensors", DMG_HLEN, NULL, SUM_MSG,
		"past the end of the file"},
	{"overlapping offsets", "model.safetensors", DMG_HEADER, edit_overlap, SUM_MSG,
		"overlap"},
	{"unknown dtype", "model.safetensors", DMG_HEADER, edit_dtype_i32, SUM_MSG,
		"unsupported dtype 'I32'"},
	{"wrong dtype", "optimizer.safetensors", DMG_HEADER, edit_dtype_f16, SUM_MSG,
		"F16 needs"},
	{"n_embd changed in config.json", "config.json", DMG_NEMBD, NULL, SUM_MSG,
		"does not match config.json"},
	{"wte's shape transposed", "model.safetensors", DMG_HEADER, edit_shape_wte, SUM_MSG,
		"transformer.wte.weight"},
	{"c_fc's shape transposed", "model.safetensors", DMG_HEADER, edit_shape_fc, SUM_MSG,
		"transformer.h.1.mlp.c_fc.weight"},
	{"a moment's shape transposed", "optimizer.safetensors", DMG_HEADER, edit_shape_moment,
		SUM_MSG, "exp_avg_sq.transformer.h.0.attn.c_attn.weight"},
	{"missing optimizer", "optimizer.safetensors", DMG_REMOVE, NULL, "is missing", NULL},
	{"missing config", "config.json", DMG_REMOVE, NULL, "is missing", NULL},
	{"missing state", "trainer_state.json", DMG_REMOVE, NULL, "trainer_state.json", NULL},
	{"state not JSON", "trainer_state.json", DMG_TEXT, NULL, "trainer_state.json", NULL},
	{"state of format 2", "trainer_state.json", DMG_FORMAT, NULL, "format-1", NULL},
	{"wrong checksum in the state", "model.safetensors", DMG_SUM, NULL, SUM_MSG, NULL},
	/* the same bytes behind a symlink: verify opens the checkpoint's own files only */
	{"model behind a symlink", "model.safetensors", DMG_LINK, NULL, "symbolic link", NULL},
};
#define NDAMAGES (sizeof damages / sizeof damages[0])

static void damage_do(const char *ckpt, const damage *d)
{
	/* a wrong checksum names the file it is of, and is written into the state */
	char *p = path_join(ckpt, d->op == DMG_SUM ? "trainer_state.json" : d->file);
	size_t len;
	char *buf = d->op == DMG_REMOVE ? NULL : t_read_file(p, &len);
	switch (d->op) {
	case DMG_TRUNCATE:
		t_write_file(p, buf, len / 2);
		break;
	case DMG_FLIP_DATA:
		buf[len - 3] ^= 0x10; /* a float's exponent bits, near the end */
		t_write_file(p, buf, len);
		break;
	case DMG_FLIP_HEADER:
		buf[8] = '}'; /* the header's opening brace */
		t_write_file(p, buf, len);
		break;
	case DMG_HLEN:
		for (int i = 0; i < 8; i++) /* 8 + hlen = len + 8: the header ends past the file */
			buf[i] = (char)((uint64_t)len >> (8 * i));
		t_write_file(p, buf, len);
		break;
	case DMG_HEADER:
		edit_header(p, d->edit);
		break;
	case DMG_NEMBD: {
		char *at = strstr(buf, "\"n_embd\": 64");
		ck_assert_msg(at != NULL, "config.json has no \"n_embd\": 64:\n%s", buf);
		memcpy(at + strlen("\"n_embd\": "), "32", 2); /* n_head 4 still divides 32 */
		t_write_file(p, buf, len);
		break;
	}
	case DMG_REMOVE:
		ck_assert_int_eq(unlink(p), 0);
		break;
	case DMG_LINK: {
		char *copy = path_join(ckpt, "copy.bin");
		t_write_file(copy, buf, len);
		ck_assert_int_eq(unlink(p), 0);
		ck_assert_int_eq(symlink("copy.bin", p), 0);
		free(copy);
		break;
	}
	case DMG_TEXT:
		write_text(p, "{\"format_version\": 1, \"step\": ");
		break;
	case DMG_FORMAT:
	case DMG_SUM: {
		json_t *o = json_loadb(buf, len, 0, NULL);
		ck_assert_ptr_nonnull(o);
		if (d->op == DMG_FORMAT)
			json_object_set_new(o, "format_version", json_integer(2));
		else
			json_object_set_new(json_object_get(json_object_get(o, "files"), d->file),
				"sha256", json_string("0123456789abcdef0123456789abcdef"
						      "0123456789abcdef0123456789abcdef"));
		ck_assert_int_eq(json_dump_file(o, p, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
		json_decref(o);
		break;
	}
	}
	free(buf);
	free(p);
}

/* Records in trainer_state.json the size and SHA-256 the files have now. */
static void recompute_sums(const char *ckpt)
{
	char *sp = path_join(ckpt, "trainer_state.json");
	json_t *o = json_load_file(sp, 0, NULL);
	ck_assert_ptr_nonnull(o);
	json_t *files = json_object_get(o, "files");
	for (size_t i = 0; i < NFILES - 1; i++) {
		char *p = path_join(ckpt, ckpt_files[i]), hex[65];
		struct stat st;
		eng_err err;
		ck_assert_int_eq(stat(p, &st), 0);
		ck_assert_msg(eng_sha256_file(p, hex, &err) == 0, "%s", err.msg);
		json_object_set_new(files, ckpt_files[i], json_pack("{s:s,s:I}", "sha256", hex,
			"bytes", (json_int_t)st.st_size));
		free(p);
	}
	ck_assert_int_eq(json_dump_file(o, sp, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
	json_decref(o);
	free(sp);
}

/* remat-train init_from ckpt with resume: exit 1 (not a signal), one line on stderr that
 * names the file (NULL: it must train instead). */
static void expect_train_refuses(const char *root, const char *ckpt, const char *what,
	const char *file, const char *needle)
{
	char *model = resume_from(ckpt);
	char *job = job_file(root, "damaged.json", model, 2, 1, ""); /* one step, if any */
	const char *args[] = {job, NULL};
	char *err;
	int rc = t_train_run(&err, 1, args);
	if (!file) {
		ck_assert_msg(rc == 0, "%s: remat-train refused it (%d): %s", what, rc, err);
	} else {
		ck_assert_msg(rc == 1, "%s: remat-train exit status %d, want 1:\n%s", what, rc,
			err);
		ck_assert_msg(strncmp(err, "remat-train: ", 13) == 0 && strchr(err, '\n') ==
			err + strlen(err) - 1, "%s: want one line on stderr, got:\n%s", what, err);
		ck_assert_msg(strstr(err, file) && strstr(err, needle), "%s: remat-train's message "
			"lacks '%s' or '%s': %s", what, file, needle, err);
	}
	free(err);
	free(job);
	free(model);
}

START_TEST(test_ckpt_verify_damaged)
{
	need_gpl();
	char *root = t_tmp_dir("damage");
	char *good = good_checkpoint(root, 1, 1000);
	ck_assert_int_eq(eng_ckpt_verify(good, NULL), 0);
	int n = 0;
	for (size_t i = 0; i < NDAMAGES; i++) {
		const damage *d = &damages[i];
		for (int resum = 0; resum < 2; resum++) {
			if (resum && d->op >= DMG_REMOVE)
				continue; /* damage to trainer_state.json, or a missing file */
			char what[128], name[64];
			snprintf(what, sizeof what, "%s%s", d->what,
				resum ? " (sums recomputed)" : "");
			/* each copy alone in its save dir: no other checkpoint to offer */
			snprintf(name, sizeof name, "d%02d%d", (int)i, resum);
			char *dir = t_tmp_dir(name), *ckpt = path_join(dir, "step_00000001");
			copy_dir(good, ckpt);
			damage_do(ckpt, d);
			if (resum)
				recompute_sums(ckpt);
			const char *needle = resum ? d->needle2 : d->needle;
			eng_err err = {0};
			int rc = eng_ckpt_verify(ckpt, &err);
			if (!needle) {
				ck_assert_msg(rc == 0, "%s: refused: %s", what, err.msg);
				expect_train_refuses(root, ckpt, what, NULL, NULL);
			} else {
				ck_assert_msg(rc == -1, "%s: eng_ckpt_verify accepted it", what);
				ck_assert_msg(strstr(err.msg, d->file) && strstr(err.msg, needle),
					"%s: message lacks '%s' or '%s': %s", what, d->file, needle,
					err.msg);
				expect_train_refuses(root, ckpt, what, d->file, needle);
			}
			n++;
			free(ckpt);
			free(dir);
		}
	}
	ck_assert_int_ge(n, 25);
	free(good);
	free(root);
}
END_TEST

START_TEST(test_ckpt_find_offers_previous)
{
	need_gpl();
	char *root = t_tmp_dir("previous"), *sd = path_join(root, "save");
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\"}", sd);
	eng_trainer tr;
	eng_step_stats st;
	eng_err err = {0};
	char path[ENG_PATH_LEN + 64];
	trainer_from(&tr, TINY, 1000, extra);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(eng_trainer_step_as(&tr, NULL, &st, &err), 0);
		t_save(&tr, path, sizeof path);
	}
	eng_trainer_free(&tr);
	char *s1 = path_join(sd, "step_00000001"), *s2 = path_join(sd, "step_00000002");
	char *latest = latest_of(sd);
	ck_assert_str_eq(latest, "step_00000002");
	free(latest);
	damage_do(s2, &damages[0]); /* model.safetensors truncated */

	/* the save dir: the previous one, and the message says why the newest was passed over */
	char found[ENG_PATH_LEN + 64];
	ck_assert_msg(eng_ckpt_find(sd, found, sizeof found, &err) == 0, "find: %s", err.msg);
	ck_assert_str_eq(found, s1);
	ck_assert_msg(strstr(err.msg, "step_00000002") && strstr(err.msg, "model.safetensors"),
		"find's message: %s", err.msg);
	ck_assert_int_eq(eng_ckpt_previous(s2, found, sizeof found), 0);
	ck_assert_str_eq(found, s1);

	/* a job from the save dir resumes at step 1 */
	char *m = resume_from(sd);
	trainer_from(&tr, m, 1000, "");
	ck_assert_int_eq(tr.step, 1);
	eng_trainer_free(&tr);
	free(m);

	/* init_from the damaged one: refused, naming the newest that verifies */
	m = resume_from(s2);
	char *text = job_text(m, 1000, 1, "");
	eng_spec spec;
	ck_assert_msg(eng_spec_parse(&spec, text, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(eng_trainer_init(&tr, &spec, &err), -1);
	ck_assert_msg(strstr(err.msg, "model.safetensors") && strstr(err.msg, s1) &&
		strstr(err.msg, "the newest checkpoint that verifies"), "message: %s", err.msg);
	expect_train_refuses(root, s2, "damaged newest", "model.safetensors", s1);
	free(text);
	free(m);

	/* nothing verifies: find fails and says why */
	damage_do(s1, &damages[0]);
	ck_assert_int_eq(eng_ckpt_find(sd, found, sizeof found, &err), -1);
	ck_assert_msg(strstr(err.msg, "model.safetensors"), "find's message: %s", err.msg);
	free(s2);
	free(s1);
	free(sd);
	free(root);
}
END_TEST

/* A crash while a checkpoint is saved again under the name `latest` holds (the final save
 * of a run stopped right after a periodic one, or ckpt-save of one name twice): the old
 * directory was moved to <name>.old and the new one not yet renamed into place. */
START_TEST(test_ckpt_find_resave_interrupted)
{
	need_gpl();
	char *root = t_tmp_dir("resave"), *sd = path_join(root, "save");
	char *ck = good_checkpoint(sd, 1, 1000);
	char *old = path_join(sd, "step_00000001.old"), *tmp = path_join(sd, "step_00000001.tmp");
	copy_dir(ck, tmp);
	ck_assert_int_eq(rename(ck, old), 0);
	char found[ENG_PATH_LEN + 64];
	eng_err err = {0};
	/* finding only reads (init_from may be another job's save directory): the complete
	 * X.old is found, and nothing is touched */
	ck_assert_msg(eng_ckpt_find(sd, found, sizeof found, &err) == 0, "no checkpoint found "
		"(%s) in: %s", err.msg, listing(sd));
	ck_assert_str_eq(found, old);
	ck_assert_str_eq(listing(sd), "latest step_00000001.old step_00000001.tmp");
	/* the job's own start puts it back and removes the interrupted save */
	ck_assert_msg(eng_ckpt_clean_tmp(sd, 0, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(listing(sd), "latest step_00000001");
	ck_assert_int_eq(eng_ckpt_find(sd, found, sizeof found, &err), 0);
	ck_assert_str_eq(found, ck);

	/* after the second rename: the new one is in place, the old one goes */
	copy_dir(ck, old);
	ck_assert_int_eq(eng_ckpt_find(sd, found, sizeof found, &err), 0);
	ck_assert_str_eq(found, ck);
	ck_assert_msg(eng_ckpt_clean_tmp(sd, 0, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(listing(sd), "latest step_00000001");
	free(tmp);
	free(old);
	free(ck);
	free(sd);
	free(root);
}
END_TEST

/* ---- 5. the reference weights, loaded and saved ---- */

static void round_trip(const char *which)
{
	char rel[64];
	snprintf(rel, sizeof rel, "reference/%s", which);
	char *ref = t_data(rel), *sd = t_tmp_dir("roundtrip");
	char *orig_st = path_join(ref, "model.safetensors"), *orig_cfg = path_join(ref,
		"config.json");
	char *train = path_join(ref, "train.bin");
	eng_trainer tr;
	t_trainer(&tr, "{\"model\": {\"init_from\": \"%s\"}, \"data\": {\"train\": \"%s\"}, "
		"\"batch\": 2, \"seq_len\": 16, \"steps\": 1, \"threads\": 1, \"save\": {\"dir\": "
		"\"%s\"}}", ref, train, sd);
	char out[ENG_PATH_LEN + 64];
	eng_err err = {0};
	t_save(&tr, out, sizeof out);
	eng_trainer_free(&tr);
	ck_assert_msg(eng_ckpt_verify(out, &err) == 0, "%s: %s", out, err.msg);

	/* every tensor, bit for bit, and no other */
	char *saved_st = path_join(out, "model.safetensors");
	eng_st_file a, b;
	ck_assert_msg(eng_st_read(&a, orig_st, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_st_read(&b, saved_st, &err) == 0, "%s", err.msg);
	ck_assert_msg(a.n == b.n, "%s: %d tensors, the reference %d", which, b.n, a.n);
	for (int i = 0; i < a.n; i++) {
		const eng_st_tensor *ta = &a.t[i], *tb = eng_st_find(&b, ta->name);
		ck_assert_msg(tb != NULL, "%s: '%s' not saved", which, ta->name);
		ck_assert_msg(ta->dtype == ENG_ST_F32 && tb->dtype == ENG_ST_F32 &&
			ta->ndim == tb->ndim && memcmp(ta->shape, tb->shape, sizeof ta->shape) == 0,
			"%s: '%s' saved with another dtype or shape", which, ta->name);
		ck_assert_msg(memcmp(a.data + ta->begin, b.data + tb->begin, ta->end - ta->begin) ==
			0, "%s: '%s' saved with other values (%s)", which, ta->name,
			first_diff(orig_st, saved_st));
	}
	eng_st_free(&a);
	eng_st_free(&b);

	/* the same shape in config.json */
	char *saved_cfg = path_join(out, "config.json");
	eng_config ca, cb;
	ck_assert_msg(eng_hfconfig_read(orig_cfg, &ca, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_hfconfig_read(saved_cfg, &cb, &err) == 0, "%s", err.msg);
	ck_assert_msg(ca.n_layer == cb.n_layer && ca.n_embd == cb.n_embd &&
		ca.n_head == cb.n_head && ca.n_positions == cb.n_positions &&
		ca.vocab_size == cb.vocab_size, "%s: config.json saved with another shape", which);
	free(saved_cfg);
	free(saved_st);
	free(train);
	free(orig_cfg);
	free(orig_st);
	free(sd);
	free(ref);
}

START_TEST(test_ckpt_write_reference_round_trip)
{
	round_trip("tiny");
	round_trip("odd");
}
END_TEST

/* ---- 6. one save at a time, and pruning ---- */

/* Reads replies (skipping events) until the one with id; counts step_*.tmp directories in
 * dir at every wake-up and returns it (new reference). */
static json_t *reply_with_id(td_conn *c, int id, const char *dir, int *max_tmp)
{
	long end = td_ms() + WAIT_MS;
	while (td_ms() < end) {
		int n = count_suffix(dir, ".tmp");
		*max_tmp = n > *max_tmp ? n : *max_tmp;
		json_t *o = td_read_msg(c, 20);
		if (!o)
			continue;
		if (!json_object_get(o, "event") &&
			json_integer_value(json_object_get(o, "id")) == id)
			return o;
		json_decref(o);
	}
	ck_abort_msg("no reply to request %d within %d ms", id, WAIT_MS);
	return NULL;
}

START_TEST(test_ckpt_writer_busy_over_control)
{
	need_gpl();
	char *root = t_tmp_dir("busy"), *sd = path_join(root, "save");
	char *sock = path_join(root, "ctl.sock"), *log = path_join(root, "train.log");
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\"}", sd);
	char *job = job_file(root, "busy.json", TINY, 1000000, 1, extra);
	setenv("REMAT_CKPT_DELAY_US", BUSY_DELAY_US, 1);
	pid_t pid = spawn_train(job, log, sock);

	/* connect once it listens, and wait until it trains */
	td_conn c = {.fd = -1};
	for (long end = td_ms() + WAIT_MS; c.fd < 0 && td_ms() < end; td_sleep_ms(10)) {
		ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "remat-train exited:\n%s",
			td_slurp(log));
		c.fd = td_connect(sock);
	}
	ck_assert_msg(c.fd >= 0, "remat-train does not listen on %s:\n%s", sock, td_slurp(log));
	json_t *g = td_read_msg(&c, T_READ_MS);
	ck_assert_msg(g && json_object_get(g, "remat"), "no greeting");
	json_decref(g);
	for (long end = td_ms() + WAIT_MS;; td_sleep_ms(10)) {
		ck_assert_msg(td_ms() < end, "no step within %d ms:\n%s", WAIT_MS, td_slurp(log));
		json_t *r = td_request(&c, "{\"execute\":\"job-status\",\"arguments\":{\"job\":"
					   "\"job\"},\"id\":0}");
		json_t *ret = json_object_get(r, "return");
		int step = (int)json_integer_value(json_object_get(ret, "step"));
		json_decref(r);
		if (step > 0)
			break;
	}

	/* two saves back to back, in one write: the second finds the first being written */
	static const char two[] =
		"{\"execute\":\"ckpt-save\",\"arguments\":{\"job\":\"job\"},\"id\":1}\n"
		"{\"execute\":\"ckpt-save\",\"arguments\":{\"job\":\"job\"},\"id\":2}\n";
	td_send_raw(&c, two, sizeof two - 1);
	int max_tmp = 0;
	json_t *r2 = reply_with_id(&c, 2, sd, &max_tmp);
	const char *desc = td_expect_error(r2, "Busy");
	ck_assert_msg(strstr(desc, "being written"), "Busy says: %s", desc);
	json_t *r1 = reply_with_id(&c, 1, sd, &max_tmp);
	json_t *ret = td_expect_return(r1);
	const char *path = td_str(ret, "path");
	ck_assert_msg(strncmp(path, sd, strlen(sd)) == 0 && strstr(path, "/step_"), "path %s",
		path);
	eng_err err = {0};
	ck_assert_msg(eng_ckpt_verify(path, &err) == 0, "%s: %s", path, err.msg);
	ck_assert_msg(max_tmp <= 1, "%d saves were being written at once", max_tmp);
	ck_assert_int_eq(count_suffix(sd, ".tmp"), 0);
	/* one checkpoint: the refused request wrote nothing */
	char want[128];
	snprintf(want, sizeof want, "latest %s", strrchr(path, '/') + 1);
	ck_assert_str_eq(listing(sd), want);
	json_decref(r1);
	json_decref(r2);

	/* once it is written, the next one is taken */
	td_send(&c, "{\"execute\":\"ckpt-save\",\"arguments\":{\"job\":\"job\",\"name\":"
		    "\"named\"},\"id\":3}");
	json_t *r3 = reply_with_id(&c, 3, sd, &max_tmp);
	ret = td_expect_return(r3);
	char *named = path_join(sd, "named");
	ck_assert_str_eq(td_str(ret, "path"), named);
	ck_assert_msg(max_tmp <= 1, "%d saves were being written at once", max_tmp);
	json_decref(r3);
	char *latest = latest_of(sd);
	ck_assert_str_eq(latest, "named");
	free(latest);

	/* stop without a save; the worker exits 0 */
	json_t *rs = td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"job\"},"
				    "\"id\":4}");
	td_expect_return(rs);
	json_decref(rs);
	int status = td_wait_pid(pid, WAIT_MS);
	ck_assert_msg(status == 0, "remat-train ended with %d:\n%s", status, td_slurp(log));
	td_close(&c);
	free(named);
	free(job);
	free(log);
	free(sock);
	free(sd);
	free(root);
}
END_TEST

static int saved_count; /* checkpoints the writer thread reported written */

static void on_done(void *ud, int ok, const eng_ckpt_result *res, const char *msg)
{
	(void)ud;
	(void)res;
	ck_assert_msg(ok, "the writer failed: %s", msg);
	saved_count++;
}

START_TEST(test_ckpt_writer_submit_busy)
{
	need_gpl();
	char *root = t_tmp_dir("writer"), *sd = path_join(root, "save");
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\"}", sd);
	eng_trainer tr;
	eng_err err;
	trainer_from(&tr, TINY, 1000, extra); /* creates sd */
	setenv("REMAT_CKPT_DELAY_US", "50000", 1); /* a save spans 0.3 s */
	eng_ckpt_writer *w = eng_ckpt_writer_start();
	ck_assert_ptr_nonnull(w);
	eng_ckpt_snap a, b;
	ck_assert_int_eq(eng_trainer_snap_take(&a, &tr, &err), 0);
	ck_assert_int_eq(eng_ckpt_writer_submit(w, &a, sd, NULL, 3, on_done, NULL), 0);
	ck_assert_ptr_null(a.params); /* the writer owns it now */
	ck_assert_int_eq(eng_ckpt_writer_busy(w), 1);
	ck_assert_int_eq(eng_trainer_snap_take(&b, &tr, &err), 0);
	ck_assert_int_eq(eng_ckpt_writer_submit(w, &b, sd, "second", 3, on_done, NULL), -1);
	ck_assert_ptr_nonnull(b.params); /* refused: still the caller's */
	eng_ckpt_writer_wait(w);
	ck_assert_int_eq(eng_ckpt_writer_busy(w), 0);
	ck_assert_int_eq(saved_count, 1);
	ck_assert_str_eq(listing(sd), "latest step_00000000");
	/* idle again: the refused snapshot is taken now */
	ck_assert_int_eq(eng_ckpt_writer_submit(w, &b, sd, "second", 3, on_done, NULL), 0);
	eng_ckpt_writer_stop(w); /* waits for it */
	ck_assert_int_eq(saved_count, 2);
	ck_assert_str_eq(listing(sd), "latest second step_00000000");
	eng_trainer_free(&tr);
	free(sd);
	free(root);
}
END_TEST

/* Writes snapshot s as step `step` (or as name) into dir, keeping keep. */
static void write_as(eng_ckpt_snap *s, const char *dir, int step, const char *name, int keep)
{
	eng_ckpt_result res;
	eng_err err = {0};
	s->step = step;
	ck_assert_msg(eng_ckpt_write(s, dir, name, keep, &res, &err) == 0, "write %d: %s", step,
		err.msg);
	ck_assert_int_eq(res.step, step);
	ck_assert_int_eq(eng_ckpt_verify(res.path, &err), 0);
}

START_TEST(test_ckpt_write_keep_prunes)
{
	need_gpl();
	char *root = t_tmp_dir("keep"), *sd = path_join(root, "save");
	eng_trainer tr;
	eng_err err;
	trainer_from(&tr, TINY, 1000, "");
	ck_assert_int_eq(mkdir(sd, 0777), 0);
	eng_ckpt_snap s;
	ck_assert_int_eq(eng_trainer_snap_take(&s, &tr, &err), 0);
	for (int step = 1; step <= 5; step++)
		write_as(&s, sd, step, NULL, 2);
	ck_assert_str_eq(listing(sd), "latest step_00000004 step_00000005");

	/* a named checkpoint is never pruned, and counts for none of the keep */
	write_as(&s, sd, 6, "best", 2);
	ck_assert_str_eq(listing(sd), "best latest step_00000004 step_00000005");
	write_as(&s, sd, 7, NULL, 1);
	ck_assert_str_eq(listing(sd), "best latest step_00000007");

	/* a save older than the newest step_ (a resume from an earlier checkpoint): latest
	 * names it, and keep 1 keeps the newest step_ besides it */
	write_as(&s, sd, 8, NULL, 10);
	write_as(&s, sd, 9, NULL, 10);
	write_as(&s, sd, 3, NULL, 1);
	char *latest = latest_of(sd);
	ck_assert_str_eq(latest, "step_00000003");
	ck_assert_str_eq(listing(sd), "best latest step_00000003 step_00000009");
	free(latest);
	char found[ENG_PATH_LEN + 64];
	ck_assert_int_eq(eng_ckpt_find(sd, found, sizeof found, &err), 0);
	ck_assert_msg(strstr(found, "step_00000003") != NULL, "find: %s", found);
	eng_ckpt_snap_free(&s);
	eng_trainer_free(&tr);
	free(sd);
	free(root);
}
END_TEST

START_TEST(test_ckpt_write_name_checked)
{
	need_gpl();
	char *root = t_tmp_dir("names"), *sd = path_join(root, "save");
	eng_trainer tr;
	eng_err err = {0};
	trainer_from(&tr, TINY, 1000, "");
	ck_assert_int_eq(mkdir(sd, 0777), 0);
	eng_ckpt_snap s;
	ck_assert_int_eq(eng_trainer_snap_take(&s, &tr, &err), 0);
	write_as(&s, sd, 1, NULL, 3);
	/* the protocol's longest name (64) is kept whole */
	char name[80];
	memset(name, 'n', 64);
	name[64] = '\0';
	write_as(&s, sd, 2, name, 3);
	char *latest = latest_of(sd), want[256];
	ck_assert_str_eq(latest, name);
	free(latest);
	snprintf(want, sizeof want, "latest %s step_00000001", name);
	ck_assert_str_eq(listing(sd), want);

	/* one more is refused, and so are the save directory's own names: nothing changes */
	strcat(name, "n");
	const char *bad[] = {name, "latest", "step_00000001.tmp", "step_00000001.old", ".hidden",
		"a/b", "step_00000009", "step_best"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		eng_ckpt_result res;
		ck_assert_msg(eng_ckpt_write(&s, sd, bad[i], 3, &res, &err) == -1, "'%s' accepted",
			bad[i]);
		ck_assert_msg(strstr(err.msg, "checkpoint name") != NULL, "'%s': %s", bad[i],
			err.msg);
		ck_assert_str_eq(listing(sd), want);
	}
	eng_ckpt_snap_free(&s);
	eng_trainer_free(&tr);
	free(sd);
	free(root);
}
END_TEST


/* trainer_state.json's counts out of range are refused by their key (a negative step once
 * read as a batch shape that differs), and no message quotes a file of the checkpoint:
 * trainer_state.json that is not JSON, `latest` holding garbage */
START_TEST(test_ckpt_state_counts_and_quotes)
{
	need_gpl();
	char *root = t_tmp_dir("counts");
	char *good = good_checkpoint(root, 1, 1000);
	static const struct {
		const char *obj, *key; /* obj: NULL for the top level */
		int value;
		const char *needle;
	} cases[] = {
		{NULL, "step", -5, "\"step\" is not an integer in 0.."},
		{NULL, "batch", 0, "\"batch\" is not an integer in 1.."},
		{"data", "cursor", -1, "\"data.cursor\" is not an integer in 0.."},
		{"data", "tokens", -7, "\"data.tokens\" is not an integer in 0.."},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char name[32];
		snprintf(name, sizeof name, "counts%zu", i);
		char *dir = t_tmp_dir(name), *ckpt = path_join(dir, "step_00000001");
		copy_dir(good, ckpt);
		char *sp = path_join(ckpt, "trainer_state.json");
		json_t *o = json_load_file(sp, 0, NULL);
		ck_assert_ptr_nonnull(o);
		json_t *in = cases[i].obj ? json_object_get(o, cases[i].obj) : o;
		json_object_set_new(in, cases[i].key, json_integer(cases[i].value));
		ck_assert_int_eq(json_dump_file(o, sp, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
		json_decref(o);
		eng_err err = {0};
		ck_assert_int_eq(eng_ckpt_verify(ckpt, &err), -1);
		ck_assert_msg(strstr(err.msg, cases[i].needle), "%s: %s", cases[i].key, err.msg);
		expect_train_refuses(root, ckpt, cases[i].key, "trainer_state.json",
			cases[i].needle);
		free(sp), free(ckpt), free(dir);
	}
	/* not JSON: where, never what */
	char *dir = t_tmp_dir("countsjson"), *ckpt = path_join(dir, "step_00000001");
	copy_dir(good, ckpt);
	char *sp = path_join(ckpt, "trainer_state.json");
	write_text(sp, "{\"format_version\": 1, \"step\": notjson}");
	eng_err err = {0};
	ck_assert_int_eq(eng_ckpt_verify(ckpt, &err), -1);
	ck_assert_msg(strstr(err.msg, "trainer_state.json") && strstr(err.msg, "line 1, column")
		&& !strstr(err.msg, "notjson"), "%s", err.msg);
	/* latest naming garbage, no checkpoint to fall back on */
	char *sd = t_tmp_dir("countslatest"), found[ENG_PATH_LEN + 64];
	set_latest(sd, "AAAAAAAAAAAAAAAAAAAA");
	ck_assert_int_eq(eng_ckpt_find(sd, found, sizeof found, &err), -1);
	ck_assert_msg(strstr(err.msg, "'latest'") && strstr(err.msg, sd) &&
		!strstr(err.msg, "AAAA"), "%s", err.msg);
	free(sd), free(sp), free(ckpt), free(dir), free(good), free(root);
}
END_TEST


/* SHA-256 (libcrypto under eng_sha256.h) against FIPS 180-2's examples and the empty
 * string, from memory and from a file (a million bytes: many read chunks); a file that
 * cannot be read, and a descriptor that cannot, each an error naming it. */
START_TEST(test_sha256_known_vectors)
{
	static const struct {
		const char *text, *hex;
	} v[] = {
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
			"248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	};
	const char *million = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
	char hex[ENG_SHA256_HEX];
	eng_err err = {0};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		memset(hex, 'x', sizeof hex);
		ck_assert_msg(eng_sha256_buf(v[i].text, strlen(v[i].text), hex, &err) == 0, "%s",
			err.msg);
		ck_assert_str_eq(hex, v[i].hex);
	}
	size_t n = 1000000;
	char *a = malloc(n + 1);
	ck_assert_ptr_nonnull(a);
	memset(a, 'a', n);
	a[n] = '\0';
	ck_assert_msg(eng_sha256_buf(a, n, hex, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(hex, million);
	char *dir = t_tmp_dir("sha256"), *p = path_join(dir, "million-a");
	write_text(p, a);
	memset(hex, 'x', sizeof hex);
	ck_assert_msg(eng_sha256_file(p, hex, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(hex, million);
	/* one byte changed: another digest */
	a[n / 2] = 'b';
	write_text(p, a);
	ck_assert_msg(eng_sha256_file(p, hex, &err) == 0, "%s", err.msg);
	ck_assert_str_ne(hex, million);
	char *gone = path_join(dir, "gone");
	ck_assert_int_eq(eng_sha256_file(gone, hex, &err), -1);
	ck_assert_msg(strstr(err.msg, gone) != NULL, "%s", err.msg);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(eng_sha256_fd(fd, "the-name", hex, &err), -1);
	ck_assert_msg(strstr(err.msg, "cannot read 'the-name'") != NULL, "%s", err.msg);
	close(fd);
	free(gone), free(p), free(dir), free(a);
}
END_TEST

/* The tests of this file, added to suite "ckpt" by test_ckpt.c. */
void tcase_ckpt_damage(Suite *s)
{
	TCase *tc = tcase_create("damage");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_ckpt_verify_damaged);
	tcase_add_test(tc, test_ckpt_find_offers_previous);
	tcase_add_test(tc, test_ckpt_find_resave_interrupted);
	tcase_add_test(tc, test_ckpt_write_reference_round_trip);
	tcase_add_test(tc, test_ckpt_writer_busy_over_control);
	tcase_add_test(tc, test_ckpt_writer_submit_busy);
	tcase_add_test(tc, test_ckpt_write_keep_prunes);
	tcase_add_test(tc, test_ckpt_write_name_checked);
	tcase_add_test(tc, test_ckpt_state_counts_and_quotes);
	tcase_add_test(tc, test_sha256_known_vectors);
	suite_add_tcase(s, tc);
}
