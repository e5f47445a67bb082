/*
 * standbytab.c: the standby agents tdlisten knows and what it asked of them
 * (see standbytab.h).  A list, searched whole for each control request: a
 * request is rare, and 10,000 entries are walked in well under a
 * millisecond.
 */
#include <fnmatch.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "flight.h"
#include "listener.h"
#include "log.h"
#include "output.h"
#include "standbytab.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

/* One standby agent. */
struct standbytab_entry {
	int			(*send)(void *, const void *, size_t);
	void			*send_arg;
	char			 identity[TD_MAX_NAME_LEN + 1];
	char			 peer[64];
	char			 host[TD_MAX_NAME_LEN + 1];
	char			 kernel[TD_MAX_NAME_LEN + 1];
	char			 clocks[TD_STANDBY_CLOCKS + 1];
	char			 recording[TD_MAX_NAME_LEN + 1]; /* "": idle */
	char			 allow[TD_STANDBY_EVENTS + 1];	/* "": unknown */
	uint32_t		 max_buffer, max_duration;	/* 0: unknown */
	char			 refused[80];	/* the last refusal, "" */
	char			*file;		/* its recording's file, NULL */
	bool			 complete;	/* ... put in place whole */
	uint32_t		 ncpus;
	uint32_t		 seconds;	/* the last START's, 0: its own */
	struct standbytab_reply	*waiter;	/* who waits for an ANSWER */
	uint32_t		 req;		/* ... to this request */
	bool			 ready;		/* READY to req: waits for GO */
	bool			 snapping;	/* req is a SNAPSHOT: its waiter
						   waits for FINISHED too */
	uint16_t		 version;	/* its STANDBY's */
	char			 armed[TD_MAX_NAME_LEN + 1]; /* its group, "" */
	time_t			 armed_since;
	uint32_t		 armed_kb;	/* its ring per CPU */
	long long		 window_ms;	/* how far back it reaches, -1 */
	char			 arming[TD_MAX_NAME_LEN + 1]; /* ARM's, waits */
	struct standbytab_entry	*prev, *next;
};

static struct standbytab_entry	*standbytab_list_head;
/* the last request's number */
static uint32_t		 standbytab_reqs;

static void	standbytab_take_file(struct standbytab_entry *);

