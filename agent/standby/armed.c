/*
 * armed.c: a standby agent's flight recorder (see armed.h).
 *
 * Why overwrite mode and a trigger of the kernel's own: the ring then
 * always holds the last seconds, at no cost but the events' own (nobody
 * reads it, so nothing wakes up and nothing goes on the network), and a
 * `traceoff' trigger stops it in the very event that matched, where a
 * user-space watcher would let the ring run on and overwrite the seconds
 * before.  This kernel has no snapshot buffer in instances, so the ring
 * itself is frozen and read.
 *
 * How the agent learns of the freeze without a timer: a second, tiny
 * instance, the sentinel (tracedock-<pid>-sentinel), records the
 * trigger's event alone, with the trigger's filter as its event filter,
 * and the agent's loop waits in poll() on its trace_pipe (buffer_percent
 * 0: woken by the first event).  The event that fires the trigger in the
 * armed ring lands in the sentinel too and wakes the agent, which then
 * reads the armed ring's tracing_on: the sentinel is only the doorbell,
 * tracing_on says whether the ring froze.  ftrace:print has no event
 * filter (every trace_marker write is copied to the sentinel), so a marker
 * trigger wakes the agent for each marker, matched or not; still nothing
 * when nothing is written.  Where no sentinel can be made (no
 * copy_trace_marker, an event the sentinel cannot enable) tracing_on is
 * read every ARMED_POLL_MS instead, and armed_sentinel_why() says why.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tracefs.h>

#include "armed.h"
#include "instance.h"
#include "standbycfg.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

/* An armed ring without -b: small, a few seconds of a busy machine. */
#define ARMED_DEFAULT_KB	1024
/* The sentinel's ring per CPU: a few events (the kernel rounds it up). */
#define ARMED_SENTINEL_KB	4
/*
 * Looks at tracing_on after a sentinel event that found it still on: the
 * event may reach the sentinel a moment before the armed ring's trigger
 * turns it off.
 */
#define ARMED_RECHECKS		3

/* One armed instance. */
struct armed {
	struct instance	*in;
	char		 name[TD_MAX_NAME_LEN + 1];
	char		 instance[80];
	char		 trig_file[TD_MAX_NAME_LEN * 2 + 32];	/* "" none */
	uint32_t	 kb;
	int		 on_fd;		/* its tracing_on, read and written */
	bool		 frozen;
	struct instance	*sent;		/* the trigger's sentinel, or NULL */
	int		 sent_fd;	/* its trace_pipe, non-blocking */
	int		 recheck;	/* looks left after a sentinel event */
	char		 nosent[TD_MAX_ERROR_LEN];	/* why none, "" */
	/* the sentinel's last event: who, on which CPU, when; 0: none */
	long		 ev_pid;
	int		 ev_cpu;
	uint64_t	 ev_ns;
	uint64_t	 fired_ns;	/* the trigger's event, in the ring */
	bool		 copies;	/* copy_trace_marker on when tracing */
	bool		 sent_copies;	/* ... the sentinel's, always */
};

/*
 * The kernel copies a trace_marker write into each instance that asks, in
 * turn, and stops at the first whose ring is off: the write fails (EBADF)
 * and the instances after it get nothing.  A frozen ring (a snapshot
 * streaming it, a trigger waiting for its SNAPSHOT) would so break every
 * application's marker writes on the machine, and the other armed
 * instances' marker triggers: frozen, it takes no copies.  (Nor while it
 * is made or removed: tracing is off then too.)
 */
static void
armed_copies(struct armed *ar, bool on)
{
	if (ar->copies)
		tracefs_instance_file_write(instance_tracefs(ar->in),
		    "options/copy_trace_marker", on ? "1" : "0");
}

/* Split "SYS:EV if FILTER" into sys, ev, filter (in buf): 0, or -1. */
static int
armed_split(char *buf, char **sys, char **ev, char **filter)
{
	char *p = strstr(buf, " if ");

	if (p == NULL)
		return -1;
	*p = '\0';
	*filter = p + 4;
	*sys = buf;
	if ((p = strchr(buf, ':')) == NULL || p == buf || p[1] == '\0')
		return -1;
	*p = '\0';
	*ev = p + 1;
	if (strpbrk(*sys, "/*?[. ") != NULL || strpbrk(*ev, "/*?[. ") != NULL)
		return -1;
	return 0;
}

