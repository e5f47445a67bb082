/*
 * test-admit.c: unit tests of listener/edge/admit.c, the handshake budget:
 * the per-address share (an IPv6 /64 is one address, an IPv4 address the
 * same mapped or not), the global budget, which slot a newcomer takes
 * (the oldest of the busiest address, only when that one holds more than
 * the newcomer's and more than one) and the bookkeeping behind it; Unix
 * socket peers told apart by their process (SO_PEERCRED).  And the
 * admission of listener/producers/client.c, the one client layer:
 * --max-sessions across agents, trace-cmd and uftrace clients, control clients
 * apart, an identity's agents waiting for their HELLO, slots kept for resumes,
 * uftrace's share per address, the one --max-per-identity check.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "admit.h"
#include "client.h"
#include "listener.h"
#include "log.h"
#include "registry.h"
#include "tdlimits.h"

/* An owner per slot: distinct addresses to hand to admit_add(). */
static char owners[64];

static struct sockaddr_storage
sa_of(const char *addr)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof ss);
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(1234);
	} else {
		assert_int_equal(inet_pton(AF_INET6, addr, &s6->sin6_addr), 1);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(1234);
	}
	return ss;
}

/* admit_check() for addr, with the victim it names. */
static enum admit_verdict
check(const char *addr, void **victim)
{
	struct sockaddr_storage ss = sa_of(addr);

	return admit_check(-1, (struct sockaddr *)&ss, victim);
}

/* Admit addr as owner i (the check must say yes). */
static void
add(const char *addr, int i)
{
	struct sockaddr_storage ss = sa_of(addr);
	void *victim;

	assert_int_equal(admit_check(-1, (struct sockaddr *)&ss, &victim),
	    ADMIT_YES);
	assert_null(victim);
	admit_add(-1, (struct sockaddr *)&ss, &owners[i]);
}

static void
test_per_address(void **state)
{
	struct event_base *base = event_base_new();
	void *victim;

	admit_init(base, 8, 2, UINT64_MAX);
	add("192.0.2.1", 0);
	add("192.0.2.1", 1);
	assert_int_equal(check("192.0.2.1", &victim), ADMIT_NO);
	/* the same IPv4 address mapped to IPv6 is the same address */
	assert_int_equal(check("::ffff:192.0.2.1", &victim), ADMIT_NO);
	assert_int_equal(check("192.0.2.2", &victim), ADMIT_YES);
	/* an IPv6 /64 is one address, the next /64 another */
	add("2001:db8:0:1::1", 2);
	add("2001:db8:0:1:ffff::2", 3);
	assert_int_equal(check("2001:db8:0:1:abcd::3", &victim), ADMIT_NO);
	assert_int_equal(check("2001:db8:0:2::1", &victim), ADMIT_YES);
	assert_int_equal(admit_handshakes(), 4);
	/* a release frees the address's share; unknown owners hold none */
	assert_true(admit_release(&owners[0]));
	assert_false(admit_release(&owners[0]));
	assert_false(admit_release(&owners[40]));
	assert_int_equal(check("192.0.2.1", &victim), ADMIT_YES);
	assert_int_equal(admit_handshakes(), 3);
	admit_free();
	event_base_free(base);
}

