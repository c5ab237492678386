/* eng_fs.h - how the engine touches the file system: every read, durable write and removal
 * of a file the job spec names goes through here.
 *
 * Reading: eng_fs_open_read opens with O_NONBLOCK and checks fstat before anything reads,
 * so a FIFO, a device or a socket is refused at once instead of blocking the worker in
 * open() or read(). Symbolic links are followed when reading: a Hugging Face cache holds
 * its snapshots as symlinks, and the worker reads with the rights of the job's user.
 *
 * Writing and removing happen inside a directory opened once (eng_dir) and never leave it:
 * every call is relative to its descriptor (openat, mkdirat, renameat, unlinkat, fstatat),
 * a new file is created O_CREAT|O_EXCL|O_NOFOLLOW, and an entry that is a symbolic link,
 * a hard link (a file with more than one name: its bytes are also a file elsewhere),
 * belongs to another user or is of the wrong type is never removed, replaced or written
 * through: the call fails with a message naming it ("refusing to remove 'x.tmp' in '/s':
 * it is a symbolic link"). The directory itself is reached by its path, links included: it
 * is the user's own choice, and the job runs with the user's rights.
 *
 * Durable replacement (eng_fs_write_at): NAME.tmp is created, filled, flushed, fsynced,
 * renamed over NAME, and the directory fsynced. After a crash NAME is the old file or the
 * new one, never a mixture; a leftover NAME.tmp is removed by the next write. The NAME
 * replaced must pass eng_fs_entry (checked before the write and again before the rename).
 * The only files written in place are a lock (eng_fs_lock) and a log (eng_fs_append_at),
 * each checked after its open, on the descriptor, to be a regular file of ours with one
 * link.
 *
 * Not here: what the files hold (eng_st, eng_hfconfig, eng_llmc, eng_ckpt).
 */
#ifndef ENG_FS_H
#define ENG_FS_H

#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "eng_err.h"

#define ENG_FS_PATH_LEN 4096 /* longest directory path an eng_dir keeps for messages */

/* A directory the engine writes into: its descriptor and its path (for messages). */
typedef struct eng_dir {
	int fd;                      /* O_RDONLY|O_DIRECTORY|O_CLOEXEC, -1 when closed */
	char path[ENG_FS_PATH_LEN];  /* as given to eng_dir_open */
} eng_dir;

/* ---- reading ---- */

/* Opens a regular file for reading: O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC, then fstat;
 * anything but a regular file is closed at once and refused ("data file '/x': not a
 * regular file (a FIFO)"). what names the file in messages ("data file", "checkpoint
 * file"); NULL says just the path. Returns the descriptor (blocking again) with its stat
 * in *st (may be NULL), or -1. */
int eng_fs_open_read(const char *path, const char *what, struct stat *st, eng_err *err);
/* A regular file whole (eng_fs_open_read's rules), at most max bytes: malloc'd with a NUL
 * after its *len bytes, or NULL with "what 'path' is N bytes, more than max" or why it
 * could not be read ("the file shrank" when it did). */
char *eng_fs_read_all(const char *path, const char *what, size_t max, size_t *len,
	eng_err *err);
/* The same for the file d/name, a link at name itself followed (eng_fs_open_read_in). */
char *eng_fs_read_all_in(const eng_dir *d, const char *name, const char *what, size_t max,
	size_t *len, eng_err *err);
/* The same as a stdio stream ("rb"); NULL on failure. */
FILE *eng_fs_fopen_read(const char *path, const char *what, eng_err *err);
/* The regular file d/name as a model's files are read, by their owner's process: a link at
 * name itself is followed (Hugging Face's hub cache keeps its files as links to blobs),
 * never anything the descriptor does not hold; eng_fs_open_read's checks. The descriptor
 * and its stat, or -1 (errno ENOENT when absent). */
int eng_fs_open_read_in(const eng_dir *d, const char *name, const char *what,
	struct stat *st, eng_err *err);
/* eng_fs_open_read of the regular file d/name, never through a symlink (O_NOFOLLOW):
 * the descriptor and its stat in *st (may be NULL), or -1 with "cannot open what 'name'
 * in 'dir': ..." (errno ENOENT when it is absent). */
int eng_fs_open_read_at(const eng_dir *d, const char *name, const char *what,
	struct stat *st, eng_err *err);
/* The regular file d/name, never through a symlink (O_NOFOLLOW), as a stream; NULL with
 * "cannot open what 'name' in 'dir': ..." (errno ENOENT when it is absent). */
FILE *eng_fs_fopen_at(const eng_dir *d, const char *name, const char *what, eng_err *err);

/* "a FIFO", "a directory", "a symbolic link", ...: what an st_mode is, for messages. */
const char *eng_fs_kind(mode_t mode);

/* ---- directories ---- */

/* Opens the directory at path (symlinks in the path followed: the user's own path). */
int eng_dir_open(eng_dir *d, const char *path, eng_err *err);
/* A path that names a directory or a file in one (or a name yet to be made there): the
 * directory opened and name "" for the first, the file's directory opened and its last
 * part in name[len] for the others, told apart by the open itself (O_DIRECTORY; no stat
 * before it). 0, or -1 with a message. */
int eng_dir_open_file_or_dir(eng_dir *d, const char *path, char *name, size_t len,
	eng_err *err);
