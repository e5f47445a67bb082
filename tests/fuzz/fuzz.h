/*
 * fuzz.h: helpers shared by the libFuzzer targets of tests/fuzz/.
 *
 * FUZZ_CHECK() turns a broken property into a crash that libFuzzer records
 * (the input is saved as crash-*); it names the file, line and condition so
 * the report says which promise of a decoder failed.  Nothing here allocates.
 */
#ifndef TD_FUZZ_H
#define TD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: property failed: %s\n",		\
		    __FILE__, __LINE__, #cond);				\
		abort();						\
	}								\
} while (0)

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
