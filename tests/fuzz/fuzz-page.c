/*
 * fuzz-page.c: libFuzzer target for the ring-buffer page walker
 * (shared/page.c), which tdlisten runs on every page a peer sends.
 *
 * The input is one page.  It is parsed as a page of its own length and,
 * copied into a 4096-byte block (cut or zero-padded), as a page of 4096
 * bytes, each with commit fields of 4 and 8 bytes.  Both blocks have exactly
 * the parsed size, so ASan sees any read past the page.  Properties:
 *
 *   - on success the data and the stored missed count lie inside the page,
 *     and every counted event took at least 8 bytes;
 *   - on failure errno is EBADMSG;
 *   - a page that parses keeps parsing, to the same result, when it is
 *     zero-padded to a larger page size (nothing depends on bytes past the
 *     committed data).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "page.h"
#include "fuzz.h"

#define BIG_PAGE	4096

static int
parse(const uint8_t *p, size_t n, int commit, struct td_page_info *info)
{
	int r = td_page_parse(p, n, commit, info);

	if (r == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return -1;
	}
	FUZZ_CHECK(r == 0);
	FUZZ_CHECK(n >= 8 + (size_t)commit);
	FUZZ_CHECK(info->data_len <= n - 8 - commit);
	FUZZ_CHECK(info->events * 8 <= info->data_len);
	if (info->missed_stored)
		FUZZ_CHECK(info->data_len + (size_t)commit <= n - 8 - commit);
	else
		FUZZ_CHECK(info->missed_count == 0);
	return 0;
}

static void
same_info(const struct td_page_info *a, const struct td_page_info *b)
{
	FUZZ_CHECK(a->timestamp == b->timestamp);
	FUZZ_CHECK(a->data_len == b->data_len);
	FUZZ_CHECK(a->events == b->events);
	FUZZ_CHECK(a->missed == b->missed);
	FUZZ_CHECK(a->missed_stored == b->missed_stored);
	FUZZ_CHECK(a->missed_count == b->missed_count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct td_page_info own, big;
	uint8_t *page;
	size_t k = size < BIG_PAGE ? size : BIG_PAGE;
	int commit, r_own, r_big;

	page = malloc(BIG_PAGE);
	FUZZ_CHECK(page != NULL);
	memcpy(page, data, k);
	memset(page + k, 0, BIG_PAGE - k);
	for (commit = 4; commit <= 8; commit += 4) {
		r_own = parse(data, size, commit, &own);
		r_big = parse(page, BIG_PAGE, commit, &big);
		if (r_own == 0 && size <= BIG_PAGE) {
			FUZZ_CHECK(r_big == 0);
			same_info(&own, &big);
		}
	}
	/* commit sizes other than 4 and 8 are refused */
	FUZZ_CHECK(td_page_parse(page, BIG_PAGE, 0, &own) == -1);
	FUZZ_CHECK(td_page_parse(page, BIG_PAGE, 6, &own) == -1);
	free(page);
	return 0;
}
