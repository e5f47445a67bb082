/*
 * ckrec.c: the small recording of fuzz-restore and its checkpoints (see
 * ckrec.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "checkpoint.h"
#include "guests.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "timesync.h"
#include "ckrec.h"

static const struct {
	const char		*name;
	int			 version;
	enum td_codec_id	 codec;
} ckrec_variants[CKREC_VARIANTS] = {
	{ "v6", 6, TD_CODEC_NONE },
	{ "v7-none", 7, TD_CODEC_NONE },
	{ "v7-zstd", 7, TD_CODEC_ZSTD },
	{ "v7-zlib", 7, TD_CODEC_ZLIB },
};

const char *
ckrec_name(int v)
{
	return ckrec_variants[v].name;
}

int
ckrec_variant(const void *state, size_t len)
{
	const uint8_t *p = memmem(state, len, "tdck", 4);
	uint32_t version, codec;
	int v;

	if (p == NULL || len - (size_t)(p - (const uint8_t *)state) < 16)
		return 0;
	memcpy(&version, p + 8, 4);
	memcpy(&codec, p + 12, 4);
	for (v = 0; v < CKREC_VARIANTS; v++)
		if ((int)version == ckrec_variants[v].version &&
		    (version == 6 || codec == ckrec_variants[v].codec))
			return v;
	return 0;
}

static void
add_item(struct td_buf *b, const char *text)
{
	td_buf_add_u64(b, strlen(text));
	td_buf_add(b, text, strlen(text));
}

void
ckrec_section(int id, struct td_buf *b)
{
	static const char kallsyms[] = "ffffffff81000000 T _stext\n"
	    "ffffffff81002000 t ckrec [tracedock]\n";
	static const char printk[] = "0xffffffff82000000 : \"ckrec %d\\n\"\n";

	td_buf_reset(b);
	switch (id) {
	case TD_OPT_HEADER_INFO:
		td_buf_add_str(b, "header_page");
		add_item(b, "\tfield: u64 timestamp;\toffset:0;\tsize:8;"
		    "\tsigned:0;\n");
		td_buf_add_str(b, "header_event");
		add_item(b, "# compressed entry header\n");
		break;
	case TD_OPT_FTRACE_EVENTS:
		td_buf_add_u32(b, 1);
		add_item(b, "name: print\nID: 5\nformat:\n");
		break;
	case TD_OPT_EVENT_FORMATS:
		td_buf_add_u32(b, 1);
		td_buf_add_str(b, "sched");
		td_buf_add_u32(b, 1);
		add_item(b, "name: sched_switch\nID: 300\nformat:\n");
		break;
	case TD_OPT_KALLSYMS:
		td_buf_add_u32(b, sizeof kallsyms - 1);
		td_buf_add(b, kallsyms, sizeof kallsyms - 1);
		break;
	case TD_OPT_PRINTK:
		td_buf_add_u32(b, sizeof printk - 1);
		td_buf_add(b, printk, sizeof printk - 1);
		break;
	default:
		add_item(b, "1 init\n42 tdagent\n");
		break;
	}
}

void
ckrec_page(uint8_t *p, int cpu, uint64_t seq)
{
	size_t i;

	/* a time stamp, a commit of 16 bytes, words that name the page */
	memset(p, 0, CKREC_PAGE);
	memcpy(p, &seq, 8);
	p[8] = 16;
	for (i = 16; i < CKREC_PAGE; i++)
		p[i] = (uint8_t)(seq * 31 + (uint64_t)cpu * 7 + i);
}

/*
 * Pairings for points 2 and 3: the recording (identity "ckrec") runs the
 * guest vm1 (two vCPUs, with the KVM block at point 3) and has a recording
 * of it paired, and is itself the guest of a host hv0, as tdlisten --guest
 * hv0:ckrec --guest ckrec:vm1 allows (without it, nothing pairs: the
 * states held no pairing from the day pairing was authorised, and no seed
 * said so).  The sides of vm1 and hv0 are freed once ckrec's is saved.
 */
