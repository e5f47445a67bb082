/*
 * qmp.c: a QMP client for one question (see qmp.h).
 *
 * QEMU writes one JSON object per line: the greeting {"QMP": ...}, then
 * for each command {"return": ...} or {"error": ...}, and between them
 * events {"event": ..., "timestamp": ...} whenever something happens.
 * The parser below reads only what query-cpus-fast needs: the top-level
 * key that says what a line is, and in "return" each element's own
 * "cpu-index" and "thread-id" ("props" holds a "thread-id" too, the
 * topology's, one level down: nesting matters).
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "buf.h"
#include "qmp.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/* Nesting the parser follows before it calls the text bad. */
#define QMP_MAX_DEPTH	32

/* One connection to QEMU's monitor. */
struct qmp {
	int		 fd;
	pid_t		 pid;
	int		 timeout_ms;
	struct td_buf	 in;		/* bytes after the last line taken */
};

/* A cursor over JSON text. */
struct qmp_json {
	const char	*p;
	const char	*end;
	bool		 bad;
};

static void
js_ws(struct qmp_json *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
	    *j->p == '\r' || *j->p == '\n'))
		j->p++;
}

/* Take c (after blanks), or mark the text bad. */
static void
js_expect(struct qmp_json *j, char c)
{
	js_ws(j);
	if (j->p < j->end && *j->p == c)
		j->p++;
	else
		j->bad = true;
}

/* Whether c comes next (after blanks); taken if so. */
static bool
js_take(struct qmp_json *j, char c)
{
	js_ws(j);
	if (j->bad || j->p >= j->end || *j->p != c)
		return false;
	j->p++;
	return true;
}

/*
 * A string into out (cap bytes, cut short silently: keys we look for
 * are short); escapes are kept as they are, none of our keys has one.
 */
static void
js_string(struct qmp_json *j, char *out, size_t cap)
{
	size_t n = 0;

	js_expect(j, '"');
	while (!j->bad && j->p < j->end && *j->p != '"') {
		if (*j->p == '\\' && j->p + 1 < j->end) {
			if (n + 1 < cap)
				out[n++] = *j->p;
			j->p++;
		}
		if (n + 1 < cap)
			out[n++] = *j->p;
		j->p++;
	}
	if (j->p >= j->end)
		j->bad = true;
	else
		j->p++;
	if (cap > 0)
		out[n] = '\0';
}

/* An integer (QEMU's thread ids and indexes are). */
static long long
js_number(struct qmp_json *j)
{
	long long v = 0;
	bool neg = false, digits = false;

	js_ws(j);
	if (j->p < j->end && *j->p == '-') {
		neg = true;
		j->p++;
	}
	while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
		if (v > 1000000000000LL)
			j->bad = true;
		v = v * 10 + (*j->p++ - '0');
		digits = true;
	}
	if (!digits || (j->p < j->end && (*j->p == '.' || *j->p == 'e' ||
	    *j->p == 'E')))
		j->bad = true;
	return neg ? -v : v;
}

/* Skip any value, nested at most QMP_MAX_DEPTH deep. */
static void
js_skip(struct qmp_json *j, int depth)
{
	char key[8];

	js_ws(j);
	if (j->bad || j->p >= j->end || depth > QMP_MAX_DEPTH) {
		j->bad = true;
		return;
	}
	switch (*j->p) {
	case '"':
		js_string(j, key, sizeof key);
		return;
	case '{':
		j->p++;
		if (js_take(j, '}'))
			return;
		do {
			js_string(j, key, sizeof key);
			js_expect(j, ':');
			js_skip(j, depth + 1);
		} while (!j->bad && js_take(j, ','));
		js_expect(j, '}');
		return;
	case '[':
		j->p++;
		if (js_take(j, ']'))
			return;
		do
			js_skip(j, depth + 1);
		while (!j->bad && js_take(j, ','));
		js_expect(j, ']');
		return;
	default:
		/* a number, true, false, null */
		while (j->p < j->end && *j->p != ',' && *j->p != '}' &&
		    *j->p != ']' && *j->p != ' ' && *j->p != '\r' &&
		    *j->p != '\n')
			j->p++;
	}
}

