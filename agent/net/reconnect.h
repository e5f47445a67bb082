/*
 * reconnect.h: the thread that dials the listener again after the agent's
 * connection broke (net.c starts it, the recorder's loop takes its result).
 *
 * An attempt is one thread: it calls the dial callback it was given until
 * that makes a connection, says that trying again cannot help, or the loop
 * stops the attempt, waiting between calls with exponential backoff and
 * jitter (100 ms doubling up to 5 s, each wait 50% to 150% of it).  Then
 * the thread writes an eventfd (reconnect_fd(), readable until the loop
 * takes the result with reconnect_over() and reconnect_take()) and ends.
 *
 * The thread touches its own struct and whatever the dial callback reads,
 * which must not change while an attempt runs; every function here is for
 * the loop's thread.  Nothing here logs: errors go into err.
 */
#ifndef TD_RECONNECT_H
#define TD_RECONNECT_H

#include <stdbool.h>
#include <stddef.h>

struct conn;
struct reconnect;
struct td_welcome;

/*
 * A reconnector whose attempts call dial_cb(arg, ...): 0 with a connection
 * and its WELCOME, or -1 with err and *fatal when trying again cannot help.
 * NULL with err when its eventfds cannot be made.
 */
struct reconnect *reconnect_new(int (*dial_cb)(void *arg, struct conn **c,
		    struct td_welcome *w, bool *fatal, char *err,
		    size_t errlen), void *arg, char *err, size_t errlen);
/*
 * Start an attempt unless one runs; with later, the thread waits one
 * backoff before it dials (the listener asked to come back later).  -1
 * with err when no thread can be started.
 */
int		 reconnect_start(struct reconnect *rc, bool later, char *err,
		    size_t errlen);
/*
 * Sleep one backoff on the caller's thread, then double it: between the
 * first connection's tries, before any attempt runs.
 */
void		 reconnect_pause(struct reconnect *rc);
/* The next waits start again from the shortest (a link that lived). */
void		 reconnect_reset(struct reconnect *rc);
/* Whether an attempt was started and its result not taken yet. */
bool		 reconnect_running(const struct reconnect *rc);
/* Readable when an attempt is over. */
int		 reconnect_fd(const struct reconnect *rc);
/* Wait up to ms for an attempt to be over: whether it is. */
bool		 reconnect_wait(struct reconnect *rc, int ms);
/*
 * Whether the attempt under way is over; if so its thread is gone and
 * reconnect_take() has its result.
 */
bool		 reconnect_over(struct reconnect *rc);
/*
 * The result of an attempt that is over: 0 with the connection (now the
 * caller's) and its WELCOME, or -1 with err (given up, or stopped).
 */
int		 reconnect_take(struct reconnect *rc, struct conn **c,
		    struct td_welcome *w, char *err, size_t errlen);
/* Tell an attempt under way to stop, without waiting for it. */
void		 reconnect_stop(struct reconnect *rc);
/* Stop and wait for an attempt under way, then free; NULL is fine. */
void		 reconnect_free(struct reconnect *rc);

#endif
