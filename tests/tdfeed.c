/*
 * tdfeed.c: a test peer for tdlisten --insecure.  It replays a trace.dat
 * file (read with shared/tdread) as a recording, either faithfully or with
 * one deliberate protocol fault, so the tests can check that the listener
 * closes exactly that session, says why, and keeps what can be kept.
 *
 *	tdfeed HOST PORT FILE MODE [NAME]
 *
 * MODE: good, hello-twice, early-pages, early-big (the 8-byte header of a
 * 1 MiB frame before HELLO, and nothing more), bad-cpu, seq-gap, oversize,
 * truncated, garbage, end-mismatch, bad-section, cut (close without END),
 * idle (send the pages, then nothing: wait for the listener to give up),
 * resume-done (only a HELLO resuming recording 1, finished before: DONE
 * expected), resume-unknown (the same for recording 3: refused),
 * bad-samples (a good replay with three absurd time-sync samples, which
 * the listener drops and counts: DONE expected), hello-only (HELLO, then
 * close without reading the WELCOME: an agent that gave up waiting).
 * Exit 0 when the listener answered as expected for the mode: DONE for
 * good and resume-done, an ERROR or a close for the others.
 *
 * With TDFEED_CERT, TDFEED_KEY and TDFEED_CA in the environment it speaks
 * TLS with that client certificate (the listener without --insecure);
 * TDFEED_ID (hex) is the recording id of the HELLO (default 1, and 3 for
 * resume-unknown).  TDFEED_SRC=ADDR connects from that IPv4 address (with
 * --insecure the listener's identity is the address: 127.1.0.7 is one).
 *
 * With TDFEED_HCACHE=1 it speaks version 4 when the listener does: it
 * offers the sections 16 to 20 by hash and sends those the listener has
 * as SECTION_REF (the header cache); TDFEED_HCACHE=lie offers the true
 * hashes but sends KALLSYMS with its last byte changed (the listener
 * must not keep it).  At the end it prints "tdfeed: sent N bytes, R
 * sections by reference" to stderr.  Mode resume-replay resumes recording
 * TDFEED_ID and sends the whole good stream again from the offset the
 * listener names, with the sections whose bit is 1 in TDFEED_REFS (five
 * digits, sections 16 to 20) as SECTION_REF, as a "cut" feed with the
 * header cache sent them.
 */
#include <errno.h>
#include <stdbool.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "buf.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "tls.h"

static int fd = -1;
static SSL_CTX *ctx;
static SSL *ssl;
static struct td_buf out;
static struct td_buf in;	/* what the listener sent, not yet taken */
static uint64_t sent;		/* bytes sent */
static bool hold;		/* resume-replay: gather the whole stream */

/* Send or receive on the connection, through TLS when there is one. */
static ssize_t
feed_send(const void *p, size_t n)
{
	int w;

	if (ssl == NULL)
		return send(fd, p, n, MSG_NOSIGNAL);
	w = SSL_write(ssl, p, (int)n);
	return w > 0 ? w : -1;
}

static ssize_t
feed_recv(void *p, size_t n)
{
	int r;

	if (ssl == NULL)
		return recv(fd, p, n, 0);
	r = SSL_read(ssl, p, (int)n);
	return r > 0 ? r : -1;
}

/* TLS with the certificate of the environment, if it names one. */
static int
feed_tls(const char *host)
{
	const char *cert = getenv("TDFEED_CERT");
	char err[512] = "the handshake failed";

	if (cert == NULL)
		return 0;
	ctx = td_tls_client_ctx(cert, getenv("TDFEED_KEY"),
	    getenv("TDFEED_CA"), err, sizeof err);
	if (ctx == NULL || (ssl = SSL_new(ctx)) == NULL ||
	    td_tls_client_prepare(ssl, host, err, sizeof err) == -1 ||
	    SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1) {
		fprintf(stderr, "tdfeed: TLS: %s\n", err);
		return -1;
	}
	return 0;
}

