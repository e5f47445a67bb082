/*
 * test-guests.c: host and guest recordings paired by tdlisten
 * (listener/recording/guests.c), no privileges, no network.
 *
 * Pairing whichever starts first: a guest recording before its host's,
 * after it, without one, of another name; a guest rebooted (two guest
 * recordings, two GUEST options, each with the map it ran with); either
 * side finishing first; two hosts declaring the same guest (the first
 * keeps it); QEMU gone (the last map stays).  The GUEST options are
 * written into a real trace.dat and read back with tdread, byte for
 * byte, and with trace-cmd 3.1.6 when it is installed.  A checkpoint of
 * both sides, loaded into fresh recordings (tdlisten restarted), pairs
 * them again.  Pairing is authorised by the configuration (tdlisten
 * --guest HOST:GUEST, guests_allow()): an identity that claims another as
 * its guest, first or not, pairs nothing (issue 31, row 2).
 *
 * The exact KVM clock, against numbers worked out by hand: the guest's
 * samples are the host's moved by the TSC offset (and scaled by the TSC
 * ratio), in the units of the guest's own TSC2NSEC; vCPUs whose TSCs
 * differ, a host or guest not in x86-tsc, a guest without TSC2NSEC keep
 * the probes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "cursor.h"
#include "guests.h"
#include "tdfile.h"
#include "tdproto.h"
#include "tdread.h"
#include "testdata.h"
#include "timesync.h"
#include "banned.h"

/* Declare guest name on h: vCPUs 0..n-1 on threads tid0, tid0 + 1, ... */
static void
declare(struct guests *h, const char *name, uint32_t pid, uint32_t n,
    int32_t tid0, uint8_t flags, int64_t offset, uint64_t ratio,
    uint32_t frac)
{
	struct td_guest *g = calloc(1, sizeof *g);
	struct td_buf b;
	uint32_t i;

	assert_non_null(g);
	snprintf(g->name, sizeof g->name, "%s", name);
	g->pid = pid;
	g->flags = flags;
	g->nvcpus = n;
	if (flags & TD_GUEST_KVM) {
		g->tsc_mult = 1u << 23;		/* 2 GHz: 0.5 ns a cycle */
		g->tsc_shift = 24;
	}
	for (i = 0; i < n; i++) {
		g->vcpu[i].vcpu = i;
		g->vcpu[i].tid = tid0 + (int32_t)i;
		g->vcpu[i].tsc_offset = offset;
		g->vcpu[i].tsc_ratio = ratio;
		g->vcpu[i].tsc_frac = frac;
	}
	td_buf_init(&b, TD_MAX_FRAME);
	assert_int_equal(td_msg_pack_guest(&b, g), 0);
	assert_int_equal(guests_declare(h, b.data, b.len), 0);
	td_buf_free(&b);
	free(g);
}

/* Whether g was paired, with host id want. */
static void
paired(struct guests *g, uint64_t want)
{
	uint64_t id = 0;

	assert_true(guests_host(g, &id));
	assert_true(id == want);
}

static void
unpaired(struct guests *g)
{
	uint64_t id;

	assert_false(guests_host(g, &id));
}

/* One expected GUEST option. */
struct want_guest {
	const char	*name;
	uint64_t	 trace_id;
	uint32_t	 nvcpus;
	int32_t		 tid[4];	/* -1: no thread */
};

/*
 * Write h's GUEST options into a real file and read them back: exactly
 * the n wanted, in order, byte for byte.
 */