/* Opens d/name, a directory of ours that is no symlink (eng_fs_entry's rules); its path
 * for messages is parent/name. */
int eng_dir_open_at(eng_dir *d, const eng_dir *parent, const char *name, eng_err *err);
/* Makes parent/name with exactly mode (fchmod'ed past the umask, on the directory
 * opened), or takes the existing one when fresh is 0: a directory of ours that is no
 * symlink (eng_dir_open_at's rules). 0 with *out open; 1 when fresh and it exists
 * already; -1 with a message. */
int eng_dir_make_at(eng_dir *out, const eng_dir *parent, const char *name, mode_t mode,
	int fresh, eng_err *err);
/* mkdir -p (mode 0777 before the umask), then eng_dir_open. */
int eng_dir_make(eng_dir *d, const char *path, eng_err *err);
void eng_dir_close(eng_dir *d); /* safe on a closed or zeroed-then-fd=-1 one */

/* What an entry of d is, without following a link: 0 absent; 1 present, of the kind asked
 * (want_dir: a directory, else a regular file with one link), ours (our euid) and no
 * symlink; -1 refused, with a message "refusing to <verb> 'name' in 'dir': it is a
 * symbolic link" (or "it belongs to uid N", "it is a FIFO, not a directory", "it is a hard
 * link (2 names for one file)"). verb: "remove", "use", ... */
int eng_fs_entry(const eng_dir *d, const char *name, int want_dir, const char *verb,
	eng_err *err);

/* Removes a regular file of ours (eng_fs_entry's rules). Absent is success. */
int eng_fs_remove_file(const eng_dir *d, const char *name, eng_err *err);
/* Removes a directory of ours that holds only regular files, symlinks and directories of
 * the same (a checkpoint, and the base a LoRA checkpoint carries): the links themselves
 * are removed, never what they point to; a directory deeper down, or another user's file
 * or directory inside, is refused. Absent is success. */
int eng_fs_remove_dir(const eng_dir *d, const char *name, eng_err *err);
/* mkdirat, mode 0777 before the umask; "cannot create 'name' in 'dir': ..." */
int eng_fs_mkdir(const eng_dir *d, const char *name, eng_err *err);
/* renameat within d; "cannot rename 'a' to 'b' in 'dir': ..." */
int eng_fs_rename(const eng_dir *d, const char *from, const char *to, eng_err *err);
/* fsync of the directory itself. */
int eng_fs_sync_dir(const eng_dir *d, eng_err *err);

/* ---- writing ---- */

/* Writes the body of a file into f; returns 0, or -1 with a message. A failed fwrite need
 * not be reported: the final flush finds the stream's error and says it with errno. */
typedef int (*eng_fs_fill_fn)(FILE *f, void *ud, eng_err *err);

/* Durable replacement of d/name by what fill writes (see the top of this file). A
 * leftover name.tmp of ours is removed first; a symlink, a hard link or another user's
 * file there, or under name itself, is refused (eng_fs_entry's message, verb "remove" or
 * "replace"). On failure nothing new is left under either name, and name is untouched. */
int eng_fs_write_at(const eng_dir *d, const char *name, eng_fs_fill_fn fill, void *ud,
	eng_err *err);
/* The same with the new file's mode (before the umask) instead of 0666. */
int eng_fs_write_mode(const eng_dir *d, const char *name, mode_t mode, eng_fs_fill_fn fill,
	void *ud, eng_err *err);
/* A JSON document (two-space indent, keys in insertion order, a trailing newline) written
 * durably as d/name, the new file's mode before the umask. */
int eng_fs_write_json(const eng_dir *d, const char *name, mode_t mode, const json_t *doc,
	eng_err *err);
/* eng_fs_write_at in the directory of path (its last component the name). */
int eng_fs_write(const char *path, eng_fs_fill_fn fill, void *ud, eng_err *err);

/* ---- appending ---- */

/* Opens d/name to append to (a log): created with mode (before the umask) when missing,
 * O_NOFOLLOW, never blocking on a FIFO; then, on the descriptor, a regular file with one
 * link, ours (euid) or owner's (pass geteuid() when no one else's may be). The descriptor
 * (blocking), or -1 with "refusing to append to 'name' in 'dir': it is a hard link ...". */
int eng_fs_append_at(const eng_dir *d, const char *name, mode_t mode, uid_t owner,
	eng_err *err);
/* The same in the directory of path (its last component the name). */
int eng_fs_append(const char *path, mode_t mode, uid_t owner, eng_err *err);

/* ---- locks ---- */

/* Takes an exclusive, non-blocking lock on d/name (created 0644 O_NOFOLLOW if missing,
 * a regular file of ours with one link otherwise) and writes our pid into it. Returns the descriptor,
 * held for as long as the lock must be (closing it, or the process ending, releases it);
 * -1 with a message when another process holds it ("... is in use by another job (process
 * N)", marked ENG_ERR_BUSY). */
int eng_fs_lock(const eng_dir *d, const char *name, const char *what, eng_err *err);
/* 0 when nobody holds that lock now (the file is neither created nor kept), -1 with
 * eng_fs_lock's message otherwise. */
int eng_fs_lock_free(const eng_dir *d, const char *name, const char *what, eng_err *err);

#endif
