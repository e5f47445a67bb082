/*
 * onfinish.c: tdlisten --on-finish CMD (see onfinish.h).
 *
 * Every file done is an item in one list, in the order they came: waiting
 * for a slot (READY), waiting for its next attempt (BACKOFF: its timer
 * runs) or running (its timer is the timeout).  onfinish_kick() starts
 * READY items while fewer than `jobs` run.  A child is never waited for:
 * SIGCHLD (a libevent signal event, so the handler only wakes the loop)
 * makes onfinish_sigchld_cb() ask each running item's pid with WNOHANG,
 * and only those pids, so a child some other part of the process made is
 * left to its owner.
 *
 * Why posix_spawn: glibc makes it a vfork-like clone, which costs the same
 * for a listener holding gigabytes as for a small one, where fork() would
 * copy the page tables of every buffer, on the loop's thread.  The child
 * gets /dev/null as stdin, tdlisten's stdout and stderr (the log file, or
 * /dev/null when daemonized without -l), no other descriptor (closefrom),
 * an empty signal mask and the default action for the signals tdlisten
 * catches or ignores (SIGPIPE above all: a shell pipeline in CMD needs
 * it), and a process group of its own so that the timeout kills what CMD
 * started too.  It runs as tdlisten runs: after -u, as that user.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "buf.h"
#include "listener.h"
#include "log.h"
#include "onfinish.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

#define ONFINISH_SUFFIX		".onfinish"
#define ONFINISH_MAGIC		"tdlisten-onfinish 1"

extern char **environ;

enum onfinish_state {
	OF_READY,	/* waits for a slot */
	OF_BACKOFF,	/* waits for its next attempt */
	OF_RUNNING,
};

/* One file and the runs of the command for it. */
struct onfinish_item {
	struct onfinish		*of;
	enum onfinish_state	 state;
	char			*path;		/* absolute */
	char			*sidecar;	/* path + ".onfinish" */
	bool			 complete;
	char			*producer;
	char			*identity;
	char			*name;
	int			 attempt;	/* started so far */
	pid_t			 pid;		/* OF_RUNNING */
	bool			 timed_out;	/* killed at the timeout */
	struct event		*timer;		/* backoff, or timeout */
	struct onfinish_item	*next;
};

/* The runner. */
struct onfinish {
	struct event_base	*base;
	struct onfinish_config	 c;
	char			*line;		/* CMD "$1" */
	char			*cwd;		/* relative paths' base */
	struct event		*sigchld;
	struct onfinish_item	*head;
	struct onfinish_item	*tail;
	struct onfinish_stats	 st;
	bool			 stopping;	/* start nothing */
};

static void	onfinish_kick(struct onfinish *of);

static const char *
onfinish_kind(const struct onfinish_item *it)
{
	return it->complete ? "complete" : "incomplete";
}

/* s appended to b as a JSON string, quotes included. */
static void
onfinish_jstr(struct td_buf *b, const char *s)
{
	const unsigned char *p;

	td_buf_add(b, "\"", 1);
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p == '\\' || *p == '"')
			td_buf_printf(b, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			td_buf_printf(b, "\\u%04x", *p);
		else
			td_buf_add(b, p, 1);
	}
	td_buf_add(b, "\"", 1);
}

/*
 * "TD_JSON=": the run's facts as one JSON object, every string through
 * onfinish_jstr(), so that a hook posting JSON never pastes a value into
 * JSON text itself (issue 31, row 5: a recording's name forged the field
 * "identity" of a site's JSON hook).
 */
static char *
onfinish_json(const struct onfinish_item *it)
{
	static const char *const keys[] = { "path", "kind", "producer",
	    "identity", "recording" };
	const char *vals[] = { it->path, onfinish_kind(it), it->producer,
	    it->identity, it->name };
	struct td_buf b;
	char *j;
	size_t i;

	/* 6 bytes a byte at most: a path (4 KiB), names of 64 and 256 */
	td_buf_init(&b, 64 * 1024);
	td_buf_printf(&b, "TD_JSON={");
	for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		td_buf_printf(&b, "%s\"%s\":", i > 0 ? "," : "", keys[i]);
		onfinish_jstr(&b, vals[i]);
	}
	td_buf_printf(&b, ",\"attempt\":%d}", it->attempt);
	xasprintf(&j, "%.*s", (int)b.len, (const char *)b.data);
	td_buf_free(&b);
	return j;
}

/*
 * The environment of a run: tdlisten's, ours replacing any of the same.
 * Peer data reaches the command here and in "$1" only, never in the text
 * the shell reads, and only as the listener made it: the name sanitized
 * as in the file's name, the identity as its directory's name.
 */
