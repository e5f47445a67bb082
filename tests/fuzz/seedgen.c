/*
 * seedgen.c: make the seed corpora of the fuzz targets (tests/fuzz/corpus/).
 *
 *	seedgen proto DIR	valid frames of every message, alone and as
 *				a stream, packed with td_msg_pack_*()
 *				(time-sync probes, replies and samples too)
 *	seedgen page DIR	synthetic ring-buffer pages: every event
 *				type, missed-event flags, 4- and 8-byte
 *				commit fields
 *	seedgen tdread DIR	tiny trace.dat files written by tdfile: v7
 *				with each codec, v6, with a few pages
 *	seedgen session DIR	whole agent streams (HELLO .. END) for v6 and
 *				each v7 codec, and cut ones; protocol v2:
 *				streams over several connections that
 *				resume (see fuzz-session.c); a host's
 *				recording that declares guests
 *	seedgen restore DIR	checkpoints of the small recording of
 *				ckrec.h: the writer's and the listener's
 *	seedgen shrink IN OUT	rewrite a real recording small: kallsyms,
 *				printk and command lines cut to a few lines,
 *				at most 2 pages per CPU, same version, codec
 *				and everything else
 *	seedgen stream IN OUT	turn a trace.dat into the frame stream an
 *				agent would send for it (a session seed)
 *	seedgen pages IN DIR N	copy the first N pages of a trace.dat into
 *				DIR as page seeds
 *
 * Synthetic content is deterministic, so running it again gives the same
 * files, byte for byte (tests/check-seeds.sh checks the committed ones):
 * no time, no random number, no path, no uninitialised byte goes into a
 * seed.  Metadata texts come from tests/data/ (header_page, header_event
 * and event formats captured from a real kernel): seedgen runs from the
 * top of the source tree, and fails elsewhere.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "compress.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "log.h"
#include "ckrec.h"
#include "fuzz.h"

#define PAGE		4096
#define SMALL_PAGE	256

static void
die(const char *what)
{
	fprintf(stderr, "seedgen: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void
save(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *fp;

	/* dir NULL: name is the path */
	snprintf(path, sizeof path, "%s%s%s", dir ? dir : "", dir ? "/" : "",
	    name);
	if ((fp = fopen(path, "wb")) == NULL)
		die(path);
	if (n != 0 && fwrite(p, 1, n, fp) != n)
		die(path);
	if (fclose(fp) != 0)
		die(path);
}

/* A page being laid out event by event (commit field of cs bytes). */
struct pb {
	uint8_t		*p;
	size_t		 size;
	int		 cs;
	size_t		 len;
};

static void
pb_init(struct pb *b, uint8_t *buf, size_t size, int cs, uint64_t ts)
{
	memset(buf, 0, size);
	memcpy(buf, &ts, 8);
	b->p = buf;
	b->size = size;
	b->cs = cs;
	b->len = 0;
}

static uint8_t *
pb_room(struct pb *b, size_t n)
{
	uint8_t *d = b->p + 8 + b->cs + b->len;

	/* keep room for a stored missed count */
	if (8 + b->cs + b->len + n + b->cs > b->size)
		return NULL;
	b->len += n;
	return d;
}

static void
pb_word(uint8_t *d, uint32_t w)
{
	memcpy(d, &w, 4);
}

/* A data event of type_len 1..28 (type_len words of payload). */
static int
pb_event(struct pb *b, unsigned int type_len, uint32_t delta)
{
	uint8_t *d = pb_room(b, 4 + 4 * (size_t)type_len);
	unsigned int i;

	if (d == NULL)
		return -1;
	pb_word(d, type_len | delta << 5);
	for (i = 0; i < 4 * type_len; i++)
		d[4 + i] = (uint8_t)(i * 7 + type_len);
	return 0;
}

/* A data event of type_len 0: array[0] holds the payload length + 4. */
static int
pb_event0(struct pb *b, uint32_t delta, size_t plen)
{
	size_t al = (plen + 3) & ~(size_t)3;
	uint8_t *d = pb_room(b, 8 + al);
	size_t i;

	if (d == NULL)
		return -1;
	pb_word(d, 0 | delta << 5);
	pb_word(d + 4, (uint32_t)(al + 4));
	for (i = 0; i < al; i++)
		d[8 + i] = (uint8_t)(i < plen ? 'a' + i % 26 : 0);
	return 0;
}

/* Time extend (30) or absolute time stamp (31). */
static int
pb_time(struct pb *b, unsigned int type, uint64_t t)
{
	uint8_t *d = pb_room(b, 8);

	if (d == NULL)
		return -1;
	pb_word(d, type | (uint32_t)(t & ((1u << 27) - 1)) << 5);
	pb_word(d + 4, (uint32_t)(t >> 27));
	return 0;
}

/* Padding (29) of len bytes; delta 0 marks the rest of the page empty. */
static int
pb_padding(struct pb *b, uint32_t delta, size_t len)
{
	uint8_t *d = pb_room(b, len);

	if (d == NULL)
		return -1;
	pb_word(d, 29 | delta << 5);
	pb_word(d + 4, (uint32_t)(len - 4));
	return 0;
}

static void
pb_finish(struct pb *b, bool missed, bool stored, uint64_t count)
{
	uint64_t commit = b->len;
	uint32_t c32;

	if (missed)
		commit |= 1ULL << 31;
	if (stored) {
		commit |= 1ULL << 30;
		memcpy(b->p + 8 + b->cs + b->len, &count, b->cs);
	}
	if (b->cs == 8)
		memcpy(b->p + 8, &commit, 8);
	else {
		c32 = (uint32_t)commit;
		memcpy(b->p + 8, &c32, 4);
	}
}

/* Page n of a CPU: a mix of events, deterministic. */
static void
make_page(uint8_t *buf, size_t size, int cs, int cpu, unsigned int n)
{
	struct pb b;
	unsigned int i;

	pb_init(&b, buf, size, cs, 1000000ULL * (n + 1) + (uint64_t)cpu);
	for (i = 0; ; i++) {
		int r;

		switch ((i + n + (unsigned int)cpu) % 7) {
		case 0:
			r = pb_event(&b, 1 + (i % 28), 100 + i);
			break;
		case 1:
			r = pb_event0(&b, 10, 120 + i % 9);
			break;
		case 2:
			r = pb_time(&b, 30, (1ULL << 30) + i);
			break;
		case 3:
			r = pb_event(&b, 3, 7);
			break;
		case 4:
			r = pb_padding(&b, 5, 12);
			break;
		case 5:
			r = pb_time(&b, 31, 123456789ULL * (i + 1));
			break;
		default:
			r = pb_event(&b, 6, (1u << 27) - 1);
			break;
		}
		if (r == -1 || i > 40)
			break;
	}
	pb_finish(&b, n % 3 == 1, n % 3 == 2, n + 5);
}

