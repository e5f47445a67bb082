/*
 * admit.c: who may start a TLS handshake with tdlisten, and how refusals
 * are logged.
 *
 * A connection costs the listener a descriptor and TLS state from its
 * accept() until its certificate is checked, and anyone who can reach the
 * port can open one.  So connections still in their handshake have their
 * own small budget (--max-handshakes), apart from the --max-sessions slots
 * of authenticated agents, and one source address (an IPv6 /64, which one
 * customer usually holds whole) may hold only --max-handshakes-per-address
 * of it.  When the budget is full a newcomer takes the slot of the oldest
 * handshake of the address holding the most, if that address holds more
 * than the newcomer's and more than one: a crowd from a few addresses
 * cannot keep anyone else out.  A crowd from as many addresses as there
 * are slots, one connection each, is met by age instead: the newcomer
 * takes the slot of the oldest handshake if that one has run for
 * TD_ADMIT_MIN_AGE_MS (tdlisten's; a TLS handshake takes milliseconds on a network
 * and one round trip more across the world), so such a crowd keeps an
 * agent out only by opening --max-handshakes connections in every such
 * interval, while honest agents arriving together are never cut off in
 * mid-handshake for one another.  Otherwise the newcomer is refused (its
 * agent comes back later).
 *
 * Refusals come at the rate a peer chooses, so they are not logged one a
 * line: the first TD_ADMIT_LOG_BURST of each TD_ADMIT_LOG_INTERVAL are,
 * the others are counted and told in one line at the end of the interval.
 *
 * A Unix socket has no address: its peers are told apart by their
 * credentials (SO_PEERCRED: uid and pid), so that one local process's
 * silent connections cannot keep every guest's QEMU out (issue 31 row 7).
 *
 * The tables are arrays searched in order: a handful of entries by
 * default, --max-handshakes at most, which the options keep small.
 */
#include <stdarg.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/vm_sockets.h>

#include <event2/event.h>

#include "admit.h"
#include "clock.h"
#include "listener.h"
#include "log.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/* A source address as admission sees it: IPv4, or an IPv6 /64. */
struct admit_key {
	uint8_t		 b[16];
};

/* One connection in its handshake. */
struct admit_slot {
	struct admit_key key;
	void		*owner;
	uint64_t	 seq;		/* order of arrival */
	uint64_t	 since_ms;	/* monotonic */
};

/* How many slots one address holds, and since when. */
struct admit_addr {
	struct admit_key key;
	int		 n;
	uint64_t	 oldest;	/* seq of its oldest slot */
};

static struct admit_slot	*admit_slots;
static struct admit_addr	*admit_addrs;
static int			 admit_nslots;
static int			 admit_naddrs;
static int			 admit_max;
static int			 admit_per_addr;
static uint64_t			 admit_seq;
static uint64_t			 admit_min_age_ms;

static struct event		*admit_log_ev;
static int			 admit_logged;	/* lines this interval */
static uint64_t			 admit_held[ADMIT_R_NKINDS];	/* not logged */
static uint64_t			 admit_total[ADMIT_R_NKINDS];	/* since start */

static void	admit_log_cb(evutil_socket_t, short, void *);

static const char *const admit_kind_names[ADMIT_R_NKINDS] = {
	"over the per-address limit",
	"over the handshake budget",
	"evicted by a newer connection",
	"over --max-sessions",
	"over --max-per-identity waiting for their HELLO",
	"failed or timed out in the handshake",
};

/*
 * The admission key of sa (accepted on fd): IPv4 (mapped or not) whole,
 * IPv6 its /64, a vsock guest its context id, a Unix socket peer its
 * process (uid and pid; all peers whose credentials cannot be read are
 * one key).
 */