static void
flush_out(void)
{
	size_t off = 0;
	ssize_t w;

	if (hold)
		return;
	while (off < out.len) {
		w = feed_send(out.data + off, out.len - off);
		if (w <= 0)
			break;
		off += w;
		sent += w;
	}
	td_buf_reset(&out);
}

static int
dial(const char *host, const char *port)
{
	struct addrinfo hints, *res;
	int s;

	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	s = socket(res->ai_family, SOCK_STREAM, 0);
	if (s != -1 && getenv("TDFEED_SRC") != NULL) {
		/* from another loopback address: another --insecure identity */
		struct sockaddr_in sin;

		memset(&sin, 0, sizeof sin);
		sin.sin_family = AF_INET;
		if (inet_pton(AF_INET, getenv("TDFEED_SRC"),
		    &sin.sin_addr) != 1 ||
		    bind(s, (struct sockaddr *)&sin, sizeof sin) == -1) {
			close(s);
			s = -1;
		}
	}
	if (s == -1 || connect(s, res->ai_addr, res->ai_addrlen) == -1) {
		freeaddrinfo(res);
		return -1;
	}
	freeaddrinfo(res);
	return s;
}

/*
 * The next frame from the listener into f (valid until next_frame() is
 * called again); 0, or -1 when the connection ends or is garbage.
 */
static int
next_frame(struct td_frame *f)
{
	static size_t taken;
	uint8_t buf[4096];
	ssize_t r;
	int pr;

	if (taken > 0) {
		memmove(in.data, in.data + taken, in.len - taken);
		in.len -= taken;
		taken = 0;
	}
	for (;;) {
		if ((pr = td_frame_parse(in.data, in.len, f)) == 1) {
			taken = f->total;
			return 0;
		}
		if (pr == -1 || (r = feed_recv(buf, sizeof buf)) <= 0)
			return -1;
		td_buf_add(&in, buf, r);
	}
}

/* The references of sections 16 to 20 of r. */
static void
feed_hash(struct td_read *r, const enum td_opt *sections,
    struct td_section_ref *refs)
{
	struct td_buf b;
	unsigned int len;
	int i;

	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (i = 0; i < 5; i++) {
		td_buf_reset(&b);
		td_read_section(r, sections[i], &b);
		refs[i].id = sections[i];
		refs[i].length = b.len;
		EVP_Digest(b.data, b.len, refs[i].sha, &len, EVP_sha256(),
		    NULL);
	}
	td_buf_free(&b);
}

/*
 * Resume recording h's (resume-replay): the whole stream is gathered in
 * out and sent from the listener's offset.  -1 when it did not resume.
 */
static int
feed_resume(struct td_read *r, struct td_hello *h,
    const enum td_opt *sections, struct td_section_ref *refs,
    uint8_t *have, uint64_t *offset)
{
	const char *bits = getenv("TDFEED_REFS");
	struct td_welcome w;
	struct td_frame f;
	int i;

	h->flags |= TD_HELLO_RESUME;
	h->version_max = TD_PROTO_VERSION;
	td_msg_pack_hello(&out, h);
	flush_out();
	if (next_frame(&f) == -1 || td_msg_unpack_welcome(&f, &w) == -1 ||
	    !(w.flags & TD_WELCOME_RESUMED))
		return -1;
	*offset = w.resume_offset;
	feed_hash(r, sections, refs);
	for (i = 0; i < 5; i++)
		have[i] = bits != NULL && bits[i] == '1';
	hold = true;
	return 0;
}

/*
 * The header cache: after HELLO (version 3 to 4), the WELCOME; with
 * version 4, offer sections 16 to 20 of r and read which the listener
 * has (have[i] for sections[i]).  0, or -1 when the listener said no.
 */
static int
feed_offer(struct td_read *r, const enum td_opt *sections,
    struct td_section_ref *refs, uint8_t *have)
{
	struct td_section_offer o;
	struct td_section_have hv;
	struct td_welcome w;
	struct td_frame f;
	int i;

