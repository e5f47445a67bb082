/*
 * qmp.h: just enough of the QEMU Machine Protocol to ask one question,
 * query-cpus-fast: which host thread runs each vCPU.
 *
 * qmp_open() connects to QEMU's QMP socket (-qmp unix:PATH,server=on,
 * wait=off), reads the greeting and leaves capabilities negotiation
 * done; it runs as root in tdagent's set-up, and the unprivileged
 * recorder asks later through the same connection.  Every exchange is
 * blocking, bounded by the timeout given at open (a local socket: QEMU
 * answers in microseconds unless it is stuck) and by TD_MAX_QMP_REPLY
 * bytes; asynchronous events QEMU sends in between are skipped.  Returns
 * -1 (or NULL) with a message in err; never logs.  One thread.
 */
#ifndef TD_QMP_H
#define TD_QMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct qmp;

/* Connect to the QMP socket at path; NULL with err. */
struct qmp	*qmp_open(const char *path, int timeout_ms, char *err,
		    size_t errlen);
/* The process at the other end (SO_PEERCRED): QEMU's pid. */
pid_t		 qmp_pid(const struct qmp *q);
/*
 * query-cpus-fast: up to max vCPUs into vcpu[] (cpu-index, increasing)
 * and tid[] (thread-id); their count, or -1 with err (errno EPIPE when
 * QEMU closed the connection).
 */
int		 qmp_vcpus(struct qmp *q, uint32_t *vcpu, int32_t *tid,
		    int max, char *err, size_t errlen);
/*
 * The vCPUs of a query-cpus-fast answer (the JSON text s of n bytes),
 * as qmp_vcpus() returns them: count, or -1 when s is not one.
 */
int		 qmp_parse_cpus(const char *s, size_t n, uint32_t *vcpu,
		    int32_t *tid, int max);
void		 qmp_close(struct qmp *q);

#endif