static void
check_options(struct guests *h, const struct want_guest *want, int n)
{
	struct testdata_meta m;
	struct td_file_params fp;
	struct td_file *f;
	struct td_read *r;
	struct td_buf got, exp;
	char *dir = testdata_tmpdir(), path[512];
	uint32_t k;
	int i, id;

	testdata_meta_init(&m);
	snprintf(path, sizeof path, "%s/host.dat", dir);
	memset(&fp, 0, sizeof fp);
	fp.version = 7;
	fp.codec = TD_CODEC_NONE;
	fp.page_size = TESTDATA_PAGE_SIZE;
	fp.long_size = 8;
	fp.ncpus = 1;
	fp.clock = "local";
	f = td_file_create(path, &fp);
	assert_non_null(f);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++)
		assert_int_equal(td_file_section_add(f, id,
		    testdata_meta_section(&m, id)->data,
		    testdata_meta_section(&m, id)->len), 0);
	assert_int_equal(guests_options(h, f), 0);
	assert_int_equal(td_file_finish(f), 0);
	td_file_free(f);
	r = td_read_open(path);
	assert_non_null(r);
	td_buf_init(&got, TD_MAX_OPTION_SIZE);
	td_buf_init(&exp, TD_MAX_OPTION_SIZE);
	for (i = 0; i < n; i++) {
		assert_int_equal(td_read_option(r, TD_OPT_GUEST, i, &got), 0);
		td_buf_reset(&exp);
		td_buf_add_str(&exp, want[i].name);
		td_buf_add_u64(&exp, want[i].trace_id);
		td_buf_add_u32(&exp, want[i].nvcpus);
		for (k = 0; k < want[i].nvcpus; k++) {
			td_buf_add_u32(&exp, k);
			td_buf_add_u32(&exp, (uint32_t)want[i].tid[k]);
		}
		assert_int_equal(got.len, exp.len);
		assert_memory_equal(got.data, exp.data, exp.len);
	}
	assert_int_equal(td_read_option(r, TD_OPT_GUEST, n, &got), -1);
	td_read_close(r);
	if (n > 0 && testdata_have_trace_cmd()) {
		char line[128];

		td_buf_reset(&got);
		td_buf_reset(&exp);
		testdata_trace_cmd("dump --options", path, &got, &exp);
		testdata_assert_has(&got, want[0].name);
		snprintf(line, sizeof line, "  0 %d [guest cpu, host pid]",
		    want[0].tid[0]);
		testdata_assert_has(&got, line);
	}
	td_buf_free(&got);
	td_buf_free(&exp);
	testdata_meta_free(&m);
	testdata_rmdir(dir);
	free(dir);
}

static void
test_guest_after_host(void **state)
{
	struct guests *h = guests_new("hv1", 0x1111, "local", "host");
	struct guests *g = guests_new("vm1", 0x2222, "local", "guest");
	const struct want_guest w[] = { { "vm1", 0x2222, 2, { 500, 501 } } };

	guests_start(h);
	declare(h, "vm1", 42, 2, 500, 0, 0, 1, 0);
	unpaired(h);
	guests_start(g);
	paired(g, 0x1111);
	check_options(h, w, 1);
	guests_free(g);
	guests_free(h);
}

static void
test_guest_before_host(void **state)
{
	struct guests *g = guests_new("vm1", 0x2222, "local", "guest");
	struct guests *h = guests_new("hv1", 0x1111, "local", "host");
	const struct want_guest w[] = { { "vm1", 0x2222, 2, { 500, 501 } } };

	guests_start(g);
	unpaired(g);
	guests_start(h);
	unpaired(g);		/* h has not said it runs vm1 yet */
	declare(h, "vm1", 42, 2, 500, 0, 0, 1, 0);
	paired(g, 0x1111);
	/* the host's file is finished first: the guest keeps its host */
	check_options(h, w, 1);
	guests_finish(h);
	paired(g, 0x1111);
	guests_free(h);
	paired(g, 0x1111);
	guests_free(g);
}

static void
test_no_host(void **state)
{
	struct guests *g = guests_new("vm1", 0x2222, "local", "guest");
	struct guests *h = guests_new("hv1", 0x1111, "local", "host");
	struct guests *z = guests_new("vm3", 0, "local", "old");
	const char *why = "x";

	guests_start(g);
	guests_start(h);
	declare(h, "vm2", 42, 1, 500, 0, 0, 1, 0);
	unpaired(g);
	assert_null(guests_kvm(g, 1, 0, &why));
	assert_null(why);
	/* a recording of an old checkpoint (no trace id) never pairs */
	guests_start(z);
	declare(h, "vm3", 43, 1, 600, 0, 0, 1, 0);
	unpaired(z);
	check_options(h, NULL, 0);
	guests_free(z);
	guests_free(h);
	guests_free(g);
}

