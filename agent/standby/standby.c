/*
 * standby.c: tdagent --standby's loop (see standby.h).
 *
 * poll() on the connection and a signalfd: KEEPALIVE every third of the
 * listener's idle timeout, START and STOP as they come, SIGCHLD when the
 * recording ends (ANSWER FINISHED), SIGINT/SIGTERM to stop the recording
 * and leave.  Without a connection it dials again with backoff (1 s
 * doubling to STANDBY_BACKOFF_MAX, each wait 50% to 150% of it) for ever;
 * a recording already running goes on meanwhile over its own connection,
 * and the next STANDBY says it runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "armed.h"
#include "armsync.h"
#include "buf.h"
#include "clock.h"
#include "conn.h"
#include "instance.h"
#include "log.h"
#include "standby.h"
#include "standby-local.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

#define STANDBY_BACKOFF_MAX	30	/* s */
#define STANDBY_TIMEOUT		10	/* s: connect, handshake, a write */
#define STANDBY_USER_TIMEOUT_MS	15000	/* TCP_USER_TIMEOUT, as net.c's */
#define STANDBY_ARGS		(2 * TD_MAX_EVENT_ARGS * 2 + 40)


/* Send one whole frame b: 0, or -1 (the connection is gone then). */
int
standby_send(struct standby *sb, struct td_buf *b)
{
	int r;

	if (sb->c == NULL)
		return -1;
	conn_set_blocking(sb->c, true, STANDBY_TIMEOUT * 1000);
	r = conn_write_all(sb->c, b->data, b->len, NULL);
	conn_set_blocking(sb->c, false, STANDBY_TIMEOUT * 1000);
	if (r == -1) {
		log_warnx("lost the collector: cannot send");
		conn_close(sb->c, false);
		sb->c = NULL;
	}
	return r;
}

/*
 * A reply to the collector's request req (0: nobody asked): type
 * TD_MSG_ANSWER (what of TD_ANSWER_*: a START, STOP or SNAPSHOT) or
 * TD_MSG_ARMED (TD_ARMED_*: an ARM, a DISARM, the ring on its own).  One
 * layout, one way out for both.
 */
void
standby_reply(struct standby *sb, uint16_t type, uint32_t req,
    uint16_t what, const char *text)
{
	struct td_answer an = { .req = req, .what = what };
	struct td_armed ar = { .req = req, .what = what };
	struct td_buf b;
	int r;

	snprintf(an.text, sizeof an.text, "%s", text);
	snprintf(ar.text, sizeof ar.text, "%s", text);
	td_buf_init(&b, TD_FRAME_HEADER + 8 + TD_MAX_ERROR_LEN);
	if (type == TD_MSG_ARMED)
		r = td_msg_pack_armed(&b, &ar);
	else
		r = td_msg_pack_answer(&b, &an);
	if (r == 0)
		standby_send(sb, &b);
	td_buf_free(&b);
}

/* The machine's trace clocks, space-separated, without the brackets. */
static void
standby_clocks(char *out, size_t len)
{
	char buf[TD_STANDBY_CLOCKS + 1];
	size_t n = 0, i;
	FILE *fp;

	out[0] = '\0';
	if ((fp = fopen("/sys/kernel/tracing/trace_clock", "re")) == NULL)
		return;
	if (fgets(buf, sizeof buf, fp) != NULL)
		for (i = 0; buf[i] != '\0' && buf[i] != '\n' &&
		    n + 1 < len; i++)
			if (buf[i] != '[' && buf[i] != ']')
				out[n++] = buf[i];
	out[n] = '\0';
	while (n > 0 && out[n - 1] == ' ')
		out[--n] = '\0';
	fclose(fp);
}

/* The armed window's time sync on this connection (armsync.h). */
static void
standby_sync_connected(struct standby *sb)
{
	struct td_welcome *w = &sb->welcome;

	sb->sync_said = false;
	armsync_connected(sb->sync, conn_fd(sb->c), w->udp_port, w->udp_id,
	    w->udp_key, w->tsync_interval);
	if (armsync_due(sb->sync, td_clock_now_ms()) == -1)
		log_info("flight recorder: no time sync while armed (%s)",
		    w->tsync_interval == TD_TSYNC_OFF ? "the collector's time "
		    "sync is off" : "the collector has no probe port");
}

