/*
 * guests.c: host and guest recordings paired (see guests.h,
 * docs/guests.md).
 *
 * The table of open recordings is a list: pairing walks it when a
 * recording starts and when a host declares a guest, a few times per
 * recording, next to a TLS handshake each.
 *
 * The exact KVM clock.  KVM runs a guest's TSC as guest = (host * ratio
 * >> frac) + offset, exactly (debugfs says ratio, frac and offset per
 * vCPU: agent/guest/kvmclock.c).  A host recording in x86-tsc has samples
 * (ts, offset) that put its TSC on the listener's timeline: reference
 * cycles = ts + offset.  At each of them the guest's TSC read
 * g = (ts * ratio >> frac) + offset_kvm, so (g, ts + offset - g) is a
 * sample of the guest's with the host's error and no error of its own:
 * between two of them both the guest's TSC and the reference are linear
 * in the host's, so trace-cmd's interpolation is as exact for the guest
 * file as for the host's, and an event of the guest and one of the host
 * are ordered as the TSCs ordered them.  The reference is in host cycles;
 * at the guest's end its samples are converted into the units that its
 * own TSC2NSEC turns into nanoseconds (the host's and the guest's kernels
 * calibrate the TSC each on their own: a difference of 1 ppm on a TSC of
 * 10^15 cycles would be 0.3 ms).  A TSC parameter that changes (a
 * migration, the guest writing its TSC) takes effect at the host's next
 * sample; vCPUs with different parameters, or a guest not in x86-tsc,
 * keep the probe sync.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cursor.h"
#include "guests.h"
#include "log.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "timesync.h"
#include "xmalloc.h"
#include "banned.h"

/* A guest the host's agent declared, as it last did. */
struct guests_decl {
	char			 name[TD_MAX_NAME_LEN + 1];
	uint32_t		 pid;
	uint8_t			 flags;		/* TD_GUEST_* */
	uint32_t		 tsc_mult;	/* the host's TSC2NSEC */
	uint32_t		 tsc_shift;
	uint32_t		 nvcpus;	/* the last known, kept when
						   QEMU is gone */
	struct td_guest_vcpu	*vcpu;
};

/* One vCPU and its host thread, as the GUEST option has them. */
struct guests_thread {
	uint32_t		 vcpu;
	int32_t			 tid;
};

/* A guest recording a host recording was paired with. */
struct guests_pair {
	char			 name[TD_MAX_NAME_LEN + 1];
	uint64_t		 trace_id;	/* the guest file's */
	uint32_t		 pid;
	uint32_t		 nthreads;	/* the last known while paired */
	struct guests_thread	*thread;
	struct guests		*guest;		/* open, or NULL */
};

/* The pairing side of one recording. */
struct guests {
	char			 identity[TD_MAX_NAME_LEN + 1];
	char			 label[TD_MAX_NAME_LEN * 2 + 160];
	char			 clock[TD_MAX_NAME_LEN + 1];
	uint64_t		 trace_id;
	bool			 open;		/* in the table */
	/* as a host */
	struct guests_decl	*decl;
	uint32_t		 ndecl;
	struct guests_pair	*pair;
	uint32_t		 npair;
	bool			 full_told;
	/* as a guest */
	bool			 paired;
	uint64_t		 host_id;	/* the host file's trace id */
	char			 host_name[TD_MAX_NAME_LEN + 1];
	struct guests		*host;		/* open, or NULL */
	struct timesync		*kvm;		/* samples on the KVM clock */
	uint32_t		 kvm_mult;	/* their units: the host's */
	uint32_t		 kvm_shift;
	bool			 kvm_mixed;	/* vCPUs' TSCs differ */
	struct guests		*next;
	struct guests		*prev;
};

static struct guests *guests_table;

/*
 * The pairs the listener's configuration allows (tdlisten --guest
 * HOST:GUEST): a host recording is paired only with a guest recording
 * whose identity its own identity may run.  A declaration from an agent
 * is a claim, never the authority (issue 31, row 2: any identity that
 * declared another as its guest took over the victim's TIME_SHIFT).
 */