static void
test_budget_full(void **state)
{
	struct event_base *base = event_base_new();
	void *victim;
	int i;

	/* 6 slots, 4 per address: a holds 4 (owners 0-3), b 2 (4-5) */
	admit_init(base, 6, 4, UINT64_MAX);
	for (i = 0; i < 4; i++)
		add("10.0.0.1", i);
	add("10.0.0.2", 4);
	add("10.0.0.2", 5);
	/* a newcomer takes the oldest slot of the busiest address */
	assert_int_equal(check("10.0.0.3", &victim), ADMIT_EVICT);
	assert_ptr_equal(victim, &owners[0]);
	/* b (2) may take from a (4) too, but a may not take from itself */
	assert_int_equal(check("10.0.0.2", &victim), ADMIT_EVICT);
	assert_ptr_equal(victim, &owners[0]);
	/* the caller closes the victim, then admits the newcomer */
	assert_true(admit_release(&owners[0]));
	add("10.0.0.3", 6);
	/* a 3, b 2, c 1: the oldest of a is now owner 1 */
	assert_int_equal(check("10.0.0.4", &victim), ADMIT_EVICT);
	assert_ptr_equal(victim, &owners[1]);
	assert_true(admit_release(&owners[1]));
	add("10.0.0.4", 7);
	/* a 2, b 2, c 1, d 1: of a tie, the address with the oldest slot */
	assert_int_equal(check("10.0.0.5", &victim), ADMIT_EVICT);
	assert_ptr_equal(victim, &owners[2]);
	/* an address that holds as many as the busiest takes nothing */
	assert_int_equal(check("10.0.0.1", &victim), ADMIT_FULL);
	assert_null(victim);
	assert_int_equal(check("10.0.0.2", &victim), ADMIT_FULL);
	admit_free();
	event_base_free(base);
}

static void
test_one_each(void **state)
{
	struct event_base *base = event_base_new();
	char addr[32];
	void *victim;
	int i;

	/* agents from many addresses, one each: none cuts another off */
	admit_init(base, 4, 4, UINT64_MAX);
	for (i = 0; i < 4; i++) {
		snprintf(addr, sizeof addr, "10.0.1.%d", i + 1);
		add(addr, i);
	}
	assert_int_equal(check("10.0.1.9", &victim), ADMIT_FULL);
	assert_null(victim);
	/* a second from one of them: still a newcomer refused, not a swap */
	assert_int_equal(check("10.0.1.1", &victim), ADMIT_FULL);
	/* released in any order, the slots come back */
	assert_true(admit_release(&owners[2]));
	assert_true(admit_release(&owners[0]));
	add("10.0.1.9", 10);
	add("10.0.1.9", 11);
	/* now 10.0.1.9 holds 2: a newcomer takes its oldest (owner 10) */
	assert_int_equal(check("10.0.1.7", &victim), ADMIT_EVICT);
	assert_ptr_equal(victim, &owners[10]);
	assert_true(admit_release(&owners[10]));
	add("10.0.1.7", 12);
	/* 10.0.1.9 holds 1 again, everyone 1: full, nobody evicted */
	assert_int_equal(check("10.0.1.8", &victim), ADMIT_FULL);
	for (i = 0; i < 64; i++)
		admit_release(&owners[i]);
	assert_int_equal(admit_handshakes(), 0);
	admit_free();
	event_base_free(base);
}

static void
test_oldest_goes(void **state)
{
	struct event_base *base = event_base_new();
	char addr[32];
	void *victim;
	int i;

	/*
	 * a crowd from as many addresses as there are slots, one each,
	 * whose handshakes are old enough (here at once: 0 ms): a newcomer
	 * takes the oldest's slot, from any address
	 */
	admit_init(base, 4, 4, 0);
	for (i = 0; i < 4; i++) {
		snprintf(addr, sizeof addr, "10.0.2.%d", i + 1);
		add(addr, i);
	}
	assert_int_equal(check("10.0.2.9", &victim), ADMIT_EVICT);
	assert_ptr_equal(victim, &owners[0]);
	assert_true(admit_release(&owners[0]));
	add("10.0.2.9", 4);
	assert_int_equal(check("10.0.2.10", &victim), ADMIT_EVICT);
	assert_ptr_equal(victim, &owners[1]);
	/* an address at its own limit is still refused */
	admit_free();
	event_base_free(base);
	base = event_base_new();
	admit_init(base, 4, 1, 0);
	add("10.0.3.1", 20);
	assert_int_equal(check("10.0.3.1", &victim), ADMIT_NO);
	for (i = 0; i < 64; i++)
		admit_release(&owners[i]);
	admit_free();
	event_base_free(base);
}

/*
 * A Unix socket peer in a child process of its own: the accepted end (the
 * child waits for the parent to close it); *pid: the child.
 */
