/* eng_ckpt_writer.c - the checkpoint writer thread (see eng_ckpt.h): one snapshot at a
 * time, written by eng_ckpt_write while training goes on. Not here: what a save writes
 * (eng_ckpt_write.c).
 */
#include "eng_ckpt_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WRITER_NICE 10 /* the writer thread's niceness */

/* ---- the writer thread ---- */

struct eng_ckpt_writer {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;        /* a job arrived, or the writer went idle */
	int busy;                 /* a snapshot is queued or being written */
	int quit;
	eng_ckpt_snap snap;       /* the job: owned by the writer while busy */
	char dir[ENG_PATH_LEN];
	char name[CKPT_NAME_MAX + 2]; /* one more: a name too long stays too long */
	int keep;
	eng_ckpt_done_fn done;
	void *ud;
};

static void *writer_main(void *arg)
{
	eng_ckpt_writer *w = arg;
	/* The training threads come first: at nice 10 the writer takes about a tenth of a core
	 * they want, instead of half of one (Linux: per-thread nice through the thread id). */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WRITER_NICE);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->busy && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->busy)
			break;
		pthread_mutex_unlock(&w->mu);
		eng_ckpt_result res;
		eng_err err = {0};
		int ok = eng_ckpt_write(&w->snap, w->dir, w->name[0] ? w->name : NULL, w->keep, &res,
				 &err) == 0;
		eng_ckpt_snap_free(&w->snap);
		if (w->done)
			w->done(w->ud, ok, &res, err.msg);
		pthread_mutex_lock(&w->mu);
		w->busy = 0;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

eng_ckpt_writer *eng_ckpt_writer_start(void)
{
	eng_ckpt_writer *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
		free(w);
		return NULL;
	}
	return w;
}

int eng_ckpt_writer_submit(eng_ckpt_writer *w, eng_ckpt_snap *s, const char *dir,
	const char *name, int keep, eng_ckpt_done_fn done, void *ud)
{
	pthread_mutex_lock(&w->mu);
	if (w->busy) {
		pthread_mutex_unlock(&w->mu);
		return -1;
	}
	w->snap = *s;
	memset(s, 0, sizeof *s); /* the writer owns the buffers now */
	snprintf(w->dir, sizeof w->dir, "%s", dir);
	snprintf(w->name, sizeof w->name, "%s", name ? name : "");
	w->keep = keep;
	w->done = done;
	w->ud = ud;
	w->busy = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int eng_ckpt_writer_busy(eng_ckpt_writer *w)
{
	pthread_mutex_lock(&w->mu);
	int b = w->busy;
	pthread_mutex_unlock(&w->mu);
	return b;
}

void eng_ckpt_writer_wait(eng_ckpt_writer *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	while (w->busy)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

void eng_ckpt_writer_stop(eng_ckpt_writer *w)
{
	if (!w)
		return;
	eng_ckpt_writer_wait(w);
	pthread_mutex_lock(&w->mu);
	w->quit = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}
