/*
 * reconnect.c: the reconnection thread of the agent's session (see
 * reconnect.h).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "reconnect.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

/* Reconnection backoff. */
#define RECONNECT_BACKOFF_MIN_MS	100
#define RECONNECT_BACKOFF_MAX_MS	5000

/* One reconnector: its thread, its wake-ups and the result of an attempt. */
struct reconnect {
	int		(*dial)(void *, struct conn **, struct td_welcome *,
			    bool *, char *, size_t);
	void		*arg;
	pthread_t	 thr;
	bool		 on;		/* started, result not taken */
	atomic_bool	 stop;		/* set by the loop, read by the thread */
	bool		 later;		/* wait before the first dial */
	int		 evfd;		/* the attempt is over */
	int		 stopfd;	/* wakes the thread's backoff */
	uint64_t	 delay;		/* backoff, ms */
	struct conn	*c;		/* the thread's result */
	struct td_welcome w;
	int		 status;	/* 0 up, -1 given up */
	char		 err[512];
};

/* A reconnector that dials with dial_cb (reconnect.h). */
struct reconnect *
reconnect_new(int (*dial_cb)(void *, struct conn **, struct td_welcome *,
    bool *, char *, size_t), void *arg, char *err, size_t errlen)
{
	struct reconnect *rc;

	rc = xcalloc(1, sizeof *rc);
	rc->dial = dial_cb;
	rc->arg = arg;
	rc->delay = RECONNECT_BACKOFF_MIN_MS;
	rc->stopfd = -1;
	if ((rc->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1 ||
	    (rc->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		reconnect_free(rc);
		return NULL;
	}
	return rc;
}

/* Sleep about rc->delay ms (50% to 150%: jitter), then double it. */
static void
reconnect_backoff(struct reconnect *rc)
{
	uint64_t wait;
	unsigned int r;

	if (getrandom(&r, sizeof r, 0) != sizeof r)
		r = (unsigned int)td_clock_now_ms();
	wait = rc->delay / 2 + r % (rc->delay + 1);
	if (!rc->stop) {
		struct pollfd pfd = { rc->stopfd, POLLIN, 0 };

		poll(&pfd, 1, (int)wait);
	}
	rc->delay = rc->delay * 2 > RECONNECT_BACKOFF_MAX_MS ?
	    RECONNECT_BACKOFF_MAX_MS : rc->delay * 2;
}

/* One attempt: dial until up, hopeless or stopped; then say so. */
static void *
reconnect_thread(void *arg)
{
	struct reconnect *rc = arg;
	uint64_t one = 1;
	bool fatal;

	/* told to come back later: not at once */
	if (rc->later)
		reconnect_backoff(rc);
	for (;;) {
		if (rc->stop) {
			rc->status = -1;
			break;
		}
		if (rc->dial(rc->arg, &rc->c, &rc->w, &fatal, rc->err,
		    sizeof rc->err) == 0) {
			rc->status = 0;
			break;
		}
		if (fatal) {
			rc->status = -1;
			break;
		}
		reconnect_backoff(rc);
	}
	if (write(rc->evfd, &one, sizeof one) != sizeof one)
		rc->status = -1;
	return NULL;
}

/* Start an attempt unless one runs (reconnect.h). */
int
reconnect_start(struct reconnect *rc, bool later, char *err, size_t errlen)
{
	if (rc->on)
		return 0;
	rc->stop = false;
	rc->later = later;
	rc->c = NULL;
	rc->err[0] = '\0';
	if (pthread_create(&rc->thr, NULL, reconnect_thread, rc) != 0) {
		snprintf(err, errlen, "cannot start a thread");
		return -1;
	}
	rc->on = true;
	return 0;
}

/* The next backoff starts from the shortest wait. */
void
reconnect_reset(struct reconnect *rc)
{
	rc->delay = RECONNECT_BACKOFF_MIN_MS;
}

/* Whether an attempt runs or waits for reconnect_take(). */
bool
reconnect_running(const struct reconnect *rc)
{
	return rc->on;
}

/* The eventfd an attempt writes when it is over. */
int
reconnect_fd(const struct reconnect *rc)
{
	return rc->evfd;
}

/* Wait up to ms for the eventfd (reconnect.h). */
bool
reconnect_wait(struct reconnect *rc, int ms)
{
	struct pollfd pfd = { rc->evfd, POLLIN, 0 };
	int r;

	while ((r = poll(&pfd, 1, ms)) == -1 && errno == EINTR)
		;
	return r == 1;
}

/* Whether the attempt is over; joins its thread (reconnect.h). */
bool
reconnect_over(struct reconnect *rc)
{
	uint64_t v;

	if (!rc->on || read(rc->evfd, &v, sizeof v) != sizeof v)
		return false;
	pthread_join(rc->thr, NULL);
	rc->on = false;
	return true;
}

/* The result of an attempt that is over (reconnect.h). */
int
reconnect_take(struct reconnect *rc, struct conn **c, struct td_welcome *w,
    char *err, size_t errlen)
{
	*c = NULL;
	if (rc->status == -1) {
		snprintf(err, errlen, "%s", rc->err);
		return -1;
	}
	*c = rc->c;
	*w = rc->w;
	rc->c = NULL;
	return 0;
}

/* Tell an attempt under way to stop, without waiting for it. */
void
reconnect_stop(struct reconnect *rc)
{
	uint64_t one = 1;

	if (rc == NULL || !rc->on)
		return;
	rc->stop = true;
	if (write(rc->stopfd, &one, sizeof one) != sizeof one)
		return;
}

/* Stop and join an attempt under way, close what it made, free. */
void
reconnect_free(struct reconnect *rc)
{
	if (rc == NULL)
		return;
	if (rc->on) {
		reconnect_stop(rc);
		pthread_join(rc->thr, NULL);
	}
	conn_close(rc->c, false);
	if (rc->evfd != -1)
		close(rc->evfd);
	if (rc->stopfd != -1)
		close(rc->stopfd);
	free(rc);
}

void
reconnect_pause(struct reconnect *rc)
{
	reconnect_backoff(rc);
}