static struct guests *
ckrec_guests(int k, struct guests **peers)
{
	static bool allowed;
	struct td_guest *g = calloc(1, sizeof *g);
	struct guests *me, *h, *vm;
	struct td_buf b;
	uint32_t i;

	if (g == NULL)
		return NULL;
	/* the configuration (tdlisten --guest) that lets them pair */
	if (!allowed && (guests_allow("hv0:ckrec") == -1 ||
	    guests_allow("ckrec:vm1") == -1)) {
		free(g);
		return NULL;
	}
	allowed = true;
	me = guests_new("ckrec", 0x7777, "local", "ckrec");
	h = guests_new("hv0", 0x9999, "local", "hv0");
	vm = guests_new("vm1", 0x8888, "local", "vm1");
	td_buf_init(&b, TD_MAX_FRAME);
	snprintf(g->name, sizeof g->name, "vm1");
	g->pid = 4321;
	g->nvcpus = 2;
	if (k == 3) {
		g->flags = TD_GUEST_KVM;
		g->tsc_mult = 1u << 23;
		g->tsc_shift = 24;
	}
	for (i = 0; i < 2; i++) {
		g->vcpu[i].vcpu = i;
		g->vcpu[i].tid = 4328 + (int32_t)i;
		g->vcpu[i].tsc_offset = -1000;
		g->vcpu[i].tsc_ratio = 1;
	}
	td_msg_pack_guest(&b, g);
	guests_declare(me, b.data, b.len);
	td_buf_reset(&b);
	snprintf(g->name, sizeof g->name, "ckrec");
	g->flags = 0;
	td_msg_pack_guest(&b, g);
	guests_declare(h, b.data, b.len);
	guests_start(h);
	guests_start(me);
	guests_start(vm);
	td_buf_free(&b);
	free(g);
	peers[0] = h;
	peers[1] = vm;
	return me;
}

/*
 * The listener's checkpoint (checkpoint_write(), PATH.state) of a recording
 * into f: its parameters, counters, per-CPU sequences and samples (one at
 * point 1; two kept and one dropped at point 3, with TSC2NSEC factors), its
 * file's TRACEID and, at points 2 and 3, pairings (ckrec_guests()).
 */
static int
ckrec_listener(struct td_file *f, const char *path, int v, int k,
    struct td_buf *out)
{
	static const uint8_t tsc[8] = { 0x55, 0x55, 0x55, 0x55, 31, 0, 0, 0 };
	struct recording_cpu cpu[CKREC_NCPUS];
	struct guests *peers[2] = { NULL, NULL };
	struct td_tsync_sample t;
	struct checkpoint ck;
	char *state_path;
	int i, ret;

	memset(&ck, 0, sizeof ck);
	memset(cpu, 0, sizeof cpu);
	ck.params.ncpus = CKREC_NCPUS;
	ck.params.page_size = CKREC_PAGE;
	ck.params.long_size = ck.params.commit_size = 8;
	ck.params.recording_id = 0x1000 + (uint64_t)v;
	ck.params.file_trace_id = 0x7777;
	snprintf(ck.params.name, sizeof ck.params.name, "ckrec");
	snprintf(ck.params.clock, sizeof ck.params.clock, "local");
	ck.trace_id = 0x5e55;
	ck.position = ck.bytes = 1000 * (uint64_t)(k + 1);
	ck.lost = (uint64_t)k;
	ck.elapsed_ns = 1500000000;	/* the same bytes every time */
	ck.cpu = cpu;
	ck.file = f;
	for (i = 0; i < CKREC_NCPUS; i++) {
		cpu[i].next_seq = td_file_cpu_pages(f, i);
		cpu[i].events = 3 * cpu[i].next_seq;
		ck.pages += cpu[i].next_seq;
	}
	ck.ts = timesync_new();
	memset(&t, 0, sizeof t);
	t.probes = 3;
	t.scaling = 1;
	t.bound = 4000;
	t.rtt = 8000;
	for (i = 0; i < (k == 1 ? 1 : k == 3 ? 3 : 0); i++) {
		t.round = (uint32_t)i;
		t.ts = 1000000 * (uint64_t)(i + 1);
		t.offset = -5000 + i;
		t.scaling = i == 2 ? 3 : 1;	/* dropped (counted) */
		timesync_add(ck.ts, &t);
	}
	if (k == 3)
		timesync_tsc2nsec(ck.ts, tsc, false);
	if (k >= 2)
		ck.guests = ckrec_guests(k, peers);
	ret = -1;
	if (asprintf(&state_path, "%s.state", path) != -1) {
		ret = checkpoint_write(state_path, &ck, NULL);
		if (ret == 0) {
			td_buf_reset(out);
			ret = td_buf_read_file(out, state_path);
		}
		checkpoint_remove(state_path);
		free(state_path);
	}
	timesync_free(ck.ts);
	guests_free(ck.guests);
	if (k >= 2) {
		guests_free(peers[0]);
		guests_free(peers[1]);
	}
	return ret;
}

