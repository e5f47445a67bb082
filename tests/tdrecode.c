/*
 * tdrecode.c: a test tool that exercises tracedock's own reader and writer
 * on real recordings, for the codecs no installed tool reads (zlib v7).
 *
 *	tdrecode IN OUT VERSION CODEC	rewrite IN (read with shared/tdread)
 *					as OUT (written with shared/tdfile)
 *	tdrecode -d IN			print a digest of every metadata
 *					section and of each CPU's pages
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
	if (argc == 5)
		return recode(argv[1], argv[2], atoi(argv[3]), argv[4]);
	fprintf(stderr, "usage: tdrecode IN OUT VERSION CODEC | tdrecode -d IN\n");
	return 2;
}