static int
unix_peer(const char *path, pid_t *pid)
{
	struct sockaddr_un sun;
	int l, c, fd;
	char b;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	unlink(path);
	assert_true((l = socket(AF_UNIX, SOCK_STREAM, 0)) != -1);
	assert_int_equal(bind(l, (struct sockaddr *)&sun, sizeof sun), 0);
	assert_int_equal(listen(l, 1), 0);
	if ((*pid = fork()) == 0) {
		/* never kept past a failed test, nor holding its output */
		alarm(10);
		close(STDOUT_FILENO);
		close(STDERR_FILENO);
		c = socket(AF_UNIX, SOCK_STREAM, 0);
		if (c == -1 || connect(c, (struct sockaddr *)&sun,
		    sizeof sun) == -1)
			_exit(1);
		(void)read(c, &b, 1);
		_exit(0);
	}
	assert_true(*pid > 0);
	assert_true((fd = accept(l, NULL, NULL)) != -1);
	close(l);
	unlink(path);
	return fd;
}

static void
test_unix_peers(void **state)
{
	struct event_base *base = event_base_new();
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct sockaddr *sa = (struct sockaddr *)&sun;
	char path[64];
	void *victim;
	pid_t pid[3];
	int fd[3], i;

	snprintf(path, sizeof path, "/tmp/test-admit.%ld", (long)getpid());
	for (i = 0; i < 3; i++)
		fd[i] = unix_peer(path, &pid[i]);
	admit_init(base, 8, 2, UINT64_MAX);
	/* two slots of the first process: its third connection is refused */
	assert_int_equal(admit_check(fd[0], sa, &victim), ADMIT_YES);
	admit_add(fd[0], sa, &owners[0]);
	assert_int_equal(admit_check(fd[0], sa, &victim), ADMIT_YES);
	admit_add(fd[0], sa, &owners[1]);
	assert_int_equal(admit_check(fd[0], sa, &victim), ADMIT_NO);
	/* another process (a guest's QEMU) is another peer */
	assert_int_equal(admit_check(fd[1], sa, &victim), ADMIT_YES);
	admit_add(fd[1], sa, &owners[2]);
	assert_int_equal(admit_check(fd[2], sa, &victim), ADMIT_YES);
	/* credentials not known: one key of their own */
	assert_int_equal(admit_check(-1, sa, &victim), ADMIT_YES);
	for (i = 0; i < 3; i++) {
		admit_release(&owners[i]);
		/* later children hold copies of it: shut it for them too */
		shutdown(fd[i], SHUT_RDWR);
		close(fd[i]);
		waitpid(pid[i], NULL, 0);
	}
	admit_free();
	event_base_free(base);
}

/* The registry's recordings open per identity, as client.c asks. */
static const char	*open_identity;
static int		 open_recordings;

int
registry_count(const char *identity)
{
	return open_identity != NULL && strcmp(identity, open_identity) == 0 ?
	    open_recordings : 0;
}

static const struct client_hooks no_hooks;

/* A client of kind named key, admitted (v: what client_admit() must say). */
static struct client *
admitted(enum client_kind kind, const char *key, enum client_verdict v)
{
	struct client *c = client_new(kind, -1, key, &no_hooks, NULL);

	assert_non_null(c);
	assert_int_equal(client_admit(c, key), v);
	return c;
}

/* client_new() with no hooks: the layer's own. */
static struct client *
new_client(enum client_kind kind, const char *key)
{
	return client_new(kind, -1, key, &no_hooks, NULL);
}

/*
 * --max-sessions 3 holds across the kinds: two agents and a trace-cmd
 * client keep a uftrace client, an agent and a trace-cmd client out; a
 * control client still gets in; one gone, another kind takes its slot.
 */
