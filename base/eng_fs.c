/* eng_fs.c - safe reads, durable writes and removals relative to a directory descriptor
 * (see eng_fs.h). Not here: any file format.
 */
#include "eng_fs.h"
#include "proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define TMP_SUFFIX ".tmp"   /* eng_fs_write_at's temporary name: NAME.tmp */
#define NAME_LEN 256        /* longest entry name handled (NAME_MAX + 1) */
#define LOCK_MODE 0644      /* a lock file: its pid readable by whoever finds it held */

const char *eng_fs_kind(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFDIR:
		return "a directory";
	case S_IFLNK:
		return "a symbolic link";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	}
	return "of an unknown type";
}

/* ---- reading ---- */

/* Opens name relative to dirfd for reading (flags added: O_NOFOLLOW for an entry of a
 * directory of ours), and refuses anything but a regular file before it is read; label
 * names the file in messages. The descriptor, blocking again, or -1. */
static int open_regular(int dirfd, const char *name, int flags, const char *label,
	struct stat *st, eng_err *err)
{
	struct stat sb;
	/* O_NONBLOCK: opening a FIFO without a writer, or a device, returns at once, so that
	 * fstat can refuse it before anything waits on it */
	int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | flags);
	if (fd < 0) {
		int e = errno; /* kept for the caller: ENOENT, an absent file */
		eng_errf(err, "cannot open %s: %s", label,
			e == ELOOP ? "it is a symbolic link" : strerror(e));
		errno = e;
		return -1;
	}
	if (fstat(fd, &sb) < 0) {
		eng_errf(err, "cannot stat %s: %s", label, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(sb.st_mode)) {
		eng_errf(err, "cannot read %s: it is %s, not a regular file", label,
			eng_fs_kind(sb.st_mode));
		goto fail;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		eng_errf(err, "cannot read %s: %s", label, strerror(errno));
		goto fail;
	}
	if (st)
		*st = sb;
	return fd;
fail:
	close(fd);
	return -1;
}

/* A descriptor as a stdio stream ("rb"), or NULL (the descriptor closed). */
static FILE *stream_of(int fd, const char *label, eng_err *err)
{
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, "rb");
	if (!f) {
		eng_errf(err, "cannot read %s: %s", label, strerror(errno));
		close(fd);
	}
	return f;
}

int eng_fs_open_read(const char *path, const char *what, struct stat *st, eng_err *err)
{
	char label[ENG_FS_PATH_LEN + 64];
	if (what)
		snprintf(label, sizeof label, "%s '%s'", what, path);
	else
		snprintf(label, sizeof label, "'%s'", path);
	return open_regular(AT_FDCWD, path, 0, label, st, err);
}

/* fd (of st, a regular file labelled what 'name') whole, at most max bytes; closes fd. */
static char *read_all_fd(int fd, const struct stat *st, const char *what, const char *name,
	size_t max, size_t *len, eng_err *err)
{
	char *b = NULL;
	size_t got = 0;
	if ((unsigned long long)st->st_size > max) {
		eng_errf(err, "%s '%s' is %lld bytes, more than %zu", what, name,
			(long long)st->st_size, max);
		goto fail;
	}
	if (!(b = malloc((size_t)st->st_size + 1))) {
		eng_err_nomem(err, "cannot read %s '%s': out of memory", what, name);
		goto fail;
	}
	while (got < (size_t)st->st_size) {
		ssize_t r = read(fd, b + got, (size_t)st->st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			eng_errf(err, "cannot read %s '%s': %s", what, name,
				r ? strerror(errno) : "the file shrank");
			goto fail;
		}
		got += (size_t)r;
	}
	close(fd);
	b[got] = '\0';
	*len = got;
	return b;
fail:
	free(b);
	close(fd);
	return NULL;
}

char *eng_fs_read_all(const char *path, const char *what, size_t max, size_t *len,
	eng_err *err)
{
	struct stat st;
	int fd = eng_fs_open_read(path, what, &st, err);
	return fd < 0 ? NULL : read_all_fd(fd, &st, what, path, max, len, err);
}

char *eng_fs_read_all_in(const eng_dir *d, const char *name, const char *what, size_t max,
	size_t *len, eng_err *err)
{
	struct stat st;
	int fd = eng_fs_open_read_in(d, name, what, &st, err);
	return fd < 0 ? NULL : read_all_fd(fd, &st, what, name, max, len, err);
}

FILE *eng_fs_fopen_read(const char *path, const char *what, eng_err *err)
{
	char label[ENG_FS_PATH_LEN + 8];
	snprintf(label, sizeof label, "'%s'", path);
	return stream_of(eng_fs_open_read(path, what, NULL, err), label, err);
}

