/*
 * tdhostile.c: an agent that is let in and then tries to make the listener
 * hold, write or open more than its share (issue 13).  Its identity is its
 * certificate (--cert, --key, --ca: TLS), or on an --insecure listener the
 * source address it connects from (SRCADDR, 127.0.0.2 by default; with
 * TLS it only tells its connections apart in the listener's log).
 *
 *	tdhostile [--cert F --key F --ca F] [-n N] [--hold] [--kernel STR]
 *	    HOST PORT MODE [SRCADDR]
 *
 *	chunks	128 CPUs of 512 KiB pages (the most a HELLO may declare),
 *		9 zero pages a CPU as PAGES_Z in zlib (tdlisten writes zstd):
 *		~1.4 KB on the wire fill 4.5 MiB a CPU
 *	span	a HELLO of 256 CPUs x 512 KiB: refused
 *	options	200 options of 1 MiB: refused past the options' cap
 *	trickle	3 MiB of options, then 60 options of 20 bytes 50 ms apart:
 *		each must not rewrite the options
 *	probes	time-sync probes, never reading the replies
 *	fds	1010 CPUs of 256-byte pages, one page each
 *	partial	a HELLO of 1 CPU, then all but the last byte of an OPTION
 *		frame of TD_MAX_FRAME bytes: the listener waits for the rest
 *	hello	a HELLO of 2 CPUs, nothing else: a recording that reserves
 *		its descriptors (4) and holds nearly nothing
 *	standby	a STANDBY (host "hostile", the kernel of --kernel STR), then
 *		its WELCOME: a standby agent that never records (issue 31)
 *	sections  a HELLO of 1 CPU, HEADER_INFO, FTRACE_EVENTS,
 *		EVENT_FORMATS, KALLSYMS and PRINTK of 255 MiB each (or
 *		--section-mb MB: the same with less to move), paced at
 *		4 MiB each 5 ms, then 16 pages a second for 4 s (under
 *		--rotate the first piece is cut: its sections are copied
 *		into the next), CMDLINES, END: the listener's DONE is the
 *		expected end (issue 31, row 3); "sections" is printed once
 *		they are sent
 *
 * A session sends its HELLO and waits for the WELCOME ("welcome"), as an
 * agent does, before it goes on (span excepted).  chunks, trickle, fds and
 * hello end with a probe and wait for its reply: every frame before it was
 * handled.  Each session prints its outcome ("reply", "error: TEXT",
 * "closed", "blocked"; "sent" for partial, whose bytes all went out); the
 * last line is "sent N" (bytes, all sessions).  A session ends as expected
 * when the listener did what the fixed tdlisten does: the reply for chunks,
 * trickle, fds and hello, an ERROR or a close for span and options (once
 * welcomed), for probes a stop of reading (the sends block, or the
 * listener lets go of the connection) before 256 MiB were sent, for
 * partial all its bytes sent.
 *
 * -n N runs N sessions of MODE one after the other (1 by default) and stops
 * at the first that does not end as expected.  A session is closed when it
 * ends (its recording waits for a resume), unless --hold: then the
 * sessions that ended as expected stay open, "held H of N" is printed after
 * the last, and they are closed on SIGTERM or SIGINT.  Exit 0 when all N
 * sessions ended as expected, 1 when one did not, 2 on a usage or set-up
 * error.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "buf.h"
#include "compress.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tls.h"

#define HOSTILE_MAX	256

/* One connection to the listener, TLS or not. */
struct peer {
	int	 fd;
	SSL	*ssl;
};

static struct peer *cur;		/* the session being run */
static struct td_buf out;
static uint64_t sent;
static bool blocked;
static SSL_CTX *ctx;
static uint64_t rid_seq;
static const char *kernel = "6.1.0-hostile";
/* sections: the size of each, in MiB (--section-mb) */
static uint32_t section_mb = 255;
static volatile sig_atomic_t stop;

static void
hostile_signal(int sig)
{
	stop = 1;
}

