/*
 * page.h: read the header and walk the events of one ring-buffer sub-buffer
 * ("page") as the kernel hands it out through trace_pipe_raw.
 *
 * Layout (events/header_page): u64 timestamp; local_t commit (4 or 8
 * bytes: data length in the low 27 bits, bit 31 = events were missed before
 * this page, bit 30 = the missed count is stored after the data); data.
 * Each event starts with a u32: type_len in the low 5 bits, time delta in the
 * upper 27.  Pure code on caller memory: nothing here allocates or logs, and
 * every read is bounds checked, so it is safe on data from the network.
 */
#ifndef TD_PAGE_H
#define TD_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct td_page_info {
	uint64_t	timestamp;	/* of the first event */
	uint32_t	data_len;	/* bytes of event data */
	uint64_t	events;		/* data events (not padding/time) */
	bool		missed;		/* events were lost before this page */
	bool		missed_stored;
	uint64_t	missed_count;	/* valid when missed_stored */
};

/*
 * Parse a page of page_size bytes whose commit field is commit_size (4 or 8)
 * bytes; fill info.  Returns 0, or -1 with errno EBADMSG if the page is
 * malformed (lengths past the end).
 */
int	td_page_parse(const void *page, size_t page_size, int commit_size,
	    struct td_page_info *info);

#endif