int eng_fs_open_read_at(const eng_dir *d, const char *name, const char *what,
	struct stat *st, eng_err *err)
{
	char label[ENG_FS_PATH_LEN + 128];
	snprintf(label, sizeof label, "%s '%s' in '%s'", what, name, d->path);
	return open_regular(d->fd, name, O_NOFOLLOW, label, st, err);
}

int eng_fs_open_read_in(const eng_dir *d, const char *name, const char *what,
	struct stat *st, eng_err *err)
{
	char label[ENG_FS_PATH_LEN + 128];
	snprintf(label, sizeof label, "%s '%s' in '%s'", what, name, d->path);
	return open_regular(d->fd, name, 0, label, st, err);
}

FILE *eng_fs_fopen_at(const eng_dir *d, const char *name, const char *what, eng_err *err)
{
	char label[ENG_FS_PATH_LEN + 128];
	snprintf(label, sizeof label, "%s '%s' in '%s'", what, name, d->path);
	return stream_of(eng_fs_open_read_at(d, name, what, NULL, err), label, err);
}

/* ---- directories ---- */

int eng_dir_open(eng_dir *d, const char *path, eng_err *err)
{
	d->fd = -1;
	if (strlen(path) >= sizeof d->path) {
		eng_errf(err, "directory path too long (%zu bytes)", strlen(path));
		errno = ENAMETOOLONG;
		return -1;
	}
	snprintf(d->path, sizeof d->path, "%s", path);
	d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0) {
		int e = errno; /* kept for the caller: ENOTDIR, a file */
		eng_errf(err, "cannot open directory '%s': %s", path, strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

int eng_dir_open_file_or_dir(eng_dir *d, const char *path, char *name, size_t len,
	eng_err *err)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	char dir[ENG_FS_PATH_LEN];
	name[0] = '\0';
	if (eng_dir_open(d, path, err) == 0 || (errno != ENOTDIR && errno != ENOENT))
		return d->fd >= 0 ? 0 : -1;
	if (strlen(base) >= len || strlen(path) >= sizeof dir)
		return eng_errf(err, "path too long: '%.64s...'", path);
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
		slash ? path : ".");
	snprintf(name, len, "%s", base);
	return eng_dir_open(d, dir, err);
}

int eng_dir_open_at(eng_dir *d, const eng_dir *parent, const char *name, eng_err *err)
{
	d->fd = -1;
	int w = snprintf(d->path, sizeof d->path, "%s/%s", parent->path, name);
	if (w < 0 || (size_t)w >= sizeof d->path)
		return eng_errf(err, "directory path too long");
	int r = eng_fs_entry(parent, name, 1, "open", err);
	if (r <= 0)
		return r < 0 ? -1 : eng_errf(err, "cannot open '%s' in '%s': %s", name, parent->path,
			strerror(ENOENT));
	/* O_NOFOLLOW: a link swapped in since the check is refused, not entered */
	d->fd = openat(parent->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d->fd < 0)
		return eng_errf(err, "cannot open '%s' in '%s': %s", name, parent->path,
			strerror(errno));
	return 0;
}

int eng_dir_make(eng_dir *d, const char *path, eng_err *err)
{
	char p[ENG_FS_PATH_LEN];
	d->fd = -1;
	if (strlen(path) >= sizeof p || !path[0])
		return eng_errf(err, "bad directory path (%zu bytes)", strlen(path));
	snprintf(p, sizeof p, "%s", path);
	for (char *c = p + 1;; c++) {
		if (*c != '/' && *c != '\0')
			continue;
		char keep = *c;
		*c = '\0';
		if (mkdir(p, 0777) < 0 && errno != EEXIST)
			return eng_errf(err, "cannot create directory '%s': %s", p, strerror(errno));
		*c = keep;
		if (!keep)
			break;
	}
	return eng_dir_open(d, path, err);
}

