/*
 * tdrecode.c: a test tool that exercises tracedock's own reader and writer
 * on real recordings, for the codecs no installed tool reads (zlib v7).
 *
 *	tdrecode IN OUT VERSION CODEC	rewrite IN (read with shared/tdread)
 *					as OUT (written with shared/tdfile)
 *	tdrecode -d IN			print a digest of every metadata
 *					section and of each CPU's pages
 *	tdrecode -z CODEC IN		compress each CPU's pages of IN in
 *					batches of TD_CHUNK_PAGES, as tdagent
 *					--wire-compression CODEC does at full
 *					speed (one td_codec_compress call per
 *					batch, the codec's default level),
 *					and print the page bytes, the
 *					compressed bytes and their ratio
 *
 * Two files with the same digest hold byte-identical decompressed sections
 * and pages, whatever their codec or version.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdread.h"

static const enum td_opt sections[] = {
	TD_OPT_HEADER_INFO, TD_OPT_FTRACE_EVENTS, TD_OPT_EVENT_FORMATS,
	TD_OPT_KALLSYMS, TD_OPT_PRINTK, TD_OPT_CMDLINES,
};
static const enum td_opt options[] = {
	TD_OPT_DATE, TD_OPT_CPUSTAT, TD_OPT_TRACECLOCK, TD_OPT_UNAME,
	TD_OPT_VERSION, TD_OPT_TRACEID, TD_OPT_TIME_SHIFT, TD_OPT_TSC2NSEC,
};

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n--)
		h = (h ^ *c++) * 1099511628211ULL;
	return h;
}

struct digest {
	uint64_t	hash;
	uint64_t	pages;
};

static int
digest_page(void *arg, const void *page, size_t len)
{
	struct digest *d = arg;

	d->hash = fnv(d->hash, page, len);
	d->pages++;
	return 0;
}

static int
copy_page(void *arg, const void *page, size_t len)
{
	void **a = arg;

	return td_file_cpu_page(a[0], *(int *)a[1], page, len);
}

static int
digest(const char *path)
{
	struct td_read *r;
	struct td_buf b;
	struct digest d;
	size_t i;
	int cpu;

	if ((r = td_read_open(path)) == NULL) {
		fprintf(stderr, "tdrecode: cannot read '%s': %s\n", path,
		    strerror(errno));
		return 1;
	}
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (i = 0; i < sizeof sections / sizeof *sections; i++) {
		td_buf_reset(&b);
		if (td_read_section(r, sections[i], &b) == -1) {
			fprintf(stderr, "tdrecode: section %d: %s\n",
			    sections[i], strerror(errno));
			return 1;
		}
		printf("section %d %zu %016" PRIx64 "\n", sections[i], b.len,
		    fnv(14695981039346656037ULL, b.data, b.len));
	}
	for (cpu = 0; cpu < td_read_ncpus(r); cpu++) {
		d.hash = 14695981039346656037ULL;
		d.pages = 0;
		if (td_read_cpu_pages(r, cpu, digest_page, &d) == -1) {
			fprintf(stderr, "tdrecode: cpu %d: %s\n", cpu,
			    strerror(errno));
			return 1;
		}
		printf("cpu%d %" PRIu64 " %016" PRIx64 "\n", cpu, d.pages,
		    d.hash);
	}
	td_buf_free(&b);
	td_read_close(r);
	return 0;
}

/* Pages of one CPU gathered into wire batches and compressed. */
struct wire {
	struct td_codec	*codec;
	unsigned char	*batch;
	size_t		 len;		/* bytes in batch */
	uint32_t	 count;		/* pages in batch */
	uint32_t	 page_size;
	unsigned char	*z;
	size_t		 zcap;
	uint64_t	 raw;
	uint64_t	 sent;
};

static int
wire_flush(struct wire *w)
{
	ssize_t z;

	if (w->count == 0)
		return 0;
	/* tdagent sends whole pages: a short last page is padded */
	z = td_codec_compress(w->codec, w->batch,
	    (size_t)w->count * w->page_size, w->z, w->zcap);
	if (z <= 0)
		return -1;
	w->raw += (uint64_t)w->count * w->page_size;
	w->sent += (uint64_t)z;
	w->count = 0;
	w->len = 0;
	return 0;
}

static int
wire_page(void *arg, const void *page, size_t len)
{
	struct wire *w = arg;

	if (len > w->page_size) {
		errno = EINVAL;
		return -1;
	}
	memcpy(w->batch + w->len, page, len);
	memset(w->batch + w->len + len, 0, w->page_size - len);
	w->len += w->page_size;
	if (++w->count == TD_CHUNK_PAGES)
		return wire_flush(w);
	return 0;
}

