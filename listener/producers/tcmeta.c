/*
 * tcmeta.c: a trace-cmd client's trace.dat header into a recording (see
 * tcmeta.h).
 *
 * The header is parsed by shared/tdread, the reader every foreign producer
 * goes through, never by a second parser: whatever passes it has every
 * offset and length checked.  The CPU count (v7: CPUCOUNT, v6: the header)
 * and the page size (the initial format and header_page's own layout)
 * must agree with TINIT: the data sockets were made for those.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "recording.h"
#include "recparams.h"
#include "tcmeta.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdread.h"
#include "xmalloc.h"
#include "banned.h"

/* One client's header, open. */
struct tcmeta {
	struct td_read	*rd;
	int		 commit_size;
	char		 desc[32];
	char		 repaired[160];	/* what tcmeta_feed() put right */
};

/* The "NAME; offset:N; size:N;" field of header_page text. */
static int
tcmeta_field(const char *t, const char *name, unsigned *off, unsigned *size)
{
	const char *p = strstr(t, name);

	if (p == NULL || sscanf(p + strlen(name),
	    ";%*[ \t]offset:%u;%*[ \t]size:%u;", off, size) != 2)
		return -1;
	return 0;
}

/*
 * header_page's layout out of the HEADER_INFO section: the commit field's
 * size, and the page size it implies.
 */
static int
tcmeta_geometry(struct tcmeta *m, uint32_t *page_size)
{
	struct td_buf b;
	unsigned doff, dsize, coff, csize;
	uint64_t len;
	char *text;
	int ret = -1;

	td_buf_init(&b, TD_TC_MAX_HEADER_INFO);
	if (td_read_section(m->rd, TD_OPT_HEADER_INFO, &b) == -1)
		goto out;
	/* "header_page\0", u64 size, text */
	if (b.len < 20 || memcmp(b.data, "header_page", 12) != 0)
		goto out;
	memcpy(&len, b.data + 12, 8);
	if (len > b.len - 20)
		goto out;
	if (len > 4096)
		len = 4096;	/* the kernel's is some 400 bytes */
	text = xmalloc(len + 1);
	memcpy(text, b.data + 20, len);
	text[len] = '\0';
	if (tcmeta_field(text, "char data", &doff, &dsize) == 0 &&
	    tcmeta_field(text, "local_t commit", &coff, &csize) == 0 &&
	    (csize == 4 || csize == 8) && doff <= TD_MAX_PAGE_SIZE &&
	    dsize <= TD_MAX_PAGE_SIZE) {
		m->commit_size = (int)csize;
		*page_size = doff + dsize;
		ret = 0;
	}
	free(text);
out:
	td_buf_free(&b);
	return ret;
}

struct tcmeta *
tcmeta_read(int fd, uint32_t ncpus, uint32_t page_size, char *err,
    size_t errlen)
{
	struct tcmeta *m = xcalloc(1, sizeof *m);
	uint32_t hp;

	if ((m->rd = td_read_open_header(fd)) == NULL) {
		snprintf(err, errlen, "its metadata is not a trace.dat header "
		    "(%s)", errno == EBADMSG ? "malformed" : strerror(errno));
		goto out_free;
	}
	if ((uint32_t)td_read_ncpus(m->rd) != ncpus) {
		snprintf(err, errlen, "its metadata says %d CPUs, its TINIT "
		    "said %u", td_read_ncpus(m->rd), ncpus);
		goto out_free;
	}
	if (td_read_page_size(m->rd) != page_size) {
		snprintf(err, errlen, "its metadata says %u-byte pages, its "
		    "TINIT said %u", td_read_page_size(m->rd), page_size);
		goto out_free;
	}
	if (tcmeta_geometry(m, &hp) == -1) {
		snprintf(err, errlen, "its metadata has no readable "
		    "header_page");
		goto out_free;
	}
	if (hp != page_size) {
		snprintf(err, errlen, "its header_page describes %u-byte "
		    "pages, its TINIT said %u", hp, page_size);
		goto out_free;
	}
	snprintf(m->desc, sizeof m->desc, "v%d %s", td_read_version(m->rd),
	    td_codec_name(td_read_codec(m->rd)));
	return m;
out_free:
	tcmeta_free(m);
	return NULL;
}

/* The clock name of the TRACECLOCK option ("[local] global"), or "". */
static void
tcmeta_clock(struct tcmeta *m, char *clock, size_t len)
{
	struct td_buf b;
	const char *s, *e;
	size_t n;

	clock[0] = '\0';
	td_buf_init(&b, TD_MAX_OPTION_SIZE);
	if (td_read_option(m->rd, TD_OPT_TRACECLOCK, 0, &b) == 0 &&
	    td_buf_add(&b, "", 1) == 0 &&
	    (s = memchr(b.data, '[', b.len)) != NULL &&
	    (e = memchr(s, ']', b.len - (size_t)(s - (char *)b.data))) !=
	    NULL) {
		n = (size_t)(e - s - 1);
		if (n > 0 && n < len) {
			memcpy(clock, s + 1, n);
			clock[n] = '\0';
		}
	}
	td_buf_free(&b);
}