/* Metadata sections in the layout trace-cmd (and tdread v6) expects. */
struct meta {
	struct td_buf	 sect[TD_OPT_CMDLINES + 1];
};

/*
 * A metadata text of tests/data/, read from the top of the source tree
 * (mkseeds.sh and tests/check-seeds.sh run seedgen there).  There is no
 * stand-in: seeds made elsewhere from built-in texts were other bytes
 * than the committed ones, and nothing said so.
 */
static void
read_data(struct td_buf *b, const char *name)
{
	char path[256];

	snprintf(path, sizeof path, "tests/data/%s", name);
	if (td_buf_read_file(b, path) == -1)
		die(path);
}

static void
add_u32(struct td_buf *b, uint32_t v)
{
	td_buf_add_u32(b, v);
}

static void
add_item(struct td_buf *b, const struct td_buf *item)
{
	td_buf_add_u64(b, item->len);
	td_buf_add(b, item->data, item->len);
}

static void
meta_init(struct meta *m)
{
	struct td_buf t;
	const char *kallsyms = "ffffffff81000000 T _stext\n"
	    "ffffffff81001000 T do_one_initcall\n"
	    "ffffffff81002000 t fuzz_me [tracedock]\n";
	const char *printk = "0xffffffff82000000 : \"fuzz %d\\n\"\n";
	const char *cmdlines = "1 init\n42 tdagent\n";
	int i;

	for (i = 0; i <= TD_OPT_CMDLINES; i++)
		td_buf_init(&m->sect[i], TD_MAX_SECTION_SIZE);
	td_buf_init(&t, TD_MAX_SECTION_SIZE);

	/* HEADER_INFO */
	td_buf_add_str(&m->sect[TD_OPT_HEADER_INFO], "header_page");
	read_data(&t, "header_page");
	add_item(&m->sect[TD_OPT_HEADER_INFO], &t);
	td_buf_reset(&t);
	td_buf_add_str(&m->sect[TD_OPT_HEADER_INFO], "header_event");
	read_data(&t, "header_event");
	add_item(&m->sect[TD_OPT_HEADER_INFO], &t);
	td_buf_reset(&t);

	/* FTRACE_EVENTS: one format */
	add_u32(&m->sect[TD_OPT_FTRACE_EVENTS], 1);
	read_data(&t, "ftrace_print.format");
	add_item(&m->sect[TD_OPT_FTRACE_EVENTS], &t);
	td_buf_reset(&t);

	/* EVENT_FORMATS: one system, two events */
	add_u32(&m->sect[TD_OPT_EVENT_FORMATS], 1);
	td_buf_add_str(&m->sect[TD_OPT_EVENT_FORMATS], "raw_syscalls");
	add_u32(&m->sect[TD_OPT_EVENT_FORMATS], 2);
	read_data(&t, "sys_enter.format");
	add_item(&m->sect[TD_OPT_EVENT_FORMATS], &t);
	td_buf_reset(&t);
	read_data(&t, "sys_exit.format");
	add_item(&m->sect[TD_OPT_EVENT_FORMATS], &t);
	td_buf_reset(&t);

	add_u32(&m->sect[TD_OPT_KALLSYMS], (uint32_t)strlen(kallsyms));
	td_buf_add(&m->sect[TD_OPT_KALLSYMS], kallsyms, strlen(kallsyms));
	add_u32(&m->sect[TD_OPT_PRINTK], (uint32_t)strlen(printk));
	td_buf_add(&m->sect[TD_OPT_PRINTK], printk, strlen(printk));
	td_buf_add_u64(&m->sect[TD_OPT_CMDLINES], strlen(cmdlines));
	td_buf_add(&m->sect[TD_OPT_CMDLINES], cmdlines, strlen(cmdlines));
	td_buf_free(&t);
}

static void
meta_free(struct meta *m)
{
	int i;

	for (i = 0; i <= TD_OPT_CMDLINES; i++)
		td_buf_free(&m->sect[i]);
}

static const char cpustat[] = "CPU: 0\nentries: 12\noverrun: 3\n"
    "commit overrun: 0\nbytes: 4096\noldest event ts: 1.000000\n"
    "now ts: 2.000000\ndropped events: 1\nread events: 12\n";
static const char uname_text[] = "Linux fuzz 6.1.0-fuzz #1 SMP x86_64";

/* Write a small trace.dat with the writer. */
static void
write_trace(const char *path, int version, enum td_codec_id codec,
    uint32_t page_size, int ncpus, const int *pages, const char *clock)
{
	struct td_file_params p;
	struct td_file *f;
	struct meta m;
	uint8_t *page;
	int id, cpu;
	unsigned int n;

	memset(&p, 0, sizeof p);
	p.version = version;
	p.codec = codec;
	p.page_size = page_size;
	p.long_size = 8;
	p.ncpus = ncpus;
	p.clock = clock;
	if ((f = td_file_create(path, &p)) == NULL)
		die(path);
	meta_init(&m);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++)
		if (td_file_section_add(f, id, m.sect[id].data,
		    m.sect[id].len) == -1)
			die("section");
	if (td_file_add_option(f, TD_OPT_UNAME, uname_text,
	    sizeof uname_text) == -1 ||
	    td_file_add_option(f, TD_OPT_CPUSTAT, cpustat,
	    sizeof cpustat) == -1 ||
	    td_file_add_option(f, TD_OPT_TRACECLOCK, "[local] global\n",
	    16) == -1 ||
	    td_file_add_option(f, TD_OPT_VERSION, "0.1.0", 6) == -1)
		die("option");
	page = malloc(page_size);
	for (n = 0; n < 4; n++)
		for (cpu = 0; cpu < ncpus; cpu++) {
			if ((int)n >= pages[cpu])
				continue;
			make_page(page, page_size, 8, cpu, n);
			if (td_file_cpu_page(f, cpu, page, page_size) == -1)
				die("page");
		}
	free(page);
	if (td_file_finish(f) == -1)
		die("finish");
	td_file_free(f);
	meta_free(&m);
}

static int
cmd_tdread(const char *dir)
{
	static const struct {
		const char	*name;
		int		 version;
		enum td_codec_id codec;
		uint32_t	 page_size;
		int		 ncpus;
		int		 pages[3];
		const char	*clock;
	} t[] = {
		{ "v7-zstd", 7, TD_CODEC_ZSTD, PAGE, 2, { 2, 1 }, "local" },
		{ "v7-zlib", 7, TD_CODEC_ZLIB, PAGE, 2, { 1, 2 }, "mono" },
		{ "v7-none", 7, TD_CODEC_NONE, SMALL_PAGE, 3, { 3, 0, 1 },
		    "global" },
		{ "v7-empty", 7, TD_CODEC_ZSTD, PAGE, 1, { 0 }, "local" },
		{ "v6", 6, TD_CODEC_NONE, PAGE, 2, { 2, 1 }, "local" },
		{ "v6-small", 6, TD_CODEC_NONE, SMALL_PAGE, 3, { 1, 0, 2 },
		    "x86-tsc" },
	};
	char path[4096];
	size_t i;

	for (i = 0; i < sizeof t / sizeof *t; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, t[i].name);
		write_trace(path, t[i].version, t[i].codec, t[i].page_size,
		    t[i].ncpus, t[i].pages, t[i].clock);
	}
	return 0;
}