/*
 * While armed: the window's time-sync samples, made with the ring, gone
 * with it, a round when one is due (not while frozen: the window does
 * not move).  The ms until the next, or -1.
 */
static long long
standby_sync(struct standby *sb)
{
	char err[TD_MAX_ERROR_LEN];
	uint64_t bound;
	long long due;

	/* disarmed, or disarmed and armed again since the last turn */
	if (sb->armed == NULL || (sb->sync != NULL &&
	    armed_ring(sb->armed) != sb->sync_ring)) {
		armsync_free(sb->sync);
		sb->sync = NULL;
		sb->sync_off = false;
		if (sb->armed == NULL)
			return -1;
	}
	if (sb->sync == NULL) {
		if (sb->sync_off)
			return -1;
		if ((sb->sync = armsync_new(armed_ring(sb->armed), err,
		    sizeof err)) == NULL) {
			/* armed all the same: its snapshot as before */
			log_warnx("flight recorder '%s': no time sync while "
			    "armed: %s", armed_name(sb->armed), err);
			sb->sync_off = true;
			return -1;
		}
		sb->sync_ring = armed_ring(sb->armed);
		if (sb->c != NULL)
			standby_sync_connected(sb);
	}
	if (sb->c == NULL || armed_frozen(sb->armed))
		return -1;
	if ((due = armsync_due(sb->sync, td_clock_now_ms())) != 0)
		return due;
	if (armsync_round(sb->sync, &bound, err, sizeof err) == -1) {
		if (!sb->sync_said)
			log_warnx("flight recorder: time sync: %s", err);
		else
			log_debug("flight recorder: time sync: %s", err);
		sb->sync_said = true;
	} else
		log_debug("flight recorder: time sync sample +-%llu ns, %u "
		    "kept", (unsigned long long)bound,
		    armsync_count(sb->sync));
	return armsync_due(sb->sync, td_clock_now_ms());
}

/* Connect, say STANDBY, take the WELCOME: 0, or -1 with err. */
static int
standby_dial(struct standby *sb, char *err, size_t errlen)
{
	struct td_welcome w;
	struct td_frame f;
	struct td_buf b;
	struct td_error e;
	bool fatal;
	struct conn *c;

	memset(&f, 0, sizeof f);
	/* a dead link shows up within STANDBY_USER_TIMEOUT_MS of a
	   KEEPALIVE nobody acknowledged */
	if ((c = conn_open(&sb->t, sb->ctx, STANDBY_TIMEOUT,
	    STANDBY_USER_TIMEOUT_MS, &fatal, err, errlen)) == NULL)
		return -1;
	conn_set_blocking(c, true, STANDBY_TIMEOUT * 1000);
	td_buf_init(&b, TD_FRAME_HEADER + TD_MAX_STANDBY_MSG);
	if (td_msg_pack_standby(&b, &sb->me) == -1 ||
	    conn_write_all(c, b.data, b.len, NULL) == -1) {
		td_buf_free(&b);
		snprintf(err, errlen, "cannot send STANDBY");
		/* a refused TLS 1.3 client learns why from what came */
		if (conn_read_frame(c, &f, err, errlen) == -1 ||
		    f.type != TD_MSG_ERROR)
			goto fail;
	} else {
		td_buf_free(&b);
		if (conn_read_frame(c, &f, err, errlen) == -1)
			goto fail;
	}
	if (f.type == TD_MSG_ERROR) {
		if (td_msg_unpack_error(&f, &e) == 0)
			snprintf(err, errlen, "the collector refused: %s%s",
			    e.text, strstr(e.text, "(type 21)") != NULL ?
			    " (a tdlisten older than standby agents)" : "");
		goto fail;
	}
	if (f.type != TD_MSG_WELCOME || td_msg_unpack_welcome(&f, &w) == -1) {
		snprintf(err, errlen, "the collector sent %s, not WELCOME",
		    td_msg_name(f.type));
		goto fail;
	}
	conn_consume(c, &f);
	conn_set_blocking(c, false, STANDBY_TIMEOUT * 1000);
	sb->keepalive_ms = w.idle_timeout > 0 ? w.idle_timeout * 1000 / 3 :
	    60 * 1000;
	if (sb->keepalive_ms < 500)
		sb->keepalive_ms = 500;
	sb->c = c;
	/* the probe port (version 5) is the armed window's time sync */
	explicit_bzero(&sb->welcome, sizeof sb->welcome);
	sb->welcome = w;
	if (w.version < 5)
		sb->welcome.udp_port = 0;
	explicit_bzero(w.udp_key, sizeof w.udp_key);
	if (sb->sync != NULL)
		standby_sync_connected(sb);
	log_info("standby on %s as '%s'", sb->o.host, w.identity);
	return 0;
fail:
	conn_close(c, false);
	return -1;
}

