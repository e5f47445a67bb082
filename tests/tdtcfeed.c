/*
 * tdtcfeed.c: a trace-cmd record -N client made from a trace.dat, for
 * tests/e2e-tracecmd.sh: it speaks trace-cmd's v3 protocol (proto/tcmsg.h)
 * to tdlisten --tracecmd-port, sends FILE's header (rebuilt without its
 * CPU data by the writer, as a trace-cmd client sends it) and then every
 * page of FILE on the data ports, and CLOSE; or it misbehaves on purpose.
 *
 *	tdtcfeed [-u] [-s] [-r] [-C] [-n N] [-w FILE] [-1] [-c CPUS]
 *	    [-P PAGE_SIZE] [-g] [-v] [-E] [-T] [-S SRC] [-K MIB] HOST PORT FILE
 *	tdtcfeed -H SOURCE HOST PORT[,PORT...]
 *
 *	-u	data over UDP (default TCP)
 *	-c	say CPUS in TINIT (a lie)
 *	-P	say PAGE_SIZE in TINIT (a lie)
 *	-g	send garbage as the header
 *	-s	(UDP) make every 4th datagram half a page long
 *	-r	(UDP) send the second page of each CPU before its first
 *	-C	say 10 bytes more in the saved_cmdlines section than it holds
 *		(what trace-cmd sends when the file changed while it read it)
 *	-n	send each CPU's pages N times (each time 10 s later: the pages'
 *		timestamps shifted)
 *	-w	wait for FILE to exist before sending the pages
 *	-1	speak the old v1 protocol (a CPU count first): refused
 *	-v	vanish: after the header and a page of each CPU, exit without
 *		CLOSE
 *	-E	after RINIT, send an empty SEND_DATA every half second, never
 *		the header (exit 0 when the listener closed the connection)
 *	-T	after RINIT, send 130,880 bytes of header every half second, never
 *		FIN_DATA (exit 0 when the listener closed the connection;
 *		prints after how many seconds)
 *	-S	connect the control connection from SOURCE (an IPv4 address)
 *	-K	make the kallsyms section MIB MiB of symbol lines (compressed
 *		some 10 times: a header that expands)
 *	-H	a third party: connect from SOURCE to each data PORT and send
 *		a page of garbage (exit 0 when every connection was closed by
 *		the other side without an answer)
 *
 * Exit 0 when the conversation went as the options said; it prints the
 * pages it sent.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "tcmsg.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdread.h"

static const char *host;
static bool bad_cmdlines;	/* -C */
static long kallsyms_mib;	/* -K */

static void
die(const char *what)
{
	fprintf(stderr, "tdtcfeed: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void
dief(const char *what)
{
	fprintf(stderr, "tdtcfeed: %s\n", what);
	exit(1);
}

static void
put(int fd, const void *p, size_t n)
{
	const char *c = p;
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, c, n)) <= 0)
			die("write");
		c += w;
		n -= (size_t)w;
	}
}

static void
get(int fd, void *p, size_t n)
{
	char *c = p;
	ssize_t r;

	while (n > 0) {
		if ((r = read(fd, c, n)) <= 0)
			dief("the listener closed the connection");
		c += r;
		n -= (size_t)r;
	}
}

/* A connected socket of type to host:port, from source if not NULL. */
static int
dial(const char *port, int type, const char *source)
{
	struct addrinfo hints, *res;
	struct sockaddr_in sin;
	int fd;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_INET;
	hints.ai_socktype = type;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		dief("cannot resolve the host");
	if ((fd = socket(res->ai_family, type, 0)) == -1)
		die("socket");
	if (source != NULL) {
		memset(&sin, 0, sizeof sin);
		sin.sin_family = AF_INET;
		if (inet_pton(AF_INET, source, &sin.sin_addr) != 1 ||
		    bind(fd, (struct sockaddr *)&sin, sizeof sin) == -1)
			die("bind to the source address");
	}
	if (connect(fd, res->ai_addr, res->ai_addrlen) == -1)
		die("connect");
	freeaddrinfo(res);
	return fd;
}

/* -H: connect from source to each port, send garbage. */
static int
hijack(const char *source, char *ports)
{
	char page[4096], c;
	char *p;
	int fd, bad = 0;

	memset(page, 0x5a, sizeof page);
	for (p = strtok(ports, ","); p != NULL; p = strtok(NULL, ",")) {
		fd = dial(p, SOCK_STREAM, source);
		/* refused: closed by the listener, nothing read from us */
		(void)!write(fd, page, sizeof page);
		if (read(fd, &c, 1) != 0 && errno != ECONNRESET)
			bad++;
		close(fd);
		printf("tdtcfeed: port %s: closed by the listener\n", p);
	}
	return bad ? 1 : 0;
}