	flush_out();
	if (next_frame(&f) == -1 || td_msg_unpack_welcome(&f, &w) == -1)
		return -1;
	memset(have, 0, 5);
	if (w.version < 4)
		return 0;
	feed_hash(r, sections, refs);
	memset(&o, 0, sizeof o);
	for (i = 0; i < 5; i++)
		o.ref[o.count++] = refs[i];
	td_msg_pack_section_offer(&out, &o);
	flush_out();
	if (next_frame(&f) == -1 || td_msg_unpack_section_have(&f, &hv) == -1 ||
	    hv.count != o.count)
		return -1;
	memcpy(have, hv.have, 5);
	return 0;
}

/* Wait for the listener's answer: 'D' for DONE, 'E' for ERROR, 'C' closed. */
static int
answer(void)
{
	struct td_frame f;

	while (next_frame(&f) == 0)
		if (f.type == TD_MSG_DONE || f.type == TD_MSG_ERROR)
			return f.type == TD_MSG_DONE ? 'D' : 'E';
	return 'C';
}

/* Count pages (for END). */
static int
count_cb(void *arg, const void *p, size_t len)
{
	(*(uint64_t *)arg)++;
	return 0;
}

struct feed {
	int		 cpu;
	uint64_t	 seq;
	size_t		 page_size;
};

static int
feed_page(void *arg, const void *page, size_t len)
{
	struct feed *fd_ = arg;

	td_msg_pack_pages_head(&out, fd_->cpu, 1, fd_->seq++, fd_->page_size);
	td_buf_add(&out, page, len);
	if (out.len > 256 * 1024)
		flush_out();
	return 0;
}