void
tcmeta_params(struct tcmeta *m, struct recording_params *p)
{
	uint16_t one = 1;
	const char *c = td_read_clock(m->rd);

	if (c[0] != '\0')
		snprintf(p->clock, sizeof p->clock, "%s", c);
	else
		tcmeta_clock(m, p->clock, sizeof p->clock);
	if (p->clock[0] == '\0')
		snprintf(p->clock, sizeof p->clock, "local");
	p->long_size = (uint8_t)td_read_long_size(m->rd);
	p->commit_size = (uint8_t)m->commit_size;
	/* tdread gives numbers in host order; pages stay as sent */
	p->big_endian = *(uint8_t *)&one == 1 ? 0 : 1;
}

const char *
tcmeta_describe(const struct tcmeta *m)
{
	return m->desc;
}

/* What tcmeta_feed()'s option walk needs. */
struct tcmeta_feed {
	struct recording	*r;
	char			*err;
	size_t			 errlen;
};

static int
tcmeta_option_cb(void *arg, uint16_t id, const void *p, size_t n)
{
	struct tcmeta_feed *f = arg;

	/* the writer makes these itself */
	if (id == TD_OPT_DONE || id == TD_OPT_BUFFER ||
	    id == TD_OPT_CPUCOUNT || (id >= TD_OPT_STRINGS &&
	    id <= TD_OPT_CMDLINES) || id == TD_OPT_BUFFER_TEXT)
		return 0;
	if (recording_option(f->r, id, p, n) == -1) {
		snprintf(f->err, f->errlen, "%s", recording_why(f->r));
		return -1;
	}
	return 0;
}

/*
 * trace-cmd writes a file's size, then copies the file: saved_cmdlines
 * (and kallsyms, printk_formats) may change in between (a new task), and
 * trace-cmd 3.1.6 then warns "error in size of file" and goes on, its
 * section saying one size and holding another.  trace-cmd report reads
 * such a file as empty, without a word.  The bytes are whole lines of
 * text: the size is set to what the section holds, and the log says so.
 */
static void
tcmeta_repair(struct tcmeta *m, int id, struct td_buf *b)
{
	size_t w = id == TD_OPT_CMDLINES ? 8 : 4;
	uint64_t said, held;
	uint32_t said32;

	if (b->len < w)
		return;
	held = b->len - w;
	if (w == 8)
		memcpy(&said, b->data, 8);
	else {
		memcpy(&said32, b->data, 4);
		said = said32;
	}
	if (said == held)
		return;
	snprintf(m->repaired, sizeof m->repaired, "its %s section says %"
	    PRIu64 " bytes and holds %" PRIu64 " (trace-cmd read the file "
	    "while it changed): set to %" PRIu64, id == TD_OPT_CMDLINES ?
	    "saved_cmdlines" : id == TD_OPT_KALLSYMS ? "kallsyms" :
	    "printk_formats", said, held, held);
	if (w == 8)
		memcpy(b->data, &held, 8);
	else {
		said32 = (uint32_t)held;
		memcpy(b->data, &said32, 4);
	}
}

const char *
tcmeta_repaired(const struct tcmeta *m)
{
	return m->repaired;
}

int
tcmeta_feed(struct tcmeta *m, struct recording *r, char *err, size_t errlen)
{
	struct tcmeta_feed f = { r, err, errlen };
	struct td_buf b;
	uint64_t total = 0;
	char why[160];
	int id, ret = -1;

	td_buf_init(&b, 0);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		/* what is left of TD_TC_MAX_SECTIONS, decompressed */
		td_buf_free(&b);
		td_buf_init(&b, TD_TC_MAX_SECTIONS - total);
		if (td_read_section(m->rd, id, &b) == -1) {
			if (errno == ENOBUFS)
				snprintf(err, errlen, "its metadata sections "
				    "are over %u MiB decompressed",
				    TD_TC_MAX_SECTIONS >> 20);
			else
				snprintf(err, errlen, "its metadata lacks "
				    "section %d (%s)", id, errno == ENOENT ?
				    "absent" : "malformed");
			goto out;
		}
		total += b.len;
		/* the section is memory while it is held */
		if (recording_account(r, b.len, why, sizeof why) == -1) {
			snprintf(err, errlen, "its metadata section %d (%zu "
			    "bytes decompressed) is %s", id, b.len, why);
			goto out;
		}
		if (id == TD_OPT_CMDLINES || id == TD_OPT_KALLSYMS ||
		    id == TD_OPT_PRINTK)
			tcmeta_repair(m, id, &b);
		if (recording_section_begin(r, (uint16_t)id) == -1 ||
		    recording_section_write(r, b.data, b.len) == -1 ||
		    recording_section_end(r) == -1) {
			snprintf(err, errlen, "%s", recording_why(r));
			goto out;
		}
	}
	td_buf_free(&b);
	td_buf_init(&b, 0);
	if (recording_account(r, 0, why, sizeof why) == -1) {
		snprintf(err, errlen, "%s", why);
		goto out;
	}
	err[0] = '\0';
	if (td_read_options(m->rd, tcmeta_option_cb, &f) != 0) {
		if (err[0] == '\0')
			snprintf(err, errlen, "its metadata has malformed "
			    "options");
		goto out;
	}
	ret = 0;
out:
	td_buf_free(&b);
	return ret;
}

void
tcmeta_free(struct tcmeta *m)
{
	if (m == NULL)
		return;
	td_read_close(m->rd);
	free(m);
}