/* Append arg to argv. */
static void
standby_arg(const char **argv, int *n, const char *arg)
{
	if (*n < STANDBY_ARGS - 1)
		argv[(*n)++] = arg;
	argv[*n] = NULL;
}

/*
 * One line of the recording's stderr: copied to ours, and kept in why when
 * it is a message of its own ("tdagent: ...", after a time stamp or a
 * priority prefix), or added to the message before it when it goes on it
 * (a kernel filter error's lines; the caret under it is left out).
 */
static void
standby_errline(struct standby *sb, char *line)
{
	const char *p = line;
	size_t n;

	fprintf(stderr, "%s\n", line);
	if (p[0] == '<' && p[1] >= '0' && p[1] <= '7' && p[2] == '>')
		p += 3;
	if (p[0] >= '0' && p[0] <= '9' && (n = strcspn(p, " ")) > 10 &&
	    p[n - 1] == 'Z' && p[n] == ' ')
		p += n + 1;
	if (strncmp(p, "tdagent: ", 9) == 0) {
		snprintf(sb->why, sizeof sb->why, "%s", p + 9);
		return;
	}
	if (sb->why[0] == '\0')
		return;
	p += strspn(p, " \t");
	if (p[0] == '[' && (n = strcspn(p, "]")) < 20 && p[n] == ']')
		p += n + 1 + strspn(p + n + 1, " ");
	if (p[strspn(p, " ^")] == '\0')
		return;
	n = strlen(sb->why);
	snprintf(sb->why + n, sizeof sb->why - n, "%s%s",
	    sb->why[n - 1] == ':' ? " " : "; ", p);
}

/* What the recording wrote on stderr; at its end, the pipe closed. */
static void
standby_stderr(struct standby *sb)
{
	char buf[4096];
	ssize_t r;
	size_t i;

	while (sb->err_fd != -1) {
		r = read(sb->err_fd, buf, sizeof buf);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1 && errno == EAGAIN)
			return;
		if (r <= 0) {
			if (sb->errlen > 0) {
				sb->errline[sb->errlen] = '\0';
				standby_errline(sb, sb->errline);
				sb->errlen = 0;
			}
			close(sb->err_fd);
			sb->err_fd = -1;
			return;
		}
		for (i = 0; i < (size_t)r; i++) {
			if (buf[i] != '\n' &&
			    sb->errlen < sizeof sb->errline - 1) {
				sb->errline[sb->errlen++] = buf[i];
				continue;
			}
			/* a line too long goes in pieces */
			sb->errline[sb->errlen] = '\0';
			standby_errline(sb, sb->errline);
			sb->errlen = 0;
			if (buf[i] != '\n')
				sb->errline[sb->errlen++] = buf[i];
		}
	}
}

/*
 * Run the recording r as a child, or (flight: an instance) a snapshot of
 * the frozen armed ring: 0, or -1 and err.
 */