static void
test_reboot(void **state)
{
	struct guests *h = guests_new("hv1", 0x1111, "local", "host");
	struct guests *g1 = guests_new("vm1", 0x2222, "local", "guest");
	struct guests *g2 = guests_new("vm1", 0x3333, "local", "guest");
	const struct want_guest w[] = {
		{ "vm1", 0x2222, 1, { 500 } },
		{ "vm1", 0x3333, 3, { 700, -1, 702 } },
	};
	struct td_guest *t = calloc(1, sizeof *t);
	struct td_buf b;

	assert_non_null(t);
	guests_start(h);
	declare(h, "vm1", 42, 1, 500, 0, 0, 1, 0);
	guests_start(g1);
	paired(g1, 0x1111);
	guests_finish(g1);
	/* QEMU restarted with more vCPUs; the first recording keeps its map */
	declare(h, "vm1", 43, 2, 600, 0, 0, 1, 0);
	guests_start(g2);
	paired(g2, 0x1111);
	/* vCPU 1 unplugged: vCPUs 0 and 2 (GUEST wants every index) */
	snprintf(t->name, sizeof t->name, "vm1");
	t->pid = 43;
	t->nvcpus = 2;
	t->vcpu[0].vcpu = 0;
	t->vcpu[0].tid = 700;
	t->vcpu[1].vcpu = 2;
	t->vcpu[1].tid = 702;
	td_buf_init(&b, TD_MAX_FRAME);
	assert_int_equal(td_msg_pack_guest(&b, t), 0);
	assert_int_equal(guests_declare(h, b.data, b.len), 0);
	/* QEMU gone: the last map stays */
	td_buf_reset(&b);
	t->flags = TD_GUEST_GONE;
	t->nvcpus = 0;
	assert_int_equal(td_msg_pack_guest(&b, t), 0);
	assert_int_equal(guests_declare(h, b.data, b.len), 0);
	check_options(h, w, 2);
	/* malformed */
	assert_int_equal(guests_declare(h, b.data, b.len - 1), -1);
	assert_int_equal(errno, EBADMSG);
	td_buf_free(&b);
	free(t);
	guests_free(g2);
	guests_free(g1);
	guests_free(h);
}

static void
test_two_hosts(void **state)
{
	struct guests *h1 = guests_new("hv1", 0x1111, "local", "host 1");
	struct guests *h2 = guests_new("hv2", 0x4444, "local", "host 2");
	struct guests *g = guests_new("vm1", 0x2222, "local", "guest");
	const struct want_guest w[] = { { "vm1", 0x2222, 1, { 500 } } };

	guests_start(h1);
	guests_start(h2);
	declare(h1, "vm1", 42, 1, 500, 0, 0, 1, 0);
	declare(h2, "vm1", 52, 1, 800, 0, 0, 1, 0);
	guests_start(g);
	paired(g, 0x1111);
	check_options(h1, w, 1);
	check_options(h2, NULL, 0);
	guests_free(g);
	guests_free(h2);
	guests_free(h1);
}

/* A host sample: reference cycles = ts + offset, +- bound ns. */
static void
host_sample(struct guests *h, uint32_t round, uint64_t ts, int64_t offset)
{
	struct td_tsync_sample s;

	memset(&s, 0, sizeof s);
	s.round = round;
	s.probes = 64;
	s.ts = ts;
	s.offset = offset;
	s.scaling = 1;
	s.bound = 3000;
	s.rtt = 6000;
	guests_host_sample(h, &s);
}