struct guests_allowed {
	char			 host[TD_MAX_NAME_LEN + 1];
	char			 guest[TD_MAX_NAME_LEN + 1];
};

static struct guests_allowed *guests_allowed;
static uint32_t guests_nallowed;

/*
 * One side of a --guest pair, from p[0..n) into out: an identity as the
 * directories name it (never a ':'), or an address in brackets, "[ADDR]"
 * (IPv6 or IPv4), which names the identity that address has with
 * --insecure: "[2001:db8::1]" is "_2001_db8__1_", as agentconn.c makes it of
 * the peer "[2001:db8::1]:PORT" (any spelling of the address: it is
 * written as the kernel writes it).  -1 when malformed.
 */
static int
guests_side(const char *p, size_t n, char *out, size_t len)
{
	char addr[INET6_ADDRSTRLEN + 2], *c;
	unsigned char bin[sizeof(struct in6_addr)];

	if (n > 0 && p[0] == '[') {
		if (n < 3 || p[n - 1] != ']' || n - 2 >= sizeof addr)
			return -1;
		snprintf(addr, sizeof addr, "%.*s", (int)(n - 2), p + 1);
		if (inet_pton(AF_INET6, addr, bin) == 1) {
			inet_ntop(AF_INET6, bin, addr, sizeof addr);
			snprintf(out, len, "[%s]", addr);
		} else if (inet_pton(AF_INET, addr, bin) == 1)
			inet_ntop(AF_INET, bin, out, (socklen_t)len);
		else
			return -1;
		/* as output_sanitize() (agentconn.c's --insecure identities) */
		for (c = out; *c != '\0'; c++)
			if (!isalnum((unsigned char)*c) && *c != '_' &&
			    ((*c != '.' && *c != '-') || c == out))
				*c = '_';
		return 0;
	}
	if (n == 0 || n >= len || memchr(p, ':', n) != NULL)
		return -1;
	snprintf(out, len, "%.*s", (int)n, p);
	return 0;
}

int
guests_allow(const char *spec)
{
	const char *colon;
	char host[TD_MAX_NAME_LEN + 1], guest[TD_MAX_NAME_LEN + 1];
	struct guests_allowed *a;

	/* the separator: the first ':' outside brackets */
	colon = spec[0] == '[' && strchr(spec, ']') != NULL ?
	    strchr(strchr(spec, ']'), ':') : strchr(spec, ':');
	if (colon == NULL || guests_side(spec, (size_t)(colon - spec), host,
	    sizeof host) == -1 || guests_side(colon + 1, strlen(colon + 1),
	    guest, sizeof guest) == -1) {
		errno = EINVAL;
		return -1;
	}
	if (guests_nallowed == TD_MAX_GUEST_ALLOW) {
		errno = E2BIG;
		return -1;
	}
	guests_allowed = xreallocarray(guests_allowed, guests_nallowed + 1,
	    sizeof *guests_allowed);
	a = &guests_allowed[guests_nallowed++];
	snprintf(a->host, sizeof a->host, "%s", host);
	snprintf(a->guest, sizeof a->guest, "%s", guest);
	return 0;
}

/* Whether host identity may run guest identity (guests_allow()). */
static bool
guests_may(const char *host, const char *guest)
{
	uint32_t i;

	for (i = 0; i < guests_nallowed; i++)
		if (strcmp(guests_allowed[i].host, host) == 0 &&
		    strcmp(guests_allowed[i].guest, guest) == 0)
			return true;
	return false;
}

struct guests *
guests_new(const char *identity, uint64_t trace_id, const char *clock,
    const char *label)
{
	struct guests *g = xcalloc(1, sizeof *g);

	guests_describe(g, identity, trace_id, clock);
	snprintf(g->label, sizeof g->label, "%s", label);
	g->kvm = timesync_new();
	return g;
}

/*
 * Pairings taken back from a checkpoint: only those the configuration
 * allows now.  A tdlisten restarted without a --guest pair it had must
 * not keep that pairing (issue 31: restored pairings were never checked
 * again); both ends drop it, each when its own recording is restored.
 */
