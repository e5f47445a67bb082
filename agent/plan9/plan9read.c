/*
 * plan9read.c: Plan 9 trace records and symbols, parsed (see plan9read.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "plan9read.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/* Fields after the type: PC, timestamp, PID, four arguments. */
#define PLAN9_FIELDS		7
/* Longest symbol name kept (the kernel's KSYM_NAME_LEN). */
#define PLAN9_SYM_MAX		512

/* The parser: the line being gathered and the record being built. */
struct plan9_input {
	struct plan9_input_cb	 cb;
	char			 line[TD_PLAN9_LINE_MAX];
	size_t			 len;
	bool			 too_long;	/* skip to the newline */
	uint64_t		 lineno;	/* of the line being gathered */
	uint64_t		 skipped;
	/* the open record: fields so far, its first and last line */
	bool			 open;
	bool			 exit;
	uint64_t		 f[PLAN9_FIELDS];
	int			 nf;
	uint64_t		 first;
	uint64_t		 last;
	uint64_t		 nlines;	/* lines it covers */
};

/* A parser at the first line, handing back through cb. */
struct plan9_input *
plan9_input_new(const struct plan9_input_cb *cb)
{
	struct plan9_input *in = xcalloc(1, sizeof *in);

	in->cb = *cb;
	in->lineno = 1;
	return in;
}

/* Free a parser (NULL is fine). */
void
plan9_input_free(struct plan9_input *in)
{
	free(in);
}

/* Lines read so far (one without its newline: once the input ended). */
uint64_t
plan9_input_lines(const struct plan9_input *in)
{
	return in->lineno - 1;
}

/* Lines of the records skipped so far. */
uint64_t
plan9_input_skipped(const struct plan9_input *in)
{
	return in->skipped;
}

/* Skip lines first..last (nlines of them) with a reason. */
static void
plan9_bad(struct plan9_input *in, uint64_t first, uint64_t last,
    uint64_t nlines, const char *why)
{
	in->skipped += nlines;
	in->cb.bad_cb(in->cb.arg, first, last, why);
}

/* The open record is skipped (why), with the current line if with_line. */
static void
plan9_drop(struct plan9_input *in, bool with_line, const char *why)
{
	if (in->open)
		plan9_bad(in, in->first, with_line ? in->lineno : in->last,
		    in->nlines + (with_line ? 1 : 0), why);
	else if (with_line)
		plan9_bad(in, in->lineno, in->lineno, 1, why);
	in->open = false;
}

/* A field: 1 to 16 hex digits. */
static int
plan9_hex(const char *s, size_t n, uint64_t *v)
{
	uint64_t x = 0;
	size_t i;
	int d;

	if (n == 0 || n > 16)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			d = s[i] - '0';
		else if (s[i] >= 'a' && s[i] <= 'f')
			d = s[i] - 'a' + 10;
		else if (s[i] >= 'A' && s[i] <= 'F')
			d = s[i] - 'A' + 10;
		else
			return -1;
		x = x << 4 | (uint64_t)d;
	}
	*v = x;
	return 0;
}

/* Blanks between fields: spaces, tabs, the CR of a CRLF. */
static bool
plan9_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The open record is complete: hand it over. */
static int
plan9_emit(struct plan9_input *in)
{
	struct plan9_rec r;

	memset(&r, 0, sizeof r);
	r.exit = in->exit;
	r.pc = in->f[0];
	r.ts = in->f[1];
	r.pid = in->f[2];
	memcpy(r.arg, &in->f[3], sizeof r.arg);
	r.line = in->first;
	in->open = false;
	return in->cb.record_cb(in->cb.arg, &r);
}

/* One whole line (without its newline). */
static int
plan9_line(struct plan9_input *in, const char *s, size_t n)
{
	size_t i = 0, j;
	bool first = true;
	uint64_t v;

	for (j = 0; j < n; j++) {
		if ((unsigned char)s[j] < 0x20 && !plan9_blank(s[j])) {
			plan9_drop(in, true, "not text");
			return 0;
		}
	}
	for (;;) {
		while (i < n && plan9_blank(s[i]))
			i++;
		if (i == n)
			break;
		for (j = i; j < n && !plan9_blank(s[j]); j++)
			;
		if (first && j - i == 1 && (s[i] == 'E' || s[i] == 'X')) {
			if (in->open)
				plan9_drop(in, false, "record cut short");
			in->open = true;
			in->exit = s[i] == 'X';
			in->nf = 0;
			in->first = in->lineno;
			in->nlines = 0;
		} else if (plan9_hex(s + i, j - i, &v) == -1) {
			plan9_drop(in, true, first && !in->open ?
			    "not a record (E or X expected)" :
			    "a field is not 1 to 16 hex digits");
			return 0;
		} else if (!in->open) {
			plan9_drop(in, true, "not a record (E or X expected)");
			return 0;
		} else if (in->nf == PLAN9_FIELDS) {
			plan9_drop(in, true, "more than 7 fields");
			return 0;
		} else
			in->f[in->nf++] = v;
		first = false;
		i = j;
	}
	if (first)
		return 0;		/* blank */
	in->nlines++;
	in->last = in->lineno;
	if (in->nf == PLAN9_FIELDS)
		return plan9_emit(in);
	return 0;
}

/* The line gathered so far is complete. */
static int
plan9_line_end(struct plan9_input *in)
{
	int ret = 0;

	if (in->too_long)
		plan9_drop(in, true, "line too long");
	else
		ret = plan9_line(in, in->line, in->len);
	in->len = 0;
	in->too_long = false;
	in->lineno++;
	return ret;
}