int
standby_record(struct standby *sb, const struct td_start *r,
    const char *flight, char *err, size_t errlen)
{
	const char *argv[STANDBY_ARGS];
	union { const char **c; char *const *v; } av = { argv };
	char evs[TD_STANDBY_EVENTS + 1], *p, *ev;
	char kb[16], secs[16];
	sigset_t all;
	pid_t pid;
	int n = 0, sv[2], ep[2], sfd = -1, sfd_hi;

	standby_arg(argv, &n, sb->self);
	standby_arg(argv, &n, "-h");
	standby_arg(argv, &n, sb->o.host);
	standby_arg(argv, &n, "-p");
	standby_arg(argv, &n, sb->o.port);
	if (sb->o.insecure)
		standby_arg(argv, &n, "--insecure");
	else {
		standby_arg(argv, &n, "--cert");
		standby_arg(argv, &n, sb->o.cert);
		standby_arg(argv, &n, "--key");
		standby_arg(argv, &n, sb->o.key);
		standby_arg(argv, &n, "--ca");
		standby_arg(argv, &n, sb->o.ca);
		if (sb->o.server_name != NULL) {
			standby_arg(argv, &n, "--server-name");
			standby_arg(argv, &n, sb->o.server_name);
		}
	}
	if (sb->o.user != NULL) {
		standby_arg(argv, &n, "-u");
		standby_arg(argv, &n, sb->o.user);
	}
	standby_arg(argv, &n, "--name");
	standby_arg(argv, &n, r->name);
	if (flight != NULL) {
		standby_arg(argv, &n, "--flight");
		standby_arg(argv, &n, flight);
		/* the samples over the window, on its fd 4 (armsync.h) */
		if (sb->sync != NULL &&
		    (sfd = armsync_export(sb->sync)) != -1) {
			sfd_hi = fcntl(sfd, F_DUPFD_CLOEXEC, 10);
			close(sfd);
			sfd = sfd_hi;
		}
		if (sfd != -1) {
			standby_arg(argv, &n, "--flight-sync");
			standby_arg(argv, &n, "4");
		}
		goto spawn;
	}
	/* the filter goes with every event */
	snprintf(evs, sizeof evs, "%s", r->events);
	for (p = evs; (ev = strsep(&p, ",")) != NULL;) {
		standby_arg(argv, &n, "-e");
		standby_arg(argv, &n, ev);
		if (r->filter[0] != '\0') {
			standby_arg(argv, &n, "-f");
			standby_arg(argv, &n, r->filter);
		}
	}
	/* no size asked: tdagent's default, at most --max-buffer */
	if (r->buffer_kb > 0 || sb->o.max_buffer < TD_AGENT_RING_KB) {
		snprintf(kb, sizeof kb, "%u", r->buffer_kb > 0 ?
		    r->buffer_kb : sb->o.max_buffer);
		standby_arg(argv, &n, "-b");
		standby_arg(argv, &n, kb);
	}
	if (r->clock[0] != '\0') {
		standby_arg(argv, &n, "-C");
		standby_arg(argv, &n, r->clock);
	}
	snprintf(secs, sizeof secs, "%u", r->seconds > 0 ? r->seconds :
	    sb->o.max_duration);
	standby_arg(argv, &n, "-s");
	standby_arg(argv, &n, secs);
spawn:
	if (sb->o.verbosity < 0)
		standby_arg(argv, &n, "-q");
	/* set up, it says so on fd 3 and waits for the collector's GO */
	standby_arg(argv, &n, "--ready-fd");
	standby_arg(argv, &n, "3");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		goto out_sfd;
	}
	/* its stderr comes through us: copied to ours, and its last
	   message is the reason a failed recording gives the collector */
	if (pipe2(ep, O_CLOEXEC) == -1) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		goto out_sfd;
	}
	if ((pid = fork()) == -1) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		close(ep[0]);
		close(ep[1]);
		goto out_sfd;
	}
	if (pid == 0) {
		/* its own process group: a terminal's ^C reaches us first */
		setpgid(0, 0);
		if (dup2(ep[1], 2) == -1)
			_exit(127);
		if (sv[1] == 3 ? fcntl(3, F_SETFD, 0) == -1 :
		    dup2(sv[1], 3) == -1)
			_exit(127);
		if (sfd != -1 && dup2(sfd, 4) == -1)
			_exit(127);
		closefrom(sfd != -1 ? 5 : 4);
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		execv(sb->self, av.v);
		fprintf(stderr, "tdagent --standby: cannot run %s: %s\n",
		    sb->self, strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	close(ep[1]);
	if (sfd != -1)
		close(sfd);
	fcntl(ep[0], F_SETFL, O_NONBLOCK);
	if (sb->err_fd != -1)
		close(sb->err_fd);	/* held by a child of the last one */
	sb->err_fd = ep[0];
	sb->errlen = 0;
	sb->why[0] = '\0';
	sb->ready_fd = sv[0];
	sb->before_go = true;
	sb->child = pid;
	sb->start_req = r->req;
	sb->stop_req = 0;
	snprintf(sb->me.recording, sizeof sb->me.recording, "%s", r->name);
	return 0;
out_sfd:
	if (sfd != -1)
		close(sfd);
	return -1;
}

/* START r: refused, or a recording started. */
static void
standby_start(struct standby *sb, const struct td_start *r)
{
	char err[TD_MAX_ERROR_LEN], text[TD_MAX_ERROR_LEN];

	if (sb->child != 0) {
		snprintf(err, sizeof err, "already recording '%s'",
		    sb->me.recording);
		goto refuse;
	}
	if (!standby_allowed(&sb->o, r, sb->me.clocks, err, sizeof err))
		goto refuse;
	/*
	 * -b is per CPU: 8 MiB on 256 CPUs would be 2 GiB of kernel memory
	 * (issue 31 row 13).  The total is capped as tdagent's own default
	 * is (TD_AGENT_RING_TOTAL_KB).
	 */
	if ((uint64_t)(r->buffer_kb + (sb->armed != NULL ?
	    armed_kb(sb->armed) : 0)) * sb->me.ncpus >
	    TD_AGENT_RING_TOTAL_KB) {
		snprintf(err, sizeof err, "buffer of %u KB x %u CPUs over %u KB "
		    "in all%s", r->buffer_kb, sb->me.ncpus,
		    TD_AGENT_RING_TOTAL_KB, sb->armed != NULL ?
		    " (with the armed ring's)" : "");
		goto refuse;
	}
	if (standby_record(sb, r, NULL, err, sizeof err) == -1)
		goto refuse;
	sb->rec_kb = r->buffer_kb > 0 ? r->buffer_kb : sb->o.max_buffer <
	    TD_AGENT_RING_KB ? sb->o.max_buffer : TD_AGENT_RING_KB;
	log_info("collector's request %u: recording '%s' (%s%s%s), "
	    "pid %ld", r->req, r->name, r->events, r->filter[0] ? " if " : "",
	    r->filter, (long)sb->child);
	snprintf(text, sizeof text, "%s pid %ld", r->name, (long)sb->child);
	standby_reply(sb, TD_MSG_ANSWER, r->req, TD_ANSWER_STARTED, text);
	return;
refuse:
	log_warnx("collector's request %u refused: %s", r->req, err);
	standby_reply(sb, TD_MSG_ANSWER, r->req, TD_ANSWER_REFUSED, err);
}

/* Let the recording's tracing begin (why: a log line, or NULL). */
static void
standby_go(struct standby *sb, const char *why)
{
	if (sb->ready_fd == -1)
		return;
	sb->before_go = false;
	if (why != NULL)
		log_info("recording '%s': %s", sb->me.recording, why);
	if (send(sb->ready_fd, "G", 1, MSG_NOSIGNAL) != 1)
		log_debug("the recording is gone before its GO");
	close(sb->ready_fd);
	sb->ready_fd = -1;
}

/* The recording says it is set up: READY, and its GO waits. */
static void
standby_ready(struct standby *sb)
{
	char c;
	ssize_t r = read(sb->ready_fd, &c, 1);

	if (r == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r != 1 || c != 'R') {
		/* it ended before it was set up: standby_reap() says so */
		close(sb->ready_fd);
		sb->ready_fd = -1;
		return;
	}
	if (sb->c == NULL) {
		standby_go(sb, "set up, and no collector to wait for: tracing");
		return;
	}
	log_info("recording '%s' set up: its tracing waits for the "
	    "collector's GO", sb->me.recording);
	standby_reply(sb, TD_MSG_ANSWER, sb->start_req, TD_ANSWER_READY,
	    sb->me.recording);
	if (sb->c == NULL)
		standby_go(sb, "lost the collector before its GO: tracing");
}

/* A recording ended: say so (to a STOP's request, if one asked). */
static void
standby_reap(struct standby *sb)
{
	char text[TD_MAX_ERROR_LEN];
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid != sb->child)
			continue;
		/* all it wrote is in the pipe now (but what a child of its
		   own still holds: that is read later, and not waited for) */
		standby_stderr(sb);
		if (WIFEXITED(status))
			snprintf(text, sizeof text, "%s exit %d",
			    sb->me.recording, WEXITSTATUS(status));
		else
			snprintf(text, sizeof text, "%s signal %d",
			    sb->me.recording, WTERMSIG(status));
		/* a failure says why, as the recording said it */
		if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) &&
		    sb->why[0] != '\0')
			snprintf(text + strlen(text), sizeof text -
			    strlen(text), ": %.*s", (int)(sizeof text -
			    strlen(text) - 3), sb->why);
		sb->why[0] = '\0';
		log_info("recording %s", text);
		/* ended in its set-up: the START's request hears of it (the
		   others of that start need not wait for it) */
		if (sb->stop_req == 0 && sb->before_go)
			sb->stop_req = sb->start_req;
		sb->before_go = false;
		if (sb->ready_fd != -1) {
			close(sb->ready_fd);
			sb->ready_fd = -1;
		}
		sb->child = 0;
		sb->me.recording[0] = '\0';
		standby_reply(sb, TD_MSG_ANSWER, sb->stop_req,
		    TD_ANSWER_FINISHED, text);
		sb->stop_req = 0;
		if (sb->snap) {
			sb->snap = false;
			standby_flight_rearm(sb, "snapshot sent");
		}
	}
}

