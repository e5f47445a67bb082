/*
 * guest.c: the virtual machines tdagent --guest watches (see guest.h).
 *
 * Each poll reads a guest's vCPU threads afresh, from /proc/PID/task or
 * from QEMU's monitor, and its vCPUs' TSC parameters from KVM's debugfs,
 * and compares the result with what was sent last: only a change goes to
 * the listener (a vCPU plugged in or out, QEMU gone, the TSC offset
 * written by the guest or moved by a migration).  The recorder polls once
 * a second: a guest's threads and TSC rarely change, and reading them
 * costs a directory walk and a few small reads (or one monitor round
 * trip, some 100 us).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "guest.h"
#include "kvmclock.h"
#include "log.h"
#include "qmp.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

/* The longest a poll waits for QEMU's monitor to answer. */
#define GUEST_QMP_MS		200
/* Where KVM keeps its debugfs files, unless $TD_KVM_DEBUGFS says. */
#define GUEST_KVM_DEBUGFS	"/sys/kernel/debug/kvm"

/* One watched guest. */
struct guest {
	struct guest_spec	 spec;
	pid_t			 pid;
	int			 procfd;	/* /proc/PID, or -1 (QMP) */
	struct qmp		*qmp;
	struct kvmclock		*kvm;
	struct td_guest		*sent;		/* what the listener has */
	bool			 have_sent;
	bool			 warned;	/* a poll failed: said once */
};

/* Every watched guest, and room for one reading. */
struct guest_watch {
	struct guest		*g;
	int			 n;
	uint32_t		 tsc_mult;
	uint32_t		 tsc_shift;
	char			 kvm_dir[256];
	struct td_guest		*now;
	struct kvmclock_vcpu	*tsc;		/* TD_MAX_CPUS */
	uint32_t		*vcpu;		/* TD_MAX_CPUS */
	int32_t			*tid;
	struct td_buf		 out;
};

