/*
 * pagebuild.h: pack events into ring-buffer sub-buffers ("pages") of the
 * kernel's layout, for a producer that has events but no ring buffer (an
 * import of another system's trace).  The inverse of page.h.
 *
 * A page as written: u64 time of its first event; the commit field
 * (commit_size bytes: the length of the event data, no flags); the events;
 * zeros to the end.  Each event is a u32 header (type_len in the low 5
 * bits, the time since the previous event in the upper 27) and its
 * payload, padded to a word: type_len is the payload's words when it is at
 * most 112 bytes, else 0 with a u32 length (payload + 4, aligned) before
 * it.  A delta of 2^27 or more takes a TIME_EXTEND record first (type 30:
 * the low 27 bits in its header, the rest in the next u32; up to 2^59 - 1);
 * a longer gap starts a new page, whose header holds the absolute time.
 * This is what header_page and header_event of a 64-bit kernel describe,
 * and what libtraceevent's kbuffer (trace-cmd's reader) reads.
 *
 * Times must not go back from one event to the next: sort first.  Pure
 * code: one allocation (the page) in td_pagebuild_new(), no I/O, nothing
 * here logs.  Actions return 0 or -1 with errno set.  Not thread safe.
 */
#ifndef TD_PAGEBUILD_H
#define TD_PAGEBUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct td_pagebuild;

/*
 * A builder of pages of page_size bytes (TD_MIN_PAGE_SIZE to
 * TD_MAX_PAGE_SIZE) with a commit field of commit_size (4 or 8) bytes;
 * NULL with EINVAL for others.
 */
struct td_pagebuild *td_pagebuild_new(uint32_t page_size, int commit_size);
void	td_pagebuild_free(struct td_pagebuild *b);
/*
 * Append one event of len bytes (1 or more) at time ts.  Fails with
 * ENOSPC when the page being built has no room for it (take the page with
 * td_pagebuild_take() and add it again), EINVAL when ts is before the
 * previous event's time or len is 0, E2BIG when it would not fit even in
 * an empty page.
 */
int	td_pagebuild_add(struct td_pagebuild *b, uint64_t ts,
	    const void *payload, size_t len);
/* Whether the page being built holds no event yet. */
bool	td_pagebuild_empty(const struct td_pagebuild *b);
/*
 * The page being built, complete (page_size bytes, valid until the next
 * call on b); the next td_pagebuild_add() starts a new page.  NULL with
 * ENOENT when it holds no event.
 */
const void *td_pagebuild_take(struct td_pagebuild *b);
/* Events in the page being built (0 after td_pagebuild_take()). */
uint32_t td_pagebuild_events(const struct td_pagebuild *b);

#endif
