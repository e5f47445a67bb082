/*
 * fuzz-plan9.c: libFuzzer target for the reader of Plan 9 kernel traces
 * (agent/plan9/plan9read.c), which tdagent --import-plan9 runs on a file or a
 * pipe from another machine.
 *
 * The input is parsed as /dev/trace text twice, whole and cut into pieces
 * whose sizes come from its own bytes, and its lines as `nm -n` symbols.
 * Properties:
 *
 *   - both parses give the same records, the same skipped records (lines
 *     and reason) and the same counts: nothing depends on where a read
 *     ends;
 *   - the lines counted are the newlines, plus one for a last line without
 *     one; each record and each skipped range lies within them, records in
 *     increasing lines, and the skipped lines are at most the lines;
 *   - every record's fields are hex numbers of the input: an entry or exit
 *     starts its line range with "E" or "X";
 *   - the records through a time-order window come out as many as went in,
 *     sorted (equal times in input order) when the window holds them all;
 *   - a symbol line adds one kallsyms line ending in a newline when it says
 *     it did (1 or 2), nothing otherwise, and fails with EINVAL or ENOBUFS
 *     only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "plan9read.h"
#include "fuzz.h"

/* Records and skipped ranges kept per parse (the rest only counted). */
#define KEEP		4096

struct bad {
	uint64_t	 first;
	uint64_t	 last;
	const char	*why;
};

/* What one parse handed back. */
struct result {
	struct plan9_rec *r;
	size_t		 nr;
	struct bad	*b;
	size_t		 nb;
	uint64_t	 lines;
	uint64_t	 skipped;
};

static int
record_cb(void *arg, const struct plan9_rec *r)
{
	struct result *res = arg;

	if (res->nr < KEEP)
		res->r[res->nr] = *r;
	res->nr++;
	return 0;
}

static void
bad_cb(void *arg, uint64_t first, uint64_t last, const char *why)
{
	struct result *res = arg;

	FUZZ_CHECK(first >= 1 && first <= last);
	FUZZ_CHECK(why != NULL && why[0] != '\0');
	if (res->nb < KEEP) {
		res->b[res->nb].first = first;
		res->b[res->nb].last = last;
		res->b[res->nb].why = why;
	}
	res->nb++;
}

/* Parse data in pieces: step 0 whole, else sizes from the data itself. */
static void
parse(const uint8_t *data, size_t size, int step, struct result *res)
{
	struct plan9_input_cb cb = { record_cb, bad_cb, res };
	struct plan9_input *in;
	size_t off = 0, n;
	uint8_t *piece;

	memset(res, 0, sizeof *res);
	res->r = calloc(KEEP, sizeof *res->r);
	res->b = calloc(KEEP, sizeof *res->b);
	FUZZ_CHECK(res->r != NULL && res->b != NULL);
	in = plan9_input_new(&cb);
	while (off < size) {
		n = step == 0 ? size - off : 1 + data[off] % 200;
		if (n > size - off)
			n = size - off;
		/* a block of exactly n bytes: ASan sees any read past it */
		piece = malloc(n);
		FUZZ_CHECK(piece != NULL);
		memcpy(piece, data + off, n);
		FUZZ_CHECK(plan9_input_feed(in, piece, n) == 0);
		free(piece);
		off += n;
	}
	FUZZ_CHECK(plan9_input_end(in) == 0);
	res->lines = plan9_input_lines(in);
	res->skipped = plan9_input_skipped(in);
	plan9_input_free(in);
}

static void
result_free(struct result *res)
{
	free(res->r);
	free(res->b);
}

/* Whole and in pieces, the same. */
static void
same(const struct result *a, const struct result *b)
{
	size_t i;

	FUZZ_CHECK(a->nr == b->nr && a->nb == b->nb);
	FUZZ_CHECK(a->lines == b->lines && a->skipped == b->skipped);
	for (i = 0; i < a->nr && i < KEEP; i++)
		FUZZ_CHECK(memcmp(&a->r[i], &b->r[i], sizeof a->r[i]) == 0);
	for (i = 0; i < a->nb && i < KEEP; i++)
		FUZZ_CHECK(a->b[i].first == b->b[i].first &&
		    a->b[i].last == b->b[i].last &&
		    strcmp(a->b[i].why, b->b[i].why) == 0);
}