/* Gather lines from n bytes of input. */
int
plan9_input_feed(struct plan9_input *in, const void *p, size_t n)
{
	const char *s = p, *nl;
	size_t k;

	while (n > 0) {
		nl = memchr(s, '\n', n);
		k = nl != NULL ? (size_t)(nl - s) : n;
		if (!in->too_long && k <= sizeof in->line - in->len) {
			memcpy(in->line + in->len, s, k);
			in->len += k;
		} else
			in->too_long = true;
		if (nl == NULL)
			break;
		if (plan9_line_end(in) == -1)
			return -1;
		s += k + 1;
		n -= k + 1;
	}
	return 0;
}

/* The end of the input. */
int
plan9_input_end(struct plan9_input *in)
{
	if ((in->len > 0 || in->too_long) && plan9_line_end(in) == -1)
		return -1;
	if (in->open)
		plan9_drop(in, false, "record cut short by the end");
	return 0;
}

/* ---- time order --------------------------------------------------------- */

/* One record waiting, with its place in the input (ties keep it). */
struct plan9_slot {
	struct plan9_rec	 r;
	uint64_t		 seq;
};

/* A binary min-heap of (time, input order). */
struct plan9_reorder {
	struct plan9_slot	*h;
	size_t			 n;
	size_t			 cap;
	size_t			 window;
	uint64_t		 seq;
};

/* An empty window of window records (at least 1). */
struct plan9_reorder *
plan9_reorder_new(size_t window)
{
	struct plan9_reorder *q = xcalloc(1, sizeof *q);

	q->window = window > 0 ? window : 1;
	return q;
}

/* Free a window and what still waits in it (NULL is fine). */
void
plan9_reorder_free(struct plan9_reorder *q)
{
	if (q == NULL)
		return;
	free(q->h);
	free(q);
}

/* Heap order: earlier time first, then earlier input. */
static bool
plan9_before(const struct plan9_slot *a, const struct plan9_slot *b)
{
	return a->r.ts < b->r.ts || (a->r.ts == b->r.ts && a->seq < b->seq);
}

static void
plan9_swap(struct plan9_slot *a, struct plan9_slot *b)
{
	struct plan9_slot t = *a;

	*a = *b;
	*b = t;
}

static void
plan9_up(struct plan9_reorder *q, size_t i)
{
	while (i > 0 && plan9_before(&q->h[i], &q->h[(i - 1) / 2])) {
		plan9_swap(&q->h[i], &q->h[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
}

static void
plan9_down(struct plan9_reorder *q, size_t i)
{
	size_t l, m;

	for (;;) {
		l = 2 * i + 1;
		m = i;
		if (l < q->n && plan9_before(&q->h[l], &q->h[m]))
			m = l;
		if (l + 1 < q->n && plan9_before(&q->h[l + 1], &q->h[m]))
			m = l + 1;
		if (m == i)
			return;
		plan9_swap(&q->h[i], &q->h[m]);
		i = m;
	}
}

/* The earliest record waiting, out of the window. */
bool
plan9_reorder_pop(struct plan9_reorder *q, struct plan9_rec *out)
{
	if (q->n == 0)
		return false;
	*out = q->h[0].r;
	q->h[0] = q->h[--q->n];
	plan9_down(q, 0);
	return true;
}

/* One record in; the earliest out once more than window wait. */
int
plan9_reorder_push(struct plan9_reorder *q, const struct plan9_rec *r,
    struct plan9_rec *out)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 1024;
		if (q->cap > q->window + 1)
			q->cap = q->window + 1;
		q->h = xreallocarray(q->h, q->cap, sizeof *q->h);
	}
	q->h[q->n].r = *r;
	q->h[q->n].seq = q->seq++;
	plan9_up(q, q->n++);
	if (q->n <= q->window)
		return 0;
	plan9_reorder_pop(q, out);
	return 1;
}

/* ---- symbols ------------------------------------------------------------ */

/* One nm -n line into kallsyms (see plan9read.h). */
int
plan9_symbol_line(const char *line, size_t n, struct td_buf *kallsyms)
{
	const char *tok[4];
	size_t len[4], i = 0, j;
	int nt = 0;
	uint64_t addr;
	char type;

	while (nt < 4) {
		while (i < n && plan9_blank(line[i]))
			i++;
		if (i == n)
			break;
		for (j = i; j < n && !plan9_blank(line[j]); j++)
			if ((unsigned char)line[j] < 0x21 ||
			    (unsigned char)line[j] == 0x7f)
				goto bad;
		tok[nt] = line + i;
		len[nt++] = j - i;
		i = j;
	}
	if (nt == 0)
		return 0;
	/* an undefined symbol has no address: "U name" */
	if (nt == 2 && len[0] == 1)
		return 0;
	if (nt != 3 || len[1] != 1 || len[2] > PLAN9_SYM_MAX ||
	    plan9_hex(tok[0], len[0], &addr) == -1)
		goto bad;
	switch (tok[1][0]) {
	case 'T':
	case 'L':
		type = 'T';
		break;
	case 't':
	case 'l':
		type = 't';
		break;
	case 'D':
	case 'd':
	case 'B':
	case 'b':
		type = tok[1][0];
		break;
	default:
		if ((tok[1][0] >= 'a' && tok[1][0] <= 'z') ||
		    (tok[1][0] >= 'A' && tok[1][0] <= 'Z'))
			return 0;
		goto bad;
	}
	if (td_buf_printf(kallsyms, "%016" PRIx64 " %c %.*s\n", addr, type,
	    (int)len[2], tok[2]) == -1)
		return -1;
	return type == 'T' || type == 't' ? 1 : 2;
bad:
	errno = EINVAL;
	return -1;
}
