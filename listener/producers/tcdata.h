/*
 * tcdata.h: the per-CPU data sockets of one trace-cmd record -N client.
 *
 * trace-cmd's client sends each CPU's raw ring-buffer pages, page_size
 * bytes each with no framing, to a port the listener gave it in RINIT:
 * over TCP (record -t) or one page per UDP datagram (the default).  Here
 * every socket is bound to the address the client reached the control
 * port on, at a port of --tracecmd-data-ports, and takes data from the
 * client's address only: a TCP connection from any other address, or a
 * second one to a CPU's port, is refused and logged, a datagram from
 * elsewhere dropped and counted.  UDP loss is counted, never silent:
 * datagrams of another size than a page, pages older than the CPU's last
 * (out of order), and what the kernel dropped for a full socket buffer
 * (SO_MEMINFO).  Nothing is read before tcdata_start() (TCP: the client
 * waits; UDP: the kernel holds a socket buffer's worth).
 *
 * Whole pages go to the page callback (cpu, bytes); a -1 from it stops
 * the reading and makes tcdata_drain() fail.  The ended callback hears
 * that a TCP stream ended.  The caller frees with tcdata_free(), never
 * from inside a callback.  Logs its refusals under the label it is given.
 * Loop thread only.
 */
#ifndef TD_TCDATA_H
#define TD_TCDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct event_base;
struct td_buf;
struct tcdata;

struct tcdata_params {
	struct event_base	*base;
	struct sockaddr_storage	 local;		/* the control port's */
	socklen_t		 local_len;
	struct sockaddr_storage	 client;	/* the client's */
	uint32_t		 ncpus;
	uint32_t		 page_size;
	bool			 tcp;
	uint16_t		 port_lo;	/* --tracecmd-data-ports */
	uint16_t		 port_hi;
	const char		*label;
	int			(*page)(void *arg, uint32_t cpu,
				    const uint8_t *page);
	void			(*ended)(void *arg);
	void			*arg;
};

/* Make the sockets: NULL with err when no port of the range is free. */
struct tcdata	*tcdata_open(const struct tcdata_params *p, char *err,
		    size_t errlen);
/* The port of each CPU (p->ncpus of them). */
const uint16_t	*tcdata_ports(const struct tcdata *d);
/* Start reading (the recording is open). */
void		 tcdata_start(struct tcdata *d);
/*
 * Take what has arrived now, without waiting: connections in the accept
 * queue, bytes and datagrams in the socket buffers.  0, or -1 when the
 * page callback failed.
 */
int		 tcdata_drain(struct tcdata *d);
/* Whether every CPU's TCP stream has ended (UDP: always). */
bool		 tcdata_complete(const struct tcdata *d);
/* Pages of cpu handed to the callback so far. */
uint64_t	 tcdata_pages(const struct tcdata *d, uint32_t cpu);
/*
 * What was lost on the way, one line per CPU with losses appended to
 * text ("cpu 0: 3 datagrams lost (...)"): the pages lost, 0 if none.
 */
uint64_t	 tcdata_losses(struct tcdata *d, struct td_buf *text);
/* Data connections and datagrams refused (not from the client). */
uint64_t	 tcdata_refused(const struct tcdata *d);
/*
 * Bytes it may hold (page buffers): over TCP a page a CPU from the start,
 * allocated or not, so that what a client can make it hold is counted
 * before it sends a byte.
 */
size_t		 tcdata_mem(const struct tcdata *d);
void		 tcdata_free(struct tcdata *d);

#endif