static void
guests_recheck(struct guests *g)
{
	uint32_t i, k;

	if (g->paired && !guests_may(g->host_name, g->identity)) {
		log_warnx("%s: no --guest %s:%s any more: its pairing with "
		    "the host's recording %016" PRIx64 " is dropped",
		    g->label, g->host_name, g->identity, g->host_id);
		g->paired = false;
		g->host_id = 0;
		g->host_name[0] = '\0';
	}
	for (i = k = 0; i < g->npair; i++) {
		if (guests_may(g->identity, g->pair[i].name)) {
			g->pair[k++] = g->pair[i];
			continue;
		}
		log_warnx("%s: no --guest %s:%s any more: its pairing with "
		    "the guest's recording %016" PRIx64 " is dropped",
		    g->label, g->identity, g->pair[i].name,
		    g->pair[i].trace_id);
		free(g->pair[i].thread);
	}
	g->npair = k;
}

void
guests_describe(struct guests *g, const char *identity, uint64_t trace_id,
    const char *clock)
{
	snprintf(g->identity, sizeof g->identity, "%s", identity);
	snprintf(g->clock, sizeof g->clock, "%s", clock);
	g->trace_id = trace_id;
	guests_recheck(g);
}

void
guests_set_label(struct guests *g, const char *label)
{
	snprintf(g->label, sizeof g->label, "%s", label);
}

static struct guests_decl *
guests_find_decl(struct guests *h, const char *name)
{
	uint32_t i;

	for (i = 0; i < h->ndecl; i++)
		if (strcmp(h->decl[i].name, name) == 0)
			return &h->decl[i];
	return NULL;
}

/* "N vCPUs on threads T0 T1 ..." of a pairing, for the log. */
static void
guests_threads_text(const struct guests_pair *p, char *out, size_t len)
{
	size_t at;
	uint32_t i;

	at = (size_t)snprintf(out, len, "%u vCPUs on threads", p->nthreads);
	for (i = 0; i < p->nthreads && at < len; i++)
		at += (size_t)snprintf(out + at, len - at, "%s%d",
		    i ? ", " : " ", p->thread[i].tid);
	if (p->nthreads == 0)
		snprintf(out, len, "no vCPU thread known");
}

/* The pairing takes the map d declares now (kept when QEMU is gone). */
static void
guests_pair_map(struct guests_pair *p, const struct guests_decl *d)
{
	uint32_t i;

	if (d->nvcpus == 0)
		return;
	p->pid = d->pid;
	if (p->nthreads != d->nvcpus) {
		free(p->thread);
		p->thread = xreallocarray(NULL, d->nvcpus, sizeof *p->thread);
		p->nthreads = d->nvcpus;
	}
	for (i = 0; i < d->nvcpus; i++) {
		p->thread[i].vcpu = d->vcpu[i].vcpu;
		p->thread[i].tid = d->vcpu[i].tid;
	}
}

/* Pair host h with guest recording g (open, not paired yet). */
static void
guests_pair(struct guests *h, struct guests *g, const struct guests_decl *d)
{
	struct guests_pair *p;
	char threads[512];

	if (h->npair == TD_MAX_GUEST_PAIRS) {
		if (!h->full_told)
			log_warnx("%s: already paired with %u guest "
			    "recordings: '%s' (%016" PRIx64 ") is not",
			    h->label, h->npair, g->identity, g->trace_id);
		h->full_told = true;
		return;
	}
	h->pair = xreallocarray(h->pair, h->npair + 1, sizeof *h->pair);
	p = &h->pair[h->npair++];
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "%s", g->identity);
	p->trace_id = g->trace_id;
	p->guest = g;
	guests_pair_map(p, d);
	g->paired = true;
	g->host = h;
	g->host_id = h->trace_id;
	snprintf(g->host_name, sizeof g->host_name, "%s", h->identity);
	guests_threads_text(p, threads, sizeof threads);
	log_info("%s: paired with guest '%s', its recording %016" PRIx64
	    " (%s): QEMU pid %u, %s", h->label, g->identity, g->trace_id,
	    g->label, p->pid, threads);
	log_info("%s: paired with the recording %016" PRIx64 " of its host "
	    "'%s' (%s): its TIME_SHIFT will name that file", g->label,
	    h->trace_id, h->identity, h->label);
}

