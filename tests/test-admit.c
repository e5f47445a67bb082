/*
 * test-admit.c: unit tests of listener/admit.c, the handshake budget:
 * the per-address share (an IPv6 /64 is one address, an IPv4 address the
 * same mapped or not), the global budget, which slot a newcomer takes
 * (the oldest of the busiest address, only when that one holds more than
 * the newcomer's and more than one) and the bookkeeping behind it; Unix
 * socket peers told apart by their process (SO_PEERCRED).
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
#include "listener.h"
#include "log.h"

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_address),
		cmocka_unit_test(test_budget_full),
		cmocka_unit_test(test_one_each),
		cmocka_unit_test(test_oldest_goes),
		cmocka_unit_test(test_unix_peers),
	};

	log_init("test-admit", -1, 0);
	return cmocka_run_group_tests_name("admit", tests, NULL, NULL);
}
