/*
 * tdload-file.c: the recording tests/tdload replays, read once (see
 * tdload.h): its metadata sections, pages and options, framed as tdagent
 * sends them and shared by every connection.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "tdlimits.h"
#include "tdload.h"
#include "tdproto.h"
#include "tdread.h"
#include "xmalloc.h"

struct load_cpu {
	uint32_t	 page_size;
	struct td_buf	 pages;
};

static int
load_page_cb(void *arg, const void *page, size_t len)
{
	struct load_cpu *lc = arg;

	if (td_buf_add(&lc->pages, page, len) == -1 ||
	    td_buf_add_zero(&lc->pages, lc->page_size - len) == -1)
		return -1;
	return 0;
}

static int
load_frame_section(struct td_read *r, struct td_buf *out, enum td_opt id)
{
	struct td_buf b;
	size_t k;

	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	if (td_read_section(r, id, &b) == -1) {
		td_buf_free(&b);
		return -1;
	}
	td_msg_pack_section(out, id);
	for (k = 0; k < b.len; k += TD_MAX_FRAME)
		td_msg_pack_section_data(out, b.data + k, b.len - k >
		    TD_MAX_FRAME ? TD_MAX_FRAME : b.len - k);
	td_msg_pack_section_end(out);
	td_buf_free(&b);
	return 0;
}

int
load_file_read(const char *path, struct load_file *lf)
{
	static const enum td_opt head[] = { TD_OPT_HEADER_INFO,
	    TD_OPT_FTRACE_EVENTS, TD_OPT_EVENT_FORMATS, TD_OPT_KALLSYMS,
	    TD_OPT_PRINTK };
	static const enum td_opt opts[] = { TD_OPT_TSC2NSEC,
	    TD_OPT_TRACECLOCK, TD_OPT_UNAME, TD_OPT_VERSION, TD_OPT_TRACEID,
	    TD_OPT_CPUSTAT };
	struct load_cpu lc;
	struct td_read *r;
	struct td_end *e;
	struct td_buf b;
	size_t i;
	int cpu, nth;

	memset(lf, 0, sizeof *lf);
	if ((r = td_read_open(path)) == NULL)
		return -1;
	lf->ncpus = td_read_ncpus(r);
	lf->page_size = td_read_page_size(r);
	lf->hello.version_min = lf->hello.version_max = TD_PROTO_VERSION_MIN;
	lf->hello.ncpus = lf->ncpus;
	lf->hello.page_size = lf->page_size;
	lf->hello.long_size = td_read_long_size(r);
	lf->hello.commit_size = 8;
	lf->hello.trace_id = 2;
	snprintf(lf->hello.clock, sizeof lf->hello.clock, "%s",
	    td_read_clock(r)[0] ? td_read_clock(r) : "local");
	td_buf_init(&lf->head, TD_MAX_SECTION_SIZE);
	td_buf_init(&lf->tail, TD_MAX_SECTION_SIZE);
	for (i = 0; i < sizeof head / sizeof *head; i++)
		if (load_frame_section(r, &lf->head, head[i]) == -1)
			goto fail;
	lf->pages = xcalloc(lf->ncpus, sizeof *lf->pages);
	lf->npages = xcalloc(lf->ncpus, sizeof *lf->npages);
	e = xcalloc(1, sizeof *e);
	e->ncpus = lf->ncpus;
	for (cpu = 0; cpu < lf->ncpus; cpu++) {
		lc.page_size = lf->page_size;
		td_buf_init(&lc.pages, (size_t)1 << 40);
		if (td_read_cpu_pages(r, cpu, load_page_cb, &lc) == -1) {
			free(e);
			goto fail;
		}
		lf->pages[cpu] = lc.pages.data;	/* kept to the end */
		lf->npages[cpu] = lc.pages.len / lf->page_size;
		e->pages[cpu] = lf->npages[cpu];
	}
	if (load_frame_section(r, &lf->tail, TD_OPT_CMDLINES) == -1) {
		free(e);
		goto fail;
	}
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (i = 0; i < sizeof opts / sizeof *opts; i++)
		for (nth = 0; td_read_option(r, opts[i], nth, &b) == 0; nth++)
			td_msg_pack_option(&lf->tail, opts[i], b.data, b.len);
	td_buf_free(&b);
	td_msg_pack_end(&lf->tail, e);
	free(e);
	td_read_close(r);
	return 0;
fail:
	td_read_close(r);
	return -1;
}

void
load_file_free(struct load_file *lf)
{
	int i;

	for (i = 0; i < lf->ncpus && lf->pages != NULL; i++)
		free(lf->pages[i]);
	free(lf->pages);
	free(lf->npages);
	td_buf_free(&lf->head);
	td_buf_free(&lf->tail);
}
