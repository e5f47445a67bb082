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
#include "output.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

#define ONFINISH_SUFFIX		".onfinish"
#define ONFINISH_MAGIC		"tdlisten-onfinish 1"
#define ONFINISH_GIVEN_UP	"given_up"

extern char **environ;

enum onfinish_state {
	OF_READY,	/* waits for a slot */
	OF_BACKOFF,	/* waits for its next attempt */
	OF_RUNNING,
};

/*
 * One identity's share of the queue: at most TD_ONFINISH_QUEUE_ID items;
 * its other files wait in their sidecars (deferred) until its items are
 * down to half that, when onfinish_refill() reads its directory again.
 */
struct onfinish_ident {
	char			*identity;
	char			*dir;		/* its sidecars' directory */
	int			 queued;	/* its items in the list */
	bool			 deferred;	/* sidecars wait on disk */
	struct onfinish_ident	*next;
};

/* One file and the runs of the command for it. */
struct onfinish_item {
	struct onfinish		*of;
	struct onfinish_ident	*id;
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
	struct onfinish_ident	*idents;
	struct onfinish_stats	 st;
	bool			 stopping;	/* start nothing */
};

static void	onfinish_kick(struct onfinish *of);
static void	onfinish_refill(struct onfinish *of);
static void	onfinish_defer(struct onfinish *of, struct onfinish_ident *id,
		    const char *path, bool has_sidecar);

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

/* The share of identity, whose files are in dir: made when new. */
static struct onfinish_ident *
onfinish_ident_get(struct onfinish *of, const char *identity,
    const char *dir)
{
	struct onfinish_ident *id;

	for (id = of->idents; id != NULL; id = id->next)
		if (strcmp(id->identity, identity) == 0)
			return id;
	id = xcalloc(1, sizeof *id);
	id->identity = xstrdup(identity);
	id->dir = xstrdup(dir);
	id->next = of->idents;
	of->idents = id;
	return id;
}

/* Forget id once it has nothing queued and nothing deferred. */
static void
onfinish_ident_put(struct onfinish *of, struct onfinish_ident *id)
{
	struct onfinish_ident **pp;

	if (id->queued > 0 || id->deferred)
		return;
	for (pp = &of->idents; *pp != NULL; pp = &(*pp)->next)
		if (*pp == id) {
			*pp = id->next;
			break;
		}
	free(id->identity);
	free(id->dir);
	free(id);
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
			it->id->queued--;
			break;
		}
	onfinish_ident_put(of, it->id);
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
 * Say in its sidecar that it was given up: onfinish_refill() leaves it
 * (the next start tries it again, onfinish_recover()).
 */