void eng_dir_close(eng_dir *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

/* The refusal of a file with other names than ours: a hard link planted under a name we
 * write would carry our bytes into a file elsewhere, and removing it would hide that. */
static int links_refused(const char *verb, const char *name, const char *dir, nlink_t n,
	eng_err *err)
{
	return eng_errf(err, "refusing to %s '%s' in '%s': it is a hard link (%lu names for one "
			     "file)", verb, name, dir, (unsigned long)n);
}

int eng_fs_entry(const eng_dir *d, const char *name, int want_dir, const char *verb,
	eng_err *err)
{
	struct stat st;
	if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return eng_errf(err, "cannot %s '%s' in '%s': %s", verb, name, d->path,
			strerror(errno));
	}
	if (S_ISLNK(st.st_mode))
		return eng_errf(err, "refusing to %s '%s' in '%s': it is a symbolic link", verb, name,
			d->path);
	if (st.st_uid != geteuid())
		return eng_errf(err, "refusing to %s '%s' in '%s': it belongs to uid %lu, not to "
				     "uid %lu", verb, name, d->path, (unsigned long)st.st_uid,
			(unsigned long)geteuid());
	if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return eng_errf(err, "refusing to %s '%s' in '%s': it is %s, not %s", verb, name,
			d->path, eng_fs_kind(st.st_mode), want_dir ? "a directory" : "a regular file");
	if (!want_dir && st.st_nlink != 1)
		return links_refused(verb, name, d->path, st.st_nlink, err);
	return 1;
}

int eng_fs_remove_file(const eng_dir *d, const char *name, eng_err *err)
{
	int r = eng_fs_entry(d, name, 0, "remove", err);
	if (r <= 0)
		return r;
	if (unlinkat(d->fd, name, 0) < 0 && errno != ENOENT)
		return eng_errf(err, "cannot remove '%s' in '%s': %s", name, d->path, strerror(errno));
	return 0;
}

/* Removes the directory `name` in d (checked by the caller: a real directory of ours),
 * its files and links, and, at depth 0, the directories it holds the same way. */