/* Send n bytes; false when the listener is gone or stopped reading. */
static bool
peer_send(struct peer *p, const void *data, size_t n)
{
	const uint8_t *d = data;
	size_t off = 0;
	ssize_t w;
	int e;

	while (off < n) {
		if (p->ssl != NULL) {
			errno = 0;
			w = SSL_write(p->ssl, d + off, n - off > 1 << 20 ?
			    1 << 20 : (int)(n - off));
			e = w > 0 ? 0 : SSL_get_error(p->ssl, (int)w);
			if (e == SSL_ERROR_WANT_WRITE || (e ==
			    SSL_ERROR_SYSCALL && errno == EAGAIN))
				blocked = true;
		} else {
			w = send(p->fd, d + off, n - off, MSG_NOSIGNAL);
			if (w == -1 && (errno == EAGAIN ||
			    errno == EWOULDBLOCK))
				blocked = true;
		}
		if (w <= 0)
			return false;
		off += w;
		sent += w;
	}
	return true;
}

static ssize_t
peer_recv(struct peer *p, void *buf, size_t n)
{
	if (p->ssl != NULL)
		return SSL_read(p->ssl, buf, (int)n);
	return recv(p->fd, buf, n, 0);
}

static void
peer_close(struct peer *p)
{
	/* no close_notify: a listener that stopped reading would not take it */
	SSL_free(p->ssl);
	if (p->fd != -1)
		close(p->fd);
	free(p);
}

/* Send what out holds; false when the listener is gone or stopped. */
static bool
flush_out(void)
{
	bool ok = peer_send(cur, out.data, out.len);

	td_buf_reset(&out);
	return ok;
}

/* A connection from src to host:port, through TLS with a certificate. */
static struct peer *
dial(const char *host, const char *port, const char *src)
{
	struct addrinfo hints, *res;
	struct sockaddr_in sa;
	struct peer *p;
	char err[512];
	int s;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return NULL;
	s = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	if (s == -1 || inet_pton(AF_INET, src, &sa.sin_addr) != 1 ||
	    bind(s, (struct sockaddr *)&sa, sizeof sa) == -1 ||
	    connect(s, res->ai_addr, res->ai_addrlen) == -1) {
		freeaddrinfo(res);
		if (s != -1)
			close(s);
		return NULL;
	}
	freeaddrinfo(res);
	p = calloc(1, sizeof *p);
	p->fd = s;
	if (ctx == NULL)
		return p;
	if ((p->ssl = SSL_new(ctx)) == NULL ||
	    td_tls_client_prepare(p->ssl, host, err, sizeof err) == -1 ||
	    SSL_set_fd(p->ssl, s) != 1 || SSL_connect(p->ssl) != 1) {
		td_tls_error(err, sizeof err, "TLS handshake");
		fprintf(stderr, "tdhostile: %s\n", err);
		peer_close(p);
		return NULL;
	}
	return p;
}

/*
 * Wait for a frame of type want (or an ERROR, or the close): 'R' for the
 * wanted one ("welcome", "done" or "reply" printed), 'E' for an ERROR
 * ("error: TEXT"), 'C' for a close ("closed").
 */
static int
answer(uint16_t want)
{
	struct td_buf in;
	struct td_frame f;
	struct td_error e;
	uint8_t buf[4096];
	ssize_t r;
	int pr = 0;

	td_buf_init(&in, 1 << 20);
	for (;;) {
		while (in.len > 0 && (pr = td_frame_parse(in.data, in.len,
		    &f)) == 1) {
			if (f.type == want) {
				td_buf_free(&in);
				printf("%s\n", want == TD_MSG_WELCOME ? "welcome" :
				    want == TD_MSG_DONE ? "done" : "reply");
				return 'R';
			}
			if (f.type == TD_MSG_ERROR) {
				if (td_msg_unpack_error(&f, &e) == 0)
					printf("error: %s\n", e.text);
				td_buf_free(&in);
				return 'E';
			}
			memmove(in.data, in.data + f.total, in.len - f.total);
			in.len -= f.total;
		}
		if (in.len > 0 && pr == -1)
			break;
		r = peer_recv(cur, buf, sizeof buf);
		if (r <= 0)
			break;
		td_buf_add(&in, buf, r);
	}
	td_buf_free(&in);
	printf("closed\n");
	return 'C';
}

static void
hello(uint32_t ncpus, uint32_t page_size)
{
	struct td_hello h;

	memset(&h, 0, sizeof h);
	h.version_min = h.version_max = TD_PROTO_VERSION_MIN;
	h.ncpus = ncpus;
	h.page_size = page_size;
	h.long_size = 8;
	h.commit_size = 8;
	/* one of each session of each process: a resume of none */
	h.recording_id = (uint64_t)time(NULL) << 32 |
	    (uint64_t)getpid() << 10 | (rid_seq++ & 1023);
	h.trace_id = 2;
	snprintf(h.name, sizeof h.name, "hostile");
	snprintf(h.clock, sizeof h.clock, "local");
	td_msg_pack_hello(&out, &h);
}

