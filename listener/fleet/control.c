/*
 * control.c: tdlisten's control socket (see control.h), the way tdctl
 * lists the standby agents and starts and stops their recordings.
 *
 * Requests, one line each, fields separated by tabs (tdctl never puts a
 * tab or a newline in a field):
 *	list
 *	start PATTERN EVENTS FILTER KB CLOCK SECONDS NAME
 *	stop PATTERN NAME
 *	arm PATTERN EVENTS FILTER KB NAME TRIGGER FANOUT HOLDOFF
 *	disarm PATTERN
 *	snapshot PATTERN NAME
 *	reload
 * The answer is lines (standbytab.c writes one per agent as it answers),
 * then "." alone once every agent asked has answered, gone, or
 * CONTROL_WAIT seconds passed.  A client reads nothing more while it
 * waits.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "buf.h"
#include "client.h"
#include "control.h"
#include "flight.h"
#include "log.h"
#include "standbytab.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

/* Seconds a request waits for its agents' answers. */
#define CONTROL_WAIT		120
/* The longest request line. */
#define CONTROL_LINE_MAX	(2 * TD_MAX_FILTER_LEN + TD_STANDBY_EVENTS + 512)
/* The most fields of a request (arm's). */
#define CONTROL_FIELDS		9
/*
 * One tdctl: its requests and answers in a client of the client layer
 * (client.h), which owns the connection, the CONTROL_WAIT deadline, the
 * list and the count (TD_CONTROL_MAX_CLIENTS, apart from --max-sessions).
 */
struct control_client {
	struct client		*client;
	struct bufferevent	*bev;		/* client's */
	struct standbytab_reply	 reply;		/* its agents' answers */
	int			 pending;	/* agents yet to answer */
	bool			 waiting;
	bool			 paused;	/* its answers unread: reads
						   wait for them to drain */
};

static struct evconnlistener	*control_lev;
static char			*control_path;
static int			(*control_reload)(char *, size_t);

void
control_set_reload(int (*fn)(char *, size_t))
{
	control_reload = fn;
}

/* The client layer's free hook: no agent answers cl any more. */
static void
control_client_free_cb(void *arg)
{
	struct control_client *cl = arg;

	standbytab_forget(&cl->reply, false);
	free(cl);
}

static void
control_client_free(struct control_client *cl)
{
	client_free(cl->client);
}

/* A line (no newline) to cl's answer. */
static void control_line(struct control_client *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static void
control_line(struct control_client *cl, const char *fmt, ...)
{
	struct evbuffer *out = bufferevent_get_output(cl->bev);
	va_list ap;

	va_start(ap, fmt);
	evbuffer_add_vprintf(out, fmt, ap);
	va_end(ap);
	evbuffer_add(out, "\n", 1);
}

/* Whether cl's unread answers reached TD_MAX_CONTROL_OUT. */
static bool
control_full(struct control_client *cl)
{
	return evbuffer_get_length(bufferevent_get_output(cl->bev)) >=
	    TD_MAX_CONTROL_OUT;
}

/* The answer is complete: "." and the next request (once cl reads). */
static void
control_done(struct control_client *cl)
{
	cl->waiting = false;
	cl->pending = 0;
	client_deadline_clear(cl->client);
	control_line(cl, ".");
	if (control_full(cl))
		cl->paused = true;
	else {
		bufferevent_enable(cl->bev, EV_READ);
		/* requests read already wait for no more bytes (found by
		   fuzz-control); on the loop's next turn, not inside the
		   agent's answer that brought us here */
		if (evbuffer_get_length(bufferevent_get_input(cl->bev)) > 0)
			bufferevent_trigger(cl->bev, EV_READ,
			    BEV_TRIG_DEFER_CALLBACKS);
	}
}

/* An agent's answer, a line. */
static void
control_reply_cb(void *arg, const char *text)
{
	control_line(arg, "%s", text);
}

/* One of the agents cl waits for has answered (or gone). */
static void
control_settle_cb(void *arg)
{
	struct control_client *cl = arg;

	if (cl->pending > 0 && --cl->pending == 0 && cl->waiting)
		control_done(cl);
}

static void
control_timer_cb(struct client *c, void *arg)
{
	struct control_client *cl = arg;

	(void)c;
	standbytab_forget(&cl->reply, true);
	control_done(cl);
}

/* A number field: 0..max, or -1. */
static long
control_number(const char *s, long max)
{
	char *end;
	long v;

	if (*s == '\0')
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0 || v > max)
		return -1;
	return v;
}