/*
 * The open host recording (not g) that declared g and came first (the
 * table's newest are first), or NULL.
 */
static struct guests *
guests_host_of(struct guests *g, struct guests_decl **d)
{
	struct guests_decl *e;
	struct guests *h, *found = NULL;

	for (h = guests_table; h != NULL; h = h->next)
		if (h != g && h->trace_id != 0 &&
		    guests_may(h->identity, g->identity) &&
		    (e = guests_find_decl(h, g->identity)) != NULL) {
			found = h;
			*d = e;
		}
	return found;
}

/* Pair every open unpaired recording named d's name with host h. */
static void
guests_pair_all(struct guests *h, struct guests_decl *d)
{
	struct guests *g;

	if (!guests_may(h->identity, d->name))
		return;
	for (g = guests_table; g != NULL; g = g->next)
		if (g != h && !g->paired && g->trace_id != 0 &&
		    strcmp(g->identity, d->name) == 0)
			guests_pair(h, g, d);
}

void
guests_start(struct guests *g)
{
	struct guests_decl *d;
	struct guests *o;
	uint32_t i;

	if (g->open)
		return;
	g->open = true;
	g->next = guests_table;
	g->prev = NULL;
	if (guests_table != NULL)
		guests_table->prev = g;
	guests_table = g;
	if (g->trace_id == 0)
		return;
	/* pairings kept in checkpoints, both ends open again */
	for (o = guests_table; o != NULL; o = o->next) {
		if (o == g)
			continue;
		for (i = 0; g->paired && g->host == NULL &&
		    o->trace_id == g->host_id && i < o->npair; i++)
			if (o->pair[i].trace_id == g->trace_id &&
			    o->pair[i].guest == NULL) {
				o->pair[i].guest = g;
				g->host = o;
			}
		for (i = 0; o->paired && o->host == NULL &&
		    o->host_id == g->trace_id && i < g->npair; i++)
			if (g->pair[i].trace_id == o->trace_id &&
			    g->pair[i].guest == NULL) {
				g->pair[i].guest = o;
				o->host = g;
			}
	}
	/* new ones: as a guest, then as a host */
	if (!g->paired && (o = guests_host_of(g, &d)) != NULL)
		guests_pair(o, g, d);
	for (i = 0; i < g->ndecl; i++)
		guests_pair_all(g, &g->decl[i]);
}

int
guests_declare(struct guests *h, const void *p, size_t n)
{
	struct td_guest *t = xmalloc(sizeof *t);
	struct guests_decl *d;
	uint32_t i;
	bool first;

	if (td_msg_unpack_guest(p, n, t) == -1) {
		free(t);
		errno = EBADMSG;
		return -1;
	}
	d = guests_find_decl(h, t->name);
	first = d == NULL;
	if (first) {
		if (h->ndecl == TD_MAX_GUESTS) {
			free(t);
			errno = E2BIG;
			return -1;
		}
		h->decl = xreallocarray(h->decl, h->ndecl + 1,
		    sizeof *h->decl);
		d = &h->decl[h->ndecl++];
		memset(d, 0, sizeof *d);
		snprintf(d->name, sizeof d->name, "%s", t->name);
	}
	d->pid = t->pid;
	d->flags = t->flags;
	d->tsc_mult = t->tsc_mult;
	d->tsc_shift = t->tsc_shift;
	if (t->nvcpus > 0) {
		free(d->vcpu);
		d->vcpu = xreallocarray(NULL, t->nvcpus, sizeof *d->vcpu);
		memcpy(d->vcpu, t->vcpu, t->nvcpus * sizeof *d->vcpu);
		d->nvcpus = t->nvcpus;
	}
	free(t);
	if (first && !guests_may(h->identity, d->name))
		log_warnx("%s: its agent says it runs guest '%s', which no "
		    "--guest %s:%s allows: never paired", h->label, d->name,
		    h->identity, d->name);
	else if (first)
		log_info("%s: its agent runs guest '%s' (QEMU pid %u, %u "
		    "vCPUs%s)", h->label, d->name, d->pid, d->nvcpus,
		    (d->flags & TD_GUEST_KVM) ? ", KVM clock" : "");
	else if (d->flags & TD_GUEST_GONE)
		log_info("%s: guest '%s': QEMU (pid %u) is gone", h->label,
		    d->name, d->pid);
	else
		log_debug("%s: guest '%s': %u vCPUs now", h->label, d->name,
		    d->nvcpus);
	/* the guests it runs now take the map they run with */
	for (i = 0; i < h->npair; i++)
		if (h->pair[i].guest != NULL &&
		    strcmp(h->pair[i].name, d->name) == 0)
			guests_pair_map(&h->pair[i], d);
	if (h->open && h->trace_id != 0)
		guests_pair_all(h, d);
	return 0;
}