/*
 * A HELLO, then its WELCOME, as an agent waits for it: a listener that
 * refuses closes at once, and bytes sent meanwhile would make its close a
 * reset that loses the ERROR saying why.  False (printed) when refused.
 */
static bool
welcomed(uint32_t ncpus, uint32_t page_size)
{
	hello(ncpus, page_size);
	flush_out();
	return answer(TD_MSG_WELCOME) == 'R';
}

/* A probe, then its reply: everything sent before it was handled. */
static int
probe_reply(void)
{
	struct td_tsync_probe p = { 1, 1, 0 };

	td_msg_pack_tsync_probe(&out, &p);
	flush_out();
	return answer(TD_MSG_TSYNC_REPLY);
}

/* An option of n bytes (id PROCMAPS, which the listener keeps). */
static bool
option(size_t n)
{
	uint8_t *p = calloc(1, n);

	memset(p, 'm', n);
	td_msg_pack_option(&out, TD_OPT_PROCMAPS, p, n);
	free(p);
	return flush_out();
}

static bool
attack_chunks(void)
{
	const uint32_t ncpus = 128, page = 512 * 1024, count = 9;
	struct td_codec *z = td_codec_new(TD_CODEC_ZLIB, 0);
	struct td_pages_z pz;
	uint8_t *pages = calloc(count, page);
	const void *zp;
	ssize_t zn;
	uint32_t cpu;

	if (!welcomed(ncpus, page))
		return false;
	zn = td_codec_compress_buf(z, pages, (size_t)count * page, &zp);
	for (cpu = 0; cpu < ncpus && zn > 0; cpu++) {
		memset(&pz, 0, sizeof pz);
		pz.cpu = cpu;
		pz.count = count;
		pz.codec = TD_WIRE_ZLIB;
		pz.data = zp;
		pz.len = (uint32_t)zn;
		td_msg_pack_pages_z(&out, &pz);
		if (!flush_out())
			break;
	}
	free(pages);
	td_codec_free(z);
	return probe_reply() == 'R';
}

static bool
attack_fds(void)
{
	const uint32_t ncpus = 1010, page = TD_MIN_PAGE_SIZE;
	uint32_t cpu;

	if (!welcomed(ncpus, page))
		return false;
	for (cpu = 0; cpu < ncpus; cpu++) {
		td_msg_pack_pages_head(&out, cpu, 1, 0, page);
		td_buf_add_zero(&out, page);
		if (out.len > 64 * 1024 && !flush_out())
			break;
	}
	return probe_reply() == 'R';
}

static bool
attack_hello(void)
{
	if (!welcomed(2, 4096))
		return false;
	return probe_reply() == 'R';
}

static bool
attack_trickle(void)
{
	struct timespec gap = { 0, 50 * 1000 * 1000 };
	int i;

	if (!welcomed(2, 4096))
		return false;
	for (i = 0; i < 3; i++)
		if (!option(1024 * 1024 - 64))
			return false;
	for (i = 0; i < 60; i++) {
		if (!option(20))
			return false;
		nanosleep(&gap, NULL);
	}
	return probe_reply() == 'R';
}