/* Copy field s into out[cap]: -1 when it does not fit. */
static int
control_field(char *out, size_t cap, const char *s)
{
	if (strlen(s) >= cap)
		return -1;
	snprintf(out, cap, "%s", s);
	return 0;
}

/*
 * arm PATTERN EVENTS FILTER KB NAME TRIGGER FANOUT HOLDOFF: ARM sent
 * (cl->pending set), or -1 with the error and "." said.
 */
static int
control_arm(struct control_client *cl, char **f)
{
	struct td_arm *a = xcalloc(1, sizeof *a);
	long kb, holdoff;
	bool self = strcmp(f[7], "self") == 0;

	if ((kb = control_number(f[4], UINT32_MAX / 2)) == -1 ||
	    (holdoff = control_number(f[8], 86400 * 365)) == -1 ||
	    control_field(a->events, sizeof a->events, f[2]) == -1 ||
	    control_field(a->filter, sizeof a->filter, f[3]) == -1 ||
	    control_field(a->name, sizeof a->name, f[5]) == -1 ||
	    control_field(a->trigger, sizeof a->trigger, f[6]) == -1 ||
	    (!self && f[7][0] != '\0' && strcmp(f[7], "group") != 0) ||
	    a->events[0] == '\0') {
		control_line(cl, "error malformed arm request");
		control_line(cl, ".");
		free(a);
		return -1;
	}
	a->buffer_kb = (uint32_t)kb;
	cl->pending = standbytab_arm(f[1][0] ? f[1] : "*", a, self,
	    f[8][0] != '\0' ? (uint32_t)holdoff : FLIGHT_HOLDOFF_DEFAULT,
	    &cl->reply);
	free(a);
	return 0;
}

