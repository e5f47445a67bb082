/*
 * instance.h: tdagent's own ftrace instance.
 *
 * tdagent never touches the top-level buffer, /proc/sys or the function
 * tracer files: it creates "instances/tracedock-<pid>", configures it, and
 * removes it on every exit path (instance_cleanup() is safe to call from the
 * fatal hook and more than once).  Failures return -1 and fill a caller
 * buffer with a message a user can act on (the kernel's error_log text for a
 * rejected filter); this module does not log.
 */
#ifndef TD_INSTANCE_H
#define TD_INSTANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct instance;
struct tracefs_instance;

/* Find or mount tracefs; -1 with a message if there is none. */
int		 instance_check_tracefs(char *err, size_t errlen);
/* tracedock-<pid>, or tracedock-<pid>-<suffix> for helper instances. */
struct instance	*instance_create(const char *suffix, char *err, size_t errlen);
/*
 * An instance that exists already (another process's, by its name), as it
 * is: instance_destroy() frees it and leaves it in tracefs.
 */
struct instance	*instance_adopt(const char *name, char *err, size_t errlen);
/*
 * Enable "SYSTEM", "SYSTEM:EVENT", a bare "EVENT" of any system or "all",
 * each name possibly a glob (sched:sched_w*); -1 if nothing matched.
 */
int		 instance_enable(struct instance *in, const char *spec,
		    char *err, size_t errlen);
/* Disable the events named by spec (tdagent -v -e: left out). */
int		 instance_disable(struct instance *in, const char *spec,
		    char *err, size_t errlen);
/* Set a filter on the events of spec (as given to instance_enable). */
int		 instance_filter(struct instance *in, const char *spec,
		    const char *filter, char *err, size_t errlen);
int		 instance_set_clock(struct instance *in, const char *clock,
		    char *err, size_t errlen);
int		 instance_set_buffer_kb(struct instance *in, int kb,
		    char *err, size_t errlen);
/* The per-CPU buffer size in KiB now (of CPU 0); -1 if unknown. */
long		 instance_buffer_kb(struct instance *in);
int		 instance_set_tracing(struct instance *in, int on);
/* Wake readers when a CPU buffer is pct percent full. */
int		 instance_set_buffer_percent(struct instance *in, int pct);
/* Record only the events of pid and its future children. */
int		 instance_follow_pid(struct instance *in, pid_t pid);
/* Do not record the events of these processes (set_event_notrace_pid). */
int		 instance_exclude_pids(struct instance *in, const pid_t *pids,
		    int n);
/* Drop what is in the buffer (before a recording starts). */
int		 instance_clear(struct instance *in);
/*
 * Open a file of the instance (or of tracefs itself: top) now, with open()
 * flags: instance_read(), instance_read_top() and instance_set_tracing()
 * ("tracing_on") use that descriptor from then on.  For a process that
 * drops root after setup: tracefs checks permissions at open time.
 */
int		 instance_keep(struct instance *in, const char *file, bool top,
		    int flags);
/* The descriptor instance_keep() opened for file, or -1. */
int		 instance_fd(struct instance *in, const char *file, bool top);
/* Read a file of the instance, NUL-terminated; caller frees. */
char		*instance_read(struct instance *in, const char *file,
		    size_t *size);
/* The same for a top-level tracefs file (saved_cmdlines). */
char		*instance_read_top(struct instance *in, const char *file,
		    size_t *size);
/* Path of a file in the instance; caller frees. */
char		*instance_path(struct instance *in, const char *file);
/* How far back the CPUs' rings reach, ms: the longest or the shortest. */
long long	 instance_reach_ms(struct instance *in, int ncpus, bool longest);
/* Clock in use, e.g. "local"; owned by the instance. */
const char	*instance_clock(struct instance *in);
/* "SYSTEM:EVENT" lines of the enabled events (set_event). */
char		*instance_enabled_events(struct instance *in);
struct tracefs_instance *instance_tracefs(struct instance *in);
/* Remove the instance from tracefs and free it. */
void		 instance_destroy(struct instance *in);
/* Remove the live instance, if any (for fatal paths and signals). */
void		 instance_cleanup(void);
/*
 * From now on this process leaves the instances alone: instance_destroy()
 * only frees memory and instance_cleanup() does nothing (the unprivileged
 * recorder, whose privileged parent removes them).
 */
void		 instance_disown(void);

#endif