/* Checkpoint k: the writer's state, the listener's, what it holds. */
static int
ckrec_point(struct td_file *f, const char *path, int v, int k,
    struct ckrec_point *pt)
{
	int i;

	td_buf_reset(&pt->state);
	if (td_file_checkpoint(f, &pt->state) == -1 ||
	    ckrec_listener(f, path, v, k, &pt->listener) == -1)
		return -1;
	for (i = 0; i < CKREC_NCPUS; i++)
		pt->pages[i] = td_file_cpu_pages(f, i);
	pt->samples = k == 1 ? 1 : k == 3 ? 2 : 0;
	pt->dropped = k == 3;
	pt->paired = k >= 2;
	pt->sections = 0;
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		if (td_file_has_section(f, i))
			pt->sections |= 1u << (i - TD_OPT_HEADER_INFO);
	return 0;
}

static int
ckrec_pages(struct td_file *f, int cpu, int n)
{
	uint8_t page[CKREC_PAGE];

	while (n-- > 0) {
		ckrec_page(page, cpu, td_file_cpu_pages(f, cpu));
		if (td_file_cpu_page(f, cpu, page, sizeof page) == -1)
			return -1;
	}
	return 0;
}

static int
ckrec_sections(struct td_file *f, int from, int to, struct td_buf *b)
{
	int id;

	for (id = from; id <= to; id++) {
		ckrec_section(id, b);
		if (td_file_section_add(f, id, b->data, b->len) == -1)
			return -1;
	}
	return 0;
}

int
ckrec_make(const char *path, int v, struct ckrec_point *pt)
{
	static const char uname[] = "Linux ckrec 6.1.0 #1 SMP x86_64";
	struct td_file_params p;
	struct td_file *f;
	struct td_buf b;
	int k, ok, e;

	for (k = 0; k < CKREC_POINTS; k++) {
		td_buf_init(&pt[k].state, TD_MAX_SECTION_SIZE);
		td_buf_init(&pt[k].listener, 2 * (size_t)TD_MAX_SECTION_SIZE);
	}
	memset(&p, 0, sizeof p);
	p.version = ckrec_variants[v].version;
	p.codec = ckrec_variants[v].codec;
	p.page_size = CKREC_PAGE;
	p.long_size = 8;
	p.ncpus = CKREC_NCPUS;
	p.clock = "local";
	if ((f = td_file_create(path, &p)) == NULL)
		return -1;
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	/* 13 + 3 pages: a full chunk and some waiting at point 1 */
	ok = ckrec_point(f, path, v, 0, &pt[0]) == 0 &&
	    ckrec_sections(f, TD_OPT_HEADER_INFO, TD_OPT_FTRACE_EVENTS,
	    &b) == 0 &&
	    ckrec_pages(f, 0, 13) == 0 && ckrec_pages(f, 1, 3) == 0 &&
	    ckrec_point(f, path, v, 1, &pt[1]) == 0 &&
	    td_file_add_option(f, TD_OPT_UNAME, uname, sizeof uname) == 0 &&
	    ckrec_sections(f, TD_OPT_EVENT_FORMATS, TD_OPT_PRINTK, &b) == 0 &&
	    ckrec_pages(f, 1, 12) == 0 && ckrec_pages(f, 0, 2) == 0 &&
	    ckrec_point(f, path, v, 2, &pt[2]) == 0 &&
	    ckrec_sections(f, TD_OPT_CMDLINES, TD_OPT_CMDLINES, &b) == 0 &&
	    ckrec_pages(f, 0, 1) == 0 &&
	    ckrec_point(f, path, v, 3, &pt[3]) == 0 &&
	    /* what no checkpoint covers: restoring cuts it off */
	    ckrec_pages(f, 0, 11) == 0 && ckrec_pages(f, 1, 4) == 0 &&
	    td_file_add_option(f, TD_OPT_HOOK, "late", 5) == 0;
	e = errno;
	td_buf_free(&b);
	if (!ok) {
		td_file_abort(f);
		td_file_free(f);
		errno = e;
		return -1;
	}
	td_file_release(f);
	return 0;
}

void
ckrec_points_free(struct ckrec_point *pt)
{
	int k;

	for (k = 0; k < CKREC_POINTS; k++) {
		td_buf_free(&pt[k].state);
		td_buf_free(&pt[k].listener);
	}
}