static void
admit_key_of(int fd, const struct sockaddr *sa, struct admit_key *k)
{
	const struct sockaddr_in6 *s6;
	const struct sockaddr_in *s4;
	struct ucred cr;
	socklen_t crlen = sizeof cr;

	memset(k, 0, sizeof *k);
	if (sa->sa_family == AF_UNIX) {
		k->b[0] = 0xfd;
		if (fd != -1 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr,
		    &crlen) == 0) {
			memcpy(k->b + 4, &cr.uid, 4);
			memcpy(k->b + 8, &cr.pid, 4);
		}
	} else if (sa->sa_family == AF_INET) {
		s4 = (const struct sockaddr_in *)sa;
		k->b[10] = k->b[11] = 0xff;
		memcpy(k->b + 12, &s4->sin_addr, 4);
	} else if (sa->sa_family == AF_VSOCK) {
		/* a guest: its context id, apart from every IP address */
		const struct sockaddr_vm *vm = (const struct sockaddr_vm *)sa;

		k->b[0] = 0xfe;
		memcpy(k->b + 12, &vm->svm_cid, 4);
	} else if (sa->sa_family == AF_INET6) {
		s6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
			memcpy(k->b, &s6->sin6_addr, 16);
		else
			memcpy(k->b, &s6->sin6_addr, 8);
	}
}

/* The entry of the address k, NULL when it holds no slot. */
static struct admit_addr *
admit_addr_find(const struct admit_key *k)
{
	int i;

	for (i = 0; i < admit_naddrs; i++)
		if (memcmp(&admit_addrs[i].key, k, sizeof *k) == 0)
			return &admit_addrs[i];
	return NULL;
}

/*
 * Set the budget: max handshakes at once, per_addr of them per address;
 * when full, one min_age_ms old gives its slot to a newcomer.
 */
void
admit_init(struct event_base *base, int max, int per_addr,
    uint64_t min_age_ms)
{
	admit_max = max;
	admit_min_age_ms = min_age_ms;
	admit_per_addr = per_addr;
	admit_slots = xcalloc(max, sizeof *admit_slots);
	admit_addrs = xcalloc(max, sizeof *admit_addrs);
	admit_log_ev = evtimer_new(base, admit_log_cb, NULL);
}

/*
 * May a connection from sa start its handshake?  ADMIT_YES: take a slot
 * (admit_add()); ADMIT_EVICT: first close *victim, whose slot it takes;
 * ADMIT_FULL: no slot is free and none may be taken; ADMIT_NO: its
 * address holds all it may.
 */
enum admit_verdict
admit_check(int fd, const struct sockaddr *sa, void **victim)
{
	struct admit_addr *a, *most = NULL;
	struct admit_slot *old;
	struct admit_key k;
	int i, mine;

	*victim = NULL;
	admit_key_of(fd, sa, &k);
	a = admit_addr_find(&k);
	mine = a != NULL ? a->n : 0;
	if (mine >= admit_per_addr)
		return ADMIT_NO;
	if (admit_nslots < admit_max)
		return ADMIT_YES;
	for (i = 0; i < admit_naddrs; i++) {
		a = &admit_addrs[i];
		if (most == NULL || a->n > most->n ||
		    (a->n == most->n && a->oldest < most->oldest))
			most = a;
	}
	if (most != NULL && most->n >= 2 && most->n > mine) {
		for (i = 0; i < admit_nslots; i++)
			if (admit_slots[i].seq == most->oldest) {
				*victim = admit_slots[i].owner;
				return ADMIT_EVICT;
			}
	}
	/* one each from many addresses: the oldest, if it is slow */
	for (i = 0, old = NULL; i < admit_nslots; i++)
		if (old == NULL || admit_slots[i].seq < old->seq)
			old = &admit_slots[i];
	if (old != NULL && td_clock_now_ms() - old->since_ms >=
	    admit_min_age_ms) {
		*victim = old->owner;
		return ADMIT_EVICT;
	}
	return ADMIT_FULL;
}