static int
cmd_page(const char *dir)
{
	uint8_t page[PAGE];
	struct pb b;
	char name[64];
	int cs;
	unsigned int n;

	for (cs = 4; cs <= 8; cs += 4) {
		for (n = 0; n < 3; n++) {
			make_page(page, PAGE, cs, 0, n);
			snprintf(name, sizeof name, "mix-c%d-%u", cs, n);
			save(dir, name, page, PAGE);
		}
		make_page(page, SMALL_PAGE, cs, 1, 2);
		snprintf(name, sizeof name, "small-c%d", cs);
		save(dir, name, page, SMALL_PAGE);
		/* events then padding that empties the rest of the page */
		pb_init(&b, page, PAGE, cs, 77);
		pb_event(&b, 2, 1);
		pb_event0(&b, 2, 13);
		pb_padding(&b, 0, 8);
		pb_finish(&b, false, false, 0);
		snprintf(name, sizeof name, "tail-c%d", cs);
		save(dir, name, page, 8 + cs + b.len + 8);
		/* an empty page */
		pb_init(&b, page, PAGE, cs, 5);
		pb_finish(&b, true, false, 0);
		snprintf(name, sizeof name, "empty-c%d", cs);
		save(dir, name, page, 8 + cs);
	}
	return 0;
}

/* HELLO's trace_id (fuzz-session's knobs) and flags for the next ones. */
static uint64_t hello_trace_id = 0x1122334455667788ULL;
static uint16_t hello_flags;

/* Frames of one recording, as tdagent sends them. */
static void
stream_hello(struct td_buf *b, uint32_t ncpus, uint32_t page_size,
    uint8_t long_size, uint8_t version, uint64_t rid, const char *name,
    const char *clock)
{
	struct td_hello h;

	memset(&h, 0, sizeof h);
	h.version_min = TD_PROTO_VERSION_MIN;
	h.version_max = TD_PROTO_VERSION;
	h.ncpus = ncpus;
	h.page_size = page_size;
	h.long_size = long_size;
	h.commit_size = long_size;
	h.big_endian = 0;
	h.file_version = version;
	h.recording_id = rid;
	h.trace_id = hello_trace_id;
	h.flags = hello_flags;
	snprintf(h.name, sizeof h.name, "%s", name);
	snprintf(h.clock, sizeof h.clock, "%s", clock);
	if (td_msg_pack_hello(b, &h) == -1)
		die("hello");
}

/* TD_WIRE_*: sections go as SECTION_DATA_Z pieces of that codec */
static uint16_t section_z;

/* One SECTION_DATA_Z piece of the codec section_z. */
static void
stream_section_z(struct td_buf *b, const void *p, size_t n)
{
	struct td_codec *c;
	struct td_section_z sz;
	uint8_t *z;
	ssize_t len;
	size_t cap;

	c = td_codec_new(section_z == TD_WIRE_ZSTD ? TD_CODEC_ZSTD :
	    TD_CODEC_ZLIB, 0);
	if (c == NULL)
		die("codec");
	cap = td_codec_bound(c, n);
	if ((z = malloc(cap)) == NULL)
		die("malloc");
	if ((len = td_codec_compress(c, p, n, z, cap)) <= 0)
		die("compress");
	sz.codec = section_z;
	sz.raw_len = (uint32_t)n;
	sz.data = z;
	sz.len = (size_t)len;
	if (td_msg_pack_section_z(b, &sz) == -1)
		die("section data z");
	free(z);
	td_codec_free(c);
}

static void
stream_section(struct td_buf *b, uint16_t id, const void *p, size_t n,
    size_t piece)
{
	size_t k;

	if (td_msg_pack_section(b, id) == -1)
		die("section");
	while (n != 0) {
		k = n < piece ? n : piece;
		if (section_z != 0 && k <= TD_SECTION_Z_RAW)
			stream_section_z(b, p, k);
		else if (td_msg_pack_section_data(b, p, k) == -1)
			die("section data");
		p = (const uint8_t *)p + k;
		n -= k;
	}
	if (td_msg_pack_section_end(b) == -1)
		die("section end");
}

static void
stream_pages(struct td_buf *b, uint32_t cpu, uint32_t count, uint64_t seq,
    uint32_t page_size)
{
	uint8_t *page = malloc(page_size);
	uint32_t i;

	if (td_msg_pack_pages_head(b, cpu, count, seq, page_size) == -1)
		die("pages");
	for (i = 0; i < count; i++) {
		make_page(page, page_size, 8, (int)cpu, (unsigned int)seq + i);
		td_buf_add(b, page, page_size);
	}
	free(page);
}

/* count pages of a CPU as one PAGES_Z block (TD_WIRE_ZSTD or ZLIB). */
static void
stream_pages_z(struct td_buf *b, uint32_t cpu, uint32_t count, uint64_t seq,
    uint32_t page_size, uint16_t wire)
{
	struct td_codec *c = td_codec_new(wire == TD_WIRE_ZSTD ?
	    TD_CODEC_ZSTD : TD_CODEC_ZLIB, 0);
	size_t n = (size_t)count * page_size;
	uint8_t *pages = malloc(n), *z;
	struct td_pages_z pz;
	ssize_t zn;
	uint32_t i;

	if (c == NULL || pages == NULL ||
	    (z = malloc(td_codec_bound(c, n))) == NULL)
		die("pages_z");
	for (i = 0; i < count; i++)
		make_page(pages + (size_t)i * page_size, page_size, 8,
		    (int)cpu, (unsigned int)seq + i);
	if ((zn = td_codec_compress(c, pages, n, z, td_codec_bound(c,
	    n))) <= 0)
		die("compress");
	memset(&pz, 0, sizeof pz);
	pz.cpu = cpu;
	pz.count = count;
	pz.first_seq = seq;
	pz.codec = wire;
	pz.data = z;
	pz.len = (size_t)zn;
	if (td_msg_pack_pages_z(b, &pz) == -1)
		die("pages_z");
	free(z);
	free(pages);
	td_codec_free(c);
}

