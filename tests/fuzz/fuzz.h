/*
 * fuzz.h: helpers shared by the libFuzzer targets of tests/fuzz/.
 *
 * FUZZ_CHECK() turns a broken property into a crash that libFuzzer records
 * (the input is saved as crash-*); it names the file, line and condition so
 * the report says which promise of a decoder failed.  fuzz_tmpdir() and
 * fuzz_lowest_fd() serve the targets that write files.
 */
#ifndef TD_FUZZ_H
#define TD_FUZZ_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/*
 * Where the report goes: the sanitizers' report file, which libFuzzer
 * keeps when -close_fd_mask=2 sends the target's own stderr (tdlisten's
 * log lines in fuzz-session) to /dev/null.
 */
void	__sanitizer_report_error_summary(const char *) __attribute__((weak));

static inline void
fuzz_failed(const char *file, int line, const char *cond)
{
	char msg[512];

	snprintf(msg, sizeof msg, "%s:%d: property failed: %s", file, line,
	    cond);
	if (__sanitizer_report_error_summary != NULL)
		__sanitizer_report_error_summary(msg);
	else
		fprintf(stderr, "%s\n", msg);
	abort();
}

#define FUZZ_CHECK(cond) do {						\
	if (!(cond))							\
		fuzz_failed(__FILE__, __LINE__, #cond);			\
} while (0)

/*
 * A new directory NAME.XXXXXX for a target's files: in $FUZZ_TMPDIR
 * (scripts/fuzz.sh gives one it removes, even after a crash), else on
 * /dev/shm, else in $TMPDIR or /tmp.  The caller frees the name.
 */
static inline char *
fuzz_tmpdir(const char *name)
{
	const char *base = getenv("FUZZ_TMPDIR");
	char *t;

	if (base == NULL && access("/dev/shm", W_OK) == 0)
		base = "/dev/shm";
	if (base == NULL)
		base = getenv("TMPDIR");
	if (base == NULL)
		base = "/tmp";
	FUZZ_CHECK(asprintf(&t, "%s/%s.XXXXXX", base, name) > 0);
	FUZZ_CHECK(mkdtemp(t) != NULL);
	return t;
}

/* The lowest free file descriptor: the same after each input, or a leak. */
static inline int
fuzz_lowest_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	FUZZ_CHECK(fd != -1);
	close(fd);
	return fd;
}

/*
 * fuzz-session: an input can hold several connections of one agent, each
 * after FUZZ_CONN_SEP and one byte saying (% FUZZ_END_COUNT) how the
 * connection before it ends.
 */
#define FUZZ_CONN_SEP		"#tdfuzz#"
#define FUZZ_CONN_SEP_LEN	8

enum fuzz_end {
	FUZZ_END_EOF,		/* the agent hangs up */
	FUZZ_END_IDLE,		/* the idle timeout strikes */
	FUZZ_END_KEEP,		/* it stays open, silent */
	FUZZ_END_RESTART,	/* tdlisten restarts */
	FUZZ_END_EXPIRE,	/* EOF, and the resume deadlines pass */
	FUZZ_END_COUNT
};

/* FNV-1a over n bytes, continuing from h (start with FUZZ_FNV_INIT). */
#define FUZZ_FNV_INIT	14695981039346656037ULL

static inline uint64_t
fuzz_fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *c = p;

	while (n-- != 0)
		h = (h ^ *c++) * 1099511628211ULL;
	return h;
}

#endif
