/*
 * test-guest.c: tdagent --guest's side (agent/guest/guest.c,
 * agent/guest/kvmclock.c, agent/guest/qmp.c), without privileges and without
 * KVM.
 *
 * The exact KVM clock is read from a directory of the shape of KVM's
 * debugfs (kvm/<pid>-<fd>/vcpuN/tsc-offset, tsc-scaling-ratio,
 * tsc-scaling-ratio-frac-bits) that the test makes: the VM of the right
 * process among others, vCPUs in numeric order, a host without TSC
 * scaling (no ratio files), values changed between two reads, damaged
 * files, a VM gone.  This machine's KVM cannot run guests, so this
 * directory is the only KVM the tests have (docs/guests.md).
 *
 * The watcher is run on the test's own process: threads named "CPU
 * N/TCG" as QEMU names its vCPU threads, and a fake debugfs directory for
 * its pid (TD_KVM_DEBUGFS): what it sends (TD_OPT_TD_GUEST, decoded with
 * proto/msg.c) names those threads and TSCs, only when something changed,
 * and again after a thread comes or a TSC offset moves.
 *
 * QMP: query-cpus-fast answers as QEMU 7.2 writes them (nested
 * "thread-id" of the topology ignored, any key order), and the ones to
 * refuse.  --guest arguments: the accepted forms and the refused ones.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "guest.h"
#include "kvmclock.h"
#include "qmp.h"
#include "tdproto.h"
#include "testdata.h"
#include "banned.h"

/* Write text into dir/rel (made with its directories). */
static void
put(const char *dir, const char *rel, const char *text)
{
	char path[512], *slash;
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, rel);
	for (slash = strchr(path + strlen(dir) + 1, '/'); slash != NULL;
	    slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Remove dir and everything under it. */
static void
rmtree(char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	free(dir);
}

static void
rm(const char *dir, const char *rel)
{
	char path[512];

	snprintf(path, sizeof path, "%s/%s", dir, rel);
	assert_int_equal(unlink(path), 0);
}

/* One vCPU's three files. */
static void
put_vcpu(const char *dir, const char *vm, int vcpu, const char *offset,
    const char *ratio, const char *frac)
{
	char rel[256];

	snprintf(rel, sizeof rel, "%s/vcpu%d/tsc-offset", vm, vcpu);
	put(dir, rel, offset);
	if (ratio == NULL)
		return;
	snprintf(rel, sizeof rel, "%s/vcpu%d/tsc-scaling-ratio", vm, vcpu);
	put(dir, rel, ratio);
	snprintf(rel, sizeof rel, "%s/vcpu%d/tsc-scaling-ratio-frac-bits", vm,
	    vcpu);
	put(dir, rel, frac);
}

static void
test_kvmclock(void **state)
{
	struct kvmclock_vcpu v[8];
	struct kvmclock *k;
	char *dir = testdata_tmpdir(), err[256], cmd[600];

	/* the VM of 4242 (fd 11), its second VM (fd 15), other processes */
	put_vcpu(dir, "4242-11", 0, "-123456789012\n", "281474976710656\n",
	    "48\n");
	put_vcpu(dir, "4242-11", 1, "-123456789012\n", "281474976710656\n",
	    "48\n");
	put_vcpu(dir, "4242-11", 10, "-123456789012\n", "422212465065984\n",
	    "48\n");
	put_vcpu(dir, "4242-11", 2, "-123456789012\n", "281474976710656\n",
	    "48\n");
	put_vcpu(dir, "4242-15", 0, "1\n", NULL, NULL);
	put_vcpu(dir, "42420-3", 0, "2\n", NULL, NULL);
	put_vcpu(dir, "77-3", 0, "3\n", NULL, NULL);
	put(dir, "4242-11/halt_exits", "0\n");

	assert_null(kvmclock_open(dir, 999, err, sizeof err));
	assert_int_equal(errno, ENOENT);
	k = kvmclock_open(dir, 4242, err, sizeof err);
	assert_non_null(k);
	assert_string_equal(kvmclock_name(k), "4242-11");
	assert_int_equal(kvmclock_read(k, v, 8, err, sizeof err), 4);
	assert_int_equal(v[0].vcpu, 0);
	assert_int_equal(v[1].vcpu, 1);
	assert_int_equal(v[2].vcpu, 2);
	assert_int_equal(v[3].vcpu, 10);
	assert_true(v[0].offset == -123456789012LL);
	assert_true(v[0].ratio == 1ULL << 48);
	assert_int_equal(v[0].frac, 48);
	assert_true(v[3].ratio == 3ULL << 47);
	/* too many for the room given */
	assert_int_equal(kvmclock_read(k, v, 3, err, sizeof err), -1);

	/* read again: a TSC written, a host that does not scale */
	put_vcpu(dir, "4242-11", 0, "5000\n", NULL, NULL);
	rm(dir, "4242-11/vcpu1/tsc-scaling-ratio");
	rm(dir, "4242-11/vcpu1/tsc-scaling-ratio-frac-bits");
	assert_int_equal(kvmclock_read(k, v, 8, err, sizeof err), 4);
	assert_true(v[0].offset == 5000);
	assert_true(v[1].ratio == 1 && v[1].frac == 0);

	/* damaged: no number, a ratio without its fraction bits */
	put_vcpu(dir, "4242-11", 2, "12abc\n", NULL, NULL);
	assert_int_equal(kvmclock_read(k, v, 8, err, sizeof err), -1);
	assert_non_null(strstr(err, "vcpu2/tsc-offset"));
	put_vcpu(dir, "4242-11", 2, "7\n", NULL, NULL);
	rm(dir, "4242-11/vcpu10/tsc-scaling-ratio-frac-bits");
	assert_int_equal(kvmclock_read(k, v, 8, err, sizeof err), -1);
	put(dir, "4242-11/vcpu10/tsc-scaling-ratio-frac-bits", "64\n");
	assert_int_equal(kvmclock_read(k, v, 8, err, sizeof err), -1);

	/* the VM is gone: its directory empties */
	snprintf(cmd, sizeof cmd, "rm -rf '%s'/4242-11/vcpu*", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(kvmclock_read(k, v, 8, err, sizeof err), -1);
	assert_int_equal(errno, ENOENT);
	kvmclock_free(k);
	rmtree(dir);
}

/* QEMU 7.2's answer to query-cpus-fast for two vCPUs. */
static const char qmp_two[] =
    "{\"return\": [{\"thread-id\": 788, \"props\": {\"core-id\": 0, "
    "\"thread-id\": 0, \"socket-id\": 0}, \"qom-path\": "
    "\"/machine/unattached/device[0]\", \"cpu-index\": 0, \"target\": "
    "\"x86_64\"}, {\"thread-id\": 884, \"props\": {\"core-id\": 1, "
    "\"thread-id\": 0, \"socket-id\": 0}, \"qom-path\": "
    "\"/machine/peripheral/cpu1\", \"cpu-index\": 1, \"target\": "
    "\"x86_64\"}]}";

static int
parse(const char *s, uint32_t *vcpu, int32_t *tid, int max)
{
	return qmp_parse_cpus(s, strlen(s), vcpu, tid, max);
}

static void
test_qmp_parse(void **state)
{
	uint32_t vcpu[4];
	int32_t tid[4];

	assert_int_equal(parse(qmp_two, vcpu, tid, 4), 2);
	assert_int_equal(vcpu[0], 0);
	assert_int_equal(tid[0], 788);
	assert_int_equal(vcpu[1], 1);
	assert_int_equal(tid[1], 884);
	/* another order of keys and of vCPUs, escapes, true/null values */
	assert_int_equal(parse("{\"return\":[{\"cpu-index\":3,\"props\":{"
	    "\"thread-id\":7},\"x\":\"a\\\"}b\",\"y\":[true,null,{}],"
	    "\"thread-id\":99},{\"thread-id\":98,\"cpu-index\":1}]}", vcpu,
	    tid, 4), 2);
	assert_int_equal(vcpu[0], 1);
	assert_int_equal(tid[0], 98);
	assert_int_equal(vcpu[1], 3);
	assert_int_equal(tid[1], 99);
	assert_int_equal(parse("{\"return\": []}", vcpu, tid, 4), 0);
	/* refused */
	assert_int_equal(parse(qmp_two, vcpu, tid, 1), -1);
	assert_int_equal(parse("{\"error\": {\"class\": \"GenericError\"}}",
	    vcpu, tid, 4), -1);
	assert_int_equal(parse("{\"return\": [{\"cpu-index\": 0}]}", vcpu,
	    tid, 4), -1);
	assert_int_equal(parse("{\"return\": [{\"cpu-index\": 0, "
	    "\"thread-id\": 5}, {\"cpu-index\": 0, \"thread-id\": 6}]}", vcpu,
	    tid, 4), -1);
	assert_int_equal(parse("{\"return\": [{\"cpu-index\": 0.5, "
	    "\"thread-id\": 5}]}", vcpu, tid, 4), -1);
	assert_int_equal(parse("{\"return\": [{\"cpu-index\": 0, "
	    "\"thread-id\": 5}", vcpu, tid, 4), -1);
	assert_int_equal(parse("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", vcpu,
	    tid, 4), -1);
	assert_int_equal(parse("", vcpu, tid, 4), -1);
}

static void
test_spec(void **state)
{
	struct guest_spec s;
	char err[256], name[80];

	assert_int_equal(guest_spec_parse("vm1:1234", &s, err, sizeof err),
	    0);
	assert_string_equal(s.name, "vm1");
	assert_int_equal(s.pid, 1234);
	assert_null(s.qmp);
	assert_int_equal(guest_spec_parse("web%2F1:qmp:/run/q.sock", &s, err,
	    sizeof err), 0);
	assert_string_equal(s.name, "web%2F1");
	assert_string_equal(s.qmp, "/run/q.sock");
	assert_int_equal(s.pid, 0);
	assert_int_equal(guest_spec_parse("vm1", &s, err, sizeof err), -1);
	assert_int_equal(guest_spec_parse(":12", &s, err, sizeof err), -1);
	assert_int_equal(guest_spec_parse("vm 1:12", &s, err, sizeof err),
	    -1);
	assert_int_equal(guest_spec_parse("vm1:0", &s, err, sizeof err), -1);
	assert_int_equal(guest_spec_parse("vm1:12x", &s, err, sizeof err),
	    -1);
	assert_int_equal(guest_spec_parse("vm1:qmp:", &s, err, sizeof err),
	    -1);
	memset(name, 'a', 65);
	snprintf(name + 65, sizeof name - 65, ":12");
	assert_int_equal(guest_spec_parse(name, &s, err, sizeof err), -1);
	snprintf(name + 64, sizeof name - 64, ":12");
	assert_int_equal(guest_spec_parse(name, &s, err, sizeof err), 0);
}

/* A thread named like a vCPU thread of QEMU, until told to end. */
struct vcpu_thread {
	pthread_t	 t;
	const char	*name;
	pid_t		 tid;
	int		 quit[2];
};

static void *
vcpu_main(void *arg)
{
	struct vcpu_thread *v = arg;
	char c;

	pthread_setname_np(pthread_self(), v->name);
	__atomic_store_n(&v->tid, gettid(), __ATOMIC_RELEASE);
	while (read(v->quit[0], &c, 1) == -1 && errno == EINTR)
		;
	return NULL;
}

static void
vcpu_start(struct vcpu_thread *v, const char *name)
{
	v->name = name;
	v->tid = 0;
	assert_int_equal(pipe(v->quit), 0);
	assert_int_equal(pthread_create(&v->t, NULL, vcpu_main, v), 0);
	while (__atomic_load_n(&v->tid, __ATOMIC_ACQUIRE) == 0)
		usleep(1000);
}

static void
vcpu_stop(struct vcpu_thread *v)
{
	assert_int_equal(write(v->quit[1], "q", 1), 1);
	pthread_join(v->t, NULL);
	close(v->quit[0]);
	close(v->quit[1]);
}

/* What guest_watch_poll() emits, decoded. */
struct emitted {
	int		 n;
	struct td_guest	 g;
};

static int
emit_cb(void *arg, const void *p, size_t n)
{
	struct emitted *e = arg;

	assert_int_equal(td_msg_unpack_guest(p, n, &e->g), 0);
	e->n++;
	return 0;
}

static void
test_watch(void **state)
{
	struct vcpu_thread v0, v1;
	struct guest_watch *w;
	struct guest_spec s;
	struct emitted *e = calloc(1, sizeof *e);
	char *dir = testdata_tmpdir(), err[512], spec[64], vm[64];

	assert_non_null(e);
	snprintf(vm, sizeof vm, "%ld-9", (long)getpid());
	put_vcpu(dir, vm, 0, "-1000\n", "281474976710656\n", "48\n");
	setenv("TD_KVM_DEBUGFS", dir, 1);

	/* no thread of ours is a vCPU yet */
	snprintf(spec, sizeof spec, "vm1:%ld", (long)getpid());
	assert_int_equal(guest_spec_parse(spec, &s, err, sizeof err), 0);
	assert_null(guest_watch_open(&s, 1, 1000, 10, err, sizeof err));
	assert_non_null(strstr(err, "debug-threads=on"));

	vcpu_start(&v0, "CPU 0/TCG");
	w = guest_watch_open(&s, 1, 1000, 10, err, sizeof err);
	assert_non_null(w);
	assert_int_equal(guest_watch_poll(w, true, emit_cb, e, err,
	    sizeof err), 0);
	assert_int_equal(e->n, 1);
	assert_string_equal(e->g.name, "vm1");
	assert_int_equal(e->g.pid, getpid());
	assert_int_equal(e->g.nvcpus, 1);
	assert_int_equal(e->g.vcpu[0].vcpu, 0);
	assert_int_equal(e->g.vcpu[0].tid, v0.tid);
	assert_int_equal(e->g.flags, TD_GUEST_KVM);
	assert_int_equal(e->g.tsc_mult, 1000);
	assert_int_equal(e->g.tsc_shift, 10);
	assert_true(e->g.vcpu[0].tsc_offset == -1000);
	assert_true(e->g.vcpu[0].tsc_ratio == 1ULL << 48);
	assert_int_equal(e->g.vcpu[0].tsc_frac, 48);

	/* nothing changed: nothing sent (all: everything again) */
	assert_int_equal(guest_watch_poll(w, false, emit_cb, e, err,
	    sizeof err), 0);
	assert_int_equal(e->n, 1);
	assert_int_equal(guest_watch_poll(w, true, emit_cb, e, err,
	    sizeof err), 0);
	assert_int_equal(e->n, 2);

	/* the guest wrote its TSC */
	put_vcpu(dir, vm, 0, "777\n", "281474976710656\n", "48\n");
	assert_int_equal(guest_watch_poll(w, false, emit_cb, e, err,
	    sizeof err), 0);
	assert_int_equal(e->n, 3);
	assert_true(e->g.vcpu[0].tsc_offset == 777);

	/* a vCPU plugged in, debugfs not yet: every vCPU's TSC or none */
	vcpu_start(&v1, "CPU 1/TCG");
	assert_int_equal(guest_watch_poll(w, false, emit_cb, e, err,
	    sizeof err), 0);
	assert_int_equal(e->n, 4);
	assert_int_equal(e->g.nvcpus, 2);
	assert_int_equal(e->g.vcpu[1].vcpu, 1);
	assert_int_equal(e->g.vcpu[1].tid, v1.tid);
	assert_int_equal(e->g.flags, 0);
	put_vcpu(dir, vm, 1, "777\n", NULL, NULL);
	assert_int_equal(guest_watch_poll(w, false, emit_cb, e, err,
	    sizeof err), 0);
	assert_int_equal(e->n, 5);
	assert_int_equal(e->g.flags, TD_GUEST_KVM);
	assert_true(e->g.vcpu[1].tsc_ratio == 1);

	/* unplugged */
	vcpu_stop(&v1);
	assert_int_equal(guest_watch_poll(w, false, emit_cb, e, err,
	    sizeof err), 0);
	assert_int_equal(e->n, 6);
	assert_int_equal(e->g.nvcpus, 1);
	guest_watch_free(w);

	/* the host does not record x86-tsc: no TSC parameters sent */
	w = guest_watch_open(&s, 1, 0, 0, err, sizeof err);
	assert_non_null(w);
	assert_int_equal(guest_watch_poll(w, true, emit_cb, e, err,
	    sizeof err), 0);
	assert_int_equal(e->g.flags, 0);
	guest_watch_free(w);
	vcpu_stop(&v0);
	unsetenv("TD_KVM_DEBUGFS");
	rmtree(dir);
	free(e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kvmclock),
		cmocka_unit_test(test_qmp_parse),
		cmocka_unit_test(test_spec),
		cmocka_unit_test(test_watch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
