/*
 * log.h: the one logging API of tracedock, in the OpenBSD shape.
 *
 * Only programs (agent/, listener/) log; proto/ and shared/ return errors and
 * leave logging to the caller that decides.  Messages go to stderr in the
 * foreground and to syslog once log_init() was told the process is a daemon.
 * log_warn() appends strerror(errno); fatal() and fatalx() exit with status 1
 * after running the hook set with log_set_fatal_hook() (used to remove a
 * tracefs instance on the way out).
 */
#ifndef TD_LOG_H
#define TD_LOG_H

#include <stdarg.h>

#define TD_PRINTF(a, b) __attribute__((format(printf, a, b)))

void	log_init(const char *progname, int verbosity, int to_syslog);
void	log_set_fatal_hook(void (*hook)(void));
/* Prefix stderr lines with an ISO 8601 UTC time (for log files). */
void	log_set_timestamps(int on);
void	log_warn(const char *fmt, ...) TD_PRINTF(1, 2);
void	log_warnx(const char *fmt, ...) TD_PRINTF(1, 2);
/* An error the process lives on with, which must be seen (LOG_ERR). */
void	log_errx(const char *fmt, ...) TD_PRINTF(1, 2);
void	log_info(const char *fmt, ...) TD_PRINTF(1, 2);
void	log_debug(const char *fmt, ...) TD_PRINTF(1, 2);
void	fatal(const char *fmt, ...) TD_PRINTF(1, 2) __attribute__((noreturn));
void	fatalx(const char *fmt, ...) TD_PRINTF(1, 2) __attribute__((noreturn));

#endif