/* One time-sync round: probes then the agent's sample. */
static void
stream_tsync(struct td_buf *b, uint32_t round, uint64_t ts)
{
	struct td_tsync_sample t;
	struct td_tsync_probe p;
	uint32_t i;

	for (i = 0; i < 3; i++) {
		p.round = round;
		p.seq = i;
		p.ref_ns = 0;
		if (td_msg_pack_tsync_probe(b, &p) == -1)
			die("probe");
	}
	memset(&t, 0, sizeof t);
	t.round = round;
	t.probes = 3;
	t.ts = ts;
	t.offset = -123456789 + (int64_t)round * 17;
	t.scaling = 1;
	t.frac = 0;
	t.bound = 4000 + round;
	t.rtt = 8000 + 2 * round;
	if (td_msg_pack_tsync_sample(b, &t) == -1)
		die("sample");
}

/*
 * An OPTION 0x7467: the agent's machine runs guest name, two vCPUs, with
 * the KVM block (kvm) or QEMU gone.
 */
static void
stream_guest(struct td_buf *b, const char *name, bool kvm, bool gone)
{
	struct td_guest *g = calloc(1, sizeof *g);
	struct td_buf c;
	uint32_t i;

	if (g == NULL)
		die("malloc");
	snprintf(g->name, sizeof g->name, "%s", name);
	g->pid = 4321;
	g->nvcpus = gone ? 0 : 2;
	g->flags = gone ? TD_GUEST_GONE : kvm ? TD_GUEST_KVM : 0;
	g->tsc_mult = kvm ? 1u << 23 : 0;
	g->tsc_shift = kvm ? 24 : 0;
	for (i = 0; i < g->nvcpus; i++) {
		g->vcpu[i].vcpu = i;
		g->vcpu[i].tid = 4328 + (int32_t)i;
		g->vcpu[i].tsc_offset = -123456789012LL;
		g->vcpu[i].tsc_ratio = 1ULL << 48;
		g->vcpu[i].tsc_frac = 48;
	}
	td_buf_init(&c, TD_MAX_FRAME);
	if (td_msg_pack_guest(&c, g) == -1 ||
	    td_msg_pack_option(b, TD_OPT_TD_GUEST, c.data, c.len) == -1)
		die("guest");
	td_buf_free(&c);
	free(g);
}

/* Whether synthetic_stream() declares guests (tdagent --guest). */
static bool with_guest;

/* A synthetic recording as a stream; cut: stop before the END. */
static void
synthetic_stream(struct td_buf *b, uint8_t version, uint64_t rid,
    uint32_t page_size, bool cut, bool no_cmdlines)
{
	struct td_end e;
	struct meta m;
	int id;

	meta_init(&m);
	stream_hello(b, 2, page_size, 8, version, rid, "seed", "local");
	stream_tsync(b, 0, 1000000);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		if (no_cmdlines && id == TD_OPT_CMDLINES)
			continue;
		stream_section(b, id, m.sect[id].data, m.sect[id].len, 300);
	}
	if (with_guest) {
		stream_guest(b, "vm1", true, false);
		stream_guest(b, "vm2", false, false);
	}
	td_msg_pack_option(b, TD_OPT_UNAME, uname_text, sizeof uname_text);
	td_msg_pack_option(b, TD_OPT_CPUSTAT, cpustat, sizeof cpustat);
	stream_pages(b, 0, 2, 0, page_size);
	stream_pages(b, 1, 1, 0, page_size);
	stream_tsync(b, 1, 2000000);
	stream_pages(b, 0, 1, 2, page_size);
	stream_tsync(b, 2, 3000000);
	if (!cut) {
		memset(&e, 0, sizeof e);
		e.ncpus = 2;
		e.pages[0] = 3;
		e.pages[1] = 1;
		td_msg_pack_end(b, &e);
	}
	meta_free(&m);
}

/* A whole v7 recording whose time-sync samples are all refused. */
static void
bad_samples_stream(struct td_buf *b)
{
	struct td_tsync_sample t;
	struct td_end e;
	struct meta m;
	int id;

	meta_init(&m);
	stream_hello(b, 1, SMALL_PAGE, 8, 7, 0, "bad-samples", "mono");
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++)
		stream_section(b, id, m.sect[id].data, m.sect[id].len, 4096);
	memset(&t, 0, sizeof t);
	t.probes = 1;
	t.ts = 10;
	t.scaling = 3;
	t.frac = 1;
	td_msg_pack_tsync_sample(b, &t);
	stream_pages(b, 0, 1, 0, SMALL_PAGE);
	memset(&e, 0, sizeof e);
	e.ncpus = 1;
	e.pages[0] = 1;
	td_msg_pack_end(b, &e);
	meta_free(&m);
}

/* Offset after the nth frame of type (type 0: the end), and HELLO's size. */
static size_t
frame_cut(const struct td_buf *b, uint16_t type, int nth, size_t *hello)
{
	struct td_frame f;
	size_t pos = 0;

	*hello = 0;
	while (pos < b->len && td_frame_parse(b->data + pos, b->len - pos,
	    &f) == 1) {
		pos += f.total;
		if (*hello == 0)
			*hello = pos;
		if (f.type == type && --nth == 0)
			return pos;
	}
	if (type != 0)
		die("frame_cut");
	return pos;
}

/*
 * A protocol v2 seed for fuzz-session: the synthetic recording cut after
 * the nth frame of type, the connection ended as how says (fuzz.h), then
 * a connection that resumes: a KEEPALIVE and the frames from the cut
 * (from > 0), from the first (from == 0: the listener rolled back to the
 * HELLO's checkpoint), or nothing (from == -1); or an empty connection
 * (from < -1: the agent never comes back).
 */
static void
resume_seed(const char *dir, const char *name, uint8_t version, uint64_t rid,
    uint64_t trace_id, uint16_t type, int nth, int how, int from)
{
	struct td_buf b, all;
	size_t cut, hello;

	td_buf_init(&b, 16 * 1024 * 1024);
	td_buf_init(&all, 16 * 1024 * 1024);
	hello_trace_id = trace_id;
	synthetic_stream(&all, version, rid, SMALL_PAGE, false, false);
	cut = frame_cut(&all, type, nth, &hello);
	td_buf_add(&b, all.data, cut);
	td_buf_add(&b, FUZZ_CONN_SEP, FUZZ_CONN_SEP_LEN);
	td_buf_add(&b, (uint8_t[]){ (uint8_t)how }, 1);
	hello_flags = TD_HELLO_RESUME;
	if (from >= -1)
		stream_hello(&b, 2, SMALL_PAGE, 8, version, rid, "seed",
		    "local");
	hello_flags = 0;
	hello_trace_id = 0x1122334455667788ULL;
	if (from >= 0) {
		td_msg_pack_keepalive(&b);
		td_buf_add(&b, all.data + (from ? cut : hello),
		    all.len - (from ? cut : hello));
	}
	save(dir, name, b.data, b.len);
	td_buf_free(&b);
	td_buf_free(&all);
}