/* One frame from the collector. */
static void
standby_frame(struct standby *sb, const struct td_frame *f)
{
	struct td_snapshot snap;
	struct td_start *r;
	struct td_arm *a;
	struct td_error e;
	uint32_t req;

	switch (f->type) {
	case TD_MSG_KEEPALIVE:
		break;
	case TD_MSG_START:
		r = xmalloc(sizeof *r);
		if (td_msg_unpack_start(f, r) == -1)
			log_warnx("the collector sent a malformed START");
		else
			standby_start(sb, r);
		free(r);
		break;
	case TD_MSG_STOP:
		if (td_msg_unpack_stop(f, &req) == -1) {
			log_warnx("the collector sent a malformed STOP");
			break;
		}
		if (sb->child == 0) {
			standby_reply(sb, TD_MSG_ANSWER, req,
			    TD_ANSWER_FINISHED, "not recording");
			break;
		}
		log_info("collector's request %u: stop '%s'", req,
		    sb->me.recording);
		sb->stop_req = req;
		kill(sb->child, SIGINT);
		break;
	case TD_MSG_GO:
		if (td_msg_unpack_go(f, &req) == -1) {
			log_warnx("the collector sent a malformed GO");
			break;
		}
		if (sb->child != 0 && req == sb->start_req)
			standby_go(sb, "the collector's GO: tracing");
		break;
	case TD_MSG_ARM:
		a = xmalloc(sizeof *a);
		if (td_msg_unpack_arm(f, a) == -1)
			log_warnx("the collector sent a malformed ARM");
		else
			standby_flight_arm(sb, a);
		free(a);
		break;
	case TD_MSG_DISARM:
		if (td_msg_unpack_disarm(f, &req) == -1)
			log_warnx("the collector sent a malformed DISARM");
		else
			standby_flight_disarm(sb, req);
		break;
	case TD_MSG_SNAPSHOT:
		if (td_msg_unpack_snapshot(f, &snap) == -1)
			log_warnx("the collector sent a malformed SNAPSHOT");
		else
			standby_flight_snapshot(sb, &snap);
		break;
	case TD_MSG_ERROR:
		if (td_msg_unpack_error(f, &e) == 0)
			log_warnx("lost the collector: %s", e.text);
		conn_close(sb->c, false);
		sb->c = NULL;
		break;
	default:
		log_warnx("the collector sent %s: closing",
		    td_msg_name(f->type));
		conn_close(sb->c, true);
		sb->c = NULL;
	}
}