static char **
onfinish_env(const struct onfinish_item *it)
{
	static const char *const ours[] = { "TD_FILE_KIND=", "TD_PRODUCER=",
	    "TD_IDENTITY=", "TD_RECORDING=", "TD_ATTEMPT=", "TD_JSON=" };
	size_t n = 0, i, k, j;
	char **env;

	while (environ[n] != NULL)
		n++;
	env = xcalloc(n + 7, sizeof *env);
	for (i = 0, k = 0; i < n; i++) {
		for (j = 0; j < sizeof ours / sizeof ours[0]; j++)
			if (strncmp(environ[i], ours[j], strlen(ours[j])) == 0)
				break;
		if (j == sizeof ours / sizeof ours[0])
			env[k++] = xstrdup(environ[i]);
	}
	xasprintf(&env[k++], "TD_FILE_KIND=%s", onfinish_kind(it));
	xasprintf(&env[k++], "TD_PRODUCER=%s", it->producer);
	xasprintf(&env[k++], "TD_IDENTITY=%s", it->identity);
	xasprintf(&env[k++], "TD_RECORDING=%s", it->name);
	xasprintf(&env[k++], "TD_ATTEMPT=%d", it->attempt);
	env[k++] = onfinish_json(it);
	env[k] = NULL;
	return env;
}

static void
onfinish_env_free(char **env)
{
	size_t i;

	for (i = 0; env[i] != NULL; i++)
		free(env[i]);
	free(env);
}

/* Start the command for it: 0, or -1 with errno (posix_spawn's). */
static int
onfinish_spawn(struct onfinish_item *it)
{
	static const int dfl[] = { SIGPIPE, SIGCHLD, SIGINT, SIGTERM, SIGHUP,
	    SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t mask, def;
	char *argv[6], **env;
	size_t i;
	int e;

	argv[0] = (char *)"sh";
	argv[1] = (char *)"-c";
	argv[2] = it->of->line;
	argv[3] = (char *)"tdlisten-on-finish";	/* $0 */
	argv[4] = it->path;			/* $1 */
	argv[5] = NULL;
	sigemptyset(&mask);
	sigemptyset(&def);
	for (i = 0; i < sizeof dfl / sizeof dfl[0]; i++)
		sigaddset(&def, dfl[i]);
	if ((e = posix_spawn_file_actions_init(&fa)) != 0)
		goto out;
	if ((e = posix_spawnattr_init(&at)) != 0)
		goto out_fa;
	if ((e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null",
	    O_RDONLY, 0)) != 0 ||
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
	    (e = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) != 0 ||
#endif
	    (e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
	    POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) != 0 ||
	    (e = posix_spawnattr_setpgroup(&at, 0)) != 0 ||
	    (e = posix_spawnattr_setsigmask(&at, &mask)) != 0 ||
	    (e = posix_spawnattr_setsigdefault(&at, &def)) != 0)
		goto out_at;
	env = onfinish_env(it);
	e = posix_spawn(&it->pid, "/bin/sh", &fa, &at, argv, env);
	onfinish_env_free(env);
out_at:
	posix_spawnattr_destroy(&at);
out_fa:
	posix_spawn_file_actions_destroy(&fa);
out:
	if (e != 0) {
		errno = e;
		return -1;
	}
	return 0;
}

/* Unlink it from the list and free it. */
static void
onfinish_item_free(struct onfinish_item *it)
{
	struct onfinish *of = it->of;
	struct onfinish_item **pp, *prev = NULL;

	for (pp = &of->head; *pp != NULL; prev = *pp, pp = &(*pp)->next)
		if (*pp == it) {
			*pp = it->next;
			if (of->tail == it)
				of->tail = prev;
			of->st.queued--;
			break;
		}
	event_free(it->timer);
	free(it->path);
	free(it->sidecar);
	free(it->producer);
	free(it->identity);
	free(it->name);
	free(it);
}

/* The wait before attempt n + 1 (n >= 1): retry, doubled, capped. */
static int
onfinish_backoff(const struct onfinish *of, int n)
{
	long s = of->c.retry;
	long cap = of->c.retry > TD_ONFINISH_RETRY_MAX ? of->c.retry :
	    TD_ONFINISH_RETRY_MAX;

	while (--n > 0 && s < cap)
		s *= 2;
	return (int)(s < cap ? s : cap);
}

/*
 * An attempt failed (why: what happened): again later, or given up (its
 * sidecar stays: the next start tries again).
 */
