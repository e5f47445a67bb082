/*
 * plan9read.h: what Plan 9's kernel trace device (#T) writes, read: the
 * records of /dev/trace, put back in time order, and the kernel's symbols
 * as `nm -n` prints them.  For tdagent --import-plan9 (plan9.c).
 *
 * /dev/trace holds one record a line, 121 bytes with the newline:
 *
 *	E|X PC TIMESTAMP PID ARG1 ARG2 ARG3 ARG4
 *
 * seven fields of 16 hex digits after the type: E is a function's entry
 * with its first four arguments, X its exit with the return value in ARG1
 * (the device leaves ARG2..ARG4 of an exit zero or stale).  The parser
 * takes 1 to 16 hex digits a field, any blanks between them, and a record
 * wrapped over several lines (as trace(3) prints its example): lines that
 * start with a hex field continue the record above until it has its seven
 * fields.  Anything else is skipped: a line that starts with neither E, X
 * nor a field, a field that is not hex or longer than 16 digits, more than
 * seven fields, a record cut short by the next one or by the end, a line
 * longer than TD_PLAN9_LINE_MAX, or one holding a control character.  Each
 * skipped record is reported once with the lines it covered; the lines are
 * counted.  Blank lines are neither records nor errors.
 *
 * Pure code on caller memory: nothing here logs or does I/O; failures are
 * -1 with errno.  Not thread safe.
 */
#ifndef TD_PLAN9READ_H
#define TD_PLAN9READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct td_buf;

/* One record of /dev/trace, as written. */
struct plan9_rec {
	uint64_t	 ts;		/* the cycle counter */
	uint64_t	 pc;
	uint64_t	 pid;		/* all ones: no process (interrupt) */
	uint64_t	 arg[4];	/* exit: arg[0] is the return value */
	uint64_t	 line;		/* the input line it starts on */
	bool		 exit;		/* X, else E */
};

/*
 * What the parser hands back: each record, in input order (a failing
 * record_cb stops plan9_input_feed() and plan9_input_end(), which return
 * its -1), and each skipped record with the lines it covered and why.
 */
struct plan9_input_cb {
	int	(*record_cb)(void *arg, const struct plan9_rec *r);
	void	(*bad_cb)(void *arg, uint64_t first, uint64_t last,
		    const char *why);
	void	*arg;
};

struct plan9_input;

struct plan9_input *plan9_input_new(const struct plan9_input_cb *cb);
/* Parse n more bytes of the input, cut anywhere. */
int	plan9_input_feed(struct plan9_input *in, const void *p, size_t n);
/* The end of the input: its last line and an unfinished record. */
int	plan9_input_end(struct plan9_input *in);
/* Lines read so far, and lines of skipped records among them. */
uint64_t plan9_input_lines(const struct plan9_input *in);
uint64_t plan9_input_skipped(const struct plan9_input *in);
void	plan9_input_free(struct plan9_input *in);

/*
 * Records put back in time order within a window: up to window records
 * wait in a heap; once it is full, each new one goes in and the earliest
 * of them all comes out.  Records of equal time keep their input order.
 * A record more than window places after its place in time comes out
 * after records of a later time: the caller sees it earlier than the one
 * before it.
 */
struct plan9_reorder;

struct plan9_reorder *plan9_reorder_new(size_t window);
/* Add r; 1 and the earliest in *out when the window is full, else 0. */
int	plan9_reorder_push(struct plan9_reorder *q, const struct plan9_rec *r,
	    struct plan9_rec *out);
/* At the end: the earliest record left, until there is none (false). */
bool	plan9_reorder_pop(struct plan9_reorder *q, struct plan9_rec *out);
void	plan9_reorder_free(struct plan9_reorder *q);

/*
 * One line of Plan 9's `nm -n` (ADDR TYPE NAME, no newline), appended to
 * kallsyms as "ADDR TYPE NAME\n" when it is a symbol of the kernel's
 * memory: 1 for a function (T, t, and leaf functions L, l, which become T
 * and t), 2 for data or bss (D, d, B, b: kept because they end the last
 * function, which a pc is looked up in); 0 for another kind (automatic
 * variables and parameters, file names, undefined "U NAME", a blank
 * line); -1 with EINVAL for a line of another shape or ENOBUFS when
 * kallsyms is at its cap.
 */
int	plan9_symbol_line(const char *line, size_t n, struct td_buf *kallsyms);

#endif