/* Everything the connection has: frames handled, or it is gone. */
static void
standby_input(struct standby *sb)
{
	struct td_frame f;
	ssize_t r;
	int pr;

	for (;;) {
		r = conn_fill(sb->c);
		if (r == 0 || (r == -1 && errno != EAGAIN)) {
			log_warnx("lost the collector%s%s", r == 0 ? "" : ": ",
			    r == 0 ? "" : strerror(errno));
			conn_close(sb->c, false);
			sb->c = NULL;
			return;
		}
		while ((pr = conn_frame(sb->c, &f)) == 1) {
			standby_frame(sb, &f);
			if (sb->c == NULL)
				return;
			conn_consume(sb->c, &f);
		}
		if (pr == -1) {
			log_warnx("the collector sent a bad frame: closing");
			conn_close(sb->c, false);
			sb->c = NULL;
			return;
		}
		if (r == -1)
			return;		/* EAGAIN: all taken */
	}
}

/* A signal: SIGCHLD reaps, the others stop the recording and leave. */
static void
standby_signal(struct standby *sb)
{
	struct signalfd_siginfo si;

	while (read(sb->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
		if (si.ssi_signo == SIGCHLD) {
			standby_reap(sb);
			continue;
		}
		if (!sb->quit)
			log_info("%s: stopping", strsignal((int)si.ssi_signo));
		sb->quit = true;
		if (sb->child != 0)
			kill(sb->child, SIGINT);
	}
}

/* Wait up to ms for the connection or a signal. */
static void
standby_wait(struct standby *sb, int ms)
{
	struct pollfd pfd[5];
	int n = 3, look, conn = -1;

	pfd[0].fd = sb->sigfd;
	pfd[0].events = POLLIN;
	pfd[1].fd = sb->ready_fd;	/* -1: not looked at */
	pfd[1].events = POLLIN;
	pfd[1].revents = 0;
	pfd[2].fd = sb->err_fd;		/* -1: not looked at */
	pfd[2].events = POLLIN;
	pfd[2].revents = 0;
	if (sb->c != NULL) {
		pfd[n].fd = conn_fd(sb->c);
		pfd[n].events = POLLIN;
		conn = n++;
	}
	/*
	 * An armed ring's trigger: its sentinel wakes us, its events read by
	 * standby_flight_look() below (or, with none, a timer does).
	 */
	if (sb->armed != NULL && armed_sentinel_fd(sb->armed) != -1) {
		pfd[n].fd = armed_sentinel_fd(sb->armed);
		pfd[n].events = POLLIN;
		n++;
	}
	if (sb->armed != NULL && (look = armed_look_ms(sb->armed)) >= 0 &&
	    ms > look)
		ms = look;
	if (poll(pfd, n, ms) <= 0) {
		standby_flight_look(sb);
		if (sb->c == NULL)
			standby_flight_lost(sb);
		return;
	}
	if (pfd[2].revents != 0 && sb->err_fd != -1)
		standby_stderr(sb);
	if (pfd[0].revents != 0)
		standby_signal(sb);
	if (pfd[1].revents != 0 && sb->ready_fd != -1)
		standby_ready(sb);
	if (conn != -1 && sb->c != NULL && pfd[conn].revents != 0)
		standby_input(sb);
	/* a recording waiting for GO does not wait for a lost collector */
	if (sb->c == NULL)
		standby_go(sb, "lost the collector before its GO: tracing");
	standby_flight_look(sb);
	if (sb->c == NULL)
		standby_flight_lost(sb);
}

int
standby_main(int argc, char **argv)
{
	struct standby *sb = xcalloc(1, sizeof *sb);
	struct utsname u;
	char err[1024];
	uint64_t next_ka = 0, now, backoff = 1000, until;
	long long wait, due;
	struct td_buf ka;
	sigset_t set;
	ssize_t len;
	long ncpus;
	int i;

	if (standby_parse(argc, argv, &sb->o, err, sizeof err) == -1) {
		fprintf(stderr, "tdagent --standby: %s\n", err);
		for (i = 0; i < sb->o.nheld; i++)
			free(sb->o.held[i]);
		free(sb);
		return 2;
	}
	log_init("tdagent", sb->o.verbosity, 0);
	if (geteuid() != 0)
		fatalx("recording needs root: ftrace instances and per-CPU "
		    "ring buffers are root-only");
	if ((len = readlink("/proc/self/exe", sb->self,
	    sizeof sb->self - 1)) == -1)
		fatal("cannot find tdagent's own path");
	sb->self[len] = '\0';
	if (conn_target_parse(sb->o.host, sb->o.port, sb->o.server_name,
	    !sb->o.insecure, &sb->t, err, sizeof err) == -1)
		fatalx("-h %s: %s", sb->o.host, err);
	if (sb->t.kind == CONN_SERIAL)
		fatalx("-h %s: a standby agent needs a connection of its own "
		    "for each recording (TCP or vsock)", sb->o.host);
	if (!sb->o.insecure && (sb->ctx = conn_ctx_new(sb->o.cert, sb->o.key,
	    sb->o.ca, err, sizeof err)) == NULL)
		fatalx("%s", err);
	if (sb->o.insecure)
		log_warnx("--insecure: an unauthenticated collector may start "
		    "recordings here");
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sb->ready_fd = -1;
	sb->err_fd = -1;
	if ((sb->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) == -1)
		fatal("signalfd");
	/* an armed instance goes with a fatal error too */
	log_set_fatal_hook(instance_cleanup);
	sb->me.version = TD_STANDBY_VERSION;
	ncpus = sysconf(_SC_NPROCESSORS_CONF);
	sb->me.ncpus = ncpus > 0 && ncpus <= TD_MAX_CPUS ? (uint32_t)ncpus : 1;
	gethostname(sb->me.host, sizeof sb->me.host - 1);
	if (uname(&u) == 0)
		snprintf(sb->me.kernel, sizeof sb->me.kernel, "%s",
		    u.release);
	standby_clocks(sb->me.clocks, sizeof sb->me.clocks);
	/* the collector shows what it may ask (tdctl list) */
	snprintf(sb->me.allow, sizeof sb->me.allow, "%s", sb->o.allow_events);
	sb->me.max_buffer = sb->o.max_buffer;
	sb->me.max_duration = sb->o.max_duration;
	log_info("standby: events %s, buffer up to %u KB, up to %u s%s",
	    sb->o.allow_events, sb->o.max_buffer, sb->o.max_duration,
	    sb->o.allow_arm ? ", may be armed" : "");
	td_buf_init(&ka, TD_FRAME_HEADER);
	td_msg_pack_keepalive(&ka);
	while (!sb->quit || sb->child != 0) {
		now = td_clock_now_ms();
		if (sb->c == NULL && !sb->quit) {
			if (standby_dial(sb, err, sizeof err) == -1) {
				log_warnx("collector %s: %s (again in %.1f s)",
				    sb->o.host, err, backoff / 1000.0);
				/* 50% to 150% of the backoff */
				until = now + backoff / 2 +
				    (uint64_t)random() % (backoff + 1);
				while (!sb->quit &&
				    (now = td_clock_now_ms()) < until)
					standby_wait(sb, (int)(until - now));
				if (backoff < STANDBY_BACKOFF_MAX * 1000)
					backoff *= 2;
				continue;
			}
			backoff = 1000;
			next_ka = td_clock_now_ms() + sb->keepalive_ms;
			/* still armed: the collector hears it again */
			if (sb->armed != NULL) {
				snprintf(err, sizeof err, "%s %s", armed_name(
				    sb->armed), sb->rearmed ? "re-armed while "
				    "the collector was away" : "still armed");
				standby_reply(sb, TD_MSG_ARMED, 0,
				    TD_ARMED_REARMED, err);
				sb->rearmed = false;
			}
			continue;
		}
		if (sb->c != NULL && now >= next_ka) {
			standby_send(sb, &ka);
			/* the window goes with a KEEPALIVE: no wake-up of its
			   own (tdctl list) */
			standby_flight_window(sb);
			next_ka = now + sb->keepalive_ms;
			continue;
		}
		wait = sb->c != NULL ? (long long)(next_ka - now) : 1000;
		/* the armed window's time sync, when a round is due */
		if ((due = standby_sync(sb)) >= 0 && due < wait)
			wait = due;
		standby_wait(sb, (int)wait);
	}
	td_buf_free(&ka);
	armed_free(sb->armed);
	sb->armed = NULL;
	standby_sync(sb);
	explicit_bzero(&sb->welcome, sizeof sb->welcome);
	conn_close(sb->c, true);
	conn_ctx_free(sb->ctx);
	for (i = 0; i < sb->o.nheld; i++)
		free(sb->o.held[i]);
	close(sb->sigfd);
	if (sb->err_fd != -1)
		close(sb->err_fd);
	free(sb);
	log_info("stopped");
	return 0;
}