static void
test_client_across_kinds(void **state)
{
	struct event_base *base = event_base_new();
	struct listener_config cfg;
	struct client *a1, *a2, *tc, *ctl, *uf;

	(void)state;
	memset(&cfg, 0, sizeof cfg);
	cfg.max_sessions = 3;
	cfg.max_per_identity = 64;
	client_init(base, &cfg);
	a1 = new_client(CLIENT_TDPROTO, "web1");
	assert_int_equal(client_admit(a1, "web1"), CLIENT_YES);
	a2 = new_client(CLIENT_TDPROTO, "web2");
	assert_int_equal(client_admit(a2, "web2"), CLIENT_YES);
	tc = new_client(CLIENT_TRACECMD, "tracecmd-127.0.0.1");
	assert_int_equal(client_admit(tc, "tracecmd-127.0.0.1"), CLIENT_YES);
	assert_int_equal(client_count(CLIENT_NKINDS), 3);
	assert_int_equal(client_may_open(CLIENT_UFTRACE, "127.0.0.1"),
	    CLIENT_FULL);
	assert_int_equal(client_may_open(CLIENT_TDPROTO, "web3"), CLIENT_FULL);
	assert_int_equal(client_may_open(CLIENT_TRACECMD, "tracecmd-::1"),
	    CLIENT_FULL);
	/* a refused client holds no slot */
	uf = new_client(CLIENT_UFTRACE, "uftrace 127.0.0.1:1");
	assert_int_equal(client_admit(uf, "127.0.0.1"), CLIENT_FULL);
	assert_int_equal(client_count(CLIENT_UFTRACE), 0);
	assert_int_equal(client_listed(CLIENT_UFTRACE), 1);
	client_free(uf);
	/* local operators: their own cap, not --max-sessions */
	ctl = new_client(CLIENT_CONTROL, "control");
	assert_int_equal(client_admit(ctl, ""), CLIENT_YES);
	assert_int_equal(client_count(CLIENT_NKINDS), 3);
	assert_int_equal(client_count(CLIENT_CONTROL), 1);
	/* the trace-cmd client goes: a uftrace client takes its slot */
	client_free(tc);
	assert_int_equal(client_may_open(CLIENT_UFTRACE, "127.0.0.1"),
	    CLIENT_YES);
	uf = new_client(CLIENT_UFTRACE, "uftrace 127.0.0.1:2");
	assert_int_equal(client_admit(uf, "127.0.0.1"), CLIENT_YES);
	assert_int_equal(client_may_open(CLIENT_TRACECMD,
	    "tracecmd-127.0.0.1"), CLIENT_FULL);
	assert_int_equal(client_count(CLIENT_UFTRACE), 1);
	assert_int_equal(client_count(CLIENT_TDPROTO), 2);
	/* the walk of one kind sees only its own */
	assert_ptr_equal(client_first(CLIENT_UFTRACE), uf);
	assert_null(client_next(uf));
	client_shutdown(CLIENT_NKINDS);
	assert_int_equal(client_listed(CLIENT_NKINDS), 0);
	assert_int_equal(client_count(CLIENT_NKINDS), 0);
	(void)a1;
	(void)a2;
	(void)ctl;
	event_base_free(base);
}

/*
 * An identity's agents waiting for their HELLO: --max-per-identity of
 * them (through TLS; with --insecure the key is an address); over
 * --max-sessions, one slot a recording it has open, for its resume.
 */