/* Whether every vCPU of d has the same TSC parameters. */
static bool
guests_tsc_uniform(const struct guests_decl *d)
{
	uint32_t i;

	for (i = 1; i < d->nvcpus; i++)
		if (d->vcpu[i].tsc_offset != d->vcpu[0].tsc_offset ||
		    d->vcpu[i].tsc_ratio != d->vcpu[0].tsc_ratio ||
		    d->vcpu[i].tsc_frac != d->vcpu[0].tsc_frac)
			return false;
	return true;
}

void
guests_host_sample(struct guests *h, const struct td_tsync_sample *s)
{
	const struct td_guest_vcpu *v;
	struct td_tsync_sample gs;
	struct guests_decl *d;
	struct guests *g;
	unsigned __int128 x;
	uint64_t gts, ref;
	uint32_t i;

	if (strcmp(h->clock, "x86-tsc") != 0)
		return;
	for (i = 0; i < h->npair; i++) {
		g = h->pair[i].guest;
		d = guests_find_decl(h, h->pair[i].name);
		if (g == NULL || d == NULL || !(d->flags & TD_GUEST_KVM) ||
		    (d->flags & TD_GUEST_GONE) || d->nvcpus == 0 ||
		    strcmp(g->clock, "x86-tsc") != 0)
			continue;
		if (!guests_tsc_uniform(d)) {
			if (!g->kvm_mixed)
				log_info("%s: the vCPUs' TSCs differ: time "
				    "sync by probes", g->label);
			g->kvm_mixed = true;
			continue;
		}
		v = &d->vcpu[0];
		x = (unsigned __int128)s->ts * v->tsc_ratio;
		gts = (uint64_t)(x >> v->tsc_frac) + (uint64_t)v->tsc_offset;
		ref = s->ts + (uint64_t)s->offset;
		gs = *s;
		gs.ts = gts;
		gs.offset = (int64_t)(ref - gts);
		gs.scaling = 1;
		gs.frac = 0;
		if (timesync_add(g->kvm, &gs)) {
			g->kvm_mult = d->tsc_mult;
			g->kvm_shift = d->tsc_shift;
		}
	}
}

int
guests_options(struct guests *h, struct td_file *f)
{
	struct guests_pair *p;
	struct td_buf b;
	uint32_t i, k, count;
	int32_t *tid;
	int ret = 0;

	for (i = 0; i < h->ndecl; i++) {
		for (k = 0; k < h->npair; k++)
			if (strcmp(h->pair[k].name, h->decl[i].name) == 0)
				break;
		if (k == h->npair)
			log_info("%s: guest '%s' had no recording here while "
			    "this one ran: no GUEST option for it", h->label,
			    h->decl[i].name);
	}
	td_buf_init(&b, TD_MAX_OPTION_SIZE);
	for (i = 0; i < h->npair && ret == 0; i++) {
		p = &h->pair[i];
		if (p->nthreads == 0)
			continue;
		/*
		 * trace-cmd 3.1.6 wants every vCPU below the count, each
		 * once: vCPUs QEMU did not name have no thread (-1)
		 */
		count = p->thread[p->nthreads - 1].vcpu + 1;
		tid = xreallocarray(NULL, count, sizeof *tid);
		for (k = 0; k < count; k++)
			tid[k] = -1;
		for (k = 0; k < p->nthreads; k++)
			tid[p->thread[k].vcpu] = p->thread[k].tid;
		td_buf_reset(&b);
		td_buf_add_str(&b, p->name);
		td_buf_add_u64(&b, p->trace_id);
		td_buf_add_u32(&b, count);
		for (k = 0; k < count; k++) {
			td_buf_add_u32(&b, k);
			td_buf_add_u32(&b, (uint32_t)tid[k]);
		}
		free(tid);
		if (td_file_add_option(f, TD_OPT_GUEST, b.data, b.len) == -1) {
			if (errno != EFBIG) {
				ret = -1;
				break;
			}
			log_warnx("%s: no room left among the options for the "
			    "GUEST option of '%s'", h->label, p->name);
			continue;
		}
		log_info("%s: GUEST option: '%s', recording %016" PRIx64
		    ", %u vCPUs", h->label, p->name, p->trace_id, count);
	}
	td_buf_free(&b);
	return ret;
}