/* A whole recording with a KEEPALIVE after every section. */
static void
keepalive_seed(const char *dir)
{
	struct td_buf b, all;
	struct td_frame f;
	size_t pos = 0;

	td_buf_init(&b, 16 * 1024 * 1024);
	td_buf_init(&all, 16 * 1024 * 1024);
	synthetic_stream(&all, 7, 4, SMALL_PAGE, false, false);
	while (pos < all.len && td_frame_parse(all.data + pos, all.len - pos,
	    &f) == 1) {
		td_buf_add(&b, all.data + pos, f.total);
		if (f.type == TD_MSG_SECTION_END || f.type == TD_MSG_PAGES)
			td_msg_pack_keepalive(&b);
		pos += f.total;
	}
	save(dir, "v2-keepalive", b.data, b.len);
	td_buf_free(&b);
	td_buf_free(&all);
}

/*
 * The synthetic recording with more pages as PAGES_Z blocks (wire codec):
 * a file of the same codec stores them as they came, any other gets the
 * pages.
 */
static void
pages_z_seed(const char *dir, const char *name, uint64_t rid, uint16_t wire)
{
	struct td_buf b;
	struct td_end e;

	td_buf_init(&b, 16 * 1024 * 1024);
	synthetic_stream(&b, 7, rid, SMALL_PAGE, true, false);
	stream_pages_z(&b, 0, 3, 3, SMALL_PAGE, wire);
	stream_pages_z(&b, 1, TD_CHUNK_PAGES, 1, SMALL_PAGE, wire);
	stream_pages(&b, 0, 1, 6, SMALL_PAGE);
	memset(&e, 0, sizeof e);
	e.ncpus = 2;
	e.pages[0] = 7;
	e.pages[1] = 1 + TD_CHUNK_PAGES;
	td_msg_pack_end(&b, &e);
	save(dir, name, b.data, b.len);
	td_buf_free(&b);
}

/*
 * fuzz-session's trace_id knobs: tick after every read, quota on, a
 * session memory budget (4 KiB + 64 x bits 8..23), a descriptor budget
 * (TD_FD_RESERVE + bits 24..26).
 */
#define TICK	1
#define QUOTA	2
#define MEMORY	4
#define FDS	16
/* 4 KiB + 88 x 64: the first read of v2-memory passes it */
#define MEMORY_CAP	((uint64_t)88 << 8)

static void
resume_seeds(const char *dir)
{
	/* rid % 3: codec none, zstd, zlib; (rid / 6) % 2: --resume-wait 0 */
	resume_seed(dir, "v2-resume-eof", 7, 1, TICK, TD_MSG_PAGES, 1,
	    FUZZ_END_EOF, 1);
	resume_seed(dir, "v2-resume-idle-mid-section", 7, 2, 0,
	    TD_MSG_SECTION, 3, FUZZ_END_IDLE, 1);
	resume_seed(dir, "v2-restart", 7, 0, TICK, TD_MSG_SECTION_END, 3,
	    FUZZ_END_RESTART, 1);
	resume_seed(dir, "v2-restart-v6", 6, 0, TICK, TD_MSG_PAGES, 1,
	    FUZZ_END_RESTART, 1);
	/* guests declared (tdagent --guest), kept across the restart */
	with_guest = true;
	resume_seed(dir, "v7-guest-restart", 7, 1, TICK, TD_MSG_PAGES, 2,
	    FUZZ_END_RESTART, 1);
	with_guest = false;
	resume_seed(dir, "v2-restart-mid-section", 7, 1, 0, TD_MSG_SECTION, 4,
	    FUZZ_END_RESTART, 0);
	resume_seed(dir, "v2-takeover", 7, 1, 0, TD_MSG_PAGES, 2,
	    FUZZ_END_KEEP, 1);
	resume_seed(dir, "v2-done-again", 7, 1, 0, 0, 0, FUZZ_END_EOF, -1);
	/* the DONE again, from the table the restarted listener read */
	resume_seed(dir, "v2-done-again-restart", 7, 1, 0, 0, 0,
	    FUZZ_END_RESTART, -1);
	/* a recovered recording nobody resumes: kept as incomplete */
	resume_seed(dir, "v2-restart-gone", 7, 1, 0, TD_MSG_PAGES, 2,
	    FUZZ_END_RESTART, -2);
	resume_seed(dir, "v2-expired", 7, 1, TICK, TD_MSG_SECTION_END, 6,
	    FUZZ_END_EXPIRE, 1);
	resume_seed(dir, "v2-quota", 7, 1, TICK | QUOTA, 0, 0, FUZZ_END_EOF,
	    0);
	resume_seed(dir, "v2-no-resume-wait", 7, 7, TICK, TD_MSG_PAGES, 1,
	    FUZZ_END_EOF, 1);
	/* paused by the memory budget, resumed from the HELLO's checkpoint */
	resume_seed(dir, "v2-memory", 7, 1, MEMORY | MEMORY_CAP, 0, 0,
	    FUZZ_END_EOF, 0);
	/* ... and with --resume-wait 0: closed, back to the checkpoint */
	resume_seed(dir, "v2-memory-no-resume-wait", 7, 7, MEMORY | MEMORY_CAP,
	    0, 0, FUZZ_END_EOF, -1);
	/* no descriptors for the recording: come back later */
	resume_seed(dir, "v2-fds", 7, 1, FDS, 0, 0, FUZZ_END_EOF, -1);
	keepalive_seed(dir);
	pages_z_seed(dir, "v2-pages-z-stored", 1, TD_WIRE_ZSTD);
	pages_z_seed(dir, "v2-pages-z-recompressed", 2, TD_WIRE_ZSTD);
	pages_z_seed(dir, "v2-pages-z-none", 0, TD_WIRE_ZLIB);
	/* v3: the header sections as SECTION_DATA_Z pieces */
	section_z = TD_WIRE_ZSTD;
	pages_z_seed(dir, "v3-section-z-zstd", 1, TD_WIRE_ZSTD);
	section_z = TD_WIRE_ZLIB;
	pages_z_seed(dir, "v3-section-z-zlib", 3, TD_WIRE_ZLIB);
	section_z = 0;
	{
		struct td_buf b;

		/* a recording this listener never had */
		td_buf_init(&b, 1024 * 1024);
		hello_flags = TD_HELLO_RESUME;
		stream_hello(&b, 2, SMALL_PAGE, 8, 7, 5, "seed", "local");
		hello_flags = 0;
		stream_pages(&b, 0, 1, 7, SMALL_PAGE);
		save(dir, "v2-resume-unknown", b.data, b.len);
		td_buf_free(&b);
	}
}