int
guest_spec_parse(const char *arg, struct guest_spec *s, char *err,
    size_t errlen)
{
	const char *colon = strchr(arg, ':'), *rest;
	size_t n = colon != NULL ? (size_t)(colon - arg) : 0;
	char *end;
	long v;

	memset(s, 0, sizeof *s);
	if (colon == NULL || n == 0 || n > TD_MAX_NAME_LEN ||
	    strspn(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789._%-") != n) {
		snprintf(err, errlen, "want NAME:PID or NAME:qmp:SOCKET, NAME "
		    "the guest's certificate name (up to %d of A-Z a-z 0-9 . "
		    "_ %% -)", TD_MAX_NAME_LEN);
		return -1;
	}
	memcpy(s->name, arg, n);
	s->name[n] = '\0';
	rest = colon + 1;
	if (strncmp(rest, "qmp:", 4) == 0) {
		if (rest[4] == '\0') {
			snprintf(err, errlen, "no socket after qmp:");
			return -1;
		}
		s->qmp = rest + 4;
		return 0;
	}
	errno = 0;
	v = strtol(rest, &end, 10);
	if (errno != 0 || end == rest || *end != '\0' || v <= 0 ||
	    v > INT32_MAX) {
		snprintf(err, errlen, "'%s' is not a process id", rest);
		return -1;
	}
	s->pid = (pid_t)v;
	return 0;
}

/*
 * The vCPU threads of g's process: threads named "CPU N/ACCEL" (QEMU
 * names them so with debug-threads=on).  Their count into w->vcpu and
 * w->tid by increasing N, -1 with errno when the process is gone.
 */
static int
guest_threads(struct guest_watch *w, struct guest *g)
{
	struct dirent *de;
	char path[64], comm[32], *end;
	unsigned long vcpu;
	long tid;
	ssize_t r;
	int fd, cfd, count = 0, i, k;
	DIR *d;

	fd = openat(g->procfd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1 || (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL && count < TD_MAX_CPUS) {
		errno = 0;
		tid = strtol(de->d_name, &end, 10);
		if (errno != 0 || *end != '\0' || tid <= 0 || tid > INT32_MAX)
			continue;
		snprintf(path, sizeof path, "task/%ld/comm", tid);
		if ((cfd = openat(g->procfd, path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;	/* the thread ended meanwhile */
		r = read(cfd, comm, sizeof comm - 1);
		close(cfd);
		if (r <= 0)
			continue;
		comm[r] = '\0';
		if (strncmp(comm, "CPU ", 4) != 0 || comm[4] < '0' ||
		    comm[4] > '9')
			continue;
		errno = 0;
		vcpu = strtoul(comm + 4, &end, 10);
		if (errno != 0 || *end != '/' || vcpu >= TD_MAX_CPUS)
			continue;
		for (i = 0; i < count && w->vcpu[i] < vcpu; i++)
			;
		if (i < count && w->vcpu[i] == vcpu)
			continue;	/* two threads claim it: keep one */
		for (k = count; k > i; k--) {
			w->vcpu[k] = w->vcpu[k - 1];
			w->tid[k] = w->tid[k - 1];
		}
		w->vcpu[i] = (uint32_t)vcpu;
		w->tid[i] = (int32_t)tid;
		count++;
	}
	closedir(d);
	/* a zombie's task directory is empty: gone too */
	if (count == 0 && faccessat(g->procfd, "exe", F_OK, 0) == -1) {
		errno = ESRCH;
		return -1;
	}
	return count;
}

/*
 * Read g now into w->now: its vCPU threads and, when its VM's debugfs
 * directory has every one of them, their TSC parameters (QEMU gone:
 * TD_GUEST_GONE).  0, or -1 with err when they cannot be read this time
 * (the last state stands; errno ENOENT: none was found).
 */
static int
guest_read(struct guest_watch *w, struct guest *g, char *err, size_t errlen)
{
	struct td_guest *t = w->now;
	char kerr[256];
	int n, nk, i, j;

	memset(t, 0, offsetof(struct td_guest, vcpu));
	snprintf(t->name, sizeof t->name, "%s", g->spec.name);
	t->pid = (uint32_t)g->pid;
	if (g->qmp != NULL) {
		n = qmp_vcpus(g->qmp, w->vcpu, w->tid, TD_MAX_CPUS, err,
		    errlen);
		if (n == -1 && errno != EPIPE)
			return -1;
	} else {
		n = guest_threads(w, g);
		if (n == -1 && errno != ESRCH && errno != ENOENT) {
			snprintf(err, errlen, "cannot read /proc/%ld/task: %s",
			    (long)g->pid, strerror(errno));
			return -1;
		}
	}
	if (n == -1) {
		/* the process or its monitor is gone */
		t->flags = TD_GUEST_GONE;
		return 0;
	}
	if (n == 0) {
		snprintf(err, errlen, g->qmp != NULL ? "QEMU reports no vCPU" :
		    "no thread named 'CPU N/KVM' or 'CPU N/TCG'");
		errno = ENOENT;
		return -1;
	}
	t->nvcpus = (uint32_t)n;
	for (i = 0; i < n; i++) {
		t->vcpu[i].vcpu = w->vcpu[i];
		t->vcpu[i].tid = w->tid[i];
		t->vcpu[i].tsc_offset = 0;
		t->vcpu[i].tsc_ratio = 1;
		t->vcpu[i].tsc_frac = 0;
	}
	if (g->kvm == NULL || w->tsc_mult == 0)
		return 0;
	nk = kvmclock_read(g->kvm, w->tsc, TD_MAX_CPUS, kerr, sizeof kerr);
	if (nk == -1) {
		log_debug("guest '%s': %s", g->spec.name, kerr);
		return 0;
	}
	/* every vCPU with its TSC, or none: the listener needs them all */
	for (i = j = 0; i < n; i++) {
		while (j < nk && w->tsc[j].vcpu < t->vcpu[i].vcpu)
			j++;
		if (j == nk || w->tsc[j].vcpu != t->vcpu[i].vcpu) {
			for (i = 0; i < n; i++) {
				t->vcpu[i].tsc_offset = 0;
				t->vcpu[i].tsc_ratio = 1;
				t->vcpu[i].tsc_frac = 0;
			}
			return 0;
		}
		t->vcpu[i].tsc_offset = w->tsc[j].offset;
		t->vcpu[i].tsc_ratio = w->tsc[j].ratio;
		t->vcpu[i].tsc_frac = w->tsc[j].frac;
	}
	t->flags |= TD_GUEST_KVM;
	t->tsc_mult = w->tsc_mult;
	t->tsc_shift = w->tsc_shift;
	return 0;
}

/* Whether a and b say the same. */
static bool
guest_same(const struct td_guest *a, const struct td_guest *b)
{
	return memcmp(a, b, offsetof(struct td_guest, vcpu)) == 0 &&
	    memcmp(a->vcpu, b->vcpu, a->nvcpus * sizeof *a->vcpu) == 0;
}

/* Say what the listener is told about g. */
static void
guest_log(const struct guest_watch *w, const struct guest *g,
    const struct td_guest *t)
{
	struct td_buf b;
	uint32_t i;

	if (t->flags & TD_GUEST_GONE) {
		log_warnx("guest '%s': QEMU (pid %ld) is gone", t->name,
		    (long)g->pid);
		return;
	}
	td_buf_init(&b, 4096);
	for (i = 0; i < t->nvcpus && i < 64; i++)
		td_buf_printf(&b, "%s%u:%d", i ? " " : "", t->vcpu[i].vcpu,
		    t->vcpu[i].tid);
	if (i < t->nvcpus)
		td_buf_printf(&b, " ...");
	td_buf_add(&b, "", 1);
	log_info("guest '%s' (QEMU pid %ld): %u vCPUs, vCPU:thread %s%s%s%s",
	    t->name, (long)g->pid, t->nvcpus, (char *)b.data,
	    (t->flags & TD_GUEST_KVM) ? "; KVM clock from '" : "",
	    (t->flags & TD_GUEST_KVM) ? w->kvm_dir : "",
	    (t->flags & TD_GUEST_KVM) ? "'" : "");
	td_buf_free(&b);
}

/* Open what g is watched through, as root. */
static int
guest_open_one(struct guest_watch *w, struct guest *g, char *err,
    size_t errlen)
{
	char path[64], kerr[512];

	g->procfd = -1;
	if (g->spec.qmp != NULL) {
		g->qmp = qmp_open(g->spec.qmp, GUEST_QMP_MS, kerr,
		    sizeof kerr);
		if (g->qmp == NULL) {
			snprintf(err, errlen, "guest '%s': %s", g->spec.name,
			    kerr);
			return -1;
		}
		g->pid = qmp_pid(g->qmp);
	} else {
		g->pid = g->spec.pid;
		snprintf(path, sizeof path, "/proc/%ld", (long)g->pid);
		g->procfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (g->procfd == -1) {
			snprintf(err, errlen, "guest '%s': no process %ld: %s",
			    g->spec.name, (long)g->pid, strerror(errno));
			return -1;
		}
	}
	g->kvm = kvmclock_open(w->kvm_dir, g->pid, kerr, sizeof kerr);
	if (g->kvm == NULL && errno != ENOENT)
		log_warnx("guest '%s': no KVM clock: %s", g->spec.name, kerr);
	else if (g->kvm == NULL)
		log_debug("guest '%s': not a KVM guest here (%s): time sync "
		    "by probes", g->spec.name, kerr);
	if (guest_read(w, g, kerr, sizeof kerr) == 0) {
		if (w->now->flags & TD_GUEST_GONE) {
			snprintf(err, errlen, "guest '%s': QEMU (pid %ld) is "
			    "gone", g->spec.name, (long)g->pid);
			return -1;
		}
		return 0;
	}
	if (errno == ENOENT && g->qmp == NULL)
		snprintf(err, errlen, "guest '%s': process %ld has %s (start "
		    "QEMU with -name %s,debug-threads=on, or give --guest "
		    "%s:qmp:SOCKET)", g->spec.name, (long)g->pid, kerr,
		    g->spec.name, g->spec.name);
	else
		snprintf(err, errlen, "guest '%s': %s", g->spec.name, kerr);
	return -1;
}

struct guest_watch *
guest_watch_open(const struct guest_spec *specs, int n, uint32_t tsc_mult,
    uint32_t tsc_shift, char *err, size_t errlen)
{
	struct guest_watch *w = xcalloc(1, sizeof *w);
	const char *dir = getenv("TD_KVM_DEBUGFS");
	int i;

	snprintf(w->kvm_dir, sizeof w->kvm_dir, "%s",
	    dir != NULL && dir[0] != '\0' ? dir : GUEST_KVM_DEBUGFS);
	w->tsc_mult = tsc_mult;
	w->tsc_shift = tsc_shift;
	w->now = xmalloc(sizeof *w->now);
	w->tsc = xreallocarray(NULL, TD_MAX_CPUS, sizeof *w->tsc);
	w->vcpu = xreallocarray(NULL, TD_MAX_CPUS, sizeof *w->vcpu);
	w->tid = xreallocarray(NULL, TD_MAX_CPUS, sizeof *w->tid);
	td_buf_init(&w->out, TD_MAX_FRAME - 2);
	w->g = xcalloc(n, sizeof *w->g);
	for (i = 0; i < n; i++) {
		w->g[i].spec = specs[i];
		w->g[i].procfd = -1;
	}
	w->n = n;
	for (i = 0; i < n; i++)
		if (guest_open_one(w, &w->g[i], err, errlen) == -1) {
			guest_watch_free(w);
			return NULL;
		}
	return w;
}

int
guest_watch_poll(struct guest_watch *w, bool all,
    int (*emit_cb)(void *, const void *, size_t), void *arg, char *err,
    size_t errlen)
{
	struct guest *g;
	char why[512];
	int i;

	for (i = 0; i < w->n; i++) {
		g = &w->g[i];
		if (g->have_sent && (g->sent->flags & TD_GUEST_GONE))
			continue;	/* nothing comes back */
		if (guest_read(w, g, why, sizeof why) == -1) {
			if (!g->warned)
				log_warnx("guest '%s': %s; its last vCPU "
				    "threads stand", g->spec.name, why);
			g->warned = true;
			continue;
		}
		if (g->have_sent && !all && guest_same(g->sent, w->now))
			continue;
		td_buf_reset(&w->out);
		if (td_msg_pack_guest(&w->out, w->now) == -1 ||
		    emit_cb(arg, w->out.data, w->out.len) == -1) {
			snprintf(err, errlen, "guest '%s': cannot queue its "
			    "vCPU threads: %s", g->spec.name, strerror(errno));
			return -1;
		}
		if (!g->have_sent || !guest_same(g->sent, w->now))
			guest_log(w, g, w->now);
		if (g->sent == NULL)
			g->sent = xmalloc(sizeof *g->sent);
		memcpy(g->sent, w->now, offsetof(struct td_guest, vcpu) +
		    w->now->nvcpus * sizeof *w->now->vcpu);
		g->have_sent = true;
	}
	return 0;
}

void
guest_watch_free(struct guest_watch *w)
{
	int i;

	if (w == NULL)
		return;
	for (i = 0; i < w->n; i++) {
		if (w->g[i].procfd != -1)
			close(w->g[i].procfd);
		qmp_close(w->g[i].qmp);
		kvmclock_free(w->g[i].kvm);
		free(w->g[i].sent);
	}
	free(w->g);
	free(w->now);
	free(w->tsc);
	free(w->vcpu);
	free(w->tid);
	td_buf_free(&w->out);
	free(w);
}