static int remove_tree(const eng_dir *d, const char *name, int depth, eng_err *err)
{
	/* O_NOFOLLOW: a link swapped in since the check is refused, not entered */
	int fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return eng_errf(err, "cannot open '%s' in '%s': %s", name, d->path, strerror(errno));
	eng_dir in = {fd, ""};
	snprintf(in.path, sizeof in.path, "%.*s/%s", (int)(sizeof in.path / 2), d->path, name);
	DIR *dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return eng_errf(err, "cannot read '%s' in '%s': %s", name, d->path, strerror(errno));
	}
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(dir))) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			rc = eng_errf(err, "cannot remove '%s/%s' in '%s': %s", name, e->d_name,
				d->path, strerror(errno));
		} else if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) &&
			   !(S_ISDIR(st.st_mode) && depth == 0)) {
			rc = eng_errf(err, "refusing to remove '%s' in '%s': it holds '%s', %s, which "
					   "no checkpoint has", name, d->path, e->d_name,
				eng_fs_kind(st.st_mode));
		} else if (st.st_uid != geteuid()) {
			rc = eng_errf(err, "refusing to remove '%s' in '%s': its file '%s' belongs to "
					   "uid %lu", name, d->path, e->d_name, (unsigned long)st.st_uid);
		} else if (S_ISDIR(st.st_mode)) { /* a LoRA checkpoint's own base */
			rc = remove_tree(&in, e->d_name, depth + 1, err);
		} else if (unlinkat(fd, e->d_name, 0) < 0 && errno != ENOENT) {
			/* a link is removed itself: unlinkat never follows one */
			rc = eng_errf(err, "cannot remove '%s/%s' in '%s': %s", name, e->d_name,
				d->path, strerror(errno));
		}
	}
	closedir(dir); /* closes fd */
	if (rc == 0 && unlinkat(d->fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = eng_errf(err, "cannot remove '%s' in '%s': %s", name, d->path, strerror(errno));
	return rc;
}

int eng_fs_remove_dir(const eng_dir *d, const char *name, eng_err *err)
{
	int r = eng_fs_entry(d, name, 1, "remove", err);
	return r <= 0 ? r : remove_tree(d, name, 0, err);
}

int eng_dir_make_at(eng_dir *out, const eng_dir *parent, const char *name, mode_t mode,
	int fresh, eng_err *err)
{
	out->fd = -1;
	if (mkdirat(parent->fd, name, mode) < 0) {
		if (errno != EEXIST)
			return eng_errf(err, "cannot create '%s' in '%s': %s", name, parent->path,
				strerror(errno));
		if (fresh)
			return 1;
	}
	if (eng_dir_open_at(out, parent, name, err) < 0)
		return -1;
	/* the mode exactly, past the umask, on the directory opened (never a link's target) */
	if (fchmod(out->fd, mode) < 0) {
		eng_errf(err, "cannot set the mode of '%s': %s", out->path, strerror(errno));
		eng_dir_close(out);
		return -1;
	}
	return 0;
}

int eng_fs_mkdir(const eng_dir *d, const char *name, eng_err *err)
{
	if (mkdirat(d->fd, name, 0777) < 0)
		return eng_errf(err, "cannot create '%s' in '%s': %s", name, d->path,
			strerror(errno));
	return 0;
}

int eng_fs_rename(const eng_dir *d, const char *from, const char *to, eng_err *err)
{
	if (renameat(d->fd, from, d->fd, to) < 0)
		return eng_errf(err, "cannot rename '%s' to '%s' in '%s': %s", from, to, d->path,
			strerror(errno));
	return 0;
}

int eng_fs_sync_dir(const eng_dir *d, eng_err *err)
{
	if (fsync(d->fd) < 0)
		return eng_errf(err, "cannot sync directory '%s': %s", d->path, strerror(errno));
	return 0;
}

/* ---- writing ---- */

int eng_fs_write_at(const eng_dir *d, const char *name, eng_fs_fill_fn fill, void *ud,
	eng_err *err)
{
	return eng_fs_write_mode(d, name, 0666, fill, ud, err);
}

int eng_fs_write_mode(const eng_dir *d, const char *name, mode_t mode, eng_fs_fill_fn fill,
	void *ud, eng_err *err)
{
	char tmp[NAME_LEN + sizeof TMP_SUFFIX];
	FILE *f = NULL;
	int fd = -1;
	eng_err local;
	if (!err)
		err = &local;
	if (strlen(name) >= NAME_LEN || strchr(name, '/'))
		return eng_errf(err, "bad file name '%.64s'", name);
	snprintf(tmp, sizeof tmp, "%s" TMP_SUFFIX, name);
	/* what the rename would replace is checked before anything is written, and again
	 * just before the rename: a link or a stranger's file there is refused, never hidden */
	if (eng_fs_entry(d, name, 0, "replace", err) < 0 || eng_fs_remove_file(d, tmp, err) < 0)
		return -1;
	fd = openat(d->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return eng_errf(err, "cannot create '%s' in '%s': %s", tmp, d->path, strerror(errno));
	f = fdopen(fd, "wb");
	if (!f) {
		eng_errf(err, "cannot write '%s' in '%s': %s", tmp, d->path, strerror(errno));
		close(fd);
		goto fail;
	}
	err->msg[0] = '\0';
	if (fill(f, ud, err) < 0) {
		if (!err->msg[0])
			eng_errf(err, "cannot write '%s' in '%s'", name, d->path);
		goto fail;
	}
	/* the one durable tail: flush, fsync, close, rename, fsync the directory */
	if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) {
		eng_errf(err, "cannot write '%s' in '%s': %s", name, d->path,
			errno ? strerror(errno) : "write error");
		goto fail;
	}
	int rc = fclose(f);
	f = NULL;
	if (rc != 0) {
		eng_errf(err, "cannot write '%s' in '%s': %s", name, d->path, strerror(errno));
		goto fail;
	}
	if (eng_fs_entry(d, name, 0, "replace", err) < 0 || eng_fs_rename(d, tmp, name, err) < 0)
		goto fail;
	return eng_fs_sync_dir(d, err);
fail:
	if (f)
		fclose(f);
	unlinkat(d->fd, tmp, 0); /* ours: created O_EXCL above */
	return -1;
}

/* eng_fs_fill_fn of a JSON document. */
static int json_fill(FILE *f, void *ud, eng_err *err)
{
	/* reals in their shortest text (0.0003, not jansson's 0.00029999999999999997) */
	char *text = proto_json_dumps(ud, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!text)
		return eng_errf(err, "cannot write JSON: out of memory");
	fputs(text, f); /* a failure shows in the stream's error, found by the flush */
	fputc('\n', f);
	free(text);
	return 0;
}

int eng_fs_write_json(const eng_dir *d, const char *name, mode_t mode, const json_t *doc,
	eng_err *err)
{
	return eng_fs_write_mode(d, name, mode, json_fill, (void *)doc, err);
}

/* Opens the directory of path (its last component, returned in *name, a file name):
 * symlinks in the directory's path followed, as eng_dir_open does. */
static int parent_open(const char *path, eng_dir *d, const char **name, eng_err *err)
{
	char dir[ENG_FS_PATH_LEN];
	const char *slash = strrchr(path, '/');
	*name = slash ? slash + 1 : path;
	d->fd = -1;
	if (!(*name)[0] || strcmp(*name, ".") == 0 || strcmp(*name, "..") == 0)
		return eng_errf(err, "cannot write '%s': not a file name", path);
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else if ((size_t)(slash - path) >= sizeof dir)
		return eng_errf(err, "cannot write '%s': path too long", path);
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	snprintf(d->path, sizeof d->path, "%s", dir);
	d->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0)
		return eng_errf(err, "cannot write '%s': %s", path, strerror(errno));
	return 0;
}