static void
onfinish_mark_given_up(const struct onfinish_item *it)
{
	static const char line[] = ONFINISH_GIVEN_UP "=1\n";
	int fd;

	fd = open(it->sidecar, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1 || write(fd, line, sizeof line - 1) !=
	    (ssize_t)(sizeof line - 1))
		log_warn("on-finish: cannot mark '%s' as given up",
		    it->sidecar);
	if (fd != -1)
		close(fd);
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
		onfinish_mark_given_up(it);
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
	onfinish_refill(of);
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
 * Make room for one more item of id in a full queue: the newest waiting
 * item of the identity holding the most (more than id holds, plus one)
 * goes back to its sidecar.  False when there is none such.
 */
static bool
onfinish_evict(struct onfinish *of, struct onfinish_ident *id)
{
	struct onfinish_ident *big = NULL, *x;
	struct onfinish_item *it, *last = NULL;

	for (x = of->idents; x != NULL; x = x->next)
		if (x != id && (big == NULL || x->queued > big->queued))
			big = x;
	if (big == NULL || big->queued <= id->queued + 1)
		return false;
	for (it = of->head; it != NULL; it = it->next)
		if (it->id == big && it->state == OF_READY)
			last = it;
	if (last == NULL)
		return false;
	onfinish_defer(of, big, last->path, true);
	onfinish_item_free(last);
	return true;
}

/*
 * A file of id is not queued: it waits in its sidecar (has_sidecar) for
 * onfinish_refill() or the next start.  Logged once a deferral.
 */
static void
onfinish_defer(struct onfinish *of, struct onfinish_ident *id,
    const char *path, bool has_sidecar)
{
	of->st.dropped++;
	if (!has_sidecar) {
		log_warnx("on-finish: '%s' cannot be queued (identity '%s' "
		    "has %d files queued, %d in all) and has no sidecar: its "
		    "command does not run", path, id->identity, id->queued,
		    of->st.queued);
		return;
	}
	if (id->deferred)
		return;
	id->deferred = true;
	log_warnx("on-finish: identity '%s' has %d files queued (%d in all): "
	    "'%s' and its next ones wait in their sidecars, queued again as "
	    "its queue drains (or at the next start of tdlisten)",
	    id->identity, id->queued, of->st.queued, path);
}

/* Whether a file of id may be queued now (room made when it may). */
static bool
onfinish_room(struct onfinish *of, struct onfinish_ident *id)
{
	if (id->queued >= TD_ONFINISH_QUEUE_ID)
		return false;
	return of->st.queued < TD_ONFINISH_QUEUE || onfinish_evict(of, id);
}

/*
 * Queue a file, its sidecar written first when write_sidecar: NULL when
 * it is queued already (*deferred false) or there is no room for it now
 * (*deferred true: it waits in its sidecar, counted, logged).  An
 * identity queues at most TD_ONFINISH_QUEUE_ID files, and a full queue
 * makes room for an identity holding fewer than another (issue 31, row
 * 6: one identity's 1,100 tiny recordings filled the shared queue, and
 * an honest file waited for the next restart).
 */
static struct onfinish_item *
onfinish_add(struct onfinish *of, const char *path, bool complete,
    const char *producer, const char *identity, const char *name,
    bool write_sidecar, bool *deferred)
{
	struct onfinish_ident *id;
	struct onfinish_item *it;
	char *abs, *sidecar, *dir;
	bool has_sidecar = true;

	*deferred = false;
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
	    producer, identity, name) == -1) {
		has_sidecar = false;
		log_warn("on-finish: cannot write '%s' (a stop before the "
		    "command succeeds forgets '%s')", sidecar, abs);
	}
	xasprintf(&dir, "%.*s", (int)(strrchr(abs, '/') - abs), abs);
	id = onfinish_ident_get(of, identity, dir);
	free(dir);
	if (!onfinish_room(of, id)) {
		*deferred = true;
		onfinish_defer(of, id, abs, has_sidecar);
		onfinish_ident_put(of, id);
		free(abs);
		free(sidecar);
		return NULL;
	}
	it = xcalloc(1, sizeof *it);
	it->of = of;
	it->id = id;
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
	id->queued++;
	return it;
}