/* One element of query-cpus-fast's list: its own index and thread. */
static void
js_cpu(struct qmp_json *j, long long *index, long long *thread)
{
	char key[32];

	*index = *thread = -1;
	js_expect(j, '{');
	if (js_take(j, '}'))
		return;
	do {
		js_string(j, key, sizeof key);
		js_expect(j, ':');
		if (strcmp(key, "cpu-index") == 0)
			*index = js_number(j);
		else if (strcmp(key, "thread-id") == 0)
			*thread = js_number(j);
		else
			js_skip(j, 2);
	} while (!j->bad && js_take(j, ','));
	js_expect(j, '}');
}

int
qmp_parse_cpus(const char *s, size_t n, uint32_t *vcpu, int32_t *tid,
    int max)
{
	struct qmp_json j = { s, s + n, false };
	long long index, thread;
	char key[32];
	int count = 0, i, k;
	bool have = false;

	js_expect(&j, '{');
	if (js_take(&j, '}'))
		return -1;
	do {
		js_string(&j, key, sizeof key);
		js_expect(&j, ':');
		if (strcmp(key, "return") != 0 || have) {
			js_skip(&j, 1);
			continue;
		}
		have = true;
		js_expect(&j, '[');
		if (js_take(&j, ']'))
			continue;
		do {
			js_cpu(&j, &index, &thread);
			if (j.bad || index < 0 || index >= TD_MAX_CPUS ||
			    thread <= 0 || thread > INT32_MAX ||
			    count == max)
				return -1;
			/* in order of index, each once */
			for (i = 0; i < count && vcpu[i] < index; i++)
				;
			if (i < count && vcpu[i] == index)
				return -1;
			for (k = count; k > i; k--) {
				vcpu[k] = vcpu[k - 1];
				tid[k] = tid[k - 1];
			}
			vcpu[i] = (uint32_t)index;
			tid[i] = (int32_t)thread;
			count++;
		} while (!j.bad && js_take(&j, ','));
		js_expect(&j, ']');
	} while (!j.bad && js_take(&j, ','));
	js_expect(&j, '}');
	if (j.bad || !have)
		return -1;
	return count;
}

/*
 * What a line is: "return", "error", "event", "QMP" (the greeting), or ""
 * when it is none of those or no JSON object.
 */
static const char *
qmp_kind(const char *s, size_t n)
{
	static const char *const kinds[] = { "return", "error", "event",
	    "QMP" };
	struct qmp_json j = { s, s + n, false };
	char key[32];
	size_t i;

	js_expect(&j, '{');
	while (!j.bad && !js_take(&j, '}')) {
		js_string(&j, key, sizeof key);
		js_expect(&j, ':');
		for (i = 0; !j.bad && i < sizeof kinds / sizeof *kinds; i++)
			if (strcmp(key, kinds[i]) == 0)
				return kinds[i];
		js_skip(&j, 1);
		js_take(&j, ',');
	}
	return "";
}

/*
 * The next line from QEMU that is not an event, into line (its length
 * in *n, the line ending taken off); -1 with err on timeout, a closed
 * connection (errno EPIPE) or a line past TD_MAX_QMP_REPLY.
 */
static int
qmp_line(struct qmp *q, struct td_buf *line, char *err, size_t errlen)
{
	struct pollfd pfd = { q->fd, POLLIN, 0 };
	uint8_t *nl;
	char chunk[4096];
	ssize_t r;
	size_t len;
	int ret;

	for (;;) {
		while (q->in.len > 0 &&
		    (nl = memchr(q->in.data, '\n', q->in.len)) != NULL) {
			len = (size_t)(nl - q->in.data);
			td_buf_reset(line);
			td_buf_add(line, q->in.data, len);
			memmove(q->in.data, nl + 1, q->in.len - len - 1);
			q->in.len -= len + 1;
			if (strcmp(qmp_kind((char *)line->data, line->len),
			    "event") != 0)
				return 0;
		}
		ret = poll(&pfd, 1, q->timeout_ms);
		if (ret == 0) {
			snprintf(err, errlen, "QEMU did not answer within %d "
			    "ms", q->timeout_ms);
			errno = ETIMEDOUT;
			return -1;
		}
		if (ret == -1) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "poll: %s", strerror(errno));
			return -1;
		}
		r = read(q->fd, chunk, sizeof chunk);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(err, errlen, "QEMU closed the connection%s%s",
			    r == -1 ? ": " : "", r == -1 ? strerror(errno) :
			    "");
			errno = EPIPE;
			return -1;
		}
		if (td_buf_add(&q->in, chunk, (size_t)r) == -1) {
			snprintf(err, errlen, "QEMU sent a line of more than "
			    "%u bytes", TD_MAX_QMP_REPLY);
			errno = EMSGSIZE;
			return -1;
		}
	}
}