/*
 * Hostile HELLO shapes (issue 13): the most pages a HELLO may declare (128
 * CPUs x 512 KiB) with chunks in the codec the file does not use, one
 * past it (refused), a page on each of many CPUs, and probes.
 */
static void
hostile_seeds(const char *dir)
{
	struct td_tsync_probe p = { 1, 0, 0 };
	struct td_buf b;
	uint32_t i;

	td_buf_init(&b, 16 * 1024 * 1024);
	stream_hello(&b, 128, 512 * 1024, 8, 7, 1, "hostile", "local");
	for (i = 0; i < 3; i++)
		stream_pages_z(&b, i, 9, 0, 512 * 1024, TD_WIRE_ZLIB);
	save(dir, "hostile-span-max", b.data, b.len);
	td_buf_reset(&b);
	stream_hello(&b, 256, 512 * 1024, 8, 7, 1, "hostile", "local");
	save(dir, "hostile-span-over", b.data, b.len);
	td_buf_reset(&b);
	stream_hello(&b, 1010, 256, 8, 7, 2, "hostile", "local");
	for (i = 0; i < 64; i++)
		stream_pages(&b, i, 1, 0, 256);
	save(dir, "hostile-many-cpus", b.data, b.len);
	td_buf_reset(&b);
	stream_hello(&b, 2, SMALL_PAGE, 8, 7, 0, "hostile", "local");
	for (i = 0; i < 2000; i++) {
		p.seq = i;
		td_msg_pack_tsync_probe(&b, &p);
	}
	save(dir, "hostile-probes", b.data, b.len);
	td_buf_free(&b);
}

static int
cmd_session(const char *dir)
{
	struct td_buf b;

	td_buf_init(&b, 16 * 1024 * 1024);
	synthetic_stream(&b, 7, 0, PAGE, false, false);
	save(dir, "v7-none", b.data, b.len);
	td_buf_reset(&b);
	synthetic_stream(&b, 7, 1, SMALL_PAGE, false, false);
	save(dir, "v7-zstd", b.data, b.len);
	td_buf_reset(&b);
	synthetic_stream(&b, 0, 2, SMALL_PAGE, false, false);
	save(dir, "v0-zlib", b.data, b.len);
	td_buf_reset(&b);
	synthetic_stream(&b, 6, 0, SMALL_PAGE, false, false);
	save(dir, "v6", b.data, b.len);
	td_buf_reset(&b);
	synthetic_stream(&b, 7, 3, SMALL_PAGE, false, false);
	save(dir, "v7-none-notsync", b.data, b.len);
	td_buf_reset(&b);
	synthetic_stream(&b, 7, 1, SMALL_PAGE, true, true);
	save(dir, "v7-cut", b.data, b.len);
	td_buf_reset(&b);
	/* the agent gives up with an ERROR */
	synthetic_stream(&b, 7, 2, SMALL_PAGE, true, false);
	td_msg_pack_error(&b, 5, "cannot read cpu1: Input/output error");
	save(dir, "v7-error", b.data, b.len);
	td_buf_reset(&b);
	/* samples tdlisten drops (a scaling other than 1) */
	bad_samples_stream(&b);
	save(dir, "v7-bad-samples", b.data, b.len);
	td_buf_reset(&b);
	/* a host's recording: the guests it runs (tdagent --guest) */
	with_guest = true;
	synthetic_stream(&b, 7, 1, SMALL_PAGE, false, false);
	with_guest = false;
	save(dir, "v7-guest", b.data, b.len);
	td_buf_reset(&b);
	/*
	 * An OPTION after END, sized so that fuzz-session delivers the 5093
	 * bytes in odd pieces of 1 + 5093 % 4093 = 1001 bytes: END comes in
	 * the fourth, the OPTION in the sixth, before the DONE drained
	 * ("data after END").
	 */
	synthetic_stream(&b, 7, 1, SMALL_PAGE, false, false);
	{
		static const char late[2048];
		size_t n = 5093 - b.len - TD_FRAME_HEADER - 2;

		if (b.len > 4004 || n > sizeof late)
			die("after-end seed");
		td_msg_pack_option(&b, TD_OPT_UNAME, late, n);
	}
	save(dir, "v7-after-end", b.data, b.len);
	td_buf_reset(&b);
	synthetic_stream(&b, 6, 0, SMALL_PAGE, true, false);
	save(dir, "v6-cut", b.data, b.len);
	td_buf_free(&b);
	hostile_seeds(dir);
	resume_seeds(dir);
	return 0;
}

static int
cmd_proto(const char *dir)
{
	struct td_welcome w;
	struct td_done d;
	struct td_buf b;

	td_buf_init(&b, 16 * 1024 * 1024);
	stream_hello(&b, 4, PAGE, 8, 7, 42, "web1", "local");
	save(dir, "hello", b.data, b.len);
	td_buf_reset(&b);

	hello_flags = TD_HELLO_RESUME;
	stream_hello(&b, 4, PAGE, 8, 7, 42, "web1", "local");
	hello_flags = 0;
	save(dir, "hello-resume", b.data, b.len);
	td_buf_reset(&b);

	memset(&w, 0, sizeof w);
	w.version = TD_PROTO_VERSION_MIN;
	w.session_id = 0xdeadbeef;
	w.idle_timeout = 60;
	snprintf(w.identity, sizeof w.identity, "web1.example.org");
	td_msg_pack_welcome(&b, &w);
	save(dir, "welcome", b.data, b.len);
	td_buf_reset(&b);
	{
		struct td_section_offer o;
		struct td_section_have hv;

		memset(&o, 0, sizeof o);
		o.count = 2;
		o.ref[0].id = 18;
		o.ref[0].length = 4096;
		memset(o.ref[0].sha, 0x5a, sizeof o.ref[0].sha);
		o.ref[1].id = 19;
		o.ref[1].length = 5400000;
		memset(o.ref[1].sha, 0xa5, sizeof o.ref[1].sha);
		td_msg_pack_section_offer(&b, &o);
		save(dir, "section-offer", b.data, b.len);
		td_buf_reset(&b);
		memset(&hv, 0, sizeof hv);
		hv.count = 2;
		hv.have[1] = 1;
		td_msg_pack_section_have(&b, &hv);
		save(dir, "section-have", b.data, b.len);
		td_buf_reset(&b);
		td_msg_pack_section_ref(&b, &o.ref[1]);
		save(dir, "section-ref", b.data, b.len);
	}
	td_buf_reset(&b);

	w.flags = TD_WELCOME_RESUMED;
	w.resume_offset = 0x123456789ULL;
	w.tsync_interval = TD_TSYNC_OFF;
	td_msg_pack_welcome(&b, &w);
	/* what follows a resumed WELCOME: acknowledgements, keepalives */
	td_msg_pack_ack(&b, 0x123456789ULL + 4096);
	td_msg_pack_keepalive(&b);
	td_msg_pack_ack(&b, UINT64_MAX);
	td_msg_pack_keepalive(&b);
	td_msg_pack_error(&b, TD_ERR_RETRY, "the listener's disk is full: "
	    "come back later");
	save(dir, "welcome-resumed-ack", b.data, b.len);
	td_buf_reset(&b);

	stream_pages_z(&b, 1, 3, 40, SMALL_PAGE, TD_WIRE_ZSTD);
	stream_pages_z(&b, 0, TD_CHUNK_PAGES, 0, SMALL_PAGE, TD_WIRE_ZLIB);
	save(dir, "pages-z", b.data, b.len);
	td_buf_reset(&b);

	memset(&d, 0, sizeof d);
	d.file_size = 123456;
	snprintf(d.path, sizeof d.path, "web1/20260101T000000Z-x.dat");
	td_msg_pack_done(&b, &d);
	td_msg_pack_error(&b, 3, "CPU 1: page 7 where 5 was due");
	save(dir, "done-error", b.data, b.len);
	td_buf_reset(&b);

	synthetic_stream(&b, 7, 1, SMALL_PAGE, false, false);
	save(dir, "stream", b.data, b.len);
	td_buf_reset(&b);

	stream_guest(&b, "vm1", false, false);
	stream_guest(&b, "vm1", true, false);
	stream_guest(&b, "vm1", false, true);
	save(dir, "guest", b.data, b.len);
	td_buf_reset(&b);

	{
		struct td_tsync_probe p = { 7, 2, 123456789012ULL };

		stream_tsync(&b, 7, 99);
		td_msg_pack_tsync_reply(&b, &p);
		save(dir, "tsync", b.data, b.len);
	}
	td_buf_free(&b);
	return 0;
}

