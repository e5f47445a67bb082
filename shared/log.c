/*
 * log.c: stderr or syslog logging with verbosity levels.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *log_progname = "tracedock";
static int log_verbosity;	/* -1 quiet, 0 normal, 1 verbose, 2 debug */
static int log_syslog;
static void (*log_fatal_hook)(void);
static int log_timestamps;
static int log_journal;	/* stderr is the journal: "<N>" prefixes */
static unsigned long long log_journal_dev, log_journal_ino;

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
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	log_progname = progname;
	log_verbosity = verbosity;
	log_syslog = to_syslog;
	/*
	 * systemd's stream to the journal on stderr (JOURNAL_STREAM names
	 * its device and inode; a stderr redirected since is not it): each
	 * line says its priority, sd-daemon(3)'s "<N>", so journalctl -p
	 * works.
	 */
	log_journal_dev = log_journal_ino = 0;
	log_journal = js != NULL && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	    fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev ==
	    dev && (unsigned long long)st.st_ino == ino;
	if (log_journal) {
		log_journal_dev = dev;
		log_journal_ino = ino;
	}
	if (to_syslog)
		openlog(progname, LOG_PID | LOG_NDELAY, LOG_DAEMON);
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
	if (log_journal) {
		struct stat st;

		/* stderr reopened since (tdlisten -l): not the journal */
		if (fstat(STDERR_FILENO, &st) == -1 ||
		    (unsigned long long)st.st_dev != log_journal_dev ||
		    (unsigned long long)st.st_ino != log_journal_ino)
			log_journal = 0;
		else
			fprintf(stderr, "<%d>", prio);
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