/*
 * -K: a kallsyms section (u32 size, text) of kallsyms_mib MiB of lines
 * that vary enough not to compress past the reader's expansion limit.
 */
static void
big_kallsyms(struct td_buf *b)
{
	size_t want = (size_t)kallsyms_mib << 20;
	uint32_t size;
	uint64_t x = 88172645463325252ULL;
	char line[64];
	int n;

	td_buf_free(b);
	td_buf_init(b, want + 4 + sizeof line);
	td_buf_add_zero(b, 4);
	while (b->len < want + 4) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		n = snprintf(line, sizeof line, "ffffffff81%06llx T s%x\n",
		    (unsigned long long)(b->len & 0xffffff),
		    (unsigned)(x & 1));
		if (td_buf_add(b, line, (size_t)n) == -1)
			dief("-K");
	}
	size = (uint32_t)(b->len - 4);
	memcpy(b->data, &size, 4);
}

/* FILE's header without CPU data, written by the writer into path. */
static void
header(struct td_read *r, const char *path)
{
	static const enum td_opt copy[] = { TD_OPT_TRACECLOCK, TD_OPT_UNAME,
	    TD_OPT_VERSION };
	struct td_file_params fp;
	struct td_file *f;
	struct td_buf b;
	size_t i;
	int id;

	memset(&fp, 0, sizeof fp);
	fp.version = 7;
	fp.codec = TD_CODEC_ZSTD;
	fp.page_size = td_read_page_size(r);
	fp.long_size = (uint8_t)td_read_long_size(r);
	fp.ncpus = td_read_ncpus(r);
	fp.clock = td_read_clock(r);
	if ((f = td_file_create(path, &fp)) == NULL)
		die("td_file_create");
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		td_buf_reset(&b);
		if (td_read_section(r, id, &b) == -1)
			die("a section");
		if (id == TD_OPT_CMDLINES && bad_cmdlines && b.len >= 8) {
			uint64_t said;

			memcpy(&said, b.data, 8);
			said += 10;
			memcpy(b.data, &said, 8);
		}
		if (id == TD_OPT_KALLSYMS && kallsyms_mib > 0)
			big_kallsyms(&b);
		if (td_file_section_add(f, id, b.data, b.len) == -1)
			die("a section");
	}
	for (i = 0; i < sizeof copy / sizeof copy[0]; i++) {
		td_buf_reset(&b);
		if (td_read_option(r, copy[i], 0, &b) == 0 &&
		    td_file_add_option(f, copy[i], b.data, b.len) == -1)
			die("an option");
	}
	if (td_file_finish(f) == -1)
		die("td_file_finish");
	td_file_free(f);
	td_buf_free(&b);
}

/* What the page walk of one CPU sends to. */
struct feed {
	int	 fd;
	long	 limit;		/* pages to send, -1: all */
	long	 sent;
	size_t	 page_size;
	bool	 shorten;	/* -s */
	bool	 swap;		/* -r */
	uint8_t	*held;		/* -r: the first page, held back */
	long	 seen;
	uint64_t shift;		/* -n: added to each page's timestamp */
};

/* Datagrams made short (-s) and pages sent out of order (-r). */
static long shortened, reordered;