/* A line to r. */
static void standbytab_line(struct standbytab_reply *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static void
standbytab_line(struct standbytab_reply *r, const char *fmt, ...)
{
	char line[TD_MAX_ERROR_LEN + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	r->line(r->arg, line);
}

/*
 * Make what an agent says one word of printable ASCII: a space (or a
 * control or non-ASCII byte) would start a field of its own in the list's
 * "key=value" line (issue 31 row 12: a kernel string forged recording=
 * and peer=).  keep: a byte left as it is (the clocks' separator).
 */
static void
standbytab_plain(char *s, char keep)
{
	unsigned char *p;

	for (p = (unsigned char *)s; *p != '\0'; p++)
		if ((*p <= ' ' || *p >= 0x7f) && *p != (unsigned char)keep)
			*p = '_';
}

struct standbytab_entry *
standbytab_add(const char *identity, const char *peer,
    const struct td_standby *st, int (*send)(void *, const void *, size_t),
    void *arg)
{
	struct standbytab_entry *sb = xcalloc(1, sizeof *sb);
	size_t i, n;

	sb->send = send;
	sb->send_arg = arg;
	snprintf(sb->identity, sizeof sb->identity, "%s", identity);
	snprintf(sb->peer, sizeof sb->peer, "%s", peer);
	snprintf(sb->host, sizeof sb->host, "%s", st->host);
	snprintf(sb->kernel, sizeof sb->kernel, "%s", st->kernel);
	snprintf(sb->clocks, sizeof sb->clocks, "%s", st->clocks);
	snprintf(sb->recording, sizeof sb->recording, "%s", st->recording);
	/* what the agent says is printed and logged: keep it plain, one
	   field each (the allowance: event globs, commas, no spaces) */
	output_sanitize(sb->host);
	output_sanitize(sb->recording);
	standbytab_plain(sb->kernel, '\0');
	standbytab_plain(sb->clocks, ' ');
	for (i = 0, n = 0; st->allow[i] != '\0'; i++)
		if (st->allow[i] != ' ')
			sb->allow[n++] = strchr("abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:,*?[]",
			    st->allow[i]) != NULL ? st->allow[i] : '_';
	sb->allow[n] = '\0';
	sb->max_buffer = st->max_buffer;
	sb->max_duration = st->max_duration;
	sb->ncpus = st->ncpus;
	sb->version = st->version;
	sb->next = standbytab_list_head;
	if (sb->next != NULL)
		sb->next->prev = sb;
	standbytab_list_head = sb;
	log_info("standby %s (%s): host %s, %u CPUs, kernel %s%s%s", identity,
	    peer, sb->host, sb->ncpus, sb->kernel,
	    sb->recording[0] != '\0' ? ", recording " : "", sb->recording);
	return sb;
}

int
standbytab_count(const char *identity)
{
	struct standbytab_entry *sb;
	int n = 0;

	for (sb = standbytab_list_head; sb != NULL; sb = sb->next)
		if (strcmp(sb->identity, identity) == 0)
			n++;
	return n;
}

/* Give up sb's waiter, with a line saying why (NULL: none). */
static void
standbytab_release(struct standbytab_entry *sb, const char *why)
{
	struct standbytab_reply *r = sb->waiter;

	if (r == NULL)
		return;
	sb->waiter = NULL;
	sb->snapping = false;
	if (why != NULL)
		standbytab_line(r, "%s %s", why, sb->identity);
	r->settle(r->arg);
}

/* GO for START req to sb: 0, or -1 (its connection is going). */
static int
standbytab_send_go(struct standbytab_entry *sb, uint32_t req)
{
	struct td_buf f;
	int r;

	td_buf_init(&f, TD_FRAME_HEADER + 4);
	td_msg_pack_go(&f, req);
	r = sb->send(sb->send_arg, f.data, f.len);
	td_buf_free(&f);
	return r;
}

/*
 * The recordings of START req (asked by r) begin together: once every
 * agent still answering it is READY (set up, connected, its tracing off),
 * a GO goes to each in this one pass, and r hears of them.
 */
static void
standbytab_go(struct standbytab_reply *r, uint32_t req)
{
	struct standbytab_entry *sb, *next;
	int n = 0;

	for (sb = standbytab_list_head; sb != NULL; sb = sb->next)
		if (sb->waiter == r && sb->req == req && !sb->ready)
			return;		/* not all ready yet */
	for (sb = standbytab_list_head; sb != NULL; sb = next) {
		next = sb->next;
		if (sb->waiter != r || sb->req != req)
			continue;
		sb->ready = false;
		n++;
		if (standbytab_send_go(sb, req) == -1)
			standbytab_release(sb, "error cannot queue GO to");
		else if (sb->snapping)
			standbytab_line(r, "go %s", sb->identity);
		else
			standbytab_release(sb, "go");
	}
	if (n > 0)
		log_info("control: GO to %d standby agents (request %" PRIu32
		    ")", n, req);
}

void
standbytab_remove(struct standbytab_entry *sb)
{
	if (sb == NULL)
		return;
	struct standbytab_reply *r = sb->waiter;
	uint32_t req = sb->req;

	log_info("standby %s (%s): gone", sb->identity, sb->peer);
	standbytab_release(sb, "lost");
	if (sb->prev != NULL)
		sb->prev->next = sb->next;
	else
		standbytab_list_head = sb->next;
	if (sb->next != NULL)
		sb->next->prev = sb->prev;
	free(sb->file);
	free(sb);
	if (r != NULL)
		standbytab_go(r, req);	/* it was the last not READY */
}

void
standbytab_answer(struct standbytab_entry *sb, const struct td_answer *a)
{
	char text[TD_MAX_ERROR_LEN + 1];
	bool mine = sb->waiter != NULL && a->req == sb->req;

	struct standbytab_reply *r = sb->waiter;

	snprintf(text, sizeof text, "%s", a->text);
	switch (a->what) {
	case TD_ANSWER_STARTED:
		/* "NAME pid PID": the name is the first word */
		snprintf(sb->recording, sizeof sb->recording, "%.*s",
		    (int)strcspn(text, " "), text);
		output_sanitize(sb->recording);
		sb->refused[0] = '\0';
		log_info("standby %s: started recording %s", sb->identity,
		    text);
		if (mine)
			standbytab_line(sb->waiter, "started %s %s",
			    sb->identity, text);
		/* answered for good once READY (or gone) */
		return;
	case TD_ANSWER_READY:
		if (!mine) {
			/* nobody waits with it (tdctl gone, or its time
			   up): it goes at once */
			standbytab_send_go(sb, a->req);
			return;
		}
		log_info("standby %s: recording %s ready", sb->identity,
		    sb->recording);
		sb->ready = true;
		standbytab_go(sb->waiter, sb->req);
		return;
	case TD_ANSWER_REFUSED:
		snprintf(sb->refused, sizeof sb->refused, "%.79s", text);
		log_warnx("standby %s: refused: %s", sb->identity, text);
		if (mine)
			standbytab_line(sb->waiter, "refused %s %s",
			    sb->identity, text);
		break;
	case TD_ANSWER_FINISHED:
		log_info("standby %s: finished %s", sb->identity, text);
		if (sb->file == NULL)
			standbytab_take_file(sb);
		sb->recording[0] = '\0';
		/* its file, put in place before the agent heard DONE */
		if (mine)
			standbytab_line(sb->waiter, "finished %s %s",
			    sb->identity, text);
		if (mine && sb->file != NULL)
			standbytab_line(sb->waiter, "%s %s %s", sb->complete ?
			    "file" : "incomplete", sb->identity, sb->file);
		free(sb->file);
		sb->file = NULL;
		break;
	}
	if (mine) {
		sb->ready = false;
		sb->snapping = false;
		standbytab_release(sb, NULL);
		/* it may have been the last of a START not READY */
		standbytab_go(r, a->req);
	}
}

/*
 * A recording's file comes with its identity and name only: which of the
 * standby agents of that identity recording that name it belongs to, the
 * listener cannot tell (two agents may share a certificate, up to
 * --max-standby-per-identity).  Each file goes to one of them without a
 * file yet, and one that finishes without one takes another's: its own
 * DONE came before its FINISHED, so one is there.  Every agent that
 * finishes then names one file, and every file is named once.
 */
static void
standbytab_take_file(struct standbytab_entry *sb)
{
	struct standbytab_entry *o;

	for (o = standbytab_list_head; o != NULL; o = o->next) {
		if (o == sb || o->file == NULL ||
		    strcmp(o->identity, sb->identity) != 0 ||
		    strcmp(o->recording, sb->recording) != 0)
			continue;
		sb->file = o->file;
		sb->complete = o->complete;
		o->file = NULL;
		return;
	}
}

void
standbytab_file(const char *identity, const char *name, const char *path,
    bool complete)
{
	struct standbytab_entry *sb, *to = NULL;

	for (sb = standbytab_list_head; sb != NULL; sb = sb->next) {
		if (strcmp(sb->identity, identity) != 0 ||
		    sb->recording[0] == '\0' ||
		    strcmp(sb->recording, name) != 0)
			continue;
		if (to == NULL || (to->file != NULL && sb->file == NULL))
			to = sb;
		if (to->file == NULL)
			break;
	}
	if (to == NULL)
		return;
	free(to->file);
	to->file = xstrdup(path);
	to->complete = complete;
}

/* sb's state as the list shows it. */
static const char *
standbytab_state(const struct standbytab_entry *sb)
{
	if (sb->recording[0] != '\0')
		return "recording";
	return sb->refused[0] != '\0' ? "refused" : "standby";
}

void
standbytab_list(struct td_buf *out)
{
	struct standbytab_entry *sb;
	char clocks[TD_STANDBY_CLOCKS + 1];
	size_t i;

	for (sb = standbytab_list_head; sb != NULL; sb = sb->next) {
		/* one field: the clocks joined by commas */
		snprintf(clocks, sizeof clocks, "%s", sb->clocks);
		for (i = 0; clocks[i] != '\0'; i++)
			if (clocks[i] == ' ')
				clocks[i] = ',';
		/* refused= last: its value has spaces */
		td_buf_printf(out, "agent %s host=%s state=%s cpus=%u "
		    "kernel=%s clocks=%s recording=%s peer=%s allow=%s "
		    "max-buffer=%" PRIu32 " max-duration=%" PRIu32 " armed=%s",
		    sb->identity, sb->host, standbytab_state(sb), sb->ncpus,
		    sb->kernel, clocks[0] ? clocks : "-",
		    sb->recording[0] ? sb->recording : "-", sb->peer,
		    sb->allow[0] ? sb->allow : "-", sb->max_buffer,
		    sb->max_duration, sb->armed[0] ? sb->armed : "-");
		if (sb->armed[0] != '\0')
			td_buf_printf(out, " armed-since=%lld ring=%" PRIu32,
			    (long long)sb->armed_since, sb->armed_kb);
		if (sb->armed[0] != '\0' && sb->window_ms >= 0)
			td_buf_printf(out, " window=%lld.%03lld",
			    sb->window_ms / 1000, sb->window_ms % 1000);
		td_buf_printf(out, "%s%s\n", sb->refused[0] ? " refused=" : "",
		    sb->refused);
	}
}

void
standbytab_each(void (*fn)(const struct standbytab_info *, void *), void *arg)
{
	struct standbytab_info i;
	struct standbytab_entry *sb;

	for (sb = standbytab_list_head; sb != NULL; sb = sb->next) {
		i.identity = sb->identity;
		i.host = sb->host;
		i.peer = sb->peer;
		i.state = standbytab_state(sb);
		i.recording = sb->recording;
		i.ncpus = sb->ncpus;
		i.seconds = sb->seconds;
		i.armed = sb->armed;
		i.armed_since = sb->armed_since;
		fn(&i, arg);
	}
}

/* Whether sb is one of pattern's. */
static bool
standbytab_matches(const struct standbytab_entry *sb, const char *pattern)
{
	return fnmatch(pattern, sb->identity, 0) == 0 ||
	    fnmatch(pattern, sb->host, 0) == 0;
}

int
standbytab_start(const char *pattern, struct td_start *req,
    struct standbytab_reply *cl)
{
	struct standbytab_entry *sb;
	struct td_buf f;
	int n = 0;

	req->req = ++standbytab_reqs;
	if (req->name[0] == '\0')
		snprintf(req->name, sizeof req->name, "ctl%" PRIu32,
		    req->req);
	td_buf_init(&f, TD_FRAME_HEADER + TD_MAX_STANDBY_MSG);
	if (td_msg_pack_start(&f, req) == -1) {
		standbytab_line(cl, "error the request does not fit a START");
		td_buf_free(&f);
		return 0;
	}
	/* every START in this one pass of the loop */
	for (sb = standbytab_list_head; sb != NULL; sb = sb->next) {
		if (!standbytab_matches(sb, pattern))
			continue;
		if (sb->recording[0] != '\0' || sb->waiter != NULL) {
			standbytab_line(cl, "busy %s %s", sb->identity,
			    sb->recording[0] ? sb->recording : "(answering)");
			continue;
		}
		if (sb->send(sb->send_arg, f.data, f.len) == -1) {
			standbytab_line(cl, "error %s cannot queue START",
			    sb->identity);
			continue;
		}
		sb->waiter = cl;
		sb->req = req->req;
		sb->seconds = req->seconds;
		n++;
	}
	td_buf_free(&f);
	if (n > 0)
		log_info("control: START '%s' sent to %d standby agents "
		    "matching '%s'", req->name, n, pattern);
	return n;
}

int
standbytab_stop(const char *pattern, const char *name,
    struct standbytab_reply *cl)
{
	struct standbytab_entry *sb;
	struct td_buf f;
	uint32_t req = ++standbytab_reqs;
	int n = 0;

	td_buf_init(&f, TD_FRAME_HEADER + 4);
	td_msg_pack_stop(&f, req);
	for (sb = standbytab_list_head; sb != NULL; sb = sb->next) {
		if (!standbytab_matches(sb, pattern) ||
		    sb->recording[0] == '\0' ||
		    (name[0] != '\0' && strcmp(name, sb->recording) != 0))
			continue;
		if (sb->waiter != NULL) {
			standbytab_line(cl, "busy %s (answering)",
			    sb->identity);
			continue;
		}
		if (sb->send(sb->send_arg, f.data, f.len) == -1)
			continue;
		sb->waiter = cl;
		sb->req = req;
		n++;
	}
	td_buf_free(&f);
	if (n > 0)
		log_info("control: STOP sent to %d standby agents", n);
	return n;
}

void
standbytab_forget(struct standbytab_reply *cl, bool say)
{
	struct standbytab_entry *sb;

	for (sb = standbytab_list_head; sb != NULL; sb = sb->next) {
		if (sb->waiter != cl)
			continue;
		sb->waiter = NULL;
		sb->snapping = false;
		if (sb->ready) {
			/* set up and waiting: it goes, with or without the
			   others (and whether or not anyone still listens) */
			sb->ready = false;
			if (standbytab_send_go(sb, sb->req) == 0 && say)
				standbytab_line(cl, "go %s (not all were "
				    "ready in time)", sb->identity);
		} else if (say)
			standbytab_line(cl, "timeout %s", sb->identity);
	}
}

/* A frame f to sb, made by pack: 0, or -1. */
static int
standbytab_send_buf(struct standbytab_entry *sb, struct td_buf *f)
{
	return sb->send(sb->send_arg, f->data, f->len);
}

/* Whether sb is busy: recording, or answering someone. */
static bool
standbytab_busy(const struct standbytab_entry *sb)
{
	return sb->recording[0] != '\0' || sb->waiter != NULL;
}

int
standbytab_arm(const char *pattern, struct td_arm *a, bool self,
    uint32_t holdoff, struct standbytab_reply *cl)
{
	struct standbytab_entry *sb;
	struct td_buf f;
	int n = 0;

	a->req = ++standbytab_reqs;
	if (a->name[0] == '\0')
		snprintf(a->name, sizeof a->name, "flight");
	td_buf_init(&f, TD_FRAME_HEADER + TD_MAX_ARM_MSG);
	if (td_msg_pack_arm(&f, a) == -1) {
		standbytab_line(cl, "error the request does not fit an ARM");
		td_buf_free(&f);
		return 0;
	}
	flight_group_set(a->name, self, holdoff);
	for (sb = standbytab_list_head; sb != NULL; sb = sb->next) {
		if (!standbytab_matches(sb, pattern))
			continue;
		if (sb->version < 3) {
			standbytab_line(cl, "refused %s cannot be armed (a "
			    "tdagent older than the flight recorder)",
			    sb->identity);
			continue;
		}
		if (sb->waiter != NULL) {
			standbytab_line(cl, "busy %s (answering)",
			    sb->identity);
			continue;
		}
		if (standbytab_send_buf(sb, &f) == -1) {
			standbytab_line(cl, "error %s cannot queue ARM",
			    sb->identity);
			continue;
		}
		sb->waiter = cl;
		sb->req = a->req;
		snprintf(sb->arming, sizeof sb->arming, "%s", a->name);
		n++;
	}
	td_buf_free(&f);
	if (n > 0)
		log_info("control: ARM '%s' sent to %d standby agents matching "
		    "'%s'", a->name, n, pattern);
	return n;
}

int
standbytab_disarm(const char *pattern, struct standbytab_reply *cl)
{
	struct standbytab_entry *sb;
	struct td_buf f;
	uint32_t req = ++standbytab_reqs;
	int n = 0;

	td_buf_init(&f, TD_FRAME_HEADER + 4);
	td_msg_pack_disarm(&f, req);
	for (sb = standbytab_list_head; sb != NULL; sb = sb->next) {
		if (!standbytab_matches(sb, pattern) || sb->armed[0] == '\0')
			continue;
		if (sb->waiter != NULL) {
			standbytab_line(cl, "busy %s (answering)",
			    sb->identity);
			continue;
		}
		if (standbytab_send_buf(sb, &f) == -1)
			continue;
		sb->waiter = cl;
		sb->req = req;
		n++;
	}
	td_buf_free(&f);
	return n;
}

/*
 * SNAPSHOT s to sb (s->req, and a name of its own when s has none);
 * waiter cl, or NULL: nobody waits, its GO goes at once.
 */
static int
standbytab_send_snapshot(struct standbytab_entry *sb, struct td_snapshot *s,
    struct standbytab_reply *cl)
{
	struct td_snapshot one = *s;
	struct td_buf f;
	int r;

	if (one.name[0] == '\0')
		snprintf(one.name, sizeof one.name, "%.40s.snap%" PRIu32,
		    sb->armed, one.req);
	td_buf_init(&f, TD_FRAME_HEADER + 18 + 2 * TD_MAX_NAME_LEN);
	r = td_msg_pack_snapshot(&f, &one);
	if (r == 0)
		r = standbytab_send_buf(sb, &f);
	td_buf_free(&f);
	if (r == 0 && one.why != TD_SNAP_REARM) {
		sb->waiter = cl;
		sb->req = one.req;
		sb->snapping = cl != NULL;
	}
	return r;
}

int
standbytab_snapshot(const char *pattern, const char *name,
    struct standbytab_reply *cl)
{
	struct td_snapshot s;
	struct standbytab_entry *sb;
	int n = 0;

	memset(&s, 0, sizeof s);
	s.req = ++standbytab_reqs;
	s.why = TD_SNAP_OPERATOR;
	snprintf(s.name, sizeof s.name, "%s", name);
	/* every SNAPSHOT in this one pass: the rings freeze together */
	for (sb = standbytab_list_head; sb != NULL; sb = sb->next) {
		if (!standbytab_matches(sb, pattern) || sb->armed[0] == '\0')
			continue;
		if (standbytab_busy(sb)) {
			standbytab_line(cl, "busy %s %s", sb->identity,
			    sb->recording[0] ? sb->recording : "(answering)");
			continue;
		}
		if (standbytab_send_snapshot(sb, &s, cl) == -1) {
			standbytab_line(cl, "error %s cannot queue SNAPSHOT",
			    sb->identity);
			continue;
		}
		n++;
	}
	if (n > 0)
		log_info("control: SNAPSHOT sent to %d armed agents", n);
	return n;
}

void
standbytab_armed(struct standbytab_entry *sb, const struct td_armed *a)
{
	bool mine = sb->waiter != NULL && a->req == sb->req && a->req != 0;
	char text[TD_MAX_ERROR_LEN + 1];

	/* printable already (the decoder takes nothing else) */
	snprintf(text, sizeof text, "%s", a->text);
	switch (a->what) {
	case TD_ARMED_OK:
		if (!mine)
			return;
		snprintf(sb->armed, sizeof sb->armed, "%s", sb->arming);
		sb->armed_since = time(NULL);
		sb->window_ms = -1;
		/* "NAME INSTANCE KB" */
		sb->armed_kb = (uint32_t)strtoul(strrchr(text, ' ') != NULL ?
		    strrchr(text, ' ') + 1 : "0", NULL, 10);
		log_info("standby %s: armed '%s'", sb->identity, sb->armed);
		standbytab_line(sb->waiter, "armed %s %s", sb->identity,
		    sb->armed);
		break;
	case TD_ARMED_FAILED:
		log_warnx("standby %s: arming refused: %s", sb->identity,
		    text);
		if (mine)
			standbytab_line(sb->waiter, "refused %s %s",
			    sb->identity, text);
		break;
	case TD_ARMED_DISARMED:
		log_info("standby %s: disarmed '%s'", sb->identity, sb->armed);
		sb->armed[0] = '\0';
		if (mine)
			standbytab_line(sb->waiter, "disarmed %s",
			    sb->identity);
		break;
	case TD_ARMED_WINDOW:
		/* "NAME MS", with each KEEPALIVE */
		if (sb->armed[0] != '\0' && strchr(text, ' ') != NULL)
			sb->window_ms = strtoll(strchr(text, ' ') + 1, NULL,
			    10);
		return;
	case TD_ARMED_REARMED:
		/* "NAME why": armed still, after a lost connection */
		snprintf(sb->armed, sizeof sb->armed, "%.*s",
		    (int)strcspn(text, " "), text);
		if (sb->armed_since == 0) {
			sb->armed_since = time(NULL);
			sb->window_ms = -1;
		}
		log_info("standby %s: %s", sb->identity, text);
		return;
	}
	if (mine) {
		sb->arming[0] = '\0';
		standbytab_release(sb, NULL);
	}
}

void
standbytab_triggered(struct standbytab_entry *sb, const struct td_triggered *t)
{
	struct td_snapshot s;
	struct timespec real, mono;
	struct standbytab_entry *o;
	bool self;
	int n = 0;

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	memset(&s, 0, sizeof s);
	s.when_ns = (uint64_t)real.tv_sec * 1000000000ULL + real.tv_nsec;
	if (sb->armed[0] == '\0') {
		log_warnx("standby %s: a trigger, and not armed", sb->identity);
		return;
	}
	log_info("standby %s: trigger of '%s' fired (its clock %" PRIu64
	    " ns, its real time %" PRIu64 " ns, at most %" PRIu32 " ms "
	    "before)", sb->identity, sb->armed, t->clock_ns, t->real_ns,
	    t->late_ms);
	if (!flight_trigger(sb->armed, sb->identity, s.when_ns,
	    (uint64_t)mono.tv_sec, s.name, sizeof s.name, &self)) {
		log_info("standby %s: trigger of '%s' within its hold-off: "
		    "counted, re-armed", sb->identity, sb->armed);
		s.why = TD_SNAP_REARM;
		standbytab_send_snapshot(sb, &s, NULL);
		return;
	}
	flight_trigger_clock(sb->armed, t->clock_ns);
	s.req = ++standbytab_reqs;
	s.why = TD_SNAP_TRIGGER;
	snprintf(s.host, sizeof s.host, "%s", sb->identity);
	for (o = standbytab_list_head; o != NULL; o = o->next) {
		if (strcmp(o->armed, sb->armed) != 0 || (self && o != sb))
			continue;
		if (standbytab_busy(o) && o != sb) {
			log_warnx("standby %s: busy, not in snapshot '%s'",
			    o->identity, s.name);
			continue;
		}
		if (standbytab_send_snapshot(o, &s, NULL) == 0)
			n++;
	}
	log_info("control: snapshot '%s' of %d armed agents (trigger on %s)",
	    s.name, n, sb->identity);
}
