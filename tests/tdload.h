/*
 * tdload.h: what tests/tdload.c takes from tests/tdload-file.c: the
 * recording every connection replays, read once.
 */
#ifndef TDLOAD_H
#define TDLOAD_H

#include <stdint.h>

#include "buf.h"
#include "tdproto.h"

struct load_file {
	struct td_hello	 hello;		/* all but the name and the id */
	uint32_t	 page_size;
	int		 ncpus;
	uint8_t		**pages;	/* per CPU: npages * page_size */
	uint64_t	*npages;
	struct td_buf	 head;		/* sections 16 .. 20, framed */
	struct td_buf	 tail;		/* CMDLINES, options, END, framed */
};

/*
 * Read the trace.dat at path into lf: its sections, pages and options,
 * framed, to be shared by every connection.  0, or -1 with errno set.
 */
int	load_file_read(const char *path, struct load_file *lf);
/* Free what load_file_read() kept. */
void	load_file_free(struct load_file *lf);

#endif
