/*
 * tdhostile.c: a peer that is allowed in (tdlisten --insecure, from a
 * source address of its own: its identity) and then tries to make the
 * listener hold, write or open more than its share.  Each MODE is one
 * attack of issue 13 (findings 1-4):
 *
 *	tdhostile HOST PORT MODE [SRCADDR]
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
 *
 * chunks, trickle and fds end with a probe and wait for its reply: every
 * frame before it was handled.  Prints "sent N" (bytes) and the outcome
 * ("reply", "error: TEXT", "closed", "blocked").  Exit 0 when the listener
 * did what the fixed tdlisten does: the reply for chunks, trickle and fds,
 * an ERROR or a close for span and options, and for probes, a stop of
 * reading (the sends block, or the listener lets go of the connection)
 * before 256 MiB were sent.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "compress.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"

static int fd = -1;
static struct td_buf out;
static uint64_t sent;
static bool blocked;

/* Send what out holds; false when the listener is gone or stopped. */
static bool
flush_out(void)
{
	size_t off = 0;
	ssize_t w;

	while (off < out.len) {
		w = send(fd, out.data + off, out.len - off, MSG_NOSIGNAL);
		if (w <= 0) {
			if (w == -1 && (errno == EAGAIN ||
			    errno == EWOULDBLOCK))
				blocked = true;
			td_buf_reset(&out);
			return false;
		}
		off += w;
		sent += w;
	}
	td_buf_reset(&out);
	return true;
}

static int
dial(const char *host, const char *port, const char *src)
{
	struct addrinfo hints, *res;
	struct sockaddr_in sa;
	int s;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	s = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	if (s == -1 || inet_pton(AF_INET, src, &sa.sin_addr) != 1 ||
	    bind(s, (struct sockaddr *)&sa, sizeof sa) == -1 ||
	    connect(s, res->ai_addr, res->ai_addrlen) == -1) {
		freeaddrinfo(res);
		return -1;
	}
	freeaddrinfo(res);
	return s;
}

/*
 * Wait for a frame of type want (or an ERROR, or the close): 'R' for the
 * wanted one, 'E' for an ERROR (text printed), 'C' for a close.
 */
static int
answer(uint16_t want)
{
	struct td_buf in;
	struct td_frame f;
	struct td_error e;
	uint8_t buf[4096];
	ssize_t r;
	int pr;

	td_buf_init(&in, 1 << 20);
	for (;;) {
		while (in.len > 0 && (pr = td_frame_parse(in.data, in.len,
		    &f)) == 1) {
			if (f.type == want) {
				td_buf_free(&in);
				printf("reply\n");
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
		r = recv(fd, buf, sizeof buf, 0);
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
	h.version_min = h.version_max = TD_PROTO_VERSION;
	h.ncpus = ncpus;
	h.page_size = page_size;
	h.long_size = 8;
	h.commit_size = 8;
	h.recording_id = (uint64_t)time(NULL) << 20 | (uint64_t)getpid();
	h.trace_id = 2;
	snprintf(h.name, sizeof h.name, "hostile");
	snprintf(h.clock, sizeof h.clock, "local");
	td_msg_pack_hello(&out, &h);
}

/* A probe, then its reply: everything sent before it was handled. */
static int
probe_reply(void)
{
	struct td_tsync_probe p = { 1, 1, 0 };

	td_msg_pack_tsync_probe(&out, &p);
	if (!flush_out())
		return answer(TD_MSG_TSYNC_REPLY);
	return answer(TD_MSG_TSYNC_REPLY);
}

/* An option of n bytes (id PROCMAPS, which the listener keeps). */
static bool
option(size_t n)
{
	uint8_t *p = calloc(1, n);
	bool ok;

	memset(p, 'm', n);
	td_msg_pack_option(&out, TD_OPT_PROCMAPS, p, n);
	free(p);
	ok = flush_out();
	return ok;
}

static int
attack_chunks(void)
{
	const uint32_t ncpus = 128, page = 512 * 1024, count = 9;
	struct td_codec *z = td_codec_new(TD_CODEC_ZLIB, 0);
	struct td_pages_z pz;
	uint8_t *pages = calloc(count, page);
	const void *zp;
	ssize_t zn;
	uint32_t cpu;

	hello(ncpus, page);
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
	return probe_reply() == 'R' ? 0 : 1;
}

static int
attack_fds(void)
{
	const uint32_t ncpus = 1010, page = TD_MIN_PAGE_SIZE;
	uint32_t cpu;

	hello(ncpus, page);
	for (cpu = 0; cpu < ncpus; cpu++) {
		td_msg_pack_pages_head(&out, cpu, 1, 0, page);
		td_buf_add_zero(&out, page);
		if (out.len > 64 * 1024 && !flush_out())
			break;
	}
	return probe_reply() == 'R' ? 0 : 1;
}

static int
attack_trickle(void)
{
	struct timespec gap = { 0, 50 * 1000 * 1000 };
	int i;

	hello(2, 4096);
	for (i = 0; i < 3; i++)
		if (!option(1024 * 1024 - 64))
			return 1;
	for (i = 0; i < 60; i++) {
		if (!option(20))
			return 1;
		nanosleep(&gap, NULL);
	}
	return probe_reply() == 'R' ? 0 : 1;
}

static int
attack_probes(void)
{
	struct timeval tv = { 10, 0 };
	struct td_tsync_probe p = { 1, 0, 0 };
	int i;

	/* a listener that stops reading makes a send wait: 10 s says so */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	hello(2, 4096);
	while (sent < 256u * 1024 * 1024) {
		for (i = 0; i < 4096; i++) {
			p.seq++;
			td_msg_pack_tsync_probe(&out, &p);
		}
		if (!flush_out())
			break;
	}
	printf("%s\n", blocked ? "blocked" : sent < 256u * 1024 * 1024 ?
	    "closed" : "not stopped");
	return sent < 256u * 1024 * 1024 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	const char *mode;
	int rc = 2, a;

	if (argc < 4) {
		fprintf(stderr, "usage: tdhostile HOST PORT MODE [SRCADDR]\n");
		return 2;
	}
	mode = argv[3];
	if ((fd = dial(argv[1], argv[2], argc > 4 ? argv[4] :
	    "127.0.0.2")) == -1) {
		fprintf(stderr, "tdhostile: cannot connect\n");
		return 2;
	}
	td_buf_init(&out, 64 * 1024 * 1024);
	if (strcmp(mode, "chunks") == 0)
		rc = attack_chunks();
	else if (strcmp(mode, "fds") == 0)
		rc = attack_fds();
	else if (strcmp(mode, "trickle") == 0)
		rc = attack_trickle();
	else if (strcmp(mode, "probes") == 0)
		rc = attack_probes();
	else if (strcmp(mode, "span") == 0) {
		hello(256, 512 * 1024);
		flush_out();
		a = answer(TD_MSG_WELCOME);
		rc = a == 'R' ? 1 : 0;
	} else if (strcmp(mode, "options") == 0) {
		int i;

		hello(2, 4096);
		for (i = 0; i < 200; i++)
			if (!option(1024 * 1024 - 64))
				break;
		a = answer(TD_MSG_DONE);
		rc = a == 'R' ? 1 : 0;
	} else
		fprintf(stderr, "tdhostile: no mode '%s'\n", mode);
	printf("sent %llu\n", (unsigned long long)sent);
	td_buf_free(&out);
	close(fd);
	return rc;
}