static void
onfinish_failed(struct onfinish_item *it, const char *why)
{
	struct onfinish *of = it->of;
	struct timeval tv = { 0, 0 };

	of->st.failed++;
	if (it->attempt >= of->c.attempts) {
		of->st.given_up++;
		log_warnx("on-finish: '%s': attempt %d of %d %s; given up "
		    "(the next start of tdlisten tries again, unless '%s' is "
		    "removed)", it->path, it->attempt, of->c.attempts, why,
		    it->sidecar);
		onfinish_item_free(it);
		return;
	}
	tv.tv_sec = onfinish_backoff(of, it->attempt);
	log_warnx("on-finish: '%s': attempt %d of %d %s; again in %ld s",
	    it->path, it->attempt, of->c.attempts, why, (long)tv.tv_sec);
	it->state = OF_BACKOFF;
	evtimer_add(it->timer, &tv);
}

/* The item's timer: its next attempt is due, or its run took too long. */
static void
onfinish_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct onfinish_item *it = arg;

	if (it->state == OF_BACKOFF) {
		it->state = OF_READY;
		onfinish_kick(it->of);
		return;
	}
	if (it->state != OF_RUNNING || it->timed_out)
		return;
	/* the group: what CMD started goes too; SIGCHLD says when */
	it->timed_out = true;
	if (kill(-it->pid, SIGKILL) == -1 && errno != ESRCH)
		log_warn("on-finish: '%s': cannot kill process group %ld",
		    it->path, (long)it->pid);
}

/* A run ended with wait status st. */
static void
onfinish_ended(struct onfinish_item *it, int st)
{
	struct onfinish *of = it->of;
	char why[96];

	of->st.running--;
	evtimer_del(it->timer);
	if (!it->timed_out && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		of->st.succeeded++;
		if (unlink(it->sidecar) == -1 && errno != ENOENT)
			log_warn("on-finish: cannot remove '%s'", it->sidecar);
		log_info("on-finish: '%s': done (attempt %d)", it->path,
		    it->attempt);
		onfinish_item_free(it);
		return;
	}
	if (it->timed_out) {
		of->st.timeouts++;
		snprintf(why, sizeof why, "killed after %d s "
		    "(--on-finish-timeout)", of->c.timeout);
	} else if (WIFEXITED(st))
		snprintf(why, sizeof why, "failed: exit status %d",
		    WEXITSTATUS(st));
	else
		snprintf(why, sizeof why, "failed: killed by signal %d",
		    WTERMSIG(st));
	it->timed_out = false;
	onfinish_failed(it, why);
}

/* SIGCHLD: reap the runs that ended (ours only), start the next ones. */
static void
onfinish_sigchld_cb(evutil_socket_t sig, short what, void *arg)
{
	struct onfinish *of = arg;
	struct onfinish_item *it, *next;
	pid_t pid;
	int st;

	for (it = of->head; it != NULL; it = next) {
		next = it->next;
		if (it->state != OF_RUNNING)
			continue;
		pid = waitpid(it->pid, &st, WNOHANG);
		if (pid == it->pid)
			onfinish_ended(it, st);
		else if (pid == -1 && errno == ECHILD) {
			/* reaped by someone else: its status is lost */
			log_warnx("on-finish: '%s': pid %ld vanished",
			    it->path, (long)it->pid);
			onfinish_ended(it, 127 << 8);
		}
	}
	onfinish_kick(of);
}

/* Start what may start. */
static void
onfinish_kick(struct onfinish *of)
{
	struct onfinish_item *it, *next;
	struct timeval tv = { of->c.timeout, 0 };
	char why[96];

	if (of->stopping)
		return;
	for (it = of->head; it != NULL && of->st.running < of->c.jobs;
	    it = next) {
		next = it->next;
		if (it->state != OF_READY)
			continue;
		it->attempt++;
		of->st.started++;
		if (onfinish_spawn(it) == -1) {
			snprintf(why, sizeof why, "failed: cannot start "
			    "/bin/sh: %s", strerror(errno));
			onfinish_failed(it, why);
			continue;
		}
		of->st.running++;
		it->state = OF_RUNNING;
		it->timed_out = false;
		evtimer_add(it->timer, &tv);
		log_info("on-finish: '%s': attempt %d of %d, pid %ld",
		    it->path, it->attempt, of->c.attempts, (long)it->pid);
	}
}