bool
guests_host(const struct guests *g, uint64_t *host_id)
{
	if (!g->paired)
		return false;
	*host_id = g->host_id;
	return true;
}

/*
 * ref reference cycles of the host's TSC2NSEC (hm, hs) in the units of
 * the guest's (gm, gs): ref * hm / 2^hs = x * gm / 2^gs, rounded; false
 * when the factors are too far apart for 128 bits (never for real TSCs).
 */
static bool
guests_units(uint64_t ref, uint32_t hm, uint32_t hs, uint32_t gm,
    uint32_t gs, uint64_t *x)
{
	unsigned __int128 num = (unsigned __int128)ref * hm, den = gm;

	if (gs >= hs) {
		if (gs - hs > 31)
			return false;
		num <<= gs - hs;
	} else {
		if (hs - gs > 64)
			return false;
		den <<= hs - gs;
	}
	num = (num + den / 2) / den;
	if (num > UINT64_MAX)
		return false;
	*x = (uint64_t)num;
	return true;
}

struct timesync *
guests_kvm(const struct guests *g, uint32_t mult, uint32_t shift,
    const char **why)
{
	const struct td_tsync_sample *s;
	struct td_tsync_sample c;
	struct timesync *t;
	uint32_t i, n;
	uint64_t ref;

	*why = NULL;
	s = timesync_samples(g->kvm, &n);
	if (!g->paired)
		return NULL;
	if (n == 0) {
		*why = g->kvm_mixed ? "the vCPUs' TSCs differ" :
		    "no exact KVM clock from the host";
		return NULL;
	}
	if (mult == 0) {
		*why = "the guest sent no TSC2NSEC";
		return NULL;
	}
	t = timesync_new();
	timesync_set_factors(t, mult, shift);
	for (i = 0; i < n; i++) {
		c = s[i];
		if (!guests_units(s[i].ts + (uint64_t)s[i].offset, g->kvm_mult,
		    g->kvm_shift, mult, shift, &ref)) {
			timesync_free(t);
			*why = "the guest's TSC2NSEC is too far from the host's";
			return NULL;
		}
		c.offset = (int64_t)(ref - s[i].ts);
		timesync_add(t, &c);
	}
	return t;
}

/* Out of the table, and every open peer forgets g (what it holds stays). */
static void
guests_leave(struct guests *g)
{
	uint32_t i;

	if (!g->open)
		return;
	if (g->prev != NULL)
		g->prev->next = g->next;
	else
		guests_table = g->next;
	if (g->next != NULL)
		g->next->prev = g->prev;
	g->next = g->prev = NULL;
	g->open = false;
	for (i = 0; i < g->npair; i++) {
		if (g->pair[i].guest != NULL)
			g->pair[i].guest->host = NULL;
		g->pair[i].guest = NULL;
	}
	if (g->host != NULL)
		for (i = 0; i < g->host->npair; i++)
			if (g->host->pair[i].guest == g)
				g->host->pair[i].guest = NULL;
	g->host = NULL;
}

void
guests_finish(struct guests *g)
{
	guests_leave(g);
}

