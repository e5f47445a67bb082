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
