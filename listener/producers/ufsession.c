/*
 * ufsession.c: one uftrace run from its messages to its directory
 * (ufsession.h): a state machine walking a message's header, the head of
 * its payload and its body, each body streamed into one file of the run's
 * directory.
 *
 * Unlike uftrace recv (uftrace issue 480), which takes the client's
 * directory name as a path and dies on any malformed message, a run here
 * is only ever given DIR/uftrace-<its address>/<UTC time>/ (the name the
 * client sends is logged, never used), every length is capped (message,
 * file, run, files per run: tdlimits.h), and bad input is returned to the
 * caller, which closes that client only.  Writes are bounded per call by
 * what the caller read ahead (TD_UF_READ_AHEAD).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "listener.h"
#include "log.h"
#include "output.h"
#include "recording.h"
#include "registry.h"
#include "tdlimits.h"
#include "ufmsg.h"
#include "ufsession.h"
#include "xmalloc.h"
#include "banned.h"

/* tdagent recordings of the same host named per run (the log's) */
#define UF_MAX_PEERS		8
#define UF_CLOCK_FILE		"tdlisten.clock"
#define UF_INCOMPLETE_FILE	"tdlisten.incomplete"

enum uf_state {
	UF_HEADER,	/* waiting for a message's 8-byte header */
	UF_HEAD,	/* ... for the head of its payload */
	UF_BODY,	/* streaming its body to a file (or skipping it) */
};

/* The collection box's clocks at one moment (ns). */
struct uf_clock {
	int64_t		 mono;
	int64_t		 real;
};

/* One run: where its messages stand and the files they went to. */
struct ufsession {
	const struct listener_config	*cfg;
	char			*label;		/* the logs' */
	char			*addr;		/* path-safe */
	struct ufsession_done	 done;
	enum uf_state		 state;
	struct td_uf_hdr	 hdr;
	struct td_uf_msg	 msg;
	uint32_t		 body_left;
	int			 fd;		/* the body's file, -1: skip */
	int			 dirfd;		/* the run's, -1 before
						   DIR_NAME */
	char			*hostdir;	/* DIR/uftrace-<addr> */
	char			*stamp;		/* <UTC time>[.N] */
	uint64_t		 bytes;		/* written for the run */
	uint32_t		 files;
	uint32_t		 skipped;	/* files of no kind */
	bool			 got_info;
	struct uf_clock		 start;
	char			*peers[UF_MAX_PEERS];	/* tdagent files */
	int			 npeers;
};

static int64_t
uf_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Realtime between two monotonic readings: the offset at its midpoint. */
static void
uf_clock_now(struct uf_clock *c)
{
	int64_t m1, m2;

	m1 = uf_ns(CLOCK_MONOTONIC);
	c->real = uf_ns(CLOCK_REALTIME);
	m2 = uf_ns(CLOCK_MONOTONIC);
	c->mono = m1 + (m2 - m1) / 2;
}