/* One request line; false: malformed (the client is closed). */
static bool
control_request(struct control_client *cl, char *line)
{
	char *f[CONTROL_FIELDS], *p = line;
	struct td_start st;
	struct td_buf out;
	int n = 0;
	long kb, secs;

	/* printable ASCII and tabs only: a field may be echoed back (found
	   by fuzz-control), and no frame to an agent carries other bytes */
	for (p = line; *p != '\0'; p++)
		if ((*p < 0x20 && *p != '\t') || *p > 0x7e)
			return false;
	p = line;
	while (n < CONTROL_FIELDS && (f[n] = strsep(&p, "\t")) != NULL)
		n++;
	if (p != NULL)
		return false;
	if (n == 1 && strcmp(f[0], "list") == 0) {
		td_buf_init(&out, 64 * 1024 * 1024);
		standbytab_list(&out);
		if (out.len > 0)
			bufferevent_write(cl->bev, out.data, out.len);
		td_buf_free(&out);
		control_line(cl, ".");
		return true;
	}
	if (n == 1 && strcmp(f[0], "reload") == 0) {
		char msg[1200];

		if (control_reload == NULL)
			control_line(cl, "error reload is not supported here");
		else if (control_reload(msg, sizeof msg) == -1)
			control_line(cl, "error %s", msg);
		else
			control_line(cl, "reloaded: %s", msg);
		control_line(cl, ".");
		return true;
	}
	memset(&st, 0, sizeof st);
	if (n == 8 && strcmp(f[0], "start") == 0) {
		if ((kb = control_number(f[4], UINT32_MAX / 2)) == -1 ||
		    (secs = control_number(f[6], UINT32_MAX / 2)) == -1 ||
		    control_field(st.events, sizeof st.events, f[2]) == -1 ||
		    control_field(st.filter, sizeof st.filter, f[3]) == -1 ||
		    control_field(st.clock, sizeof st.clock, f[5]) == -1 ||
		    control_field(st.name, sizeof st.name, f[7]) == -1 ||
		    st.events[0] == '\0') {
			control_line(cl, "error malformed start request");
			control_line(cl, ".");
			return true;
		}
		st.buffer_kb = (uint32_t)kb;
		st.seconds = (uint32_t)secs;
		cl->pending = standbytab_start(f[1][0] ? f[1] : "*", &st,
		    &cl->reply);
	} else if (n == 3 && strcmp(f[0], "stop") == 0)
		cl->pending = standbytab_stop(f[1][0] ? f[1] : "*", f[2],
		    &cl->reply);
	else if (n == 9 && strcmp(f[0], "arm") == 0) {
		if (control_arm(cl, f) == -1)
			return true;
	} else if (n == 2 && strcmp(f[0], "disarm") == 0)
		cl->pending = standbytab_disarm(f[1][0] ? f[1] : "*",
		    &cl->reply);
	else if (n == 3 && strcmp(f[0], "snapshot") == 0)
		cl->pending = standbytab_snapshot(f[1][0] ? f[1] : "*", f[2],
		    &cl->reply);
	else
		return false;
	if (cl->pending == 0) {
		/* say what was not found: "none" starts the line still */
		if (strcmp(f[0], "stop") == 0 && f[2][0] != '\0')
			control_line(cl, "none: no such recording '%s'%s%s",
			    f[2], f[1][0] ? " on agents matching " : "",
			    f[1]);
		else if (strcmp(f[0], "stop") == 0)
			control_line(cl, "none: no recording to stop%s%s",
			    f[1][0] ? " on agents matching " : "", f[1]);
		else if (strcmp(f[0], "snapshot") == 0 ||
		    strcmp(f[0], "disarm") == 0)
			control_line(cl, "none: no armed agent%s%s",
			    f[1][0] ? " matching " : "", f[1]);
		else
			control_line(cl, "none: no agent to ask");
		control_line(cl, ".");
		return true;
	}
	/* nothing more from this client until its agents answered */
	cl->waiting = true;
	bufferevent_disable(cl->bev, EV_READ);
	client_deadline(cl->client, CONTROL_WAIT * 1000L);
	return true;
}

static void
control_read_cb(struct bufferevent *bev, void *arg)
{
	struct control_client *cl = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n;
	char *line;

	while (!cl->waiting) {
		/*
		 * A client that asks and does not read: its requests wait
		 * (nothing more is read) until its answers drain below half
		 * the cap, so they hold at most TD_MAX_CONTROL_OUT and one
		 * answer (issue 31: 100 KB of "list" made 396 MB).
		 */
		if (control_full(cl)) {
			cl->paused = true;
			bufferevent_disable(bev, EV_READ);
			return;
		}
		line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF);
		if (line == NULL) {
			if (evbuffer_get_length(in) > CONTROL_LINE_MAX) {
				log_warnx("control: a request longer than %d "
				    "bytes: closing that client",
				    CONTROL_LINE_MAX);
				control_client_free(cl);
			}
			return;
		}
		if (n > CONTROL_LINE_MAX || !control_request(cl, line)) {
			log_warnx("control: a malformed request: closing "
			    "that client");
			free(line);
			control_client_free(cl);
			return;
		}
		free(line);
	}
}

/* cl's answers drained below the low watermark: its requests go on. */
static void
control_write_cb(struct bufferevent *bev, void *arg)
{
	struct control_client *cl = arg;

	if (!cl->paused || cl->waiting || control_full(cl))
		return;
	cl->paused = false;
	bufferevent_enable(bev, EV_READ);
	control_read_cb(bev, cl);	/* the requests read already */
}

