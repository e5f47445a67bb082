/*
 * tracecmd.c: stock trace-cmd record -N clients (see tracecmd.h).
 *
 * One client's control connection, a state machine driven by what its
 * bufferevent reads:
 *
 *	TC_FIRST	"tracecmd" sent; waiting for "-1V3\0" (a v1 client's
 *			CPU count is refused: see docs/tdlisten.8)
 *	TC_MAGIC	"V3\0" sent; waiting for the 8-byte magic
 *	TC_TINIT	"OK" sent; waiting for TINIT (CPUs, page size, "tcp")
 *	TC_META		RINIT sent with a data port per CPU; SEND_DATA
 *			collects the client's trace.dat header in a memfd
 *			(capped, counted in the budget) until FIN_DATA: the
 *			header is read (tcmeta.c), the recording opened, its
 *			sections and options written, the data read
 *	TC_RECORD	pages arrive on the data sockets (tcdata.c); the
 *			control connection waits for CLOSE
 *	TC_CLOSING	CLOSE came: whatever is in the data sockets is taken
 *			at once, and the file finished as soon as every TCP
 *			data stream ended (trace-cmd's recorders exit before
 *			the client sends CLOSE, so that is at once too; at
 *			most TD_TC_CLOSE_WAIT s): no sleep as trace-cmd
 *			listen's two seconds
 *
 * Until TC_RECORD a deadline of --handshake-timeout seconds covers each
 * step; the header's is put back only when TD_TC_META_PROGRESS bytes more
 * of it came (empty SEND_DATA do not hold a client's sockets forever),
 * and never past TD_TC_META_TIMES x --handshake-timeout from RINIT (a
 * trickle does not either).  The clients of one address hold at most a
 * TD_TC_PORTS_SHARE-th of the data ports.
 * At TINIT, before its data sockets are bound, the client's account
 * reserves their descriptors (its identity's share, what the process has
 * free) and counts a page buffer a CPU: it is refused when they do not
 * fit, or when its ports do not fit one RINIT.  Anything unexpected or
 * malformed, a client that lies (CPUs, page
 * size), or one that goes away without CLOSE ends that client only: its
 * recording is closed, kept as NAME.incomplete.dat when enough arrived,
 * with the reason in the log.  Callbacks of tcdata.c never free a client:
 * they mark it and kick an event that does.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "acceptpause.h"
#include "admit.h"
#include "budget.h"
#include "buf.h"
#include "client.h"
#include "agentconn.h"
#include "finished.h"
#include "listener.h"
#include "output.h"
#include "server.h"
#include "log.h"
#include "recording.h"
#include "registry.h"
#include "tcdata.h"
#include "tcmeta.h"
#include "tcmsg.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tracecmd.h"
#include "xmalloc.h"
#include "banned.h"

/* The largest UDP payload: a page must fit one datagram. */
#define TC_UDP_MAX		65507
/* Pages between two updates of the memory account. */
#define TC_ACCOUNT_PAGES	256

enum tc_state {
	TC_FIRST,
	TC_MAGIC,
	TC_TINIT,
	TC_META,
	TC_RECORD,
	TC_CLOSING,
};

/*
 * One trace-cmd client: the state machine in a client of the client layer
 * (client.h), which owns the control connection, its label, the step's
 * deadline, the list and the --max-sessions slot.
 */
struct tcclient {
	struct client		*cl;
	const struct listener_config *cfg;
	enum tc_state		 state;
	struct bufferevent	*bev;		/* cl's */
	struct event		*kick;		/* finish or fail, deferred */
	struct sockaddr_storage	 local;		/* where it reached us */
	socklen_t		 local_len;
	struct sockaddr_storage	 peer;
	char			 host[NI_MAXHOST];
	char			 identity[TD_MAX_NAME_LEN + 1];
	struct td_tc_tinit	 tinit;
	int			 memfd;		/* the header, -1 */
	uint64_t		 meta_len;
	uint64_t		 meta_armed;	/* meta_len at the last deadline */
	struct timespec		 meta_until;	/* the header's last moment */
	bool			 meta_final;	/* the deadline armed is
						   meta_until */
	struct budget_account	*acct;		/* the data sockets' descriptors
						   and pages; the header */
	struct tcdata		*data;
	struct recording	*rec;
	uint64_t		 pages;
	struct timespec		 closed;	/* when CLOSE came */
	bool			 failed;	/* a page could not be taken */
	char			 why[600];	/* ... why */
};