static void
test_kvm(void **state)
{
	struct guests *h = guests_new("hv1", 0x1111, "x86-tsc", "host");
	struct guests *g = guests_new("vm1", 0x2222, "x86-tsc", "guest");
	const struct td_tsync_sample *s;
	struct timesync *t;
	const char *why;
	uint32_t n;
	long double want;

	guests_start(h);
	guests_start(g);
	/* no TSC scaling (ratio 1.0 in 48 bits), offset -1000 */
	declare(h, "vm1", 42, 2, 500, TD_GUEST_KVM, -1000, 1ULL << 48, 48);
	paired(g, 0x1111);
	host_sample(h, 1, 1000000000, 2000000000);
	host_sample(h, 2, 3000000000ULL, 2000000100);
	/* the guest's TSC2NSEC is the host's: the host's reference */
	t = guests_kvm(g, 1u << 23, 24, &why);
	assert_non_null(t);
	s = timesync_samples(t, &n);
	assert_int_equal(n, 2);
	assert_true(s[0].ts == 1000000000 - 1000);
	assert_true(s[0].offset == 2000000000 + 1000);
	assert_true(s[1].ts == 3000000000ULL - 1000);
	assert_true(s[1].offset == 2000000100 + 1000);
	assert_true(s[0].bound == 3000 && s[0].round == 1);
	timesync_free(t);
	/* a guest kernel that calibrated its TSC 1 ppm faster */
	t = guests_kvm(g, (1u << 23) + 8, 24, &why);
	assert_non_null(t);
	s = timesync_samples(t, &n);
	want = 3000000000.0L * (1u << 23) / ((1u << 23) + 8);
	assert_true(s[0].ts == 1000000000 - 1000);
	assert_true(s[0].offset + (int64_t)s[0].ts - want < 1 &&
	    s[0].offset + (int64_t)s[0].ts - want > -1);
	timesync_free(t);
	/* no TSC2NSEC from the guest */
	assert_null(guests_kvm(g, 0, 0, &why));
	assert_string_equal(why, "the guest sent no TSC2NSEC");
	guests_free(g);

	/* TSC scaling: the guest's TSC runs 1.5 times the host's */
	g = guests_new("vm1", 0x3333, "x86-tsc", "guest");
	guests_start(g);
	paired(g, 0x1111);
	declare(h, "vm1", 42, 2, 500, TD_GUEST_KVM, -1000, 3ULL << 47, 48);
	host_sample(h, 3, 1000000000, 2000000000);
	t = guests_kvm(g, 1u << 23, 24, &why);
	assert_non_null(t);
	s = timesync_samples(t, &n);
	assert_int_equal(n, 1);
	assert_true(s[0].ts == 1500000000 - 1000);
	assert_true(s[0].offset == 3000000000LL - 1500000000 + 1000);
	timesync_free(t);
	guests_free(g);

	/* vCPUs whose TSCs differ: the probes stay */
	g = guests_new("vm1", 0x5555, "x86-tsc", "guest");
	guests_start(g);
	declare(h, "vm1", 42, 1, 500, TD_GUEST_KVM, -1000, 1, 0);
	{
		struct td_guest *t2 = calloc(1, sizeof *t2);
		struct td_buf b;

		assert_non_null(t2);
		snprintf(t2->name, sizeof t2->name, "vm1");
		t2->pid = 42;
		t2->flags = TD_GUEST_KVM;
		t2->tsc_mult = 1;
		t2->nvcpus = 2;
		t2->vcpu[0].tid = 500;
		t2->vcpu[0].tsc_ratio = 1;
		t2->vcpu[1].vcpu = 1;
		t2->vcpu[1].tid = 501;
		t2->vcpu[1].tsc_offset = 5;
		t2->vcpu[1].tsc_ratio = 1;
		td_buf_init(&b, TD_MAX_FRAME);
		assert_int_equal(td_msg_pack_guest(&b, t2), 0);
		assert_int_equal(guests_declare(h, b.data, b.len), 0);
		td_buf_free(&b);
		free(t2);
	}
	host_sample(h, 4, 1000000000, 2000000000);
	assert_null(guests_kvm(g, 1u << 23, 24, &why));
	assert_string_equal(why, "the vCPUs' TSCs differ");
	guests_free(g);

	/* a guest in another clock: no exact clock */
	g = guests_new("vm1", 0x6666, "local", "guest");
	guests_start(g);
	declare(h, "vm1", 42, 1, 500, TD_GUEST_KVM, -1000, 1, 0);
	host_sample(h, 5, 1000000000, 2000000000);
	assert_null(guests_kvm(g, 1u << 23, 24, &why));
	assert_string_equal(why, "no exact KVM clock from the host");
	guests_free(g);
	guests_free(h);
}