/*
 * The kernel's complaint about the last write, into err after what, on one
 * line: error_log's "[TIME] event_filter_parse_error: error: Field not
 * found\n  Command: ...\n  ^" without the time stamp and the caret.
 */
static void
armed_klog(struct armed *ar, const char *what, char *err, size_t errlen)
{
	char *klog = tracefs_error_last(instance_tracefs(ar->in));
	char *p, *line;
	size_t n;

	n = (size_t)snprintf(err, errlen, "%s%s%s", what, errno != 0 ?
	    ": " : "", errno != 0 ? strerror(errno) : "");
	for (p = klog; p != NULL && (line = strsep(&p, "\n")) != NULL;) {
		if (line[0] == '[' && strchr(line, ']') != NULL)
			line = strchr(line, ']') + 1;
		line += strspn(line, " \t");
		if (line[strspn(line, " ^")] == '\0' || n >= errlen)
			continue;
		n += (size_t)snprintf(err + n, errlen - n, "%s%s",
		    n > 0 ? ": " : "", line);
	}
	free(klog);
}

/* The sentinel goes: its copies first, then the instance (NULL: none). */
static void
armed_sentinel_free(struct armed *ar)
{
	if (ar->sent != NULL && ar->sent_copies)
		tracefs_instance_file_write(instance_tracefs(ar->sent),
		    "options/copy_trace_marker", "0");
	/* its trace_pipe, kept, is closed first: an open one keeps it */
	instance_destroy(ar->sent);
	ar->sent = NULL;
	ar->sent_fd = -1;
	ar->sent_copies = false;
}

/*
 * The sentinel of the trigger sys:ev if filter: an instance recording that
 * event alone, filtered as the trigger is, its trace_pipe open to wait on.
 * Not made: ar->nosent says why (the caller falls back on reading
 * tracing_on), and nothing is left in tracefs.
 */
static void
armed_sentinel(struct armed *ar, const char *sys, const char *ev,
    const char *filter)
{
	char spec[TD_MAX_NAME_LEN * 2 + 2], file[TD_MAX_NAME_LEN * 2 + 16];
	char err[TD_MAX_ERROR_LEN];
	struct tracefs_instance *ti;

	if ((ar->sent = instance_create("sentinel", err, sizeof err)) == NULL)
		goto out_why;
	ti = instance_tracefs(ar->sent);
	snprintf(spec, sizeof spec, "%s:%s", sys, ev);
	snprintf(file, sizeof file, "events/%s/%s/enable", sys, ev);
	if (instance_set_buffer_kb(ar->sent, ARMED_SENTINEL_KB, err,
	    sizeof err) == -1)
		goto out_free;
	if (instance_set_buffer_percent(ar->sent, 0) == -1) {
		snprintf(err, sizeof err, "cannot set buffer_percent: %s",
		    strerror(errno));
		goto out_free;
	}
	if (tracefs_file_exists(ti, file)) {
		if (instance_enable(ar->sent, spec, err, sizeof err) == -1 ||
		    instance_filter(ar->sent, spec, filter, err,
		    sizeof err) == -1)
			goto out_free;
	} else if (strcmp(sys, "ftrace") == 0 && strcmp(ev, "print") == 0 &&
	    tracefs_file_exists(ti, "options/copy_trace_marker")) {
		/*
		 * trace_marker's writes: every one, no filter to be had;
		 * asked for once it traces (see armed_copies())
		 */
		ar->sent_copies = true;
	} else {
		snprintf(err, sizeof err, "%s cannot be enabled in an "
		    "instance of its own", spec);
		goto out_free;
	}
	/* "PID CPU NS ...": its events' instants in ns (armed_fired_ns()) */
	if (tracefs_instance_file_write(ti, "options/raw", "1") < 0) {
		snprintf(err, sizeof err, "cannot set its raw output: %s",
		    strerror(errno));
		goto out_free;
	}
	if (instance_keep(ar->sent, "trace_pipe", false,
	    O_RDONLY | O_NONBLOCK) == -1 ||
	    instance_set_tracing(ar->sent, 1) == -1) {
		snprintf(err, sizeof err, "cannot start it: %s",
		    strerror(errno));
		goto out_free;
	}
	if (ar->sent_copies && tracefs_instance_file_write(ti,
	    "options/copy_trace_marker", "1") < 0) {
		snprintf(err, sizeof err, "cannot copy trace_marker: %s",
		    strerror(errno));
		goto out_free;
	}
	ar->sent_fd = instance_fd(ar->sent, "trace_pipe", false);
	return;
out_free:
	armed_sentinel_free(ar);
out_why:
	for (size_t i = 0; err[i] != '\0'; i++)
		if (err[i] == '\n')
			err[i] = ' ';
	snprintf(ar->nosent, sizeof ar->nosent, "%s", err);
}