static void
control_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	control_client_free(arg);
}

/* What the client layer calls control.c for. */
static const struct client_hooks control_hooks = {
	.free = control_client_free_cb,
	.deadline = control_timer_cb,
};

static void
control_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct control_client *cl;

	(void)lev;
	(void)sa;
	(void)salen;
	(void)arg;
	/* local operators: their own cap, not --max-sessions */
	if (client_may_open(CLIENT_CONTROL, "") != CLIENT_YES) {
		log_warnx("control: %d clients already: refusing one",
		    client_count(CLIENT_CONTROL));
		evutil_closesocket(fd);
		return;
	}
	cl = xcalloc(1, sizeof *cl);
	cl->client = client_new(CLIENT_CONTROL, fd, "control", &control_hooks,
	    cl);
	if (client_set_plain(cl->client) == -1) {
		client_free(cl->client);
		return;
	}
	client_admit(cl->client, "");
	cl->bev = client_bev(cl->client);
	cl->reply.line = control_reply_cb;
	cl->reply.settle = control_settle_cb;
	cl->reply.arg = cl;
	client_setcb(cl->client, control_read_cb, control_write_cb,
	    control_event_cb);
	bufferevent_setwatermark(cl->bev, EV_WRITE, TD_MAX_CONTROL_OUT / 2, 0);
	bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
}

int
control_start(struct event_base *base, const char *path, uid_t uid,
    gid_t gid, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct stat st;
	char *dir, *slash;
	mode_t old;
	int fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		snprintf(err, errlen, "'%s': path too long", path);
		return -1;
	}
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	/* its directory (/run/tdlisten) when missing, nobody else's */
	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) == 0 && uid != (uid_t)-1 &&
		    chown(dir, uid, gid) == -1) {
			snprintf(err, errlen, "cannot chown '%s': %s", dir,
			    strerror(errno));
			free(dir);
			return -1;
		}
	}
	free(dir);
	/*
	 * A socket left by an earlier tdlisten, never another file, and
	 * never one a live tdlisten listens on: taking it over would leave
	 * that one unreachable (as a port in use, it is refused).  Only a
	 * socket nobody accepts on (ECONNREFUSED) is stale.
	 */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "'%s' exists and is not a socket",
			    path);
			return -1;
		}
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) ==
		    -1) {
			snprintf(err, errlen, "socket: %s", strerror(errno));
			return -1;
		}
		if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0) {
			snprintf(err, errlen, "'%s' is in use: another "
			    "tdlisten listens on it", path);
			close(fd);
			return -1;
		}
		if (errno != ECONNREFUSED) {
			snprintf(err, errlen, "cannot tell whether '%s' is in "
			    "use: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		close(fd);
		unlink(path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	old = umask(0117);
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		umask(old);
		snprintf(err, errlen, "bind '%s': %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	if (chmod(path, 0660) == -1 || ((uid != (uid_t)-1 ||
	    gid != (gid_t)-1) && chown(path, uid, gid) == -1)) {
		snprintf(err, errlen, "'%s': %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	control_lev = evconnlistener_new(base, control_accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE, 16, fd);
	if (control_lev == NULL) {
		snprintf(err, errlen, "cannot listen on '%s'", path);
		close(fd);
		unlink(path);
		return -1;
	}
	control_path = xstrdup(path);
	log_info("control socket %s", path);
	return 0;
}

void
control_free(void)
{
	client_free_all(CLIENT_CONTROL);
	if (control_lev != NULL) {
		evconnlistener_free(control_lev);
		control_lev = NULL;
	}
	if (control_path != NULL) {
		/* may fail after -u: the directory is root's */
		unlink(control_path);
		free(control_path);
		control_path = NULL;
	}
}