/* Save g into b. */
static void
save(struct guests *g, struct td_buf *b)
{
	td_buf_init(b, 1 << 20);
	assert_int_equal(guests_save(g, b), 0);
}

/* A fresh recording's side loaded from b, as after a restart. */
static struct guests *
load(const struct td_buf *b, const char *identity, uint64_t id,
    const char *clock)
{
	struct guests *g = guests_new(identity, 0, "", "recovered");
	struct td_cur c;

	td_cur_init(&c, b->data, b->len);
	assert_int_equal(guests_load(g, &c), 0);
	assert_int_equal(td_cur_end(&c), 0);
	guests_describe(g, identity, id, clock);
	return g;
}

static void
test_checkpoint(void **state)
{
	struct guests *h = guests_new("hv1", 0x1111, "x86-tsc", "host");
	struct guests *g = guests_new("vm1", 0x2222, "x86-tsc", "guest");
	const struct want_guest w[] = { { "vm1", 0x2222, 2, { 500, 501 } } };
	struct td_buf hb, gb;
	struct td_cur c;
	const char *why;
	struct timesync *t;
	size_t cut;

	guests_start(h);
	guests_start(g);
	declare(h, "vm1", 42, 2, 500, TD_GUEST_KVM, -1000, 1, 0);
	host_sample(h, 1, 1000000000, 2000000000);
	save(h, &hb);
	save(g, &gb);
	guests_free(g);
	guests_free(h);

	/* tdlisten restarted: the guest comes back first */
	g = load(&gb, "vm1", 0x2222, "x86-tsc");
	guests_start(g);
	paired(g, 0x1111);
	h = load(&hb, "hv1", 0x1111, "x86-tsc");
	guests_start(h);
	/* linked again: the host's samples reach the guest */
	host_sample(h, 2, 2000000000, 2000000000);
	t = guests_kvm(g, 1, 0, &why);
	assert_non_null(t);
	assert_int_equal(timesync_count(t), 2);
	timesync_free(t);
	check_options(h, w, 1);

	/* damaged: cut anywhere, the load fails and frees what it took */
	for (cut = 0; cut < hb.len; cut++) {
		struct guests *x = guests_new("hv1", 0, "", "x");

		td_cur_init(&c, hb.data, cut);
		assert_true(guests_load(x, &c) == -1 || td_cur_end(&c) == -1);
		guests_free(x);
	}
	td_buf_free(&hb);
	td_buf_free(&gb);
	guests_free(g);
	guests_free(h);
}

/*
 * Issue 31: pairings taken back from checkpoints are checked against
 * --guest again.  hv1 and vm1 (allowed) paired and checkpointed; a
 * tdlisten that allows neither vm4 on hv1 nor vm1 on hv3 finds the same
 * states as vm4's and hv3's: each restored recording drops the pairing,
 * so neither file names the other.
 */
static void
test_checkpoint_recheck(void **state)
{
	struct guests *h = guests_new("hv1", 0x1111, "x86-tsc", "host");
	struct guests *g = guests_new("vm1", 0x2222, "x86-tsc", "guest");
	struct td_buf hb, gb;

	(void)state;
	guests_start(h);
	guests_start(g);
	declare(h, "vm1", 42, 2, 500, TD_GUEST_KVM, -1000, 1, 0);
	paired(g, 0x1111);
	save(h, &hb);
	save(g, &gb);
	guests_free(g);
	guests_free(h);

	g = load(&gb, "vm4", 0x2222, "x86-tsc");
	unpaired(g);
	guests_start(g);
	unpaired(g);
	h = load(&hb, "hv3", 0x1111, "x86-tsc");
	guests_start(h);
	check_options(h, NULL, 0);
	unpaired(g);
	guests_free(g);
	guests_free(h);

	/* still allowed: kept (test_checkpoint does the rest) */
	g = load(&gb, "vm1", 0x2222, "x86-tsc");
	paired(g, 0x1111);
	guests_free(g);
	td_buf_free(&hb);
	td_buf_free(&gb);
}