/* Install the trigger "traceoff if FILTER" of spec: 0, or -1 and err. */
static int
armed_trigger(struct armed *ar, const struct standby_opts *o,
    const char *spec, char *err, size_t errlen)
{
	char buf[TD_MAX_FILTER_LEN + 1], *sys, *ev, *filter, *cmd;
	struct td_start st;
	int ret;

	snprintf(buf, sizeof buf, "%s", spec);
	if (armed_split(buf, &sys, &ev, &filter) == -1) {
		snprintf(err, errlen, "trigger '%.200s': not 'SYSTEM:EVENT if "
		    "FILTER'", spec);
		return -1;
	}
	/* the trigger's event is one the collector may ask for */
	memset(&st, 0, sizeof st);
	snprintf(st.events, sizeof st.events, "%.500s:%.500s", sys, ev);
	if (!standby_allowed(o, &st, "", err, errlen))
		return -1;
	if (strlen(sys) > TD_MAX_NAME_LEN || strlen(ev) > TD_MAX_NAME_LEN) {
		snprintf(err, errlen, "trigger '%.200s': no such event", spec);
		return -1;
	}
	snprintf(ar->trig_file, sizeof ar->trig_file, "events/%.64s/%.64s/"
	    "trigger", sys, ev);
	xasprintf(&cmd, "traceoff if %s", filter);
	tracefs_error_clear(instance_tracefs(ar->in));
	errno = 0;
	ret = tracefs_instance_file_write(instance_tracefs(ar->in),
	    ar->trig_file, cmd);
	free(cmd);
	if (ret < 0) {
		char what[TD_MAX_FILTER_LEN + 64];

		snprintf(what, sizeof what, "trigger '%.200s' refused", spec);
		armed_klog(ar, what, err, errlen);
		ar->trig_file[0] = '\0';
		return -1;
	}
	armed_sentinel(ar, sys, ev, filter);
	return 0;
}

/* The events of a, each with a's filter: 0, or -1 and err. */
static int
armed_events(struct armed *ar, const struct td_arm *a, char *err,
    size_t errlen)
{
	char evs[TD_STANDBY_EVENTS + 1], *p, *ev;

	snprintf(evs, sizeof evs, "%s", a->events);
	for (p = evs; (ev = strsep(&p, ",")) != NULL;) {
		if (instance_enable(ar->in, ev, err, errlen) == -1)
			return -1;
		if (a->filter[0] != '\0' &&
		    instance_filter(ar->in, ev, a->filter, err, errlen) == -1) {
			for (size_t i = 0; err[i] != '\0'; i++)
				if (err[i] == '\n')
					err[i] = ' ';
			return -1;
		}
	}
	return 0;
}