/* Write a file's sidecar: 0, or -1 with errno. */
static int
onfinish_sidecar_write(const struct onfinish *of, const char *sidecar,
    bool complete, const char *producer, const char *identity,
    const char *name)
{
	char *text;
	ssize_t w;
	int fd, e, len;

	len = xasprintf(&text, "%s\nkind=%s\nproducer=%s\nidentity=%s\n"
	    "name=%s\n", ONFINISH_MAGIC, complete ? "complete" : "incomplete",
	    producer, identity, name);
	fd = open(sidecar, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, (mode_t)of->c.file_mode);
	if (fd == -1) {
		free(text);
		return -1;
	}
	w = write(fd, text, (size_t)len);
	e = errno;
	free(text);
	if (close(fd) == -1 && w == len)
		return -1;
	if (w != len) {
		errno = w == -1 ? e : ENOSPC;
		return -1;
	}
	return 0;
}

/* Whether a string may go into a sidecar's line (and come back). */
static bool
onfinish_field_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

/*
 * A recording's name as the file's name has it (output_sanitize()'s rule:
 * [A-Za-z0-9._-], no leading '.' or '-'): recording_done() gives it so;
 * this holds it for sidecars an older tdlisten wrote with the raw name.
 */
static char *
onfinish_name(const char *name)
{
	char *n = xstrdup(name), *p;

	for (p = n; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' ||
		    ((*p == '.' || *p == '-') && p != n)))
			*p = '_';
	return n;
}

/*
 * Queue a file, its sidecar written first when write_sidecar: NULL when
 * it is queued already or the queue is full (counted, logged).
 */
static struct onfinish_item *
onfinish_add(struct onfinish *of, const char *path, bool complete,
    const char *producer, const char *identity, const char *name,
    bool write_sidecar)
{
	struct onfinish_item *it;
	char *abs, *sidecar;

	if (path[0] != '/' && of->cwd != NULL)
		xasprintf(&abs, "%s/%s", of->cwd, path);
	else
		abs = xstrdup(path);
	for (it = of->head; it != NULL; it = it->next)
		if (strcmp(it->path, abs) == 0) {
			free(abs);
			return NULL;
		}
	if (!onfinish_field_ok(identity))
		identity = "";
	if (!onfinish_field_ok(name))
		name = "";
	xasprintf(&sidecar, "%s%s", abs, ONFINISH_SUFFIX);
	if (write_sidecar && onfinish_sidecar_write(of, sidecar, complete,
	    producer, identity, name) == -1)
		log_warn("on-finish: cannot write '%s' (a stop before the "
		    "command succeeds forgets '%s')", sidecar, abs);
	if (of->st.queued >= TD_ONFINISH_QUEUE) {
		of->st.dropped++;
		log_warnx("on-finish: %d files queued already: '%s' is not "
		    "(the next start of tdlisten runs it, from '%s')",
		    of->st.queued, abs, sidecar);
		free(abs);
		free(sidecar);
		return NULL;
	}
	it = xcalloc(1, sizeof *it);
	it->of = of;
	it->path = abs;
	it->sidecar = sidecar;
	it->complete = complete;
	it->producer = xstrdup(producer);
	it->identity = xstrdup(identity);
	it->name = onfinish_name(name);
	if ((it->timer = evtimer_new(of->base, onfinish_timer_cb, it)) ==
	    NULL)
		fatalx("on-finish: out of memory");
	it->state = OF_READY;
	if (of->tail != NULL)
		of->tail->next = it;
	else
		of->head = it;
	of->tail = it;
	of->st.queued++;
	return it;
}

void
onfinish_done_cb(const struct output_done *d, void *arg)
{
	struct onfinish *of = arg;

	if (onfinish_add(of, d->path, d->complete, d->producer, d->identity,
	    d->name, true) != NULL)
		onfinish_kick(of);
}

/* The value of "key=" in a sidecar's text, in buf; "" when absent. */
static void
onfinish_field(const char *text, const char *key, char *buf, size_t len)
{
	size_t kl = strlen(key), n;
	const char *p = text, *eol;

	buf[0] = '\0';
	for (; *p != '\0'; p = eol + (*eol != '\0')) {
		eol = strchr(p, '\n');
		if (eol == NULL)
			eol = p + strlen(p);
		if ((size_t)(eol - p) > kl && strncmp(p, key, kl) == 0 &&
		    p[kl] == '=') {
			n = (size_t)(eol - p) - kl - 1;
			if (n >= len)
				n = len - 1;
			memcpy(buf, p + kl + 1, n);
			buf[n] = '\0';
			return;
		}
	}
}

