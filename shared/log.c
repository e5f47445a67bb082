/*
 * log.c: stderr or syslog logging with verbosity levels.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "log.h"

static const char *log_progname = "tracedock";
static int log_verbosity;	/* -1 quiet, 0 normal, 1 verbose, 2 debug */
static int log_syslog;
static void (*log_fatal_hook)(void);
static int log_timestamps;

/* Turn timestamps on stderr lines on or off. */
void
log_set_timestamps(int on)
{
	log_timestamps = on;
}

/* Set the program name, verbosity and destination of every later message. */
void
log_init(const char *progname, int verbosity, int to_syslog)
{
	log_progname = progname;
	log_verbosity = verbosity;
	log_syslog = to_syslog;
	if (to_syslog)
		openlog(progname, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* Change the verbosity after log_init(). */
void
log_set_verbose(int verbosity)
{
	log_verbosity = verbosity;
}

/* Return the current verbosity (-1 quiet .. 2 debug). */
int
log_get_verbose(void)
{
	return log_verbosity;
}

/* Run hook before exiting from fatal() or fatalx(). */
void
log_set_fatal_hook(void (*hook)(void))
{
	log_fatal_hook = hook;
}

static void
log_vwrite(int prio, const char *fmt, va_list ap, const char *err)
{
	char msg[2048];

	vsnprintf(msg, sizeof msg, fmt, ap);
	if (log_syslog) {
		if (err != NULL)
			syslog(prio, "%s: %s", msg, err);
		else
			syslog(prio, "%s", msg);
		return;
	}
	if (log_timestamps) {
		struct timespec ts;
		struct tm tm;
		char when[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ldZ ", when, ts.tv_nsec / 1000000);
	}
	if (err != NULL)
		fprintf(stderr, "%s: %s: %s\n", log_progname, msg, err);
	else
		fprintf(stderr, "%s: %s\n", log_progname, msg);
}

/* Log a warning with strerror(errno) appended. */
void
log_warn(const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	log_vwrite(LOG_WARNING, fmt, ap, strerror(saved));
	va_end(ap);
	errno = saved;
}

/* Log a warning. */
void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_WARNING, fmt, ap, NULL);
	va_end(ap);
}

/* Log an error the process lives on with. */
void
log_errx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_ERR, fmt, ap, NULL);
	va_end(ap);
}

/* Log an informational message unless quiet. */
void
log_info(const char *fmt, ...)
{
	va_list ap;

	if (log_verbosity < 0)
		return;
	va_start(ap, fmt);
	log_vwrite(LOG_INFO, fmt, ap, NULL);
	va_end(ap);
}

/* Log a message only in verbose mode. */
void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (log_verbosity < 1)
		return;
	va_start(ap, fmt);
	log_vwrite(LOG_DEBUG, fmt, ap, NULL);
	va_end(ap);
}

static void __attribute__((noreturn))
log_fatal_exit(void)
{
	if (log_fatal_hook != NULL)
		log_fatal_hook();
	exit(1);
}

/* Log with strerror(errno) and exit. */
void
fatal(const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	log_vwrite(LOG_CRIT, fmt, ap, strerror(saved));
	va_end(ap);
	log_fatal_exit();
}

/* Log and exit. */
void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_CRIT, fmt, ap, NULL);
	va_end(ap);
	log_fatal_exit();
}