struct armed *
armed_new(const struct standby_opts *o, const struct td_arm *a,
    uint32_t ncpus, uint32_t used_kb, char *err, size_t errlen)
{
	struct td_start st;
	struct armed *ar;
	char *path;

	if (!o->allow_arm) {
		snprintf(err, errlen, "arming is not allowed here (tdagent "
		    "--standby --allow-arm)");
		return NULL;
	}
	/* the limits of a recording: events, buffer, name */
	memset(&st, 0, sizeof st);
	snprintf(st.events, sizeof st.events, "%s", a->events);
	snprintf(st.name, sizeof st.name, "%s", a->name);
	st.buffer_kb = a->buffer_kb;
	if (!standby_allowed(o, &st, "", err, errlen))
		return NULL;
	ar = xcalloc(1, sizeof *ar);
	ar->on_fd = -1;
	ar->sent_fd = -1;
	ar->kb = a->buffer_kb > 0 ? a->buffer_kb : ARMED_DEFAULT_KB;
	if (ar->kb > o->max_buffer)
		ar->kb = o->max_buffer;
	/* an armed ring counts against the memory a recording may take */
	if ((uint64_t)(ar->kb + used_kb) * ncpus > TD_AGENT_RING_TOTAL_KB) {
		snprintf(err, errlen, "ring of %u KB x %u CPUs (and %u KB "
		    "recording) over %u KB in all", ar->kb, ncpus, used_kb,
		    TD_AGENT_RING_TOTAL_KB);
		free(ar);
		return NULL;
	}
	snprintf(ar->name, sizeof ar->name, "%s", a->name[0] != '\0' ?
	    a->name : "flight");
	if ((ar->in = instance_create("flight", err, errlen)) == NULL) {
		free(ar);
		return NULL;
	}
	snprintf(ar->instance, sizeof ar->instance, "%s",
	    tracefs_instance_get_name(instance_tracefs(ar->in)));
	if (instance_set_buffer_kb(ar->in, (int)ar->kb, err, errlen) == -1 ||
	    armed_events(ar, a, err, errlen) == -1)
		goto out_free;
	/* the ring keeps the newest events: the seconds before now */
	if (tracefs_instance_file_write(instance_tracefs(ar->in),
	    "options/overwrite", "1") < 0) {
		snprintf(err, errlen, "cannot set overwrite mode: %s",
		    strerror(errno));
		goto out_free;
	}
	/*
	 * An application's trace_marker (the top level's) reaches the ring
	 * too, where the kernel has the option (6.17 on): its writes can be
	 * a trigger, and mark the incident in every armed machine's window.
	 */
	/* turned on by armed_rearm() below, once tracing (armed_copies()) */
	ar->copies = tracefs_file_exists(instance_tracefs(ar->in),
	    "options/copy_trace_marker");
	/* its text in raw form, the instants in ns (armed_find_fired()) */
	tracefs_instance_file_write(instance_tracefs(ar->in), "options/raw",
	    "1");
	if (a->trigger[0] != '\0' &&
	    armed_trigger(ar, o, a->trigger, err, errlen) == -1)
		goto out_free;
	if ((path = instance_path(ar->in, "tracing_on")) == NULL)
		goto out_sys;
	ar->on_fd = open(path, O_RDWR | O_CLOEXEC);
	free(path);
	if (ar->on_fd == -1 || armed_rearm(ar) == -1)
		goto out_sys;
	return ar;
out_sys:
	snprintf(err, errlen, "cannot start the armed instance: %s",
	    strerror(errno));
out_free:
	armed_free(ar);
	return NULL;
}

void
armed_free(struct armed *ar)
{
	if (ar == NULL)
		return;
	if (ar->on_fd != -1)
		close(ar->on_fd);
	/* a trigger left in place may keep the instance from going */
	if (ar->trig_file[0] != '\0')
		tracefs_instance_file_write(instance_tracefs(ar->in),
		    ar->trig_file, "!traceoff");
	armed_copies(ar, false);
	instance_destroy(ar->in);
	armed_sentinel_free(ar);
	free(ar);
}

const char *
armed_instance(const struct armed *ar)
{
	return ar->instance;
}

const char *
armed_name(const struct armed *ar)
{
	return ar->name;
}

uint32_t
armed_kb(const struct armed *ar)
{
	return ar->kb;
}

bool
armed_has_trigger(const struct armed *ar)
{
	return ar->trig_file[0] != '\0';
}

bool
armed_frozen(const struct armed *ar)
{
	return ar->frozen;
}

int
armed_freeze(struct armed *ar)
{
	ar->frozen = true;
	armed_copies(ar, false);
	return pwrite(ar->on_fd, "0", 1, 0) == 1 ? 0 : -1;
}

int
armed_sentinel_fd(const struct armed *ar)
{
	return ar->frozen ? -1 : ar->sent_fd;
}

const char *
armed_sentinel_why(const struct armed *ar)
{
	return ar->nosent;
}

/* A raw line "PID CPU NS ...": 0 and its parts, or -1. */
static int
armed_raw_line(const char *line, long *pid, int *cpu, uint64_t *ns)
{
	char *end;

	*pid = strtol(line, &end, 10);
	if (end == line || *end != ' ')
		return -1;
	line = end;
	*cpu = (int)strtol(line, &end, 10);
	if (end == line || *end != ' ')
		return -1;
	line = end;
	*ns = strtoull(line, &end, 10);
	if (end == line || *end != ' ')
		return -1;
	return 0;
}