static void
test_client_identity_resume(void **state)
{
	struct event_base *base = event_base_new();
	struct listener_config cfg;
	struct client *w1, *w2, *r1;

	(void)state;
	memset(&cfg, 0, sizeof cfg);
	cfg.max_sessions = 3;
	cfg.max_per_identity = 2;
	client_init(base, &cfg);
	w1 = admitted(CLIENT_TDPROTO, "web1", CLIENT_YES);
	w2 = admitted(CLIENT_TDPROTO, "web1", CLIENT_YES);
	assert_int_equal(client_may_open(CLIENT_TDPROTO, "web1"),
	    CLIENT_IDENTITY);
	/* trace-cmd clients are not agents waiting for a HELLO */
	assert_int_equal(client_may_open(CLIENT_TRACECMD, "web1"), CLIENT_YES);
	client_done_waiting(w1);
	assert_int_equal(client_may_open(CLIENT_TDPROTO, "web1"), CLIENT_YES);
	cfg.insecure = true;
	client_done_waiting(w2);
	admitted(CLIENT_TDPROTO, "web1", CLIENT_YES);
	/* full now; web2 has one recording open: one slot kept for it */
	open_identity = "web2";
	open_recordings = 1;
	assert_int_equal(client_may_open(CLIENT_TDPROTO, "web3"), CLIENT_FULL);
	assert_int_equal(client_may_open(CLIENT_UFTRACE, "web2"), CLIENT_FULL);
	r1 = admitted(CLIENT_TDPROTO, "web2", CLIENT_RESERVE);
	assert_true(client_reserved(r1));
	assert_int_equal(client_count(CLIENT_NKINDS), 4);
	assert_int_equal(client_may_open(CLIENT_TDPROTO, "web2"), CLIENT_FULL);
	/* resumed: its slot kept no longer waits, another may */
	client_done_waiting(r1);
	assert_int_equal(client_may_open(CLIENT_TDPROTO, "web2"),
	    CLIENT_RESERVE);
	/* the one --max-per-identity check of recordings */
	cfg.max_per_identity = 2;
	assert_true(client_may_record(&cfg, "web2"));
	open_recordings = 2;
	assert_false(client_may_record(&cfg, "web2"));
	assert_true(client_may_record(&cfg, "web1"));
	open_identity = NULL;
	client_free_all(CLIENT_NKINDS);
	assert_int_equal(client_count(CLIENT_NKINDS), 0);
	event_base_free(base);
}

/* uftrace: 16 clients an address, 256 at all; control: 64 at all. */
static void
test_client_kind_caps(void **state)
{
	struct event_base *base = event_base_new();
	struct listener_config cfg;
	char addr[32];
	int i;

	(void)state;
	memset(&cfg, 0, sizeof cfg);
	cfg.max_sessions = 100000;
	cfg.max_per_identity = 64;
	client_init(base, &cfg);
	for (i = 0; i < TD_UF_MAX_CLIENTS_ADDR; i++)
		admitted(CLIENT_UFTRACE, "10.0.0.1", CLIENT_YES);
	assert_int_equal(client_may_open(CLIENT_UFTRACE, "10.0.0.1"),
	    CLIENT_ADDRESS);
	assert_int_equal(client_may_open(CLIENT_UFTRACE, "10.0.0.2"),
	    CLIENT_YES);
	for (i = TD_UF_MAX_CLIENTS_ADDR; i < TD_UF_MAX_CLIENTS; i++) {
		snprintf(addr, sizeof addr, "10.1.%d.%d", i / 200, i % 200);
		admitted(CLIENT_UFTRACE, addr, CLIENT_YES);
	}
	assert_int_equal(client_may_open(CLIENT_UFTRACE, "10.0.0.2"),
	    CLIENT_KIND_FULL);
	for (i = 0; i < TD_CONTROL_MAX_CLIENTS; i++)
		admitted(CLIENT_CONTROL, "", CLIENT_YES);
	assert_int_equal(client_may_open(CLIENT_CONTROL, ""),
	    CLIENT_KIND_FULL);
	assert_int_equal(client_count(CLIENT_NKINDS), TD_UF_MAX_CLIENTS);
	client_free_all(CLIENT_UFTRACE);
	client_free_all(CLIENT_CONTROL);
	assert_int_equal(client_listed(CLIENT_NKINDS), 0);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_address),
		cmocka_unit_test(test_budget_full),
		cmocka_unit_test(test_one_each),
		cmocka_unit_test(test_oldest_goes),
		cmocka_unit_test(test_unix_peers),
		cmocka_unit_test(test_client_across_kinds),
		cmocka_unit_test(test_client_identity_resume),
		cmocka_unit_test(test_client_kind_caps),
	};

	log_init("test-admit", -1, 0);
	return cmocka_run_group_tests_name("admit", tests, NULL, NULL);
}