void
guests_free(struct guests *g)
{
	uint32_t i;

	if (g == NULL)
		return;
	guests_leave(g);
	for (i = 0; i < g->ndecl; i++)
		free(g->decl[i].vcpu);
	for (i = 0; i < g->npair; i++)
		free(g->pair[i].thread);
	free(g->decl);
	free(g->pair);
	timesync_free(g->kvm);
	free(g);
}

uint64_t
guests_mem(const struct guests *g)
{
	uint64_t n = sizeof *g + timesync_mem(g->kvm);
	uint32_t i;

	for (i = 0; i < g->ndecl; i++)
		n += sizeof *g->decl + (uint64_t)g->decl[i].nvcpus *
		    sizeof *g->decl[i].vcpu;
	for (i = 0; i < g->npair; i++)
		n += sizeof *g->pair + (uint64_t)g->pair[i].nthreads *
		    sizeof *g->pair[i].thread;
	return n;
}

/* A name: u32 length, the bytes. */
static int
guests_save_str(struct td_buf *b, const char *s)
{
	size_t n = strlen(s);

	return td_buf_add_u32(b, (uint32_t)n) == 0 &&
	    td_buf_add(b, s, n) == 0 ? 0 : -1;
}

/*
 * Layout (host order): u32 declared guests, each {name, u32 pid, u32
 * flags, u32 TSC mult, u32 TSC shift, u32 vCPUs, each {u32 vCPU, u32
 * thread, u64 TSC offset, u64 ratio, u32 frac}}; u32 pairings, each
 * {name, u64 trace id, u32 pid, u32 vCPUs, each {u32 vCPU, u32 thread}};
 * u32 paired (0, 1), u64 host id, the host's name, u32 KVM mult, u32 KVM
 * shift, u32 vCPUs' TSCs differ (0, 1), the KVM samples (timesync_save()).
 * A name is u32 length and bytes.
 */
int
guests_save(const struct guests *g, struct td_buf *b)
{
	const struct guests_decl *d;
	const struct guests_pair *p;
	uint32_t i, k;
	int ok;

	ok = td_buf_add_u32(b, g->ndecl) == 0;
	for (i = 0; ok && i < g->ndecl; i++) {
		d = &g->decl[i];
		ok = guests_save_str(b, d->name) == 0 &&
		    td_buf_add_u32(b, d->pid) == 0 &&
		    td_buf_add_u32(b, d->flags) == 0 &&
		    td_buf_add_u32(b, d->tsc_mult) == 0 &&
		    td_buf_add_u32(b, d->tsc_shift) == 0 &&
		    td_buf_add_u32(b, d->nvcpus) == 0;
		for (k = 0; ok && k < d->nvcpus; k++)
			ok = td_buf_add_u32(b, d->vcpu[k].vcpu) == 0 &&
			    td_buf_add_u32(b, (uint32_t)d->vcpu[k].tid) == 0 &&
			    td_buf_add_u64(b,
			    (uint64_t)d->vcpu[k].tsc_offset) == 0 &&
			    td_buf_add_u64(b, d->vcpu[k].tsc_ratio) == 0 &&
			    td_buf_add_u32(b, d->vcpu[k].tsc_frac) == 0;
	}
	ok = ok && td_buf_add_u32(b, g->npair) == 0;
	for (i = 0; ok && i < g->npair; i++) {
		p = &g->pair[i];
		ok = guests_save_str(b, p->name) == 0 &&
		    td_buf_add_u64(b, p->trace_id) == 0 &&
		    td_buf_add_u32(b, p->pid) == 0 &&
		    td_buf_add_u32(b, p->nthreads) == 0;
		for (k = 0; ok && k < p->nthreads; k++)
			ok = td_buf_add_u32(b, p->thread[k].vcpu) == 0 &&
			    td_buf_add_u32(b, (uint32_t)p->thread[k].tid) == 0;
	}
	ok = ok && td_buf_add_u32(b, g->paired) == 0 &&
	    td_buf_add_u64(b, g->host_id) == 0 &&
	    guests_save_str(b, g->host_name) == 0 &&
	    td_buf_add_u32(b, g->kvm_mult) == 0 &&
	    td_buf_add_u32(b, g->kvm_shift) == 0 &&
	    td_buf_add_u32(b, g->kvm_mixed) == 0 &&
	    timesync_save(g->kvm, b) == 0;
	return ok ? 0 : -1;
}