/*
 * Issue 31, row 2: identity "evil" says it runs "vm1" (and its own
 * "vm2"), first: nothing of it pairs; vm1's real host, allowed, pairs.
 */
static void
test_claim_refused(void **state)
{
	struct guests *e = guests_new("evil", 0x6666, "x86-tsc", "evil");
	struct guests *g = guests_new("vm1", 0x2222, "x86-tsc", "guest");
	struct guests *v = guests_new("vm2", 0x7777, "x86-tsc", "vm2");
	struct guests *h = guests_new("hv1", 0x1111, "x86-tsc", "host");
	const struct want_guest w[] = { { "vm1", 0x2222, 1, { 500 } } };

	guests_start(e);
	declare(e, "vm1", 66, 1, 900, TD_GUEST_KVM, 3600000000000LL, 1, 0);
	declare(e, "vm2", 67, 1, 901, 0, 0, 1, 0);
	guests_start(g);
	guests_start(v);
	unpaired(g);
	unpaired(v);
	check_options(e, NULL, 0);
	guests_start(h);
	declare(h, "vm1", 42, 1, 500, 0, 0, 1, 0);
	paired(g, 0x1111);
	check_options(h, w, 1);
	check_options(e, NULL, 0);
	guests_free(h);
	guests_free(v);
	guests_free(g);
	guests_free(e);
	/* what --guest takes */
	assert_int_equal(guests_allow("hv1"), -1);
	assert_int_equal(guests_allow(":vm1"), -1);
	assert_int_equal(guests_allow("hv1:"), -1);
	assert_int_equal(guests_allow("hv1:vm1:x"), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(guests_allow("2001:db8::1:vm1"), -1);
	assert_int_equal(guests_allow("[2001:db8::1:vm1"), -1);
	assert_int_equal(guests_allow("[]:vm1"), -1);
	assert_int_equal(guests_allow("[zz]:vm1"), -1);
	assert_int_equal(guests_allow("hv1:[2001:db8::1"), -1);
}

/*
 * Issue 31: an IPv6 identity (--insecure: the address) can be named in
 * --guest, in brackets, however the address is spelled: the host
 * [2001:db8::1] is the identity "_2001_db8__1_" (agentconn.c), its guest at
 * [::ffff:10.0.0.7] "___ffff_10.0.0.7_", an IPv4 one [10.0.0.9] "10.0.0.9".
 */
static void
test_allow_bracketed(void **state)
{
	struct guests *h = guests_new("_2001_db8__1_", 0x1111, "x86-tsc",
	    "host");
	struct guests *g = guests_new("___ffff_10.0.0.7_", 0x2222, "x86-tsc",
	    "guest");
	struct guests *v = guests_new("10.0.0.9", 0x3333, "x86-tsc", "v4");

	(void)state;
	assert_int_equal(guests_allow("[2001:0db8:0:0::1]:[::ffff:10.0.0.7]"),
	    0);
	assert_int_equal(guests_allow("[2001:db8::1]:[10.0.0.9]"), 0);
	guests_start(h);
	guests_start(g);
	guests_start(v);
	declare(h, "___ffff_10.0.0.7_", 42, 1, 500, 0, 0, 1, 0);
	declare(h, "10.0.0.9", 43, 1, 600, 0, 0, 1, 0);
	paired(g, 0x1111);
	paired(v, 0x1111);
	guests_free(v);
	guests_free(g);
	guests_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_refused),
		cmocka_unit_test(test_allow_bracketed),
		cmocka_unit_test(test_guest_after_host),
		cmocka_unit_test(test_guest_before_host),
		cmocka_unit_test(test_no_host),
		cmocka_unit_test(test_reboot),
		cmocka_unit_test(test_two_hosts),
		cmocka_unit_test(test_kvm),
		cmocka_unit_test(test_checkpoint),
		cmocka_unit_test(test_checkpoint_recheck),
	};

	/* tdlisten --guest hv1:vm1 --guest hv2:vm1 --guest hv1:vm3 */
	if (guests_allow("hv1:vm1") == -1 || guests_allow("hv2:vm1") == -1 ||
	    guests_allow("hv1:vm3") == -1)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
