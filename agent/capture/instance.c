/*
 * instance.c: create, configure and remove tdagent's ftrace instance.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tracefs.h>

#include "instance.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/*
 * A file opened at setup, read or written through its fd later; found by
 * its name, without asking libtracefs for paths (which, without root,
 * cannot check the tracefs mount any more).
 */
struct instance_kept {
	char			*file;
	bool			 top;		/* tracefs's, not the instance's */
	int			 fd;
};

/* tdagent's own ftrace instance and the descriptors kept open in it. */
struct instance {
	struct tracefs_instance	*ti;
	char			*clock;
	struct instance_kept	*kept;
	int			 nkept;
	bool			 borrowed;	/* instance_adopt()'s */
};

/* The instances to remove on a fatal path. */
#define INSTANCE_MAX_LIVE	4
static struct instance *instance_live[INSTANCE_MAX_LIVE];
/* false in the unprivileged recorder: the instances are its parent's */
static bool instance_owner = true;

/* Make sure tracefs is mounted where libtracefs looks for it. */
int
instance_check_tracefs(char *err, size_t errlen)
{
	struct stat st;

	if (tracefs_tracing_dir() != NULL)
		return 0;
	if (stat("/sys/kernel/tracing", &st) == 0 &&
	    mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0 &&
	    tracefs_tracing_dir() != NULL)
		return 0;
	snprintf(err, errlen, "tracefs is not mounted and cannot be mounted "
	    "at /sys/kernel/tracing (%s); tdagent needs root and a kernel "
	    "with CONFIG_FTRACE", strerror(errno));
	return -1;
}

/* Stop and remove the instance name (a dead tdagent's); -1: it stays. */
static int
instance_remove(const char *name)
{
	struct tracefs_instance *ti;
	int ret;

	if ((ti = tracefs_instance_alloc(NULL, name)) == NULL)
		return -1;
	tracefs_trace_off(ti);
	tracefs_event_disable(ti, NULL, NULL);
	ret = tracefs_instance_destroy(ti);
	tracefs_instance_free(ti);
	return ret;
}

/*
 * Remove instances left by tdagents that died without cleaning up (kill -9,
 * a crash): their name carries a pid that no longer exists.
 */