/* A name of a checkpoint into s (TD_MAX_NAME_LEN + 1 bytes): 0 or -1. */
static int
guests_load_str(struct td_cur *c, char *s)
{
	uint32_t n = td_cur_u32(c), i;
	const char *at;

	if (td_cur_bad(c) || n > TD_MAX_NAME_LEN ||
	    (at = td_cur_take(c, n)) == NULL)
		return -1;
	for (i = 0; i < n; i++)
		if ((unsigned char)at[i] < 0x20 || (unsigned char)at[i] > 0x7e)
			return -1;
	memcpy(s, at, n);
	s[n] = '\0';
	return 0;
}

int
guests_load(struct guests *g, struct td_cur *c)
{
	struct guests_decl *d;
	struct guests_pair *p;
	uint32_t i, k, n;

	n = td_cur_u32(c);
	if (td_cur_bad(c) || n > TD_MAX_GUESTS || g->ndecl != 0)
		return -1;
	g->decl = xcalloc(n > 0 ? n : 1, sizeof *g->decl);
	for (i = 0; i < n; i++) {
		d = &g->decl[g->ndecl++];
		if (guests_load_str(c, d->name) == -1)
			return -1;
		d->pid = td_cur_u32(c);
		d->flags = (uint8_t)td_cur_u32(c);
		d->tsc_mult = td_cur_u32(c);
		d->tsc_shift = td_cur_u32(c);
		d->nvcpus = td_cur_u32(c);
		if (td_cur_bad(c) || d->nvcpus > TD_MAX_CPUS ||
		    (size_t)d->nvcpus * 28 > td_cur_left(c))
			return -1;
		d->vcpu = xcalloc(d->nvcpus > 0 ? d->nvcpus : 1,
		    sizeof *d->vcpu);
		for (k = 0; k < d->nvcpus; k++) {
			d->vcpu[k].vcpu = td_cur_u32(c);
			d->vcpu[k].tid = (int32_t)td_cur_u32(c);
			d->vcpu[k].tsc_offset = (int64_t)td_cur_u64(c);
			d->vcpu[k].tsc_ratio = td_cur_u64(c);
			d->vcpu[k].tsc_frac = td_cur_u32(c);
			if (d->vcpu[k].tsc_frac >= 64)
				return -1;
		}
	}
	n = td_cur_u32(c);
	if (td_cur_bad(c) || n > TD_MAX_GUEST_PAIRS || g->npair != 0)
		return -1;
	g->pair = xcalloc(n > 0 ? n : 1, sizeof *g->pair);
	for (i = 0; i < n; i++) {
		p = &g->pair[g->npair++];
		if (guests_load_str(c, p->name) == -1)
			return -1;
		p->trace_id = td_cur_u64(c);
		p->pid = td_cur_u32(c);
		p->nthreads = td_cur_u32(c);
		if (td_cur_bad(c) || p->nthreads > TD_MAX_CPUS ||
		    (size_t)p->nthreads * 8 > td_cur_left(c))
			return -1;
		p->thread = xcalloc(p->nthreads > 0 ? p->nthreads : 1,
		    sizeof *p->thread);
		for (k = 0; k < p->nthreads; k++) {
			p->thread[k].vcpu = td_cur_u32(c);
			p->thread[k].tid = (int32_t)td_cur_u32(c);
			if (p->thread[k].vcpu >= TD_MAX_CPUS ||
			    (k > 0 && p->thread[k].vcpu <=
			    p->thread[k - 1].vcpu))
				return -1;
		}
	}
	g->paired = td_cur_u32(c) != 0;
	g->host_id = td_cur_u64(c);
	if (guests_load_str(c, g->host_name) == -1)
		return -1;
	g->kvm_mult = td_cur_u32(c);
	g->kvm_shift = td_cur_u32(c);
	g->kvm_mixed = td_cur_u32(c) != 0;
	if (td_cur_bad(c) || g->kvm_shift >= 64 ||
	    timesync_load(g->kvm, c, 3) == -1)
		return -1;
	return 0;
}