static int
page_cb(void *arg, const void *page, size_t len)
{
	struct feed *s = arg;
	char pad[TD_MAX_PAGE_SIZE > 65536 ? 65536 : TD_MAX_PAGE_SIZE];

	if (s->limit >= 0 && s->sent >= s->limit)
		return 0;
	if (len > sizeof pad || s->page_size > sizeof pad)
		return -1;
	memset(pad, 0, sizeof pad);
	memcpy(pad, page, len);
	if (s->shift != 0 && len >= 8) {
		uint64_t ts;

		memcpy(&ts, pad, 8);
		ts += s->shift;
		memcpy(pad, &ts, 8);
	}
	if (s->swap && s->seen++ == 0) {
		s->held = malloc(s->page_size);
		memcpy(s->held, pad, s->page_size);
		return 0;
	}
	/* UDP: one datagram a page; TCP: the page's bytes */
	if (s->shorten && s->sent % 4 == 3) {
		put(s->fd, pad, s->page_size / 2);
		shortened++;
	} else
		put(s->fd, pad, s->page_size);
	s->sent++;
	if (s->held != NULL) {
		put(s->fd, s->held, s->page_size);
		reordered++;
		s->sent++;
		free(s->held);
		s->held = NULL;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	const char *source = NULL;
	bool udp = false, garbage = false, vanish = false, v1 = false;
	bool shorten = false, swap = false, empty = false, trickle = false;
	const char *from = NULL;
	time_t t0;
	const char *wait = NULL;
	long repeat = 1, k;
	struct sockaddr_in me;
	socklen_t melen = sizeof me;
	uint32_t cpus = 0, psize = 0, ncpus, i, rcpus;
	uint16_t ports[TD_MAX_CPUS];
	char path[] = "/tmp/tdtcfeed.XXXXXX", num[8], tag[16];
	const char *opts[] = { "tcp", NULL };
	struct td_tc_msg m;
	struct td_buf b;
	struct td_read *r;
	struct feed s;
	uint8_t buf[TD_TC_MSG_MAX], *hdr;
	long total = 0;
	size_t n, off;
	ssize_t len;
	int ch, fd, hfd;

	while ((ch = getopt(argc, argv, "uc:P:gv1srCn:w:H:EK:TS:")) != -1) {
		switch (ch) {
		case 'u': udp = true; break;
		case 'c': cpus = (uint32_t)atol(optarg); break;
		case 'P': psize = (uint32_t)atol(optarg); break;
		case 'g': garbage = true; break;
		case 'v': vanish = true; break;
		case '1': v1 = true; break;
		case 's': shorten = true; break;
		case 'r': swap = true; break;
		case 'C': bad_cmdlines = true; break;
		case 'n': repeat = atol(optarg); break;
		case 'w': wait = optarg; break;
		case 'H': source = optarg; break;
		case 'E': empty = true; break;
		case 'T': trickle = true; break;
		case 'S': from = optarg; break;
		case 'K': kallsyms_mib = atol(optarg); break;
		default: return 2;
		}
	}
	if (argc - optind != (source != NULL ? 2 : 3)) {
		fprintf(stderr, "usage: tdtcfeed [-u] [-s] [-r] [-C] [-n N] "
		    "[-w FILE] [-1] [-c CPUS]\n"
		    "           [-P PAGE_SIZE] [-g] [-v] [-E] [-T] [-S SRC] [-K MIB] HOST "
		    "PORT FILE\n"
		    "       tdtcfeed -H SOURCE HOST PORT[,PORT...]\n");
		return 2;
	}
	host = argv[optind];
	if (empty || trickle)
		signal(SIGPIPE, SIG_IGN);
	if (source != NULL)
		return hijack(source, argv[optind + 1]);
	if ((r = td_read_open(argv[optind + 2])) == NULL)
		die(argv[optind + 2]);
	ncpus = (uint32_t)td_read_ncpus(r);
	if ((hfd = mkstemp(path)) == -1)
		die("mkstemp");
	header(r, path);
	td_buf_init(&b, 1 << 30);
	if (td_buf_read_file(&b, path) == -1)
		die("the header");
	unlink(path);
	close(hfd);

	fd = dial(argv[optind + 1], SOCK_STREAM, from);
	if (getsockname(fd, (struct sockaddr *)&me, &melen) == 0)
		printf("tdtcfeed: from 127.0.0.1:%u\n", ntohs(me.sin_port));
	fflush(stdout);
	get(fd, buf, TD_TC_GREETING_LEN);
	if (memcmp(buf, TD_TC_GREETING, TD_TC_GREETING_LEN) != 0)
		dief("no greeting");
	if (v1) {
		/* a v1 client's CPU count; the listener must hang up */
		put(fd, "2", 2);
		if (read(fd, buf, 1) > 0)
			dief("the listener answered a v1 client");
		printf("tdtcfeed: v1 refused\n");
		return 0;
	}
	put(fd, TD_TC_V3_CPU, sizeof TD_TC_V3_CPU);
	get(fd, buf, sizeof TD_TC_V3);
	put(fd, TD_TC_MAGIC, TD_TC_MAGIC_LEN);
	get(fd, buf, 2);
	if (memcmp(buf, TD_TC_OK, 2) != 0)
		dief("no OK");
	hdr = b.data;
	n = b.len;
	{
		struct td_buf t;

		td_buf_init(&t, TD_TC_MSG_MAX);
		td_tc_pack_tinit(&t, cpus ? cpus : ncpus, psize ? psize :
		    td_read_page_size(r), udp ? NULL : opts);
		put(fd, t.data, t.len);
		td_buf_free(&t);
	}
	get(fd, buf, TD_TC_MSG_HEADER);
	len = (ssize_t)((uint32_t)buf[0] << 24 | buf[1] << 16 | buf[2] << 8 |
	    buf[3]);
	if (len < TD_TC_MSG_HEADER || len > TD_TC_MSG_MAX)
		dief("bad RINIT");
	get(fd, buf + TD_TC_MSG_HEADER, (size_t)len - TD_TC_MSG_HEADER);
	if (td_tc_msg_parse(buf, (size_t)len, &m) != 1 ||
	    td_tc_unpack_rinit(&m, TD_MAX_CPUS, &rcpus, ports) == -1)
		dief("bad RINIT");
	t0 = time(NULL);
	while (trickle) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		static uint8_t zero[8180];
		struct td_buf t;

		/* 16 messages of 8180 bytes: 2 x 64 KiB of header */
		td_buf_init(&t, 16 * TD_TC_MSG_MAX);
		for (i = 0; i < 16; i++)
			td_tc_pack(&t, TD_TC_SEND_DATA, zero, sizeof zero);
		len = write(fd, t.data, t.len);
		td_buf_free(&t);
		if (len == -1 || poll(&pfd, 1, 500) == 1) {
			printf("tdtcfeed: closed by the listener after %ld s\n",
			    (long)(time(NULL) - t0));
			close(fd);
			td_read_close(r);
			td_buf_free(&b);
			return 0;
		}
	}
	while (empty) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		struct td_buf t;

		td_buf_init(&t, 64);
		td_tc_pack(&t, TD_TC_SEND_DATA, NULL, 0);
		len = write(fd, t.data, t.len);
		td_buf_free(&t);
		if (len == -1 || poll(&pfd, 1, 500) == 1) {
			if (len != -1 && read(fd, buf, 1) > 0)
				dief("the listener answered an empty SEND_DATA");
			printf("tdtcfeed: closed by the listener\n");
			close(fd);
			td_read_close(r);
			td_buf_free(&b);
			return 0;
		}
	}
	if (garbage)
		for (off = 0; off < n; off++)
			hdr[off] = (uint8_t)(off * 7 + 1);
	for (off = 0; off < n; off += 8180) {
		struct td_buf t;

		td_buf_init(&t, TD_TC_MSG_MAX);
		td_tc_pack(&t, TD_TC_SEND_DATA, hdr + off,
		    n - off < 8180 ? n - off : 8180);
		put(fd, t.data, t.len);
		td_buf_free(&t);
	}
	{
		struct td_buf t;

		td_buf_init(&t, 64);
		td_tc_pack(&t, TD_TC_FIN_DATA, NULL, 0);
		put(fd, t.data, t.len);
		td_buf_free(&t);
	}
	while (wait != NULL && access(wait, F_OK) == -1)
		usleep(20000);
	for (i = 0; i < ncpus && i < rcpus; i++) {
		snprintf(num, sizeof num, "%u", ports[i]);
		memset(&s, 0, sizeof s);
		s.fd = dial(num, udp ? SOCK_DGRAM : SOCK_STREAM, NULL);
		s.shorten = shorten;
		s.swap = swap;
		s.page_size = td_read_page_size(r);
		/* vanishing: a page of each CPU, then gone */
		s.limit = vanish ? 1 : -1;
		for (k = 0; k < repeat; k++) {
			s.shift = (uint64_t)k * 10000000000ULL;
			if (td_read_cpu_pages(r, (int)i, page_cb, &s) == -1)
				die("pages");
		}
		if (s.held != NULL) {	/* a CPU of one page */
			put(s.fd, s.held, s.page_size);
			s.sent++;
			free(s.held);
		}
		total += s.sent;
		close(s.fd);
	}
	snprintf(tag, sizeof tag, "%ld", total);
	printf("tdtcfeed: %s pages sent\n", tag);
	printf("tdtcfeed: %ld short, %ld out of order\n", shortened, reordered);
	fflush(stdout);
	if (vanish)
		_exit(0);
	{
		struct td_buf t;

		td_buf_init(&t, 64);
		td_tc_pack(&t, TD_TC_CLOSE, NULL, 0);
		put(fd, t.data, t.len);
		td_buf_free(&t);
	}
	close(fd);
	td_read_close(r);
	td_buf_free(&b);
	return 0;
}