static struct event_base	*tc_base;
static const struct listener_config *tc_cfg;
static struct evconnlistener	*tc_lev;
static struct accept_pause	*tc_pause;

int
tracecmd_clients(void)
{
	return client_count(CLIENT_TRACECMD);
}

/* The control connections (the data sockets are in the budget). */
static int
tc_nfds(void)
{
	return client_listed(CLIENT_TRACECMD);
}

static const char *
tc_label(const struct tcclient *tc)
{
	return client_label(tc->cl);
}

/*
 * The client layer's free hook: a recording not finished is closed (kept
 * partial).
 */
static void
tc_free_cb(void *arg)
{
	struct tcclient *tc = arg;

	tcdata_free(tc->data);
	if (tc->rec != NULL)
		recording_close(tc->rec);
	budget_close(tc->acct);
	if (tc->memfd != -1)
		close(tc->memfd);
	if (tc->kick != NULL)
		event_free(tc->kick);
	free(tc);
}

/* Free a client (and its client). */
static void
tc_free(struct tcclient *tc)
{
	client_free(tc->cl);
}

/* End a client for a reason: logged, its recording closed. */
static void
tc_close(struct tcclient *tc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
tc_close(struct tcclient *tc, const char *fmt, ...)
{
	char why[700];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	/* what already arrived on its data sockets is kept */
	if (tc->rec != NULL && tc->data != NULL && !tc->failed)
		tcdata_drain(tc->data);
	client_close(tc->cl, "%s", why);
}

/* Arm the step's deadline (seconds). */
static void
tc_deadline(struct tcclient *tc, int s)
{
	client_deadline(tc->cl, s * 1000L);
}

/* A recording of ours taken over by a resuming agent: let it go. */
static void
tc_taken_cb(void *arg)
{
	struct tcclient *tc = arg;

	tc->rec = NULL;
	tc->failed = true;
	snprintf(tc->why, sizeof tc->why, "its recording was taken over");
	event_active(tc->kick, EV_TIMEOUT, 0);
}

/* A page of a CPU from tcdata.c: into the recording. */
static int
tc_page_cb(void *arg, uint32_t cpu, const uint8_t *page)
{
	struct tcclient *tc = arg;
	char why[160];

	if (tc->rec == NULL || tc->failed)
		return -1;
	if (recording_pages_begin(tc->rec, cpu, tcdata_pages(tc->data,
	    cpu)) == -1 || recording_page(tc->rec, cpu, page) == -1) {
		snprintf(tc->why, sizeof tc->why, "%s",
		    recording_why(tc->rec));
		goto out_stop;
	}
	/* (the page buffers are in the client's own account) */
	if (++tc->pages % TC_ACCOUNT_PAGES == 0 &&
	    recording_account(tc->rec, 0, why, sizeof why) == -1) {
		/* a trace-cmd client cannot come back later: it ends */
		snprintf(tc->why, sizeof tc->why, "%s", why);
		goto out_stop;
	}
	return 0;
out_stop:
	tc->failed = true;
	event_active(tc->kick, EV_TIMEOUT, 0);
	return -1;
}

/* A TCP data stream ended: the client may be finished now. */
static void
tc_ended_cb(void *arg)
{
	struct tcclient *tc = arg;

	if (tc->state == TC_CLOSING)
		event_active(tc->kick, EV_TIMEOUT, 0);
}

/*
 * CLOSE came (or its wait is over: force): take what the data sockets
 * hold, and finish the file once every data stream ended.
 */
static void
tc_finish(struct tcclient *tc, bool force)
{
	struct finished fin;
	struct td_buf loss;
	uint64_t *pages, lost;
	uint32_t i, n = tc->tinit.cpus;
	struct timespec now;
	const char *p, *end, *nl;
	size_t head;
	int ret;

	if (tcdata_drain(tc->data) == -1 || tc->failed) {
		tc_close(tc, "%s", tc->why);
		return;
	}
	if (!tcdata_complete(tc->data)) {
		if (!force)
			return;
		log_warnx("%s: data connections still open %d s after "
		    "CLOSE: finishing without what they hold", tc_label(tc),
		    TD_TC_CLOSE_WAIT);
	}
	td_buf_init(&loss, 64 + (size_t)n * 128);
	td_buf_printf(&loss, "tracedock loss 1\n");
	head = loss.len;
	lost = tcdata_losses(tc->data, &loss);
	if (lost > 0) {
		recording_lost_pages(tc->rec, lost);
		log_warnx("%s: %" PRIu64 " pages lost on the way (in the "
		    "file's loss option too)", tc_label(tc), lost);
		/* one log line a CPU */
		for (p = (const char *)loss.data + head, end = (const char *)
		    loss.data + loss.len; p < end; p = nl + 1) {
			if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
				nl = end;
			log_warnx("%s: %.*s", tc_label(tc), (int)(nl - p), p);
		}
		if (td_buf_add(&loss, "", 1) == -1 ||
		    recording_option(tc->rec, TD_OPT_TD_LOSS, loss.data,
		    loss.len) == -1)
			log_warnx("%s: cannot write the loss option",
			    tc_label(tc));
	}
	td_buf_free(&loss);
	if (tcdata_refused(tc->data) > 0)
		log_warnx("%s: %" PRIu64 " data connections or datagrams "
		    "from other addresses refused", tc_label(tc),
		    tcdata_refused(tc->data));
	pages = xcalloc(n, sizeof *pages);
	for (i = 0; i < n; i++)
		pages[i] = tcdata_pages(tc->data, i);
	ret = recording_finish(tc->rec, pages, n, &fin);
	free(pages);
	if (ret == -1) {
		tc_close(tc, "cannot finish the file: %s",
		    recording_why(tc->rec));
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	log_info("%s: the file was ready %.3f s after CLOSE", tc_label(tc),
	    (now.tv_sec - tc->closed.tv_sec) +
	    (now.tv_nsec - tc->closed.tv_nsec) / 1e9);
	tc_free(tc);	/* recording_close() says "done" */
}

static void
tc_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcclient *tc = arg;

	if (tc->failed) {
		tc_close(tc, "%s", tc->why);
		return;
	}
	if (tc->state == TC_CLOSING)
		tc_finish(tc, false);
}

static void
tc_timer_cb(struct client *cl, void *arg)
{
	struct tcclient *tc = arg;
	struct timespec now;

	if (tc->state == TC_CLOSING) {
		tc_finish(tc, true);
		return;
	}
	/*
	 * libevent times its timers from a coarse clock, cached when the
	 * loop last woke: one armed for meta_until may fire a few ms before
	 * it by our clock (a loaded machine: more).  Which deadline was
	 * armed says which one passed.
	 */
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (tc->state == TC_META && (tc->meta_final ||
	    now.tv_sec > tc->meta_until.tv_sec ||
	    (now.tv_sec == tc->meta_until.tv_sec &&
	    now.tv_nsec >= tc->meta_until.tv_nsec))) {
		tc_close(tc, "its header is not whole %d s after RINIT "
		    "(%" PRIu64 " bytes of metadata so far)",
		    TD_TC_META_TIMES * tc->cfg->handshake_timeout,
		    tc->meta_len);
		return;
	}
	tc_close(tc, "no progress in %d s (handshake, TINIT or metadata: "
	    "%" PRIu64 " bytes of metadata so far)",
	    tc->cfg->handshake_timeout, tc->meta_len);
}

/*
 * The header came on: --handshake-timeout more, but not past meta_until
 * (an absolute deadline for the whole header).
 */
static void
tc_meta_deadline(struct tcclient *tc)
{
	struct timespec now;
	int64_t left_ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	left_ms = (int64_t)(tc->meta_until.tv_sec - now.tv_sec) * 1000 +
	    (tc->meta_until.tv_nsec - now.tv_nsec) / 1000000 + 1;
	tc->meta_final = left_ms <= (int64_t)tc->cfg->handshake_timeout * 1000;
	if (!tc->meta_final)
		left_ms = (int64_t)tc->cfg->handshake_timeout * 1000;
	if (left_ms < 0)
		left_ms = 0;
	client_deadline(tc->cl, (long)left_ms);
}

/* Data ports held by the clients of identity (their address). */
static uint32_t
tc_ports_of(const char *identity)
{
	struct tcclient *t;
	struct client *cl;
	uint32_t n = 0;

	for (cl = client_first(CLIENT_TRACECMD); cl != NULL;
	    cl = client_next(cl)) {
		t = client_arg(cl);
		if (t->data != NULL && strcmp(t->identity, identity) == 0)
			n += t->tinit.cpus;
	}
	return n;
}

/* The data ports one address may hold of span. */
static uint32_t
tc_ports_share(uint32_t span)
{
	uint32_t share = span / TD_TC_PORTS_SHARE;

	if (share < TD_TC_PORTS_MIN)
		share = span < TD_TC_PORTS_MIN ? span : TD_TC_PORTS_MIN;
	return share;
}

/* Send bytes on the control connection. */
static void
tc_send(struct tcclient *tc, const void *p, size_t n)
{
	bufferevent_write(tc->bev, p, n);
}

/* TINIT: the data sockets, RINIT.  -1 when the client was closed. */
static int
tc_tinit(struct tcclient *tc, const struct td_tc_msg *m)
{
	struct tcdata_params dp;
	enum budget_over over;
	struct td_buf b;
	uint32_t span = (uint32_t)tc->cfg->tracecmd_hi -
	    tc->cfg->tracecmd_lo + 1;
	int fds, ret;
	char err[256];

	if (td_tc_unpack_tinit(m, &tc->tinit) == -1) {
		tc_close(tc, "malformed TINIT (CPUs 1 to %d, a power of two "
		    "page size of %d to %d bytes)", TD_MAX_CPUS,
		    TD_MIN_PAGE_SIZE, TD_MAX_PAGE_SIZE);
		return -1;
	}
	if (tc->tinit.vsock) {
		tc_close(tc, "it asks for vsock data sockets over TCP");
		return -1;
	}
	if ((uint64_t)tc->tinit.cpus * tc->tinit.page_size >
	    TD_MAX_CPU_SPAN) {
		tc_close(tc, "%u CPUs of %u-byte pages is past the listener's "
		    "limit", tc->tinit.cpus, tc->tinit.page_size);
		return -1;
	}
	if (!tc->tinit.tcp && tc->tinit.page_size > TC_UDP_MAX) {
		tc_close(tc, "%u-byte pages do not fit a UDP datagram (use "
		    "-t)", tc->tinit.page_size);
		return -1;
	}
	if (tc->tinit.cpus > span) {
		tc_close(tc, "%u CPUs, but --tracecmd-data-ports has %u ports",
		    tc->tinit.cpus, span);
		return -1;
	}
	if (tc_ports_of(tc->identity) + tc->tinit.cpus > tc_ports_share(span)) {
		tc_close(tc, "%u CPUs: its address would hold more than %u "
		    "data ports (a %d-th of --tracecmd-data-ports)",
		    tc->tinit.cpus, tc_ports_share(span), TD_TC_PORTS_SHARE);
		return -1;
	}
	if (!td_tc_rinit_fits(tc->tinit.cpus, tc->cfg->tracecmd_hi)) {
		tc_close(tc, "%u CPUs: their data ports do not fit an RINIT "
		    "message (%d bytes)", tc->tinit.cpus, TD_TC_MSG_MAX);
		return -1;
	}
	/* TCP: a listening socket and an accepted one a CPU */
	fds = (int)tc->tinit.cpus * (tc->tinit.tcp ? 2 : 1);
	tc->acct = budget_open(tc->identity);
	over = budget_fds(tc->acct, fds, agentconn_sessions() + tc_nfds());
	if (over != BUDGET_OK) {
		tc_close(tc, "%u CPUs need %d file descriptors: %s",
		    tc->tinit.cpus, fds, over == BUDGET_IDENTITY ?
		    "past the share of its address (tracecmd-ADDRESS)" :
		    "the listener does not have them free");
		return -1;
	}
	memset(&dp, 0, sizeof dp);
	dp.base = tc_base;
	dp.local = tc->local;
	dp.local_len = tc->local_len;
	dp.client = tc->peer;
	dp.ncpus = tc->tinit.cpus;
	dp.page_size = tc->tinit.page_size;
	dp.tcp = tc->tinit.tcp;
	dp.port_lo = tc->cfg->tracecmd_lo;
	dp.port_hi = tc->cfg->tracecmd_hi;
	dp.label = tc_label(tc);
	dp.page = tc_page_cb;
	dp.ended = tc_ended_cb;
	dp.arg = tc;
	if ((tc->data = tcdata_open(&dp, err, sizeof err)) == NULL) {
		tc_close(tc, "%s", err);
		return -1;
	}
	over = budget_set(tc->acct, tcdata_mem(tc->data));
	if (over != BUDGET_OK) {
		tc_close(tc, "%u CPUs of %u-byte pages are over %s",
		    tc->tinit.cpus, tc->tinit.page_size,
		    budget_over_name(over));
		return -1;
	}
	tc->memfd = memfd_create("tracecmd-header", MFD_CLOEXEC);
	if (tc->memfd == -1) {
		tc_close(tc, "memfd_create: %s", strerror(errno));
		return -1;
	}
	td_buf_init(&b, TD_TC_MSG_MAX);
	ret = td_tc_pack_rinit(&b, tc->tinit.cpus, tcdata_ports(tc->data));
	if (ret == 0)
		tc_send(tc, b.data, b.len);
	td_buf_free(&b);
	if (ret == -1) {
		tc_close(tc, "cannot make its RINIT (%u CPUs)",
		    tc->tinit.cpus);
		return -1;
	}
	log_info("%s: %u CPUs, %u-byte pages, data over %s to ports %u-%u "
	    "(unauthenticated)", tc_label(tc), tc->tinit.cpus,
	    tc->tinit.page_size, tc->tinit.tcp ? "TCP" : "UDP",
	    tcdata_ports(tc->data)[0],
	    tcdata_ports(tc->data)[tc->tinit.cpus - 1]);
	if (tc->tinit.unknown > 0)
		log_info("%s: %u TINIT options not known, ignored", tc_label(tc),
		    tc->tinit.unknown);
	tc->state = TC_META;
	tc->meta_armed = 0;
	clock_gettime(CLOCK_MONOTONIC, &tc->meta_until);
	tc->meta_until.tv_sec += (time_t)TD_TC_META_TIMES *
	    tc->cfg->handshake_timeout;
	tc_deadline(tc, tc->cfg->handshake_timeout);
	return 0;
}

/* SEND_DATA: a piece of the header into the memfd. */
static int
tc_meta_data(struct tcclient *tc, const struct td_tc_msg *m)
{
	enum budget_over over;
	const uint8_t *p = m->payload;
	size_t n = m->len;
	ssize_t w;

	if (tc->meta_len + n > TD_TC_MAX_META) {
		tc_close(tc, "its metadata is over %u bytes", TD_TC_MAX_META);
		return -1;
	}
	while (n > 0) {
		w = write(tc->memfd, p, n);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0) {
			tc_close(tc, "cannot keep its metadata: %s",
			    strerror(errno));
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	tc->meta_len += m->len;
	/* a memfd is memory: the header counts until the recording opens */
	over = budget_set(tc->acct, tc->meta_len + tcdata_mem(tc->data));
	if (over != BUDGET_OK) {
		tc_close(tc, "its metadata is over %s", budget_over_name(over));
		return -1;
	}
	/* more time only for progress: not for empty messages */
	if (tc->meta_len - tc->meta_armed >= TD_TC_META_PROGRESS) {
		tc->meta_armed = tc->meta_len;
		tc_meta_deadline(tc);
	}
	return 0;
}

/*
 * FIN_DATA: the header is whole.  Read it, open the recording, write its
 * sections and options, start reading the data.
 */
static int
tc_meta_end(struct tcclient *tc)
{
	struct recording_params p;
	enum recording_fault fault;
	struct tcmeta *m;
	char err[600];

	if (!client_may_record(tc->cfg, tc->identity)) {
		tc_close(tc, "too many recordings open for '%s' "
		    "(--max-per-identity %d)", tc->identity,
		    tc->cfg->max_per_identity);
		return -1;
	}
	m = tcmeta_read(tc->memfd, tc->tinit.cpus, tc->tinit.page_size, err,
	    sizeof err);
	if (m == NULL) {
		tc_close(tc, "%s", err);
		return -1;
	}
	memset(&p, 0, sizeof p);
	snprintf(p.identity, sizeof p.identity, "%s", tc->identity);
	if (getrandom(&p.recording_id, sizeof p.recording_id, 0) !=
	    sizeof p.recording_id)
		p.recording_id = (uint64_t)(uintptr_t)tc ^ (uint64_t)time(NULL);
	p.ncpus = tc->tinit.cpus;
	p.page_size = tc->tinit.page_size;
	tcmeta_params(m, &p);
	tc->rec = recording_open(tc->cfg, &p, tc_label(tc), tc_taken_cb, tc,
	    agentconn_sessions() + tc_nfds(), err, sizeof err, &fault);
	if (tc->rec == NULL) {
		tcmeta_free(m);
		tc_close(tc, "%s", err);
		return -1;
	}
	recording_no_tsync(tc->rec);
	recording_set_producer(tc->rec, "tracecmd");
	log_info("%s: trace-cmd header of %" PRIu64 " bytes (%s)", tc_label(tc),
	    tc->meta_len, tcmeta_describe(m));
	if (tcmeta_feed(m, tc->rec, err, sizeof err) == -1) {
		tcmeta_free(m);
		tc_close(tc, "%s", err);
		return -1;
	}
	if (tcmeta_repaired(m)[0] != '\0')
		log_warnx("%s: %s", tc_label(tc), tcmeta_repaired(m));
	tcmeta_free(m);
	close(tc->memfd);
	tc->memfd = -1;
	/* the account keeps the data sockets' descriptors and pages */
	budget_set(tc->acct, tcdata_mem(tc->data));
	recording_received(tc->rec, tc->meta_len);
	tc->state = TC_RECORD;
	client_deadline_clear(tc->cl);
	tcdata_start(tc->data);
	return 0;
}

/* One whole message.  -1 when the client was closed. */
static int
tc_message(struct tcclient *tc, const struct td_tc_msg *m)
{
	if (tc->state == TC_TINIT && m->cmd == TD_TC_TINIT)
		return tc_tinit(tc, m);
	if (tc->state == TC_META && m->cmd == TD_TC_SEND_DATA)
		return tc_meta_data(tc, m);
	if (tc->state == TC_META && m->cmd == TD_TC_FIN_DATA)
		return tc_meta_end(tc);
	if (tc->state == TC_RECORD && m->cmd == TD_TC_CLOSE) {
		clock_gettime(CLOCK_MONOTONIC, &tc->closed);
		tc->state = TC_CLOSING;
		tc_deadline(tc, TD_TC_CLOSE_WAIT);
		event_active(tc->kick, EV_TIMEOUT, 0);
		return 0;
	}
	if (m->cmd == TD_TC_CLOSE) {
		tc_close(tc, "CLOSE before its metadata was complete");
		return -1;
	}
	tc_close(tc, "unexpected %s message", td_tc_name(m->cmd));
	return -1;
}

static void
tc_read_cb(struct bufferevent *bev, void *arg)
{
	struct tcclient *tc = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct td_tc_msg m;
	const uint8_t *p;
	uint32_t cpus = 0;
	size_t n, used;
	bool v3;
	int r;

	while ((n = evbuffer_get_length(in)) > 0) {
		switch (tc->state) {
		case TC_FIRST:
			p = evbuffer_pullup(in, n < TD_TC_FIRST_MAX ? n :
			    TD_TC_FIRST_MAX);
			r = td_tc_first(p, n < TD_TC_FIRST_MAX ? n :
			    TD_TC_FIRST_MAX, &v3, &cpus, &used);
			if (r == 0)
				return;
			if (r == -1) {
				tc_close(tc, "not a trace-cmd client");
				return;
			}
			if (!v3) {
				tc_close(tc, "a client of trace-cmd's old v1 "
				    "protocol (%u CPUs): not supported, only "
				    "v3", cpus);
				return;
			}
			evbuffer_drain(in, used);
			tc_send(tc, TD_TC_V3, sizeof TD_TC_V3);
			tc->state = TC_MAGIC;
			tc_deadline(tc, tc->cfg->handshake_timeout);
			break;
		case TC_MAGIC:
			if (n < TD_TC_MAGIC_LEN)
				return;
			p = evbuffer_pullup(in, TD_TC_MAGIC_LEN);
			if (!td_tc_magic_ok(p)) {
				tc_close(tc, "wrong v3 magic");
				return;
			}
			evbuffer_drain(in, TD_TC_MAGIC_LEN);
			tc_send(tc, TD_TC_OK, 2);
			tc->state = TC_TINIT;
			tc_deadline(tc, tc->cfg->handshake_timeout);
			break;
		default:
			p = evbuffer_pullup(in, n < TD_TC_MSG_MAX ? n :
			    TD_TC_MSG_MAX);
			r = td_tc_msg_parse(p, n < TD_TC_MSG_MAX ? n :
			    TD_TC_MSG_MAX, &m);
			if (r == 0)
				return;
			if (r == -1) {
				tc_close(tc, "malformed message (command %u)",
				    (unsigned)(p[4] << 24 | p[5] << 16 |
				    p[6] << 8 | p[7]));
				return;
			}
			if (tc->state == TC_CLOSING) {
				tc_close(tc, "data after CLOSE");
				return;
			}
			if (tc_message(tc, &m) == -1)
				return;
			evbuffer_drain(in, m.total);
			break;
		}
	}
}

static void
tc_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct tcclient *tc = arg;

	if (tc->state == TC_CLOSING) {
		/* it closes after CLOSE, as it should */
		bufferevent_disable(bev, EV_READ);
		return;
	}
	if (what & BEV_EVENT_EOF)
		tc_close(tc, "the client went away without CLOSE");
	else
		tc_close(tc, "the control connection failed: %s",
		    strerror(EVUTIL_SOCKET_ERROR()));
}

/* tdlisten stops: the client is closed, its recording kept partial. */
static void
tc_shutdown_cb(struct client *cl, void *arg)
{
	tc_close(arg, "tdlisten is shutting down");
}

/* What the client layer calls tracecmd.c for. */
static const struct client_hooks tc_hooks = {
	.free = tc_free_cb,
	.deadline = tc_timer_cb,
	.shutdown = tc_shutdown_cb,
};

/* An accepted control connection. */
static void
tc_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	char identity[TD_MAX_NAME_LEN + 1];
	char label[NI_MAXHOST + NI_MAXSERV + 32];
	struct tcclient *tc;

	if (getnameinfo(sa, (socklen_t)salen, host, sizeof host,
	    serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(host, sizeof host, "unknown");
		snprintf(serv, sizeof serv, "0");
	}
	snprintf(identity, sizeof identity, "tracecmd-%.54s", host);
	output_sanitize(identity);
	snprintf(label, sizeof label, "trace-cmd %s%s%s:%s",
	    sa->sa_family == AF_INET6 ? "[" : "", host,
	    sa->sa_family == AF_INET6 ? "]" : "", serv);
	/* --max-sessions: agents, trace-cmd and uftrace clients together */
	if (client_may_open(CLIENT_TRACECMD, identity) != CLIENT_YES) {
		admit_refused(ADMIT_R_SESSIONS, "trace-cmd client refused: "
		    "--max-sessions %d reached (%s; sessions of every kind: "
		    "%d)", tc_cfg->max_sessions, label,
		    client_count(CLIENT_NKINDS));
		close(fd);
		return;
	}
	tc = xcalloc(1, sizeof *tc);
	tc->cfg = tc_cfg;
	tc->memfd = -1;
	tc->cl = client_new(CLIENT_TRACECMD, fd, label, &tc_hooks, tc);
	client_admit(tc->cl, identity);
	memcpy(&tc->peer, sa, (size_t)salen < sizeof tc->peer ?
	    (size_t)salen : sizeof tc->peer);
	tc->local_len = sizeof tc->local;
	if (getsockname(fd, (struct sockaddr *)&tc->local,
	    &tc->local_len) == -1)
		tc->local_len = 0;
	snprintf(tc->host, sizeof tc->host, "%s", host);
	snprintf(tc->identity, sizeof tc->identity, "%s", identity);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof (int));
	evutil_make_socket_nonblocking(fd);
	tc->kick = event_new(tc_base, -1, 0, tc_kick_cb, tc);
	if (client_set_plain(tc->cl) == -1 || tc->local_len == 0) {
		tc_close(tc, "cannot set the connection up");
		return;
	}
	tc->bev = client_bev(tc->cl);
	client_setcb(tc->cl, tc_read_cb, NULL, tc_event_cb);
	/* a message is at most 8 KiB: never hold more than a few */
	bufferevent_setwatermark(tc->bev, EV_READ, 0, 4 * TD_TC_MSG_MAX);
	bufferevent_enable(tc->bev, EV_READ | EV_WRITE);
	log_info("%s: trace-cmd client (unauthenticated)", tc_label(tc));
	tc_send(tc, TD_TC_GREETING, TD_TC_GREETING_LEN);
	tc_deadline(tc, tc->cfg->handshake_timeout);
}