/* Write the small text file name into the run's directory: 0 or -1. */
static int
uf_write_text(struct ufsession *s, const char *name, const char *text)
{
	size_t len = strlen(text), off = 0;
	ssize_t n;
	int fd;

	fd = openat(s->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, s->cfg->file_mode);
	if (fd == -1)
		return -1;
	while (off < len) {
		n = write(fd, text + off, len - off);
		if (n <= 0) {
			if (n == -1 && errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	return close(fd);
}

/*
 * The collection box's CLOCK_MONOTONIC and CLOCK_REALTIME when the run
 * began and ended (uftrace's default clock is the traced machine's
 * monotonic one: on the same machine, realtime = mono + offset).
 */
static void
uf_write_clock(struct ufsession *s)
{
	struct uf_clock end;
	char *text;

	uf_clock_now(&end);
	xasprintf(&text,
	    "# tdlisten: the receiving machine's clocks in ns, realtime = "
	    "monotonic + offset\n"
	    "start_monotonic_ns: %lld\nstart_realtime_ns: %lld\n"
	    "start_offset_ns: %lld\n"
	    "end_monotonic_ns: %lld\nend_realtime_ns: %lld\n"
	    "end_offset_ns: %lld\n",
	    (long long)s->start.mono, (long long)s->start.real,
	    (long long)(s->start.real - s->start.mono),
	    (long long)end.mono, (long long)end.real,
	    (long long)(end.real - end.mono));
	if (uf_write_text(s, UF_CLOCK_FILE, text) == -1)
		log_warn("%s: cannot write %s", s->label, UF_CLOCK_FILE);
	free(text);
}

/* registry_each(): note an open tdagent recording of the same host. */
static void
uf_peer_cb(void *rec, void *arg)
{
	struct ufsession *s = arg;
	const struct recording_params *p = recording_params(rec);
	const char *path = recording_path(rec);
	int i;

	if (strcmp(p->clock, "mono") != 0 || path == NULL)
		return;
	for (i = 0; i < s->npeers; i++)
		if (strcmp(s->peers[i], path) == 0)
			return;
	if (s->npeers < UF_MAX_PEERS)
		s->peers[s->npeers++] = xstrdup(path);
}

/*
 * The tdagent recordings of this host (its identity is the address, as
 * with --insecure) on the mono clock that are open when the run starts
 * or ends: they cover part of the run's interval.
 */
static void
uf_find_peers(struct ufsession *s)
{
	registry_each(s->addr, uf_peer_cb, s);
}

static void
uf_log_peers(struct ufsession *s, const char *dir)
{
	int i;

	for (i = 0; i < s->npeers; i++)
		log_info("%s: tdagent recording '%s' of the same host (clock "
		    "mono) covers the interval of '%s'", s->label, s->peers[i],
		    dir);
}

static void
uf_body_close(struct ufsession *s)
{
	if (s->fd != -1)
		close(s->fd);
	s->fd = -1;
}

/*
 * Put the run's directory in place: as <stamp> when complete, else as
 * <stamp>.incomplete with why in its tdlisten.incomplete.
 */
static void
uf_run_end(struct ufsession *s, const char *why)
{
	char *part, *final, *text;

	uf_body_close(s);
	if (s->dirfd == -1)
		return;
	uf_write_clock(s);
	if (why != NULL) {
		xasprintf(&text, "%s\n", why);
		if (uf_write_text(s, UF_INCOMPLETE_FILE, text) == -1)
			log_warn("%s: cannot write %s", s->label,
			    UF_INCOMPLETE_FILE);
		free(text);
	}
	close(s->dirfd);
	s->dirfd = -1;
	uf_find_peers(s);
	xasprintf(&part, "%s/%s.part", s->hostdir, s->stamp);
	xasprintf(&final, "%s/%s%s", s->hostdir, s->stamp,
	    why != NULL ? ".incomplete" : "");
	if (rename(part, final) == -1) {
		log_warn("%s: cannot rename '%s' to '%s'", s->label, part,
		    final);
		free(final);
		final = part;
		part = NULL;
	}
	if (why == NULL)
		log_info("%s: wrote '%s' (%u files, %llu bytes%s)", s->label,
		    final, s->files, (unsigned long long)s->bytes,
		    s->skipped ? ", files of no kind skipped" : "");
	else
		log_warnx("%s: kept '%s' as incomplete (%u files, %llu bytes): "
		    "%s", s->label, final, s->files,
		    (unsigned long long)s->bytes, why);
	uf_log_peers(s, final);
	if (part != NULL && s->done.cb != NULL) {
		struct output_done d;

		d.path = final;
		d.complete = why == NULL;
		d.producer = "uftrace";
		d.identity = strrchr(s->hostdir, '/') + 1;
		d.name = "";
		s->done.cb(&d, s->done.arg);
	}
	free(part);
	free(final);
}

/*
 * SEND_DIR_NAME: make DIR/uftrace-<addr>/<UTC time>[.N].part, a name
 * whose final and incomplete forms are free too.  0, or -1 with err.
 */
static int
uf_run_begin(struct ufsession *s, char *err, size_t errlen)
{
	char stamp[32], *part, *a, *b;
	struct stat st;
	struct tm tm;
	time_t now;
	int i, e;

	xasprintf(&s->hostdir, "%s/uftrace-%s", s->cfg->dir, s->addr);
	if (output_hostdir(s->cfg, s->hostdir) == -1) {
		snprintf(err, errlen, "cannot create '%s': %s", s->hostdir,
		    strerror(errno));
		return -1;
	}
	uf_clock_now(&s->start);
	now = time(NULL);
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
	for (i = 0; i < 1000; i++) {
		free(s->stamp);
		if (i == 0)
			s->stamp = xstrdup(stamp);
		else
			xasprintf(&s->stamp, "%s.%d", stamp, i);
		xasprintf(&part, "%s/%s.part", s->hostdir, s->stamp);
		xasprintf(&a, "%s/%s", s->hostdir, s->stamp);
		xasprintf(&b, "%s/%s.incomplete", s->hostdir, s->stamp);
		e = 0;
		if (lstat(a, &st) == 0 || lstat(b, &st) == 0)
			e = EEXIST;
		else if (mkdir(part, s->cfg->dir_mode) == -1)
			e = errno;
		free(a);
		free(b);
		if (e == 0) {
			s->dirfd = open(part, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			e = s->dirfd == -1 ? errno : 0;
			if (e != 0)
				rmdir(part);
		}
		if (e != EEXIST) {
			if (e != 0)
				snprintf(err, errlen, "cannot create '%s': %s",
				    part, strerror(e));
			free(part);
			return e == 0 ? 0 : -1;
		}
		free(part);
	}
	snprintf(err, errlen, "no free name in '%s'", s->hostdir);
	return -1;
}

/*
 * The head of a message is in: check it against the run (order, caps)
 * and open the file its body goes to.  0, 1 when the run ended (END), or
 * -1 with err.
 */
static int
uf_message(struct ufsession *s, char *err, size_t errlen)
{
	struct td_uf_msg *m = &s->msg;
	struct stat st;
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;

	if ((m->type == TD_UF_DIR_NAME) != (s->dirfd == -1)) {
		snprintf(err, errlen, "%s %s SEND_DIR_NAME",
		    td_ufmsg_type_name(m->type), s->dirfd == -1 ?
		    "before" : "after");
		return -1;
	}
	switch (m->kind) {
	case TD_UF_K_NONE:
		if (m->type == TD_UF_END)
			return 1;
		if (uf_run_begin(s, err, errlen) == -1)
			return -1;
		log_info("%s: run of '%s' (plain TCP, unauthenticated) into "
		    "'%s/%s.part'", s->label, m->dir, s->hostdir, s->stamp);
		uf_find_peers(s);
		return 0;
	case TD_UF_K_OTHER:
		if (s->skipped++ == 0)
			log_info("%s: '%s' is no file of a uftrace data "
			    "directory: skipped", s->label, m->name);
		s->fd = -1;
		return 0;
	default:
		break;
	}
	if (s->bytes + m->body_len + (m->kind == TD_UF_K_INFO ?
	    TD_UF_INFO_HEADER : 0) > TD_UF_MAX_RUN) {
		snprintf(err, errlen, "run over %llu bytes",
		    (unsigned long long)TD_UF_MAX_RUN);
		return -1;
	}
	s->fd = openat(s->dirfd, m->name, flags, s->cfg->file_mode);
	if (s->fd == -1 && errno == EEXIST && (m->kind == TD_UF_K_TASK_DATA ||
	    m->kind == TD_UF_K_KERNEL_DATA || m->kind == TD_UF_K_PERF_DATA)) {
		/* data files grow buffer by buffer */
		s->fd = openat(s->dirfd, m->name, O_WRONLY | O_APPEND |
		    O_NOFOLLOW | O_CLOEXEC);
		if (s->fd != -1 && fstat(s->fd, &st) == 0 &&
		    (uint64_t)st.st_size + m->body_len > TD_UF_MAX_FILE) {
			snprintf(err, errlen, "'%s' over %llu bytes", m->name,
			    (unsigned long long)TD_UF_MAX_FILE);
			uf_body_close(s);
			return -1;
		}
	} else if (s->fd != -1 && ++s->files > TD_UF_MAX_FILES) {
		snprintf(err, errlen, "more than %u files", TD_UF_MAX_FILES);
		uf_body_close(s);
		return -1;
	}
	if (s->fd == -1) {
		if (errno == EEXIST)
			snprintf(err, errlen, "'%s' sent twice", m->name);
		else
			snprintf(err, errlen, "cannot create '%s': %s",
			    m->name, strerror(errno));
		return -1;
	}
	if (m->kind == TD_UF_K_INFO) {
		if (write(s->fd, m->info, sizeof m->info) !=
		    (ssize_t)sizeof m->info) {
			snprintf(err, errlen, "cannot write '%s': %s",
			    m->name, strerror(errno));
			return -1;
		}
		s->bytes += sizeof m->info;
		s->got_info = true;
	}
	return 0;
}

/* Up to n bytes of the body to its file (or dropped): 0 or -1 with err. */
static int
uf_body(struct ufsession *s, struct evbuffer *in, size_t n, char *err,
    size_t errlen)
{
	int w;

	if (s->fd == -1)
		return evbuffer_drain(in, n);
	while (n > 0) {
		w = evbuffer_write_atmost(in, s->fd, (ev_ssize_t)n);
		if (w <= 0) {
			if (w == -1 && errno == EINTR)
				continue;
			snprintf(err, errlen, "cannot write '%s': %s",
			    s->msg.name, w == 0 ? "no room" :
			    strerror(errno));
			return -1;
		}
		n -= (size_t)w;
		s->body_left -= (uint32_t)w;
		s->bytes += (uint64_t)w;
	}
	return 0;
}

/*
 * What arrived: every whole header and head is decoded, every body byte
 * written; the read-ahead bounds what one call writes.  0 to go on, 1 when
 * the run ended, -1 with err.
 */
static int
uf_input(struct ufsession *s, struct evbuffer *in, char *err, size_t errlen)
{
	size_t avail, n;
	long need;
	uint8_t *p;
	int r;

	for (;;) {
		avail = evbuffer_get_length(in);
		switch (s->state) {
		case UF_HEADER:
			if (avail < TD_UF_HEADER)
				return 0;
			p = evbuffer_pullup(in, TD_UF_HEADER);
			if (td_ufmsg_header(p, &s->hdr, err, errlen) == -1)
				return -1;
			evbuffer_drain(in, TD_UF_HEADER);
			s->state = UF_HEAD;
			break;
		case UF_HEAD:
			n = avail < 4 ? avail : 4;
			p = evbuffer_pullup(in, (ev_ssize_t)n);
			need = td_ufmsg_head_need(&s->hdr, p, n, err, errlen);
			if (need == -1)
				return -1;
			if ((size_t)need > avail)
				return 0;
			p = evbuffer_pullup(in, need);
			if (td_ufmsg_head(&s->hdr, p, (size_t)need, &s->msg,
			    err, errlen) == -1)
				return -1;
			evbuffer_drain(in, (size_t)need);
			if ((r = uf_message(s, err, errlen)) != 0)
				return r;
			s->body_left = s->msg.body_len;
			s->state = UF_BODY;
			break;
		case UF_BODY:
			if (s->body_left > 0 && avail == 0)
				return 0;
			n = avail < s->body_left ? avail : s->body_left;
			if (n > 0 && uf_body(s, in, n, err, errlen) == -1)
				return -1;
			if (s->fd == -1)
				s->body_left -= (uint32_t)n;
			if (s->body_left == 0) {
				uf_body_close(s);
				s->state = UF_HEADER;
			}
			break;
		}
	}
}
struct ufsession *
ufsession_new(const struct listener_config *cfg, const char *addr,
    const char *label, const struct ufsession_done *done)
{
	struct ufsession *s;

	s = xcalloc(1, sizeof *s);
	s->cfg = cfg;
	s->label = xstrdup(label);
	s->addr = xstrdup(addr);
	if (done != NULL)
		s->done = *done;
	s->fd = -1;
	s->dirfd = -1;
	return s;
}

int
ufsession_feed(struct ufsession *s, struct evbuffer *in, char *err,
    size_t errlen)
{
	int r;

	r = uf_input(s, in, err, errlen);
	if (r == 1 && !s->got_info) {
		snprintf(err, errlen, "SEND_END without the info file");
		return -1;
	}
	return r;
}

bool
ufsession_named(const struct ufsession *s)
{
	return s->dirfd != -1;
}

void
ufsession_end(struct ufsession *s, const char *why)
{
	uf_run_end(s, why);
}

void
ufsession_free(struct ufsession *s)
{
	int i;

	if (s == NULL)
		return;
	uf_body_close(s);
	if (s->dirfd != -1)
		close(s->dirfd);
	for (i = 0; i < s->npeers; i++)
		free(s->peers[i]);
	free(s->hostdir);
	free(s->stamp);
	free(s->addr);
	free(s->label);
	free(s);
}