static void
instance_reap_stale(void)
{
	char **list;
	long pid;
	char *end;
	int i;

	list = tracefs_instances(NULL);
	for (i = 0; list != NULL && list[i] != NULL; i++) {
		if (strncmp(list[i], "tracedock-", 10) != 0)
			continue;
		pid = strtol(list[i] + 10, &end, 10);
		if ((*end != '\0' && *end != '-') || pid <= 0 ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		instance_remove(list[i]);
	}
	tracefs_list_free(list);
}

/*
 * Whether this process made instance name before (a flight ring armed
 * again); the first time, an instance of that name that exists already
 * is a dead tdagent's whose pid this one has now.
 */
static bool
instance_made_before(const char *name)
{
	static char made[INSTANCE_MAX_LIVE * 2][64];
	size_t i;

	for (i = 0; i < sizeof made / sizeof made[0] && made[i][0]; i++)
		if (strcmp(made[i], name) == 0)
			return true;
	if (i < sizeof made / sizeof made[0])
		snprintf(made[i], sizeof made[i], "%s", name);
	return false;
}

/*
 * Create instances/tracedock-<pid>[-<suffix>], tracing off, buffer empty.
 */
struct instance *
instance_create(const char *suffix, char *err, size_t errlen)
{
	struct instance *in;
	char name[64];
	int i;

	if (suffix == NULL) {
		instance_reap_stale();
		snprintf(name, sizeof name, "tracedock-%ld", (long)getpid());
	} else
		snprintf(name, sizeof name, "tracedock-%ld-%s",
		    (long)getpid(), suffix);
	/*
	 * pid_max wraps (32768 on many boxes, a test suite forks that many):
	 * a tdagent killed with SIGKILL leaves tracedock-<pid> with its
	 * events, filters, clock and ring, and libtracefs hands an existing
	 * instance back as if made.  Recorded into, it gave an "empty"
	 * recording thousands of the dead one's events.  Such an instance
	 * goes first, or nothing is recorded.
	 */
	if (!instance_made_before(name) &&
	    tracefs_instance_exists(name) && instance_remove(name) == -1) {
		snprintf(err, errlen, "cannot remove ftrace instance '%s', "
		    "left by a tdagent that had this pid: %s", name,
		    strerror(errno));
		return NULL;
	}
	in = xcalloc(1, sizeof *in);
	in->ti = tracefs_instance_create(name);
	if (in->ti == NULL) {
		snprintf(err, errlen, "cannot create ftrace instance '%s': %s%s",
		    name, strerror(errno), errno == EACCES || errno == EPERM ?
		    " (tdagent needs root)" : "");
		free(in);
		return NULL;
	}
	for (i = 0; i < INSTANCE_MAX_LIVE; i++) {
		if (instance_live[i] == NULL) {
			instance_live[i] = in;
			break;
		}
	}
	tracefs_trace_off(in->ti);
	instance_clear(in);
	return in;
}

struct instance *
instance_adopt(const char *name, char *err, size_t errlen)
{
	struct instance *in;

	if (strncmp(name, "tracedock-", 10) != 0 || strchr(name, '/') ||
	    !tracefs_instance_exists(name)) {
		snprintf(err, errlen, "no ftrace instance '%s' of tracedock's",
		    name);
		return NULL;
	}
	in = xcalloc(1, sizeof *in);
	if ((in->ti = tracefs_instance_alloc(NULL, name)) == NULL) {
		snprintf(err, errlen, "cannot open ftrace instance '%s': %s",
		    name, strerror(errno));
		free(in);
		return NULL;
	}
	in->borrowed = true;
	return in;
}

static int
instance_split(const char *spec, char **sys, char **ev)
{
	const char *c;

	if (strcmp(spec, "all") == 0) {
		*sys = NULL;
		*ev = NULL;
		return 0;
	}
	c = strchr(spec, ':');
	if (c == NULL) {
		*sys = xstrdup(spec);
		*ev = NULL;
	} else {
		*sys = xmalloc(c - spec + 1);
		memcpy(*sys, spec, c - spec);
		(*sys)[c - spec] = '\0';
		*ev = c[1] ? xstrdup(c + 1) : NULL;
	}
	if (**sys == '\0') {
		free(*sys);
		free(*ev);
		return -1;
	}
	return 0;
}

/* Whether s has a glob character (trace-cmd's -e takes globs). */
static bool
instance_is_glob(const char *s)
{
	return s != NULL && strpbrk(s, "*?[") != NULL;
}

/*
 * libtracefs takes regular expressions: turn the name or glob the user
 * typed into an anchored one, so that "sched:sched_switch" never also
 * matches a longer event name and "sched_w*" means what it says.
 */
static char *
instance_anchor(const char *s)
{
	char *r, *o;

	if (s == NULL)
		return NULL;
	o = r = xmalloc(2 * strlen(s) + 3);
	*o++ = '^';
	for (; *s != '\0'; s++) {
		if (*s == '*') {
			*o++ = '.';
			*o++ = '*';
		} else if (*s == '?')
			*o++ = '.';
		else if (*s == '[' || *s == ']' || *s == '-' || *s == '_' ||
		    (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9'))
			*o++ = *s;
		else {
			*o++ = '\\';
			*o++ = *s;
		}
	}
	*o++ = '$';
	*o = '\0';
	return r;
}

/*
 * Enable (on) or disable the events of spec: "all", SYSTEM, SYSTEM:EVENT,
 * or a bare EVENT of any system as trace-cmd takes it, each part a name or
 * a glob.  0, or -1 when nothing matched.
 */
static int
instance_switch(struct instance *in, const char *sys, const char *ev,
    bool on)
{
	char *asys, *aev;
	int ret;

	asys = instance_anchor(sys);
	aev = instance_anchor(ev);
	ret = on ? tracefs_event_enable(in->ti, asys, aev) :
	    tracefs_event_disable(in->ti, asys, aev);
	/* no system of that name: an event of that name in any system */
	if (ret == -1 && sys != NULL && ev == NULL)
		ret = on ? tracefs_event_enable(in->ti, NULL, asys) :
		    tracefs_event_disable(in->ti, NULL, asys);
	free(asys);
	free(aev);
	return ret;
}

/* Enable (or with on false, disable) the events named by spec. */
static int
instance_set_events(struct instance *in, const char *spec, bool on,
    char *err, size_t errlen)
{
	char *sys, *ev;
	int ret;

	if (instance_split(spec, &sys, &ev) == -1) {
		snprintf(err, errlen, "invalid event '%s'", spec);
		return -1;
	}
	ret = instance_switch(in, sys, ev, on);
	if (ret == -1)
		snprintf(err, errlen, "unknown event '%s'%s", spec,
		    sys != NULL && ev == NULL ? " (no such event system), nor "
		    "an event of that name" : " (see "
		    "/sys/kernel/tracing/available_events)");
	free(sys);
	free(ev);
	return ret == -1 ? -1 : 0;
}

/* Enable the events named by spec. */
int
instance_enable(struct instance *in, const char *spec, char *err,
    size_t errlen)
{
	return instance_set_events(in, spec, true, err, errlen);
}

/* Disable the events named by spec (-v -e: left out). */
int
instance_disable(struct instance *in, const char *spec, char *err,
    size_t errlen)
{
	return instance_set_events(in, spec, false, err, errlen);
}

/* Whether name is an event system. */
static bool
instance_is_system(const char *name)
{
	char **sys;
	bool found = false;
	int i;

	sys = tracefs_event_systems(NULL);
	for (i = 0; sys != NULL && sys[i] != NULL && !found; i++)
		found = strcmp(sys[i], name) == 0;
	tracefs_list_free(sys);
	return found;
}

/*
 * The system of a bare event name (-e sched_switch): the one system that
 * has it, or NULL (none, or several: the user names one).
 */
static char *
instance_event_system(const char *name)
{
	char **sys, *found = NULL;
	int i, n = 0;

	sys = tracefs_event_systems(NULL);
	for (i = 0; sys != NULL && sys[i] != NULL; i++)
		if (tracefs_event_file_exists(NULL, sys[i], name, "filter")) {
			if (n++ == 0)
				found = xstrdup(sys[i]);
		}
	tracefs_list_free(sys);
	if (n != 1) {
		free(found);
		return NULL;
	}
	return found;
}

/*
 * The kernel takes any filter for a whole system without an error and sets
 * it on the events that have the fields; the others show a parse error in
 * their own filter file.  Count the events that took it; when none did, put
 * the first event's complaint in err.
 */
static int
instance_filter_taken(struct instance *in, const char *sys, char *err,
    size_t errlen)
{
	char **evs, *file, *text;
	int i, taken = 0;

	evs = tracefs_system_events(NULL, sys);
	for (i = 0; evs != NULL && evs[i] != NULL; i++) {
		xasprintf(&file, "events/%s/%s/filter", sys, evs[i]);
		text = tracefs_instance_file_read(in->ti, file, NULL);
		free(file);
		if (text == NULL)
			continue;
		if (strstr(text, "parse_error") == NULL &&
		    strncmp(text, "none", 4) != 0)
			taken++;
		else if (taken == 0 && err[0] == '\0')
			snprintf(err, errlen, "invalid filter for every event "
			    "of '%s':\n%s", sys, text);
		free(text);
	}
	tracefs_list_free(evs);
	return taken;
}

/* Set filter on the events of spec; report the kernel's complaint. */
int
instance_filter(struct instance *in, const char *spec, const char *filter,
    char *err, size_t errlen)
{
	char *sys, *ev, *file, *klog;
	int ret;

	if (instance_split(spec, &sys, &ev) == -1 || sys == NULL ||
	    instance_is_glob(sys) || instance_is_glob(ev)) {
		snprintf(err, errlen, "a filter needs a system or event "
		    "before it (-e SYSTEM[:EVENT] -f FILTER), not '%s'", spec);
		if (sys != NULL) {
			free(sys);
			free(ev);
		}
		return -1;
	}
	/* a bare event name: the system that has it */
	if (ev == NULL && !instance_is_system(sys) &&
	    (file = instance_event_system(sys)) != NULL) {
		ev = sys;
		sys = file;
	}
	if (ev != NULL)
		xasprintf(&file, "events/%s/%s/filter", sys, ev);
	else
		xasprintf(&file, "events/%s/filter", sys);
	tracefs_error_clear(in->ti);
	err[0] = '\0';
	ret = tracefs_instance_file_write(in->ti, file, filter);
	if (ret >= 0 && ev == NULL &&
	    instance_filter_taken(in, sys, err, errlen) == 0) {
		ret = -1;
		goto out;
	}
	if (ret < 0) {
		klog = tracefs_error_last(in->ti);
		snprintf(err, errlen, "invalid filter '%s' for '%s'%s%s",
		    filter, spec, klog ? ":\n" : "", klog ? klog : "");
		free(klog);
	}
out:
	free(file);
	free(sys);
	free(ev);
	return ret < 0 ? -1 : 0;
}

/* Select the trace clock. */
int
instance_set_clock(struct instance *in, const char *clock, char *err,
    size_t errlen)
{
	char *avail;
	const char *found = NULL;

	avail = tracefs_instance_file_read(in->ti, "trace_clock", NULL);
	if (avail != NULL) {
		size_t n = strlen(clock);
		char *p;

		for (p = avail; (p = strstr(p, clock)) != NULL; p += n) {
			if ((p == avail || p[-1] == ' ' || p[-1] == '[') &&
			    (p[n] == ' ' || p[n] == ']' || p[n] == '\n' ||
			    p[n] == '\0')) {
				found = p;
				break;
			}
		}
	}
	if (found == NULL) {
		if (avail != NULL)
			avail[strcspn(avail, "\n")] = '\0';
		snprintf(err, errlen, "unknown trace clock '%s' (available: "
		    "%s)", clock, avail ? avail : "?");
		free(avail);
		return -1;
	}
	free(avail);
	if (tracefs_instance_file_write(in->ti, "trace_clock", clock) < 0) {
		snprintf(err, errlen, "cannot set trace clock '%s': %s",
		    clock, strerror(errno));
		return -1;
	}
	free(in->clock);
	in->clock = NULL;
	return 0;
}

/* Set the per-CPU buffer size in KiB. */
int
instance_set_buffer_kb(struct instance *in, int kb, char *err, size_t errlen)
{
	if (tracefs_instance_set_buffer_size(in->ti, kb, -1) < 0) {
		snprintf(err, errlen, "cannot set buffer size %d KiB: %s",
		    kb, strerror(errno));
		return -1;
	}
	return 0;
}

/* The per-CPU buffer size in KiB (CPU 0's: they are set together). */
long
instance_buffer_kb(struct instance *in)
{
	ssize_t kb = tracefs_instance_get_buffer_size(in->ti, 0);

	return kb > 0 ? (long)kb : -1;
}

static int instance_kept_fd(struct instance *, const char *, bool);

/* Turn recording on or off (through the kept tracing_on, if kept). */
int
instance_set_tracing(struct instance *in, int on)
{
	int fd = instance_kept_fd(in, "tracing_on", false);

	if (fd != -1)
		return pwrite(fd, on ? "1" : "0", 1, 0) == 1 ? 0 : -1;
	return on ? tracefs_trace_on(in->ti) : tracefs_trace_off(in->ti);
}

/* Set the reader wake-up watermark. */
int
instance_set_buffer_percent(struct instance *in, int pct)
{
	char s[16];

	snprintf(s, sizeof s, "%d", pct);
	return tracefs_instance_file_write(in->ti, "buffer_percent", s) < 0 ?
	    -1 : 0;
}

/* Record only pid and its descendants (set_event_pid + event-fork). */
int
instance_follow_pid(struct instance *in, pid_t pid)
{
	char s[32];

	snprintf(s, sizeof s, "%ld", (long)pid);
	if (tracefs_instance_file_write(in->ti, "options/event-fork",
	    "1") < 0 ||
	    tracefs_instance_file_write(in->ti, "set_event_pid", s) < 0)
		return -1;
	return 0;
}

/* Leave processes out of the recording (one write: it replaces). */
int
instance_exclude_pids(struct instance *in, const pid_t *pids, int n)
{
	char s[256];
	size_t len = 0;
	int i;

	s[0] = '\0';
	for (i = 0; i < n && len < sizeof s; i++)
		len += snprintf(s + len, sizeof s - len, "%s%ld",
		    i ? " " : "", (long)pids[i]);
	return tracefs_instance_file_write(in->ti, "set_event_notrace_pid",
	    s) < 0 ? -1 : 0;
}

/* Empty the ring buffer. */
int
instance_clear(struct instance *in)
{
	return tracefs_instance_file_clear(in->ti, "trace");
}

/* The path of a file of the instance, or of tracefs itself (top). */
static char *
instance_file(struct instance *in, const char *file, bool top)
{
	char *p, *r;

	p = tracefs_instance_get_file(top ? NULL : in->ti, file);
	if (p == NULL)
		return NULL;
	r = xstrdup(p);
	tracefs_put_tracing_file(p);
	return r;
}

/* The kept descriptor of a file, or -1. */
static int
instance_kept_fd(struct instance *in, const char *file, bool top)
{
	int i;

	for (i = 0; i < in->nkept; i++)
		if (in->kept[i].top == top &&
		    strcmp(in->kept[i].file, file) == 0)
			return in->kept[i].fd;
	return -1;
}

/*
 * Open a file now and use that descriptor from then on.  tracefs checks
 * permissions when a file is opened, so a descriptor opened as root still
 * reads (seq files start again at offset 0) after the process lost root.
 */
int
instance_keep(struct instance *in, const char *file, bool top, int flags)
{
	char *path;
	int fd;

	if (instance_kept_fd(in, file, top) != -1)
		return 0;
	if ((path = instance_file(in, file, top)) == NULL)
		return -1;
	fd = open(path, flags | O_CLOEXEC);
	free(path);
	if (fd == -1)
		return -1;
	in->kept = xreallocarray(in->kept, in->nkept + 1, sizeof *in->kept);
	in->kept[in->nkept].file = xstrdup(file);
	in->kept[in->nkept].top = top;
	in->kept[in->nkept].fd = fd;
	in->nkept++;
	return 0;
}

int
instance_fd(struct instance *in, const char *file, bool top)
{
	return instance_kept_fd(in, file, top);
}

/* Read a kept file through from offset 0, NUL-terminated. */
static char *
instance_kept_read(int fd, size_t *size)
{
	size_t len = 0, cap = 8192;
	char *s = xmalloc(cap);
	ssize_t n;

	for (;;) {
		if (cap - len < 4096) {
			if (cap >= TD_MAX_SECTION_SIZE) {
				free(s);
				errno = EFBIG;
				return NULL;
			}
			cap *= 2;
			s = xreallocarray(s, cap, 1);
		}
		n = pread(fd, s + len, cap - len - 1, (off_t)len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			free(s);
			return NULL;
		}
		if (n == 0)
			break;
		len += n;
	}
	s[len] = '\0';
	if (size != NULL)
		*size = len;
	return s;
}

/* Read a whole file of the instance (or of tracefs: top). */
static char *
instance_read_any(struct instance *in, const char *file, bool top,
    size_t *size)
{
	int n = 0, fd;
	char *s;

	if ((fd = instance_kept_fd(in, file, top)) != -1)
		return instance_kept_read(fd, size);
	s = tracefs_instance_file_read(top ? NULL : in->ti, file, &n);
	if (s != NULL && size != NULL)
		*size = n;
	return s;
}

/* Read a whole instance file. */
char *
instance_read(struct instance *in, const char *file, size_t *size)
{
	return instance_read_any(in, file, false, size);
}

/* Read a whole top-level tracefs file (saved_cmdlines...). */
char *
instance_read_top(struct instance *in, const char *file, size_t *size)
{
	return instance_read_any(in, file, true, size);
}

/* Path of an instance file. */
/*
 * How far back the ring of each CPU reaches, in ms ("now ts" less "oldest
 * event ts" of per_cpu/cpuN/stats): the longest of them (longest) or the
 * shortest; -1 when no CPU holds an event.
 */
long long
instance_reach_ms(struct instance *in, int ncpus, bool longest)
{
	long long best = -1, ms;
	double oldest, now;
	char file[64], *t, *p;
	int cpu;

	for (cpu = 0; cpu < ncpus; cpu++) {
		snprintf(file, sizeof file, "per_cpu/cpu%d/stats", cpu);
		if ((t = instance_read(in, file, NULL)) == NULL)
			continue;
		oldest = now = -1;
		if ((p = strstr(t, "oldest event ts:")) != NULL)
			oldest = strtod(p + 16, NULL);
		if ((p = strstr(t, "now ts:")) != NULL)
			now = strtod(p + 7, NULL);
		free(t);
		if (oldest <= 0 || now < oldest)
			continue;
		ms = (long long)((now - oldest) * 1000);
		if (best == -1 || (longest ? ms > best : ms < best))
			best = ms;
	}
	return best;
}

char *
instance_path(struct instance *in, const char *file)
{
	return instance_file(in, file, false);
}

/* Name of the clock in use. */
const char *
instance_clock(struct instance *in)
{
	if (in->clock == NULL) {
		in->clock = tracefs_get_clock(in->ti);
		if (in->clock == NULL)
			in->clock = xstrdup("local");
	}
	return in->clock;
}

/* The enabled events, one "SYSTEM:EVENT" a line. */
char *
instance_enabled_events(struct instance *in)
{
	return tracefs_instance_file_read(in->ti, "set_event", NULL);
}

/* The libtracefs handle. */
struct tracefs_instance *
instance_tracefs(struct instance *in)
{
	return in->ti;
}

/* Turn off and remove the instance. */
void
instance_destroy(struct instance *in)
{
	int i;

	if (in == NULL)
		return;
	/* an open file keeps the instance from being removed */
	for (i = 0; i < in->nkept; i++) {
		close(in->kept[i].fd);
		free(in->kept[i].file);
	}
	free(in->kept);
	in->kept = NULL;
	in->nkept = 0;
	if (instance_owner && !in->borrowed) {
		tracefs_trace_off(in->ti);
		tracefs_event_disable(in->ti, NULL, NULL);
		tracefs_instance_destroy(in->ti);
	}
	tracefs_instance_free(in->ti);
	free(in->clock);
	for (i = 0; i < INSTANCE_MAX_LIVE; i++)
		if (instance_live[i] == in)
			instance_live[i] = NULL;
	free(in);
}

/* Remove whatever instances are live. */
void
instance_cleanup(void)
{
	int i;

	if (!instance_owner)
		return;
	for (i = 0; i < INSTANCE_MAX_LIVE; i++)
		instance_destroy(instance_live[i]);
}

/* This process does not own the instances (the recorder of privsep). */
void
instance_disown(void)
{
	instance_owner = false;
}