/* Cut a {u32 or u64 size, text} section to about max bytes of text. */
static void
cut_text(struct td_buf *b, size_t szlen, size_t max)
{
	uint64_t n = 0;
	size_t k;
	uint32_t n32;

	if (b->len < szlen)
		return;
	if (szlen == 4) {
		memcpy(&n32, b->data, 4);
		n = n32;
	} else
		memcpy(&n, b->data, 8);
	if (n > b->len - szlen)
		return;
	k = n < max ? n : max;
	while (k > 0 && k < n && b->data[szlen + k - 1] != '\n')
		k--;
	if (szlen == 4) {
		n32 = (uint32_t)k;
		memcpy(b->data, &n32, 4);
	} else {
		n = k;
		memcpy(b->data, &n, 8);
	}
	b->len = szlen + k;
}

/* Keep the first keep items of a {u32 count, {u64 size, data}...} list. */
static size_t
cut_list(uint8_t *p, size_t len, uint32_t keep)
{
	uint32_t cnt, i;
	uint64_t sz;
	size_t pos = 4;

	if (len < 4)
		return len;
	memcpy(&cnt, p, 4);
	for (i = 0; i < cnt && i < keep; i++) {
		if (len - pos < 8)
			return len;
		memcpy(&sz, p + pos, 8);
		if (sz > len - pos - 8)
			return len;
		pos += 8 + sz;
	}
	cnt = i;
	memcpy(p, &cnt, 4);
	return pos;
}

/* EVENT_FORMATS: keep the systems, at most keep events of each. */
static void
cut_formats(struct td_buf *b, uint32_t keep)
{
	struct td_buf o;
	uint32_t nsys, i;
	size_t pos = 4, n, k;
	uint8_t *nul;

	if (b->len < 4)
		return;
	memcpy(&nsys, b->data, 4);
	td_buf_init(&o, TD_MAX_SECTION_SIZE);
	td_buf_add(&o, b->data, 4);
	for (i = 0; i < nsys; i++) {
		nul = memchr(b->data + pos, '\0', b->len - pos);
		if (nul == NULL)
			goto out;
		n = (size_t)(nul - (b->data + pos)) + 1;
		td_buf_add(&o, b->data + pos, n);
		pos += n;
		if (b->len - pos < 4)
			goto out;
		/* the list after the name: count then items */
		{
			uint8_t *list = b->data + pos;
			size_t all = b->len - pos, full, cutlen;
			uint8_t *tmp = malloc(all);

			memcpy(tmp, list, all);
			full = cut_list(tmp, all, UINT32_MAX);
			cutlen = cut_list(tmp, all, keep);
			td_buf_add(&o, tmp, cutlen);
			free(tmp);
			pos += full;
		}
	}
	k = o.len;
	td_buf_reset(b);
	td_buf_add(b, o.data, k);
out:
	td_buf_free(&o);
}

struct shrink {
	struct td_file	*f;
	int		 cpu;
	int		 pages;
	int		 max;
};

static int
shrink_page(void *arg, const void *page, size_t len)
{
	struct shrink *s = arg;

	if (s->pages >= s->max)
		return 0;
	s->pages++;
	return td_file_cpu_page(s->f, s->cpu, page, len);
}

static int
cmd_shrink(const char *in, const char *out)
{
	struct td_file_params p;
	struct td_read *r;
	struct td_file *f;
	struct td_buf b;
	struct shrink s;
	int id, nth, cpu;

	if ((r = td_read_open(in)) == NULL)
		die(in);
	memset(&p, 0, sizeof p);
	p.version = td_read_version(r);
	p.codec = td_read_codec(r);
	p.page_size = td_read_page_size(r);
	p.long_size = (uint8_t)td_read_long_size(r);
	p.ncpus = td_read_ncpus(r);
	p.clock = td_read_clock(r)[0] ? td_read_clock(r) : "local";
	if ((f = td_file_create(out, &p)) == NULL)
		die(out);
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		if (td_read_section(r, id, &b) == -1)
			die("section");
		if (id == TD_OPT_KALLSYMS || id == TD_OPT_PRINTK)
			cut_text(&b, 4, 1500);
		else if (id == TD_OPT_CMDLINES)
			cut_text(&b, 8, 400);
		else if (id == TD_OPT_FTRACE_EVENTS)
			b.len = cut_list(b.data, b.len, 3);
		else if (id == TD_OPT_EVENT_FORMATS)
			cut_formats(&b, 64);
		if (td_file_section_add(f, id, b.data, b.len) == -1)
			die("section");
	}
	for (id = TD_OPT_DATE; id <= TD_OPT_BUFFER_TEXT; id++) {
		if (id == TD_OPT_BUFFER || id == TD_OPT_CPUCOUNT ||
		    (id >= TD_OPT_STRINGS && id <= TD_OPT_CMDLINES))
			continue;
		for (nth = 0; td_read_option(r, id, nth, &b) == 0; nth++)
			if (td_file_add_option(f, id, b.data, b.len) == -1)
				die("option");
	}
	for (cpu = 0; cpu < p.ncpus; cpu++) {
		s.f = f;
		s.cpu = cpu;
		s.pages = 0;
		s.max = 2;
		if (td_read_cpu_pages(r, cpu, shrink_page, &s) == -1)
			die("pages");
	}
	if (td_file_finish(f) == -1)
		die("finish");
	td_file_free(f);
	td_buf_free(&b);
	td_read_close(r);
	return 0;
}