int eng_fs_write(const char *path, eng_fs_fill_fn fill, void *ud, eng_err *err)
{
	const char *name;
	eng_dir d;
	if (parent_open(path, &d, &name, err) < 0)
		return -1;
	int rc = eng_fs_write_at(&d, name, fill, ud, err);
	eng_dir_close(&d);
	return rc;
}

/* ---- appending ---- */

int eng_fs_append_at(const eng_dir *d, const char *name, mode_t mode, uid_t owner,
	eng_err *err)
{
	struct stat st;
	/* O_NONBLOCK: a FIFO planted there is refused at once, never waited on */
	int fd = openat(d->fd, name, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
		O_NOCTTY | O_CLOEXEC, mode);
	if (fd < 0) {
		int e = errno;
		/* a symlink (ELOOP), a FIFO without a reader (ENXIO): eng_fs_entry words it */
		if ((e != ELOOP && e != ENXIO) || eng_fs_entry(d, name, 0, "append to", err) >= 0)
			eng_errf(err, "cannot open '%s' in '%s': %s", name, d->path, strerror(e));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		eng_errf(err, "cannot stat '%s' in '%s': %s", name, d->path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		eng_errf(err, "refusing to append to '%s' in '%s': it is %s, not a regular file",
			name, d->path, eng_fs_kind(st.st_mode));
		goto fail;
	}
	if (st.st_uid != geteuid() && st.st_uid != owner) {
		eng_errf(err, "refusing to append to '%s' in '%s': it belongs to uid %lu", name,
			d->path, (unsigned long)st.st_uid);
		goto fail;
	}
	if (st.st_nlink != 1) {
		links_refused("append to", name, d->path, st.st_nlink, err);
		goto fail;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		eng_errf(err, "cannot open '%s' in '%s': %s", name, d->path, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

int eng_fs_append(const char *path, mode_t mode, uid_t owner, eng_err *err)
{
	const char *name;
	eng_dir d;
	if (parent_open(path, &d, &name, err) < 0)
		return -1;
	int fd = eng_fs_append_at(&d, name, mode, owner, err);
	eng_dir_close(&d);
	return fd;
}

/* ---- locks ---- */

/* Opens d/name (created when create) and takes its lock: 0 with the descriptor in *out,
 * 1 when it does not exist and create is 0, or -1 with a message. */
static int lock_take(const eng_dir *d, const char *name, int create, const char *what,
	int *out, eng_err *err)
{
	char buf[32];
	int fd = openat(d->fd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0),
		LOCK_MODE);
	if (fd < 0 && errno == ENOENT && !create)
		return 1;
	if (fd < 0) {
		if (errno == ELOOP)
			return eng_errf(err, "refusing to use '%s' in '%s': it is a symbolic link",
				name, d->path);
		return eng_errf(err, "cannot open '%s' in '%s': %s", name, d->path, strerror(errno));
	}
	struct stat st;
	/* one link: the pid is written into this file, never into one elsewhere */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		st.st_nlink != 1) {
		close(fd);
		/* eng_fs_entry words why; should it find nothing wrong, the race is still ours */
		if (eng_fs_entry(d, name, 0, "use", err) >= 0)
			eng_errf(err, "refusing to use '%s' in '%s': it changed while opened", name,
				d->path);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
		close(fd);
		long pid = 0;
		if (n > 0) {
			buf[n] = '\0';
			pid = strtol(buf, NULL, 10); /* a number we wrote, never echoed as bytes */
		}
		if (e != EWOULDBLOCK)
			return eng_errf(err, "cannot lock '%s' in '%s': %s", name, d->path, strerror(e));
		if (pid > 0)
			eng_errf(err, "%s '%s' is in use by another job (process %ld)", what, d->path,
				pid);
		else
			eng_errf(err, "%s '%s' is in use by another job", what, d->path);
		if (err)
			err->kind = ENG_ERR_BUSY; /* free again once that job ends */
		return -1;
	}
	*out = fd;
	return 0;
}

int eng_fs_lock(const eng_dir *d, const char *name, const char *what, eng_err *err)
{
	char buf[32];
	int fd = -1;
	if (lock_take(d, name, 1, what, &fd, err) < 0)
		return -1;
	int w = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)w, 0) != w) {
		/* the lock holds without the pid; only the message of a loser would lack it */
	}
	return fd;
}

int eng_fs_lock_free(const eng_dir *d, const char *name, const char *what, eng_err *err)
{
	int fd = -1, r = lock_take(d, name, 0, what, &fd, err);
	if (r == 0)
		close(fd); /* it was free: released at once */
	return r < 0 ? -1 : 0;
}