/* Where each line starts, for the checks of the records' first lines. */
static size_t *
line_starts(const uint8_t *data, size_t size, uint64_t lines)
{
	size_t *ls = calloc(lines + 1, sizeof *ls), i, n = 0;

	FUZZ_CHECK(ls != NULL);
	if (lines > 0)
		ls[n++] = 0;
	for (i = 0; i + 1 < size; i++)
		if (data[i] == '\n' && n < lines)
			ls[n++] = i + 1;
	return ls;
}

static void
check_records(const uint8_t *data, size_t size, const struct result *res)
{
	uint64_t nl = 0, prev = 0;
	size_t i, *ls, at;

	for (i = 0; i < size; i++)
		if (data[i] == '\n')
			nl++;
	FUZZ_CHECK(res->lines == nl + (size > 0 && data[size - 1] != '\n'));
	FUZZ_CHECK(res->skipped <= res->lines);
	for (i = 0; i < res->nb && i < KEEP; i++)
		FUZZ_CHECK(res->b[i].last <= res->lines);
	ls = line_starts(data, size, res->lines);
	for (i = 0; i < res->nr && i < KEEP; i++) {
		FUZZ_CHECK(res->r[i].line >= 1 && res->r[i].line <= res->lines);
		FUZZ_CHECK(res->r[i].line > prev);
		prev = res->r[i].line;
		/* its line starts, after blanks, with its type */
		at = ls[res->r[i].line - 1];
		while (at < size && (data[at] == ' ' || data[at] == '\t' ||
		    data[at] == '\r'))
			at++;
		FUZZ_CHECK(at < size);
		FUZZ_CHECK(data[at] == (res->r[i].exit ? 'X' : 'E'));
	}
	free(ls);
}

/* The records through a window: as many out, sorted if all fit. */
static void
check_reorder(const struct result *res, size_t window)
{
	struct plan9_reorder *q = plan9_reorder_new(window);
	struct plan9_rec out, last;
	size_t i, n = res->nr < KEEP ? res->nr : KEEP, got = 0;
	bool all = n <= window;

	memset(&last, 0, sizeof last);
	for (i = 0; i < n; i++) {
		if (plan9_reorder_push(q, &res->r[i], &out) == 1) {
			FUZZ_CHECK(!all);
			got++;
		}
	}
	while (plan9_reorder_pop(q, &out)) {
		if (all && got > 0)
			FUZZ_CHECK(out.ts > last.ts || (out.ts == last.ts &&
			    out.line > last.line));
		last = out;
		got++;
	}
	FUZZ_CHECK(got == n);
	plan9_reorder_free(q);
}

/* Every line as an nm -n symbol. */
static void
check_symbols(const uint8_t *data, size_t size)
{
	struct td_buf b;
	const uint8_t *s = data, *nl;
	size_t left = size, before, n;
	int r;

	td_buf_init(&b, 1 + size % 4096);
	while (left > 0) {
		nl = memchr(s, '\n', left);
		n = nl != NULL ? (size_t)(nl - s) : left;
		before = b.len;
		errno = 0;
		r = plan9_symbol_line((const char *)s, n, &b);
		FUZZ_CHECK(r >= -1 && r <= 2);
		if (r == -1)
			FUZZ_CHECK(errno == EINVAL || errno == ENOBUFS);
		if (r <= 0)
			FUZZ_CHECK(b.len == before);
		else {
			FUZZ_CHECK(b.len > before + 19);
			FUZZ_CHECK(b.data[b.len - 1] == '\n');
			FUZZ_CHECK(memchr(b.data + before, '\n',
			    b.len - before) == b.data + b.len - 1);
		}
		if (nl == NULL)
			break;
		left -= n + 1;
		s = nl + 1;
	}
	td_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result whole, pieces;

	parse(data, size, 0, &whole);
	parse(data, size, 1, &pieces);
	same(&whole, &pieces);
	check_records(data, size, &whole);
	check_reorder(&whole, 1 + size % 8);
	check_reorder(&whole, KEEP);
	check_symbols(data, size);
	result_free(&whole);
	result_free(&pieces);
	return 0;
}
