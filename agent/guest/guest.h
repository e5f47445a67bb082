/*
 * guest.h: the virtual machines of this host that tdagent --guest watches
 * (docs/guests.md): for each, which host thread runs each of its vCPUs
 * and, under KVM, the guest's TSC as the host sets it.  The recorder
 * sends that to the listener (OPTION TD_OPT_TD_GUEST, docs/tdproto.md) at
 * the start and whenever it changes; the listener pairs this recording
 * with the guest's own and writes trace-cmd's GUEST option.
 *
 * The vCPU threads come from QEMU's process: with -name NAME,
 * debug-threads=on its vCPU threads are named "CPU N/KVM" (or "CPU
 * N/TCG"), read from /proc/PID/task/TID/comm; or from QEMU's monitor
 * (--guest NAME:qmp:SOCKET, query-cpus-fast).  The TSC parameters come
 * from KVM's debugfs (agent/guest/kvmclock.h), the directory $TD_KVM_DEBUGFS or
 * /sys/kernel/debug/kvm.
 *
 * guest_watch_open() runs as root in the set-up and keeps what it opened
 * (/proc/PID, the monitor's socket, the VM's debugfs directory): the
 * recorder that polls later runs unprivileged.  Polls are blocking but
 * short (the monitor answers within GUEST_QMP_MS or is given up).
 * Functions return 0 (a pointer) or -1 (NULL) with a message in err;
 * guest_watch_poll() logs what changed, as the user must know it.  The
 * recorder's thread only.
 */
#ifndef TD_GUEST_H
#define TD_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tdlimits.h"

struct guest_watch;

/* One --guest argument: NAME:PID or NAME:qmp:SOCKET. */
struct guest_spec {
	char		 name[TD_MAX_NAME_LEN + 1];	/* its identity */
	pid_t		 pid;		/* 0 with qmp */
	const char	*qmp;		/* the monitor's socket, or NULL */
};

/* Parse one --guest argument into s; -1 with err. */
int		 guest_spec_parse(const char *arg, struct guest_spec *s,
		    char *err, size_t errlen);
/*
 * Watch the n guests of specs (as root): each one's process or monitor,
 * its vCPU threads found now, its KVM debugfs directory if it has one.
 * tsc_mult and tsc_shift are the host's TSC2NSEC factors (0: the host
 * does not record x86-tsc, and the TSC parameters are not sent).  NULL
 * with err when a guest has no process or no vCPU thread.
 */
struct guest_watch *guest_watch_open(const struct guest_spec *specs, int n,
		    uint32_t tsc_mult, uint32_t tsc_shift, char *err,
		    size_t errlen);
/*
 * Look again at every guest and hand the option content of each one
 * that changed (every one with all) to emit_cb(arg, content, len); -1
 * with err when emit_cb fails.
 */
int		 guest_watch_poll(struct guest_watch *w, bool all,
		    int (*emit_cb)(void *, const void *, size_t), void *arg,
		    char *err, size_t errlen);
void		 guest_watch_free(struct guest_watch *w);

#endif