/* owner, a connection fd from sa, is in its handshake (after ADMIT_YES). */
void
admit_add(int fd, const struct sockaddr *sa, void *owner)
{
	struct admit_slot *sl;
	struct admit_addr *a;

	if (admit_nslots >= admit_max)
		fatalx("admit_add: no slot free");
	sl = &admit_slots[admit_nslots++];
	admit_key_of(fd, sa, &sl->key);
	sl->owner = owner;
	sl->seq = admit_seq++;
	sl->since_ms = td_clock_now_ms();
	if ((a = admit_addr_find(&sl->key)) == NULL) {
		a = &admit_addrs[admit_naddrs++];
		a->key = sl->key;
		a->n = 0;
		a->oldest = sl->seq;
	}
	a->n++;
}

/* owner's handshake is over; false if it held no slot. */
bool
admit_release(void *owner)
{
	struct admit_addr *a;
	uint64_t seq;
	int i;

	for (i = 0; i < admit_nslots; i++)
		if (admit_slots[i].owner == owner)
			break;
	if (i == admit_nslots)
		return false;
	a = admit_addr_find(&admit_slots[i].key);
	seq = admit_slots[i].seq;
	admit_slots[i] = admit_slots[--admit_nslots];
	if (a == NULL)
		return true;
	if (--a->n == 0) {
		*a = admit_addrs[--admit_naddrs];
		return true;
	}
	if (seq != a->oldest)
		return true;
	a->oldest = UINT64_MAX;
	for (i = 0; i < admit_nslots; i++)
		if (memcmp(&admit_slots[i].key, &a->key, sizeof a->key) == 0 &&
		    admit_slots[i].seq < a->oldest)
			a->oldest = admit_slots[i].seq;
	return true;
}

/* Connections in their handshake now. */
int
admit_handshakes(void)
{
	return admit_nslots;
}

/* The end of an interval: say what was not logged, start afresh. */
static void
admit_log_cb(evutil_socket_t fd, short what, void *arg)
{
	char line[512];
	uint64_t total = 0;
	size_t off = 0;
	int i, n;

	for (i = 0; i < ADMIT_R_NKINDS; i++)
		total += admit_held[i];
	admit_logged = 0;
	if (total == 0)
		return;
	for (i = 0; i < ADMIT_R_NKINDS; i++) {
		if (admit_held[i] == 0)
			continue;
		n = snprintf(line + off, sizeof line - off, "%s%llu %s",
		    off > 0 ? ", " : "", (unsigned long long)admit_held[i],
		    admit_kind_names[i]);
		if (n > 0 && (size_t)n < sizeof line - off)
			off += n;
		admit_held[i] = 0;
	}
	log_warnx("%llu more connections refused or closed before the end of "
	    "their handshake in the last %d s (not logged one by one): %s",
	    (unsigned long long)total, TD_ADMIT_LOG_INTERVAL, line);
}

/*
 * A connection was refused or closed in its handshake (kind): log "fmt"
 * if this interval still may, else count it for the summary line.
 */
void
admit_refused(enum admit_kind kind, const char *fmt, ...)
{
	struct timeval tv = { TD_ADMIT_LOG_INTERVAL, 0 };
	char line[1024];
	va_list ap;

	admit_total[kind]++;
	if (admit_log_ev != NULL && !evtimer_pending(admit_log_ev, NULL))
		evtimer_add(admit_log_ev, &tv);
	if (admit_logged >= TD_ADMIT_LOG_BURST) {
		admit_held[kind]++;
		return;
	}
	admit_logged++;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	log_warnx("%s", line);
}

uint64_t
admit_refused_total(enum admit_kind kind)
{
	return admit_total[kind];
}

const char *
admit_kind_label(enum admit_kind kind)
{
	static const char *const labels[ADMIT_R_NKINDS] = {
		"address", "full", "evicted", "sessions", "identity", "failed"
	};

	return labels[kind];
}

/* Free the tables; what was not logged yet is logged now. */
void
admit_free(void)
{
	if (admit_log_ev != NULL) {
		admit_log_cb(-1, 0, NULL);
		event_free(admit_log_ev);
		admit_log_ev = NULL;
	}
	free(admit_slots);
	free(admit_addrs);
	admit_slots = NULL;
	admit_addrs = NULL;
	admit_nslots = admit_naddrs = 0;
}