int
main(int argc, char **argv)
{
	static const enum td_opt sections[] = {
		TD_OPT_HEADER_INFO, TD_OPT_FTRACE_EVENTS, TD_OPT_EVENT_FORMATS,
		TD_OPT_KALLSYMS, TD_OPT_PRINTK, TD_OPT_CMDLINES,
	};
	struct td_section_ref refs[5];
	const char *hcache = getenv("TDFEED_HCACHE");
	uint8_t have[5] = { 0 };
	unsigned int nref = 0;
	uint64_t resume_at = 0;
	struct td_hello h;
	struct td_read *r;
	struct td_buf b;
	struct td_end *e;
	struct feed fe;
	uint8_t *zero = NULL;
	int rc;
	const char *mode;
	size_t i, k;
	int cpu, a;

	if (argc < 5) {
		fprintf(stderr, "usage: tdfeed HOST PORT FILE MODE [NAME]\n");
		return 2;
	}
	mode = argv[4];
	if ((r = td_read_open(argv[3])) == NULL) {
		fprintf(stderr, "tdfeed: cannot read '%s': %s\n", argv[3],
		    strerror(errno));
		return 2;
	}
	if ((fd = dial(argv[1], argv[2])) == -1) {
		fprintf(stderr, "tdfeed: cannot connect\n");
		td_read_close(r);
		return 2;
	}
	if (feed_tls(argv[1]) == -1) {
		td_read_close(r);
		return 2;
	}
	td_buf_init(&out, 64 * 1024 * 1024);
	td_buf_init(&in, 1 << 20);
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	if (strcmp(mode, "garbage") == 0) {
		td_buf_add(&out, "GET / HTTP/1.0\r\n\r\n", 18);
		flush_out();
		rc = answer() == 'D' ? 1 : 0;
		goto out;
	}
	if (strcmp(mode, "early-big") == 0) {
		/* only the header of a 1 MiB PAGES frame: refused at once */
		uint8_t hdr[8] = { 0x00, 0x10, 0, 0, 0, TD_MSG_PAGES, 0, 0 };

		td_buf_add(&out, hdr, sizeof hdr);
		flush_out();
		rc = answer() == 'D' ? 1 : 0;
		goto out;
	}
	if (strcmp(mode, "early-pages") == 0) {
		uint8_t page[4096] = { 0 };

		td_msg_pack_pages_head(&out, 0, 1, 0, sizeof page);
		td_buf_add(&out, page, sizeof page);
		flush_out();
		rc = answer() == 'D' ? 1 : 0;
		goto out;
	}
	memset(&h, 0, sizeof h);
	h.version_min = h.version_max = TD_PROTO_VERSION_MIN;
	h.ncpus = td_read_ncpus(r);
	h.page_size = td_read_page_size(r);
	h.long_size = td_read_long_size(r);
	h.commit_size = 8;
	h.recording_id = getenv("TDFEED_ID") ?
	    strtoull(getenv("TDFEED_ID"), NULL, 16) : 1;
	h.trace_id = 2;
	snprintf(h.name, sizeof h.name, "%s", argc > 5 ? argv[5] : mode);
	snprintf(h.clock, sizeof h.clock, "%s", td_read_clock(r)[0] ?
	    td_read_clock(r) : "local");
	if (strncmp(mode, "resume-", 7) == 0 &&
	    strcmp(mode, "resume-replay") != 0) {
		h.flags |= TD_HELLO_RESUME;
		if (strcmp(mode, "resume-unknown") == 0 &&
		    getenv("TDFEED_ID") == NULL)
			h.recording_id = 3;
		td_msg_pack_hello(&out, &h);
		flush_out();
		a = answer();
		rc = (a == 'D') == (strcmp(mode, "resume-done") == 0) ? 0 : 1;
		goto out;
	}
	if (hcache != NULL && hcache[0] == '\0')
		hcache = NULL;	/* TDFEED_HCACHE= */
	if (hcache != NULL)
		h.version_max = TD_PROTO_VERSION;
	if (strcmp(mode, "resume-replay") == 0) {
		if (feed_resume(r, &h, sections, refs, have, &resume_at) ==
		    -1) {
			fprintf(stderr, "tdfeed: the listener did not "
			    "resume\n");
			rc = 1;
			goto out;
		}
	} else
		td_msg_pack_hello(&out, &h);
	if (strcmp(mode, "hello-only") == 0) {
		/* an agent that gave up before the WELCOME came */
		flush_out();
		rc = 0;
		goto out;
	}
	if (strcmp(mode, "hello-twice") == 0)
		td_msg_pack_hello(&out, &h);
	if (hcache != NULL && !hold &&
	    feed_offer(r, sections, refs, have) == -1) {
		rc = answer() == 'D' ? 1 : 0;
		goto out;
	}
	for (i = 0; i < sizeof sections / sizeof *sections; i++) {
		if (i < 5 && have[i]) {
			td_msg_pack_section_ref(&out, &refs[i]);
			nref++;
			continue;
		}
		td_buf_reset(&b);
		td_read_section(r, sections[i], &b);
		if (hcache != NULL && strcmp(hcache, "lie") == 0 &&
		    sections[i] == TD_OPT_KALLSYMS && b.len > 0)
			b.data[b.len - 1] ^= 1;
		if (strcmp(mode, "bad-section") == 0 && i == 2) {
			td_msg_pack_section(&out, TD_OPT_HEADER_INFO);
			break;
		}
		td_msg_pack_section(&out, sections[i]);
		for (k = 0; k < b.len; k += TD_MAX_FRAME)
			td_msg_pack_section_data(&out, b.data + k,
			    b.len - k > TD_MAX_FRAME ? TD_MAX_FRAME : b.len - k);
		td_msg_pack_section_end(&out);
	}
	flush_out();
	if (strcmp(mode, "oversize") == 0) {
		/* a PAGES header claiming 64 MiB */
		uint8_t hdr[8] = { 0x04, 0, 0, 0, 0, TD_MSG_PAGES, 0, 0 };

		td_buf_add(&out, hdr, sizeof hdr);
		flush_out();
		rc = answer() == 'D' ? 1 : 0;
		goto out;
	}
	fe.page_size = h.page_size;
	zero = calloc(1, h.page_size);
	for (cpu = 0; cpu < (int)h.ncpus; cpu++) {
		fe.cpu = cpu;
		fe.seq = 0;
		td_read_cpu_pages(r, cpu, feed_page, &fe);
		if (strcmp(mode, "bad-cpu") == 0) {
			fe.cpu = h.ncpus;
			feed_page(&fe, zero, h.page_size);
		}
		if (strcmp(mode, "seq-gap") == 0 && cpu == 0) {
			fe.seq += 5;
			feed_page(&fe, zero, h.page_size);
		}
	}
	if (strcmp(mode, "truncated") == 0) {
		/* half of a good frame (the last CPU's next pages), then
		   hang up */
		td_msg_pack_pages_head(&out, fe.cpu, 4, fe.seq, h.page_size);
		td_buf_add_zero(&out, h.page_size);
		flush_out();
		shutdown(fd, SHUT_WR);
		rc = answer() == 'D' ? 1 : 0;
		goto out;
	}
	if (strcmp(mode, "idle") == 0) {
		flush_out();
		rc = answer() == 'D' ? 1 : 0;
		goto out;
	}
	if (strcmp(mode, "cut") == 0) {
		flush_out();
		shutdown(fd, SHUT_WR);
		rc = answer() == 'D' ? 1 : 0;
		goto out;
	}
	e = calloc(1, sizeof *e);
	e->ncpus = h.ncpus;
	for (cpu = 0; cpu < (int)h.ncpus; cpu++)
		td_read_cpu_pages(r, cpu, count_cb, &e->pages[cpu]);
	if (strcmp(mode, "end-mismatch") == 0)
		e->pages[0]++;
	if (strcmp(mode, "bad-samples") == 0) {
		/* a bound past TD_MAX_TSYNC_BOUND, a scaling, a fraction */
		struct td_tsync_sample t = { .round = 1, .probes = 1,
		    .ts = 1000, .scaling = 1, .bound = 1000, .rtt = 2000 };

		t.bound = TD_MAX_TSYNC_BOUND + 1;
		td_msg_pack_tsync_sample(&out, &t);
		t.bound = 1000;
		t.ts++;
		t.scaling = 2;
		td_msg_pack_tsync_sample(&out, &t);
		t.ts++;
		t.scaling = 1;
		t.frac = 1;
		td_msg_pack_tsync_sample(&out, &t);
	}
	td_msg_pack_end(&out, e);
	free(e);
	if (hold) {
		/* the stream from the listener's offset */
		hold = false;
		if (resume_at > out.len) {
			fprintf(stderr, "tdfeed: resume offset %llu past the "
			    "stream's %zu bytes\n",
			    (unsigned long long)resume_at, out.len);
			rc = 1;
			goto out;
		}
		memmove(out.data, out.data + resume_at, out.len - resume_at);
		out.len -= resume_at;
		fprintf(stderr, "tdfeed: resumed at offset %llu\n",
		    (unsigned long long)resume_at);
	}
	flush_out();
	a = answer();
	if (strcmp(mode, "good") == 0 || strcmp(mode, "bad-samples") == 0 ||
	    strcmp(mode, "resume-replay") == 0)
		rc = a == 'D' ? 0 : 1;
	else
		rc = a == 'D' ? 1 : 0;
out:
	fprintf(stderr, "tdfeed: sent %llu bytes, %u sections by reference\n",
	    (unsigned long long)sent, nref);
	free(zero);
	td_buf_free(&b);
	td_buf_free(&out);
	td_buf_free(&in);
	td_read_close(r);
	if (ssl != NULL) {
		SSL_shutdown(ssl);
		SSL_free(ssl);
	}
	SSL_CTX_free(ctx);
	close(fd);
	return rc;
}