static int
wire(const char *codec, const char *in)
{
	enum td_codec_id id;
	struct td_read *r;
	struct wire w;
	int cpu;

	if (td_codec_parse(codec, &id) == -1 || id == TD_CODEC_NONE) {
		fprintf(stderr, "tdrecode: wire codec: zstd or zlib\n");
		return 2;
	}
	if ((r = td_read_open(in)) == NULL) {
		fprintf(stderr, "tdrecode: cannot read '%s': %s\n", in,
		    strerror(errno));
		return 1;
	}
	memset(&w, 0, sizeof w);
	w.page_size = td_read_page_size(r);
	if ((w.codec = td_codec_new(id, 0)) == NULL)
		return 1;
	w.batch = malloc((size_t)TD_CHUNK_PAGES * w.page_size);
	w.zcap = td_codec_bound(w.codec, (size_t)TD_CHUNK_PAGES * w.page_size);
	w.z = malloc(w.zcap);
	if (w.batch == NULL || w.z == NULL)
		return 1;
	for (cpu = 0; cpu < td_read_ncpus(r); cpu++) {
		/* a batch holds the pages of one CPU */
		if (td_read_cpu_pages(r, cpu, wire_page, &w) == -1 ||
		    wire_flush(&w) == -1) {
			fprintf(stderr, "tdrecode: cpu %d: %s\n", cpu,
			    strerror(errno));
			return 1;
		}
	}
	printf("pages %" PRIu64 " sent %" PRIu64 " ratio %.3f\n", w.raw,
	    w.sent, w.raw ? (double)w.sent / (double)w.raw : 0.0);
	free(w.batch);
	free(w.z);
	td_codec_free(w.codec);
	td_read_close(r);
	return 0;
}

static int
recode(const char *in, const char *out, int version, const char *codec)
{
	struct td_file_params p;
	struct td_read *r;
	struct td_file *f;
	struct td_buf b;
	void *arg[2];
	size_t i;
	int cpu, nth;

	if ((r = td_read_open(in)) == NULL) {
		fprintf(stderr, "tdrecode: cannot read '%s': %s\n", in,
		    strerror(errno));
		return 1;
	}
	memset(&p, 0, sizeof p);
	p.version = version;
	if (td_codec_parse(codec, &p.codec) == -1)
		return 2;
	p.page_size = td_read_page_size(r);
	p.long_size = td_read_long_size(r);
	p.ncpus = td_read_ncpus(r);
	p.clock = td_read_clock(r)[0] ? td_read_clock(r) : "local";
	if ((f = td_file_create(out, &p)) == NULL) {
		fprintf(stderr, "tdrecode: cannot create '%s': %s\n", out,
		    strerror(errno));
		return 1;
	}
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (i = 0; i < sizeof sections / sizeof *sections; i++) {
		td_buf_reset(&b);
		if (td_read_section(r, sections[i], &b) == -1 ||
		    td_file_section_add(f, sections[i], b.data, b.len) == -1)
			goto fail;
	}
	for (i = 0; i < sizeof options / sizeof *options; i++) {
		for (nth = 0;; nth++) {
			td_buf_reset(&b);
			if (td_read_option(r, options[i], nth, &b) == -1)
				break;
			if (td_file_add_option(f, options[i], b.data,
			    b.len) == -1)
				goto fail;
		}
	}
	arg[0] = f;
	for (cpu = 0; cpu < p.ncpus; cpu++) {
		arg[1] = &cpu;
		if (td_read_cpu_pages(r, cpu, copy_page, arg) == -1)
			goto fail;
	}
	if (td_file_finish(f) == -1)
		goto fail;
	td_file_free(f);
	td_buf_free(&b);
	td_read_close(r);
	return 0;
fail:
	fprintf(stderr, "tdrecode: '%s' -> '%s': %s\n", in, out,
	    strerror(errno));
	td_file_free(f);
	return 1;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "-d") == 0)
		return digest(argv[2]);
	if (argc == 4 && strcmp(argv[1], "-z") == 0)
		return wire(argv[2], argv[3]);
	if (argc == 5)
		return recode(argv[1], argv[2], atoi(argv[3]), argv[4]);
	fprintf(stderr, "usage: tdrecode IN OUT VERSION CODEC | tdrecode -d IN | "
	    "tdrecode -z CODEC IN\n");
	return 2;
}