/* Send a command and take its answer's line; -1 on error. */
static int
qmp_ask(struct qmp *q, const char *cmd, struct td_buf *line, char *err,
    size_t errlen)
{
	size_t n = strlen(cmd), off = 0;
	ssize_t w;

	while (off < n) {
		w = send(q->fd, cmd + off, n - off, MSG_NOSIGNAL);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(err, errlen, "cannot write to QEMU: %s",
			    strerror(errno));
			errno = EPIPE;
			return -1;
		}
		off += (size_t)w;
	}
	if (qmp_line(q, line, err, errlen) == -1)
		return -1;
	if (strcmp(qmp_kind((char *)line->data, line->len), "return") != 0) {
		snprintf(err, errlen, "QEMU refused '%.*s': %.*s",
		    (int)strcspn(cmd, "\r\n"), cmd,
		    (int)(line->len < 200 ? line->len : 200),
		    line->len == 0 ? "" : (char *)line->data);
		errno = EPROTO;
		return -1;
	}
	return 0;
}

struct qmp *
qmp_open(const char *path, int timeout_ms, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct timeval tv;
	struct ucred cred;
	socklen_t cl = sizeof cred;
	struct td_buf line;
	struct qmp *q;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		snprintf(err, errlen, "'%s': path too long for a socket",
		    path);
		return NULL;
	}
	memcpy(sun.sun_path, path, strlen(path));
	q = xcalloc(1, sizeof *q);
	q->timeout_ms = timeout_ms;
	td_buf_init(&q->in, TD_MAX_QMP_REPLY);
	td_buf_init(&line, TD_MAX_QMP_REPLY);
	q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (q->fd == -1 || connect(q->fd, (struct sockaddr *)&sun,
	    sizeof sun) == -1) {
		snprintf(err, errlen, "cannot connect to QMP socket '%s': %s",
		    path, strerror(errno));
		goto out_close;
	}
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	setsockopt(q->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (getsockopt(q->fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == -1 ||
	    cred.pid <= 0) {
		snprintf(err, errlen, "QMP socket '%s': no peer process",
		    path);
		goto out_close;
	}
	q->pid = cred.pid;
	if (qmp_line(q, &line, err, errlen) == -1)
		goto out_close;
	if (strcmp(qmp_kind((char *)line.data, line.len), "QMP") != 0) {
		snprintf(err, errlen, "'%s' is not a QMP socket (no "
		    "greeting)", path);
		goto out_close;
	}
	if (qmp_ask(q, "{\"execute\": \"qmp_capabilities\"}\r\n", &line,
	    err, errlen) == -1)
		goto out_close;
	td_buf_free(&line);
	return q;
out_close:
	td_buf_free(&line);
	qmp_close(q);
	return NULL;
}

pid_t
qmp_pid(const struct qmp *q)
{
	return q->pid;
}

int
qmp_vcpus(struct qmp *q, uint32_t *vcpu, int32_t *tid, int max, char *err,
    size_t errlen)
{
	struct td_buf line;
	int n = -1;

	td_buf_init(&line, TD_MAX_QMP_REPLY);
	if (qmp_ask(q, "{\"execute\": \"query-cpus-fast\"}\r\n", &line, err,
	    errlen) == 0 && (n = qmp_parse_cpus((char *)line.data, line.len,
	    vcpu, tid, max)) == -1) {
		snprintf(err, errlen, "cannot read QEMU's answer to "
		    "query-cpus-fast");
		errno = EPROTO;
	}
	td_buf_free(&line);
	return n;
}

void
qmp_close(struct qmp *q)
{
	if (q == NULL)
		return;
	if (q->fd != -1)
		close(q->fd);
	td_buf_free(&q->in);
	free(q);
}
