/*
 * armsync.c: time sync for an armed ring's window (see armsync.h).
 *
 * Why samples while armed: a snapshot's rounds (one before its pages,
 * one after) are seconds apart at most, and trace-cmd extrapolates their
 * line back over the whole window: two clocks 10 to 50 ppm apart drift
 * 0.6 to 3 ms in a minute, and a line through two samples 1 us off each
 * and 0.5 s apart tilts by 4 ppm, 240 us a minute back.  With samples
 * around the window trace-cmd interpolates instead, which takes any
 * steady drift exactly; what is left is the change of the drift within
 * an interval (NTP steering a clock, temperature: a ppm or so), at most
 * a quarter of it times the interval, some 7 us at 1 ppm over 30 s.
 *
 * Why that interval: a round over the probe port costs the agent some
 * 1.2 ms of CPU (measured: 12.9 ms in 30 s of rounds every 3 s, against
 * 0.25 ms without, on a loaded 2-vCPU VM) and 48 datagrams each way
 * (about 9.6 KB), and an armed agent must not wake for more than staying
 * on the timeline needs: at one round every 30 s, 40 us of CPU a second.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "armsamples.h"
#include "armsync.h"
#include "clock.h"
#include "instance.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tsync.h"
#include "tsyncudp.h"
#include "xmalloc.h"
#include "banned.h"

/* The sync instance's ring per CPU: a round writes some 2 KB of markers. */
#define ARMSYNC_SYNC_KB		16
/* Probes of a round, and its longest time (tsyncround.c's). */
#define ARMSYNC_PROBES		48
#define ARMSYNC_ROUND_MS	100
/* The sync instance, the probe socket, the samples kept. */
struct armsync {
	struct instance		*ring;		/* the armed ring's */
	int			 ncpus;
	struct tsync		*t;
	struct tsyncudp		*u;		/* NULL: no probe port */
	uint64_t		 period_ms;	/* 0: no periodic round */
	uint64_t		 next_ms;	/* a round due then, 0: none */
	uint32_t		 round;
	struct armsamples	*kept;
};

struct armsync *
armsync_new(struct instance *armed, char *err, size_t errlen)
{
	struct armsync *as = xcalloc(1, sizeof *as);
	long n = sysconf(_SC_NPROCESSORS_CONF);

	as->ring = armed;
	as->ncpus = n > 0 && n <= TD_MAX_CPUS ? (int)n : 1;
	if ((as->t = tsync_new_sized(armed, ARMSYNC_SYNC_KB, err,
	    errlen)) == NULL) {
		free(as);
		return NULL;
	}
	as->kept = armsamples_new();
	return as;
}

void
armsync_connected(struct armsync *as, int tcp_fd, uint16_t port,
    uint64_t id, const uint8_t *key, uint32_t interval)
{
	char err[256];

	tsyncudp_free(as->u);
	as->u = NULL;
	as->next_ms = 0;
	if (port == 0 || interval == TD_TSYNC_OFF ||
	    (as->u = tsyncudp_new(tcp_fd, port, id, key, err,
	    sizeof err)) == NULL) {
		/* another listener's machine, maybe: nothing tells, they go */
		armsamples_clear(as->kept);
		return;
	}
	as->period_ms = (uint64_t)interval * ARMSYNC_FACTOR;
	if (interval != 0 && as->period_ms < ARMSYNC_MIN_MS)
		as->period_ms = ARMSYNC_MIN_MS;
	as->next_ms = td_clock_now_ms();
}

long long
armsync_due(const struct armsync *as, uint64_t now_ms)
{
	if (as->u == NULL || as->next_ms == 0)
		return -1;
	return as->next_ms <= now_ms ? 0 : (long long)(as->next_ms - now_ms);
}

/*
 * How far back the ring reaches, in ms: the oldest event of any CPU (a
 * quiet CPU's ring may hold events far older than a busy one's; the
 * snapshot brings them all), -1 when none holds one.
 */
static long long
armsync_window_ms(struct armsync *as)
{
	long long ms = instance_reach_ms(as->ring, as->ncpus, true);

	return ms < 0 ? -1 : ms + 1;
}

int
armsync_round(struct armsync *as, uint64_t *bound, char *err, size_t errlen)
{
	struct td_tsync_sample smp;
	struct armsample x;
	uint64_t nb, margin, start, span;
	long long window_ms;
	int ret;

	if (as->u == NULL) {
		snprintf(err, errlen, "no probe port");
		return -1;
	}
	ret = tsyncudp_round(as->u, as->t, as->round++, ARMSYNC_PROBES,
	    ARMSYNC_ROUND_MS, NULL, NULL, &smp, err, errlen);
	as->next_ms = as->period_ms > 0 ? td_clock_now_ms() +
	    as->period_ms : 0;
	if (ret == -1)
		return -1;
	memset(&x, 0, sizeof x);
	tsyncudp_last(as->u, &x.theta, &nb, &x.mono);
	x.ts = smp.ts;
	x.ref = tsync_to_ns(as->t, (uint64_t)((int64_t)smp.ts + smp.offset));
	x.bound = smp.bound;
	x.rtt = smp.rtt;
	x.probes = smp.probes;
	/* a period's margin: the window is read in the trace clock */
	window_ms = armsync_window_ms(as);
	margin = (as->period_ms > 0 ? as->period_ms : ARMSYNC_MIN_MS) *
	    1000000ULL;
	span = window_ms >= 0 ? (uint64_t)window_ms * 1000000ULL + margin : 0;
	start = span < x.mono ? x.mono - span : 0;
	armsamples_keep(as->kept, &x, start);
	*bound = x.bound;
	return 0;
}

uint32_t
armsync_count(const struct armsync *as)
{
	return armsamples_count(as->kept);
}

int
armsync_export(const struct armsync *as)
{
	const struct armsample *x;
	uint32_t i, n = armsamples_count(as->kept);
	int fd;

	if (n == 0 ||
	    (fd = memfd_create("tdagent-armsync", MFD_CLOEXEC)) == -1)
		return -1;
	for (i = 0; i < n; i++) {
		x = armsamples_get(as->kept, i);
		if (dprintf(fd, "%llu %llu %llu %llu %u\n",
		    (unsigned long long)x->ts, (unsigned long long)x->ref,
		    (unsigned long long)x->bound, (unsigned long long)x->rtt,
		    x->probes) < 0)
			goto out_close;
	}
	if (lseek(fd, 0, SEEK_SET) == 0)
		return fd;
out_close:
	close(fd);
	return -1;
}

void
armsync_free(struct armsync *as)
{
	if (as == NULL)
		return;
	tsyncudp_free(as->u);
	tsync_free(as->t);
	armsamples_free(as->kept);
	free(as);
}