/* Queue the file of the sidecar at sidecar again, or remove the sidecar. */
static void
onfinish_recover_one(struct onfinish *of, const char *sidecar)
{
	char text[TD_ONFINISH_SIDECAR + 1], kind[16], producer[16];
	char identity[TD_MAX_NAME_LEN * 4 + 1], name[TD_MAX_NAME_LEN * 4 + 1];
	char *path;
	struct onfinish_item *it;
	struct stat sb;
	ssize_t n;
	int fd;

	fd = open(sidecar, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		log_warn("on-finish: cannot open '%s'", sidecar);
		return;
	}
	n = read(fd, text, sizeof text - 1);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	xasprintf(&path, "%.*s", (int)(strlen(sidecar) -
	    strlen(ONFINISH_SUFFIX)), sidecar);
	if (n <= 0 || strncmp(text, ONFINISH_MAGIC "\n",
	    strlen(ONFINISH_MAGIC) + 1) != 0 || memchr(text, '\0',
	    (size_t)n) != NULL) {
		log_warnx("on-finish: '%s' is not a sidecar of ours: left "
		    "alone", sidecar);
		free(path);
		return;
	}
	if (lstat(path, &sb) == -1) {
		log_warnx("on-finish: '%s' is gone: its sidecar is removed",
		    path);
		unlink(sidecar);
		free(path);
		return;
	}
	onfinish_field(text, "kind", kind, sizeof kind);
	onfinish_field(text, "producer", producer, sizeof producer);
	onfinish_field(text, "identity", identity, sizeof identity);
	onfinish_field(text, "name", name, sizeof name);
	it = onfinish_add(of, path, strcmp(kind, "incomplete") != 0,
	    producer[0] != '\0' ? producer : "tdproto", identity, name,
	    false);
	if (it != NULL)
		log_info("on-finish: '%s': left by an earlier tdlisten, "
		    "queued again", it->path);
	free(path);
}

void
onfinish_recover(struct onfinish *of, const char *dir)
{
	struct dirent *d, *e;
	DIR *top, *sub;
	char *subdir, *sidecar;
	size_t n, sl = strlen(ONFINISH_SUFFIX);

	if ((top = opendir(dir)) == NULL)
		return;
	while ((d = readdir(top)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		xasprintf(&subdir, "%s/%s", dir, d->d_name);
		if ((sub = opendir(subdir)) == NULL) {
			free(subdir);
			continue;
		}
		while ((e = readdir(sub)) != NULL) {
			n = strlen(e->d_name);
			if (n <= sl || e->d_name[0] == '.' ||
			    strcmp(e->d_name + n - sl, ONFINISH_SUFFIX) != 0)
				continue;
			xasprintf(&sidecar, "%s/%s", subdir, e->d_name);
			onfinish_recover_one(of, sidecar);
			free(sidecar);
		}
		closedir(sub);
		free(subdir);
	}
	closedir(top);
	onfinish_kick(of);
}

struct onfinish *
onfinish_new(struct event_base *base, const struct onfinish_config *c,
    char *err, size_t errlen)
{
	struct onfinish *of;

	of = xcalloc(1, sizeof *of);
	of->base = base;
	of->c = *c;
	of->c.cmd = NULL;
	xasprintf(&of->line, "%s \"$1\"", c->cmd);
	of->cwd = getcwd(NULL, 0);
	of->sigchld = evsignal_new(base, SIGCHLD, onfinish_sigchld_cb, of);
	if (of->sigchld == NULL || evsignal_add(of->sigchld, NULL) == -1) {
		snprintf(err, errlen, "cannot watch SIGCHLD");
		if (of->sigchld != NULL)
			event_free(of->sigchld);
		free(of->line);
		free(of->cwd);
		free(of);
		return NULL;
	}
	return of;
}

void
onfinish_stats(const struct onfinish *of, struct onfinish_stats *s)
{
	*s = of->st;
}

void
onfinish_stop(struct onfinish *of)
{
	of->stopping = true;
}

void
onfinish_free(struct onfinish *of)
{
	struct onfinish_item *it;

	if (of == NULL)
		return;
	if (of->st.queued > 0)
		log_warnx("on-finish: %d file%s pending (%d running: sent "
		    "SIGTERM): the sidecars stay, the next start of tdlisten "
		    "runs them", of->st.queued, of->st.queued == 1 ? "" : "s",
		    of->st.running);
	for (it = of->head; it != NULL; it = it->next)
		if (it->state == OF_RUNNING && kill(-it->pid, SIGTERM) == -1 &&
		    errno != ESRCH)
			log_warn("on-finish: cannot stop process group %ld",
			    (long)it->pid);
	while (of->head != NULL)
		onfinish_item_free(of->head);
	event_free(of->sigchld);
	free(of->line);
	free(of->cwd);
	free(of);
}
