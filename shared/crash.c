/*
 * crash.c: a last word from a program that dies of a bug.
 *
 * On SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT the handler writes the
 * signal and a backtrace to stderr (which the tests and -l keep), then
 * lets the default action run, so a core is still dumped where enabled.
 * Addresses of static functions show as "(+0xOFFSET)": `addr2line -f -e
 * tdagent 0xOFFSET` names them.  Only async-signal-safe calls are made;
 * backtrace() is called once at install time, as its first call may load
 * libgcc.  Sanitizer builds keep their own, better, reports.
 */
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "crash.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CRASH_SANITIZED 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CRASH_SANITIZED 1
#endif
#endif

#ifndef CRASH_SANITIZED
static const char	*crash_prog = "?";
static char		 crash_stack[64 * 1024];

static void
crash_puts(const char *s)
{
	ssize_t r;
	size_t n = strlen(s);

	while (n > 0 && (r = write(STDERR_FILENO, s, n)) > 0) {
		s += r;
		n -= (size_t)r;
	}
}

static void
crash_handler(int sig)
{
	void *pc[64];
	char num[16];
	int n, i = (int)sizeof num - 1;
	unsigned int v = (unsigned int)sig;

	num[i] = '\0';
	do
		num[--i] = (char)('0' + v % 10);
	while ((v /= 10) != 0 && i > 0);
	crash_puts(crash_prog);
	crash_puts(": fatal signal ");
	crash_puts(num + i);
	crash_puts(" (");
	crash_puts(sigabbrev_np(sig) != NULL ? sigabbrev_np(sig) : "?");
	crash_puts("), a bug: please report it with this backtrace\n");
	n = backtrace(pc, 64);
	backtrace_symbols_fd(pc, n, STDERR_FILENO);
	signal(sig, SIG_DFL);
	raise(sig);
}
#endif

void
crash_install(const char *prog)
{
#ifndef CRASH_SANITIZED
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	struct sigaction sa;
	stack_t ss;
	void *pc[1];
	size_t i;

	crash_prog = prog;
	(void)backtrace(pc, 1);
	memset(&ss, 0, sizeof ss);
	ss.ss_sp = crash_stack;
	ss.ss_size = sizeof crash_stack;
	(void)sigaltstack(&ss, NULL);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = crash_handler;
	sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof sigs / sizeof *sigs; i++)
		(void)sigaction(sigs[i], &sa, NULL);
#else
	(void)prog;
#endif
}