/* The frame stream of a trace.dat. */
struct tostream {
	struct td_buf	*b;
	uint32_t	 cpu;
	uint64_t	 seq;
	uint32_t	 page_size;
};

static int
stream_page_cb(void *arg, const void *page, size_t len)
{
	struct tostream *t = arg;

	if (td_msg_pack_pages_head(t->b, t->cpu, 1, t->seq,
	    t->page_size) == -1)
		return -1;
	td_buf_add(t->b, page, len);
	td_buf_add_zero(t->b, t->page_size - len);
	t->seq++;
	return 0;
}

static int
cmd_stream(const char *in, const char *out)
{
	static struct td_end e;
	struct td_read *r;
	struct td_buf b, s;
	struct tostream t;
	int id, nth, cpu;
	uint8_t ver;

	if ((r = td_read_open(in)) == NULL)
		die(in);
	td_buf_init(&b, 64 * 1024 * 1024);
	td_buf_init(&s, TD_MAX_SECTION_SIZE);
	ver = (uint8_t)td_read_version(r);
	stream_hello(&b, (uint32_t)td_read_ncpus(r), td_read_page_size(r),
	    (uint8_t)td_read_long_size(r), ver,
	    ver == 6 ? 0 : (uint64_t)td_read_codec(r), "real",
	    td_read_clock(r)[0] ? td_read_clock(r) : "local");
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		if (td_read_section(r, id, &s) == -1)
			die("section");
		stream_section(&b, id, s.data, s.len, 64 * 1024);
	}
	for (id = TD_OPT_DATE; id <= TD_OPT_BUFFER_TEXT; id++) {
		if (id == TD_OPT_BUFFER || id == TD_OPT_CPUCOUNT ||
		    (id >= TD_OPT_STRINGS && id <= TD_OPT_CMDLINES))
			continue;
		for (nth = 0; td_read_option(r, id, nth, &s) == 0; nth++)
			td_msg_pack_option(&b, id, s.data, s.len);
	}
	stream_tsync(&b, 0, 1000);
	memset(&e, 0, sizeof e);
	e.ncpus = (uint32_t)td_read_ncpus(r);
	for (cpu = 0; cpu < td_read_ncpus(r); cpu++) {
		t.b = &b;
		t.cpu = (uint32_t)cpu;
		t.seq = 0;
		t.page_size = td_read_page_size(r);
		if (td_read_cpu_pages(r, cpu, stream_page_cb, &t) == -1)
			die("pages");
		e.pages[cpu] = t.seq;
	}
	stream_tsync(&b, 1, 2000);
	td_msg_pack_end(&b, &e);
	save(NULL, out, b.data, b.len);
	td_buf_free(&b);
	td_buf_free(&s);
	td_read_close(r);
	return 0;
}

struct extract {
	const char	*dir;
	const char	*base;
	int		 n;
	int		 max;
};

static int
extract_cb(void *arg, const void *page, size_t len)
{
	struct extract *x = arg;
	char name[256];

	if (x->n >= x->max)
		return 0;
	snprintf(name, sizeof name, "%s-%d", x->base, x->n++);
	save(x->dir, name, page, len);
	return 0;
}

static int
cmd_pages(const char *in, const char *dir, int max)
{
	struct extract x;
	struct td_read *r;
	const char *base = strrchr(in, '/') ? strrchr(in, '/') + 1 : in;
	char stem[128];
	int cpu;

	if ((r = td_read_open(in)) == NULL)
		die(in);
	snprintf(stem, sizeof stem, "%s", base);
	if (strrchr(stem, '.') != NULL)
		*strrchr(stem, '.') = '\0';
	x.dir = dir;
	x.base = stem;
	x.n = 0;
	x.max = max;
	for (cpu = 0; cpu < td_read_ncpus(r) && x.n < max; cpu++)
		if (td_read_cpu_pages(r, cpu, extract_cb, &x) == -1)
			die("pages");
	td_read_close(r);
	return 0;
}

/* Checkpoints of the recording fuzz-restore restores (ckrec.h). */
static int
cmd_restore(const char *dir)
{
	struct ckrec_point pt[CKREC_POINTS];
	char path[4096], name[64], *t;
	int v, k, i;

	if ((t = strdup("/tmp/seedgen.XXXXXX")) == NULL || mkdtemp(t) == NULL)
		die("mkdtemp");
	snprintf(path, sizeof path, "%s/r.dat", t);
	for (v = 0; v < CKREC_VARIANTS; v++) {
		if (ckrec_make(path, v, pt) == -1)
			die(path);
		for (k = 0; k < CKREC_POINTS; k++) {
			snprintf(name, sizeof name, "ck-%s-%d", ckrec_name(v),
			    k);
			save(dir, name, pt[k].state.data, pt[k].state.len);
			snprintf(name, sizeof name, "state-%s-%d",
			    ckrec_name(v), k);
			save(dir, name, pt[k].listener.data,
			    pt[k].listener.len);
		}
		ckrec_points_free(pt);
		for (i = -1; i < CKREC_NCPUS; i++) {
			char f[4200];

			if (i < 0)
				snprintf(f, sizeof f, "%s.part", path);
			else
				snprintf(f, sizeof f, "%s.cpu%d.part", path, i);
			unlink(f);
		}
	}
	rmdir(t);
	free(t);
	return 0;
}

int
main(int argc, char **argv)
{
	log_init("seedgen", -1, 0);
	if (argc == 3 && strcmp(argv[1], "proto") == 0)
		return cmd_proto(argv[2]);
	if (argc == 3 && strcmp(argv[1], "page") == 0)
		return cmd_page(argv[2]);
	if (argc == 3 && strcmp(argv[1], "tdread") == 0)
		return cmd_tdread(argv[2]);
	if (argc == 3 && strcmp(argv[1], "session") == 0)
		return cmd_session(argv[2]);
	if (argc == 3 && strcmp(argv[1], "restore") == 0)
		return cmd_restore(argv[2]);
	if (argc == 4 && strcmp(argv[1], "shrink") == 0)
		return cmd_shrink(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "stream") == 0)
		return cmd_stream(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "pages") == 0)
		return cmd_pages(argv[2], argv[3], atoi(argv[4]));
	fprintf(stderr, "usage: seedgen proto|page|tdread|session|restore DIR\n"
	    "       seedgen shrink IN OUT | stream IN OUT | "
	    "pages IN DIR N\n");
	return 2;
}
