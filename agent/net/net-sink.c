/*
 * net-sink.c: the network's meta_sink (see net.h, net_meta_sink()):
 * everything recorded framed into the stream that net.c sends.  Before
 * the first connection the header sections are held back (hstage.c) for
 * the header cache; net_start() frames them.
 */
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "hstage.h"
#include "meta.h"
#include "net.h"
#include "net-local.h"
#include "stream.h"
#include "tdproto.h"
#include "banned.h"

/* A section begins (its SECTION frame). */
static int
net_sink_begin(void *arg, enum td_opt id)
{
	struct net *n = arg;
	struct td_buf *q;

	/* before the first connection: held back for the header cache */
	if (n->hs != NULL)
		return hstage_begin(n->hs, id);
	if ((q = stream_frame(n->s)) == NULL ||
	    td_msg_pack_section(q, id) == -1)
		return -1;
	stream_added(n->s);
	return 0;
}

/* A piece of the section: big sections start going out while read. */
static int
net_sink_write(void *arg, const void *p, size_t len)
{
	struct net *n = arg;
	char err[512];

	if (n->hs != NULL)
		return hstage_write(n->hs, p, len);
	if (stream_section_data(n->s, p, len) == -1)
		return -1;
	/* big sections start going out while they are read */
	if (net_up(n) && net_flush(n, err, sizeof err) == -1)
		return 0;	/* the loop finds out and reconnects */
	return 0;
}

/* The section is whole (SECTION_END). */
static int
net_sink_end(void *arg)
{
	struct net *n = arg;
	struct td_buf *q;

	if (n->hs != NULL)
		return hstage_end(n->hs);
	if (stream_section_flush(n->s) == -1 ||
	    (q = stream_frame(n->s)) == NULL ||
	    td_msg_pack_section_end(q) == -1)
		return -1;
	stream_added(n->s);
	return 0;
}

/* An option of the file (OPTION). */
static int
net_sink_option(void *arg, enum td_opt id, const void *p, size_t len)
{
	struct net *n = arg;
	struct td_buf *q;

	if ((q = stream_frame(n->s)) == NULL ||
	    td_msg_pack_option(q, id, p, len) == -1)
		return -1;
	stream_added(n->s);
	return 0;
}

/* A page of a CPU, into its PAGES batch. */
static int
net_sink_page(void *arg, int cpu, const void *p, size_t len)
{
	struct net *n = arg;

	return stream_page(n->s, cpu, p, len);
}

/* Room for pages read in place. */
static void *
net_sink_room(void *arg, int cpu, uint32_t *npages)
{
	struct net *n = arg;

	return stream_room(n->s, cpu, npages);
}

/* A chunk compressed elsewhere (PAGES_Z). */
static int
net_sink_chunk(void *arg, int cpu, enum td_codec_id codec, const void *z,
    size_t zlen, uint32_t npages)
{
	struct net *n = arg;

	return stream_chunk(n->s, cpu, codec, z, zlen, npages);
}

/* The end of a burst: the open batch is closed. */
static int
net_sink_batch_end(void *arg)
{
	struct net *n = arg;

	return stream_batch_end(n->s);
}

/* Frame everything recorded into the stream. */
void
net_meta_sink(struct net *n, struct meta_sink *s)
{
	s->begin = net_sink_begin;
	s->write = net_sink_write;
	s->end = net_sink_end;
	s->option = net_sink_option;
	s->page = net_sink_page;
	s->room = net_sink_room;
	s->chunk = net_sink_chunk;
	s->batch_end = net_sink_batch_end;
	s->arg = n;
}

/* Close the current PAGES batch. */
int
net_batch_end(struct net *n)
{
	return stream_batch_end(n->s);
}
