/*
 * instance.c: create, configure and remove tdagent's ftrace instance.
 */
#include <errno.h>
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
#include "xmalloc.h"
#include "banned.h"

struct instance {
	struct tracefs_instance	*ti;
	char			*clock;
};

/* The instances to remove on a fatal path. */
#define INSTANCE_MAX_LIVE	4
static struct instance *instance_live[INSTANCE_MAX_LIVE];

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
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
			continue;
		}
		{
			struct tracefs_instance *ti;

			ti = tracefs_instance_alloc(NULL, list[i]);
			if (ti != NULL) {
				tracefs_trace_off(ti);
				tracefs_instance_destroy(ti);
				tracefs_instance_free(ti);
			}
		}
	}
	tracefs_list_free(list);
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

/*
 * libtracefs takes regular expressions; anchor the names the user typed so
 * that "sched:sched_switch" never also matches a longer event name.
 */
static char *
instance_anchor(const char *s)
{
	char *r;

	if (s == NULL)
		return NULL;
	xasprintf(&r, "^%s$", s);
	return r;
}

/* Enable the events named by spec. */
int
instance_enable(struct instance *in, const char *spec, char *err,
    size_t errlen)
{
	char *sys, *ev, *asys, *aev;
	int ret;

	if (instance_split(spec, &sys, &ev) == -1) {
		snprintf(err, errlen, "invalid event '%s'", spec);
		return -1;
	}
	asys = instance_anchor(sys);
	aev = instance_anchor(ev);
	ret = tracefs_event_enable(in->ti, asys, aev);
	if (ret == -1)
		snprintf(err, errlen, "unknown event '%s'%s", spec,
		    sys != NULL && ev == NULL ? " (no such event system)" :
		    " (see /sys/kernel/tracing/available_events)");
	free(sys);
	free(ev);
	free(asys);
	free(aev);
	return ret == -1 ? -1 : 0;
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

	if (instance_split(spec, &sys, &ev) == -1 || sys == NULL) {
		snprintf(err, errlen, "a filter needs a system or event "
		    "before it (-e SYSTEM[:EVENT] -f FILTER), not '%s'", spec);
		return -1;
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

/* Turn recording on or off. */
int
instance_set_tracing(struct instance *in, int on)
{
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

/* Leave a process out of the recording. */
int
instance_exclude_pid(struct instance *in, pid_t pid)
{
	char s[32];

	snprintf(s, sizeof s, "%ld", (long)pid);
	return tracefs_instance_file_write(in->ti, "set_event_notrace_pid",
	    s) < 0 ? -1 : 0;
}

/* Empty the ring buffer. */
int
instance_clear(struct instance *in)
{
	return tracefs_instance_file_clear(in->ti, "trace");
}

/* Read a whole instance file. */
char *
instance_read(struct instance *in, const char *file, size_t *size)
{
	int n = 0;
	char *s;

	s = tracefs_instance_file_read(in->ti, file, &n);
	if (s != NULL && size != NULL)
		*size = n;
	return s;
}

/* Path of an instance file. */
char *
instance_path(struct instance *in, const char *file)
{
	char *p, *r;

	p = tracefs_instance_get_file(in->ti, file);
	if (p == NULL)
		return NULL;
	r = xstrdup(p);
	tracefs_put_tracing_file(p);
	return r;
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
	tracefs_trace_off(in->ti);
	tracefs_event_disable(in->ti, NULL, NULL);
	tracefs_instance_destroy(in->ti);
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

	for (i = 0; i < INSTANCE_MAX_LIVE; i++)
		instance_destroy(instance_live[i]);
}