/* Empty the sentinel's ring (its last event kept): whether it held any. */
static bool
armed_sentinel_drain(struct armed *ar)
{
	char buf[4097], *p, *line;
	bool any = false;
	ssize_t n;
	long pid;
	uint64_t ns;
	int i, cpu;

	/* bounded: a flood of markers is looked at on the next wake-up */
	for (i = 0; ar->sent_fd != -1 && i < 16; i++) {
		if ((n = read(ar->sent_fd, buf, sizeof buf - 1)) <= 0)
			break;
		buf[n] = '\0';
		any = true;
		/* trace_pipe gives whole lines */
		for (p = buf; (line = strsep(&p, "\n")) != NULL;) {
			if (armed_raw_line(line, &pid, &cpu, &ns) == 0) {
				ar->ev_pid = pid;
				ar->ev_cpu = cpu;
				ar->ev_ns = ns;
			}
		}
	}
	return any;
}

/*
 * The trigger's event in the frozen ring: the last event of the sentinel's
 * last event's process on its CPU (the trigger stopped the ring right
 * after it), read from per_cpu/cpuN/trace in raw form (which does not
 * consume it): its instant in ns of the ring's clock, or 0.
 */
static uint64_t
armed_find_fired(struct armed *ar)
{
	char file[64], *path, buf[65536], *p, *line, *nl;
	size_t have = 0;
	uint64_t best = 0, ns;
	ssize_t n;
	long pid;
	int fd, cpu;

	snprintf(file, sizeof file, "per_cpu/cpu%d/trace", ar->ev_cpu);
	if ((path = instance_path(ar->in, file)) == NULL)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd == -1)
		return 0;
	while ((n = read(fd, buf + have, sizeof buf - 1 - have)) > 0) {
		have += (size_t)n;
		buf[have] = '\0';
		for (p = buf; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
			*nl = '\0';
			line = p;
			if (armed_raw_line(line, &pid, &cpu, &ns) == 0 &&
			    pid == ar->ev_pid)
				best = ns;
		}
		/* a line longer than the buffer is dropped */
		have = p == buf ? 0 : have - (size_t)(p - buf);
		memmove(buf, p, have);
	}
	close(fd);
	return best;
}

uint64_t
armed_fired_ns(const struct armed *ar, bool *exact)
{
	*exact = ar->fired_ns != 0;
	return ar->fired_ns != 0 ? ar->fired_ns : ar->ev_ns;
}

int
armed_look_ms(const struct armed *ar)
{
	if (ar->trig_file[0] == '\0' || ar->frozen)
		return -1;
	if (ar->sent == NULL)
		return ARMED_POLL_MS;
	return ar->recheck > 0 ? ARMED_RECHECK_MS : -1;
}

bool
armed_fired(struct armed *ar)
{
	char c = '1';

	if (ar->frozen)
		return false;
	if (armed_sentinel_drain(ar))
		ar->recheck = ARMED_RECHECKS + 1;
	/* any wake-up reads it (cheap): a freeze a recheck missed is seen */
	if (pread(ar->on_fd, &c, 1, 0) != 1 || c != '0') {
		if (ar->recheck > 0)
			ar->recheck--;
		return false;
	}
	ar->recheck = 0;
	ar->frozen = true;
	armed_copies(ar, false);
	ar->fired_ns = ar->ev_ns != 0 ? armed_find_fired(ar) : 0;
	return true;
}

long long
armed_window_ms(struct armed *ar, int ncpus)
{
	return instance_reach_ms(ar->in, ncpus, false);
}

int
armed_rearm(struct armed *ar)
{
	struct tracefs_instance *ti = instance_tracefs(ar->in);

	/* a snapshot's recorder left its own pids out: they are gone */
	tracefs_instance_file_clear(ti, "set_event_notrace_pid");
	/*
	 * What the sentinel saw while frozen is no trigger of this arming;
	 * emptied before tracing again, so that nothing after is lost.
	 */
	armed_sentinel_drain(ar);
	ar->recheck = 0;
	ar->ev_ns = ar->fired_ns = 0;
	if (instance_clear(ar->in) == -1 ||
	    pwrite(ar->on_fd, "1", 1, 0) != 1)
		return -1;
	armed_copies(ar, true);
	ar->frozen = false;
	return 0;
}

struct instance *
armed_ring(const struct armed *ar)
{
	return ar->in;
}

const char *
armed_clock(struct armed *ar)
{
	const char *c = instance_clock(ar->in);

	return c != NULL ? c : "local";
}