void
onfinish_done_cb(const struct output_done *d, void *arg)
{
	struct onfinish *of = arg;
	bool deferred;

	if (onfinish_add(of, d->path, d->complete, d->producer, d->identity,
	    d->name, true, &deferred) != NULL)
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

/*
 * Queue the file of the sidecar at sidecar again, or remove the sidecar
 * when the file is gone.  At start (at_start) every sidecar of ours is
 * taken; later (onfinish_refill()) a given up one is left for the next
 * start.  1 when queued, 0 when not, -1 when there was no room (deferred).
 */
static int
onfinish_recover_one(struct onfinish *of, const char *sidecar, bool at_start)
{
	char text[TD_ONFINISH_SIDECAR + 1], kind[16], producer[16], gu[4];
	char identity[TD_MAX_NAME_LEN * 4 + 1], name[TD_MAX_NAME_LEN * 4 + 1];
	char *path;
	struct onfinish_item *it;
	struct stat sb;
	bool deferred;
	ssize_t n;
	int fd;

	fd = open(sidecar, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		log_warn("on-finish: cannot open '%s'", sidecar);
		return 0;
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
		return 0;
	}
	if (lstat(path, &sb) == -1) {
		log_warnx("on-finish: '%s' is gone: its sidecar is removed",
		    path);
		unlink(sidecar);
		free(path);
		return 0;
	}
	onfinish_field(text, ONFINISH_GIVEN_UP, gu, sizeof gu);
	if (!at_start && gu[0] != '\0') {
		free(path);
		return 0;
	}
	onfinish_field(text, "kind", kind, sizeof kind);
	onfinish_field(text, "producer", producer, sizeof producer);
	onfinish_field(text, "identity", identity, sizeof identity);
	onfinish_field(text, "name", name, sizeof name);
	it = onfinish_add(of, path, strcmp(kind, "incomplete") != 0,
	    producer[0] != '\0' ? producer : "tdproto", identity, name,
	    false, &deferred);
	if (it != NULL && at_start)
		log_info("on-finish: '%s': left by an earlier tdlisten, "
		    "queued again", it->path);
	free(path);
	return it != NULL ? 1 : deferred ? -1 : 0;
}

/*
 * The sidecars in dir queued again (at_start: all of ours), until one
 * finds no room: the number queued, and *full when one found none.
 */
static int
onfinish_recover_dir(struct onfinish *of, const char *dir, bool at_start,
    bool *full)
{
	struct dirent *e;
	DIR *d;
	char *sidecar;
	size_t n, sl = strlen(ONFINISH_SUFFIX);
	int queued = 0, rc;

	*full = false;
	if ((d = opendir(dir)) == NULL)
		return 0;
	while (!*full && (e = readdir(d)) != NULL) {
		n = strlen(e->d_name);
		if (n <= sl || e->d_name[0] == '.' ||
		    strcmp(e->d_name + n - sl, ONFINISH_SUFFIX) != 0)
			continue;
		xasprintf(&sidecar, "%s/%s", dir, e->d_name);
		rc = onfinish_recover_one(of, sidecar, at_start);
		free(sidecar);
		if (rc == 1)
			queued++;
		*full = rc == -1;
	}
	closedir(d);
	return queued;
}

/*
 * The identities whose files wait in their sidecars and whose items are
 * down to half their share: their directories read again (once a kick
 * each, while the queue has room), what waits there queued up to the
 * share.  Its directory is read a few times for every 32 files.
 */
static void
onfinish_refill(struct onfinish *of)
{
	struct onfinish_ident *id, *next;
	bool full;
	int n;

	for (id = of->idents; id != NULL; id = next) {
		next = id->next;
		if (!id->deferred || id->queued > TD_ONFINISH_QUEUE_ID / 2 ||
		    of->st.queued >= TD_ONFINISH_QUEUE)
			continue;
		/* deferred stays set while reading: id is kept, not logged */
		n = onfinish_recover_dir(of, id->dir, false, &full);
		id->deferred = full;
		log_info("on-finish: identity '%s': %d waiting file%s queued "
		    "again from %s sidecars%s", id->identity, n, n == 1 ? "" :
		    "s", n == 1 ? "its" : "their", full ? ", more wait" : "");
		onfinish_ident_put(of, id);
	}
}

void
onfinish_recover(struct onfinish *of, const char *dir)
{
	struct dirent *d;
	DIR *top;
	char *subdir;
	bool full;

	if ((top = opendir(dir)) == NULL)
		return;
	while ((d = readdir(top)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		xasprintf(&subdir, "%s/%s", dir, d->d_name);
		onfinish_recover_dir(of, subdir, true, &full);
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
	while (of->idents != NULL) {
		of->idents->deferred = false;
		onfinish_ident_put(of, of->idents);
	}
	event_free(of->sigchld);
	free(of->line);
	free(of->cwd);
	free(of);
}