int
tracecmd_start(struct event_base *base, const struct listener_config *cfg)
{
	char tail[128];
	struct server_tcp how = {
		.opt = "--tracecmd-bind",
		.fail = "cannot listen for trace-cmd clients",
		.ok = "listening for trace-cmd clients",
		.tail = tail,
		.backlog = 64,
		.numeric = 1,
		.cb = tc_accept_cb,
	};

	tc_base = base;
	tc_cfg = cfg;
	snprintf(tail, sizeof tail, ", data ports %u-%u (INSECURE: plain TCP "
	    "and UDP, no authentication)", cfg->tracecmd_lo, cfg->tracecmd_hi);
	if ((tc_pause = accept_pause_new(base, "trace-cmd port", NULL,
	    NULL)) == NULL)
		fatalx("trace-cmd port: out of memory");
	how.pause = tc_pause;
	if (server_listen_tcp(base, cfg->tracecmd_bind, cfg->tracecmd_port,
	    &how, &tc_lev, 1) == -1)
		return -1;
	return 0;
}

void
tracecmd_shutdown(void)
{
	if (tc_lev != NULL)
		evconnlistener_free(tc_lev);
	tc_lev = NULL;
	accept_pause_free(tc_pause);
	tc_pause = NULL;
	client_shutdown(CLIENT_TRACECMD);
}