static bool
attack_probes(void)
{
	struct timeval tv = { 10, 0 };
	struct td_tsync_probe p = { 1, 0, 0 };
	uint64_t from = sent;
	int i;

	/* a listener that stops reading makes a send wait: 10 s says so */
	setsockopt(cur->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	blocked = false;
	if (!welcomed(2, 4096))
		return false;
	while (sent - from < 256u * 1024 * 1024) {
		for (i = 0; i < 4096; i++) {
			p.seq++;
			td_msg_pack_tsync_probe(&out, &p);
		}
		if (!flush_out())
			break;
	}
	printf("%s\n", blocked ? "blocked" : sent - from < 256u * 1024 *
	    1024 ? "closed" : "not stopped");
	return sent - from < 256u * 1024 * 1024;
}

static bool
attack_span(void)
{
	hello(256, 512 * 1024);
	flush_out();
	return answer(TD_MSG_WELCOME) != 'R';
}

static bool
attack_options(void)
{
	int i;

	if (!welcomed(2, 4096))
		return false;
	for (i = 0; i < 200; i++)
		if (!option(1024 * 1024 - 64))
			break;
	return answer(TD_MSG_DONE) != 'R';
}

/*
 * All of a frame of TD_MAX_FRAME bytes but its last byte: the listener
 * has its header and waits for the rest, which never comes.
 */
static bool
attack_partial(void)
{
	const size_t n = TD_MAX_FRAME - 2;
	uint8_t *p = calloc(1, n);
	bool ok;

	if (!welcomed(1, 4096))
		return false;
	td_msg_pack_option(&out, TD_OPT_PROCMAPS, p, n);
	free(p);
	out.len--;
	ok = flush_out();
	printf("%s\n", ok ? "sent" : "closed");
	return ok;
}

static bool
attack_standby(void)
{
	struct td_standby st;

	memset(&st, 0, sizeof st);
	st.version = TD_STANDBY_VERSION;
	st.ncpus = 2;
	snprintf(st.host, sizeof st.host, "hostile");
	snprintf(st.kernel, sizeof st.kernel, "%s", kernel);
	snprintf(st.clocks, sizeof st.clocks, "local");
	if (td_msg_pack_standby(&out, &st) == -1)
		return false;
	flush_out();
	return answer(TD_MSG_WELCOME) == 'R';
}

/*
 * Section id as trace.dat version 6 lays it out (what the listener reads
 * back at a cut): head (hn bytes), n bytes of c, tail (tn), in frames of at
 * most 1 MiB, 4 MiB each 5 ms (the listener's turns stay short: what the
 * test measures is the cut's copy).
 */
static bool
section_tail(uint16_t id, const void *head, size_t hn, size_t n, int c,
    const void *tail, size_t tn)
{
	const struct timespec pace = { 0, 5 * 1000 * 1000 };
	const size_t piece = TD_MAX_FRAME - 64;
	uint8_t *p = malloc(piece);
	size_t k;
	bool ok = true;

	memset(p, c, piece);
	td_msg_pack_section(&out, id);
	if (hn > 0)
		td_msg_pack_section_data(&out, head, hn);
	while (n > 0 && ok) {
		k = n < piece ? n : piece;
		td_msg_pack_section_data(&out, p, k);
		n -= k;
		if (out.len > 4 * 1024 * 1024) {
			ok = flush_out();
			nanosleep(&pace, NULL);
		}
	}
	free(p);
	if (tn > 0)
		td_msg_pack_section_data(&out, tail, tn);
	td_msg_pack_section_end(&out);
	return ok && flush_out();
}

static bool
section(uint16_t id, const void *head, size_t hn, size_t n, int c)
{
	return section_tail(id, head, hn, n, c, NULL, 0);
}

/* A v6 list section (u32 size, then the bytes) of n bytes of c. */
static bool
section_text(uint16_t id, uint32_t n, int c)
{
	return section(id, &n, sizeof n, n, c);
}

/*
 * FTRACE_EVENTS (sys NULL) or EVENT_FORMATS of one system sys: a list of
 * one format of n bytes of c.
 */
static bool
section_list(uint16_t id, const char *sys, uint64_t n, int c)
{
	uint8_t head[64];
	uint32_t one = 1;
	size_t hn = 0;

	if (sys != NULL) {
		memcpy(head, &one, sizeof one);
		hn += sizeof one;
		memcpy(head + hn, sys, strlen(sys) + 1);
		hn += strlen(sys) + 1;
	}
	memcpy(head + hn, &one, sizeof one);
	hn += sizeof one;
	memcpy(head + hn, &n, sizeof n);
	hn += sizeof n;
	return section(id, head, hn, n, c);
}

static bool
attack_sections(void)
{
	static const char tail[] = "header_event\0\0\0\0\0\0\0\0\0";
	uint8_t hinfo[12 + 8];
	struct timespec gap = { 0, 250 * 1000 * 1000 };
	const uint32_t big = section_mb * 1024 * 1024;
	const uint64_t none = 0;
	uint64_t big64;
	struct td_end e;
	uint64_t seq = 0;
	int i;

	if (!welcomed(1, 4096))
		return false;
	/* header_page of big - 33, an empty header_event */
	memcpy(hinfo, "header_page", 12);
	big64 = big - 12 - 8 - (sizeof tail - 1);
	memcpy(hinfo + 12, &big64, 8);
	if (!section_tail(TD_OPT_HEADER_INFO, hinfo, sizeof hinfo, big64,
	    'h', tail, sizeof tail - 1) ||
	    !section_list(TD_OPT_FTRACE_EVENTS, NULL, big, 'f') ||
	    !section_list(TD_OPT_EVENT_FORMATS, "x", big, 'e') ||
	    !section_text(TD_OPT_KALLSYMS, big, 'k') ||
	    !section_text(TD_OPT_PRINTK, big, 'p'))
		return false;
	printf("sections\n");
	for (i = 0; i < 16; i++) {
		td_msg_pack_pages_head(&out, 0, 4, seq, 4096);
		td_buf_add_zero(&out, 4 * 4096);
		seq += 4;
		if (!flush_out())
			return false;
		nanosleep(&gap, NULL);
	}
	if (probe_reply() != 'R' ||
	    !section(TD_OPT_CMDLINES, &none, sizeof none, 0, 0))
		return false;
	memset(&e, 0, sizeof e);
	e.ncpus = 1;
	e.pages[0] = seq;
	td_msg_pack_end(&out, &e);
	flush_out();
	return answer(TD_MSG_DONE) == 'R';
}

static const struct {
	const char	*name;
	bool		(*run)(void);
} hostile_modes[] = {
	{ "chunks", attack_chunks },
	{ "span", attack_span },
	{ "options", attack_options },
	{ "trickle", attack_trickle },
	{ "probes", attack_probes },
	{ "fds", attack_fds },
	{ "partial", attack_partial },
	{ "hello", attack_hello },
	{ "standby", attack_standby },
	{ "sections", attack_sections },
};

static void
usage(void)
{
	fprintf(stderr, "usage: tdhostile [--cert F --key F --ca F] [-n N] "
	    "[--hold] [--kernel STR] [--section-mb MB] HOST PORT MODE "
	    "[SRCADDR]\n");
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cert", required_argument, NULL, 'c' },
		{ "key", required_argument, NULL, 'k' },
		{ "ca", required_argument, NULL, 'a' },
		{ "hold", no_argument, NULL, 'H' },
		{ "kernel", required_argument, NULL, 'K' },
		{ "section-mb", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	static struct peer *held[HOSTILE_MAX];
	struct timespec tick = { 0, 100 * 1000 * 1000 };
	const char *cert = NULL, *key = NULL, *ca = NULL, *src;
	bool (*run)(void) = NULL;
	int i, ch, n = 1, nheld = 0, done = 0, hold = 0;
	char err[512];
	bool ok = true;

	while ((ch = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
		if (ch == 'c')
			cert = optarg;
		else if (ch == 'k')
			key = optarg;
		else if (ch == 'a')
			ca = optarg;
		else if (ch == 'H')
			hold = 1;
		else if (ch == 'K')
			kernel = optarg;
		else if (ch == 'n')
			n = atoi(optarg);
		else if (ch == 'S' && atoi(optarg) >= 1 && atoi(optarg) <= 255)
			section_mb = (uint32_t)atoi(optarg);
		else {
			usage();
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 3 || n < 1 || n > HOSTILE_MAX) {
		usage();
		return 2;
	}
	for (i = 0; i < (int)(sizeof hostile_modes / sizeof hostile_modes[0]);
	    i++)
		if (strcmp(argv[2], hostile_modes[i].name) == 0)
			run = hostile_modes[i].run;
	if (run == NULL) {
		fprintf(stderr, "tdhostile: no mode '%s'\n", argv[2]);
		return 2;
	}
	src = argc > 3 ? argv[3] : "127.0.0.2";
	if (cert != NULL && (ctx = td_tls_client_ctx(cert, key, ca, err,
	    sizeof err)) == NULL) {
		fprintf(stderr, "tdhostile: %s\n", err);
		return 2;
	}
	/* the test reads the outcomes while the sessions are held */
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, hostile_signal);
	signal(SIGINT, hostile_signal);
	td_buf_init(&out, 64 * 1024 * 1024);
	for (done = 0; done < n && ok && !stop; done++) {
		if ((cur = dial(argv[0], argv[1], src)) == NULL) {
			fprintf(stderr, "tdhostile: cannot connect\n");
			return 2;
		}
		ok = run();
		if (ok && hold)
			held[nheld++] = cur;
		else
			peer_close(cur);
		cur = NULL;
	}
	if (hold) {
		printf("held %d of %d\n", nheld, n);
		while (!stop)
			nanosleep(&tick, NULL);
	}
	for (i = 0; i < nheld; i++)
		peer_close(held[i]);
	printf("sent %llu\n", (unsigned long long)sent);
	td_buf_free(&out);
	SSL_CTX_free(ctx);
	return ok && done == n ? 0 : 1;
}
