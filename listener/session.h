/*
 * session.h: one agent's recording in tdlisten, shared by session.c (the
 * connection and the protocol) and checkpoint.c (its state on disk).
 * Nothing outside those two files looks inside.
 */
#ifndef TD_SESSION_H
#define TD_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"
#include "tdproto.h"

struct budget_account;
struct bufferevent;
struct event;
struct td_file;
struct td_codec;
struct listener_config;

enum session_state {
	S_HANDSHAKE,
	S_HELLO,
	S_STREAM,
	S_DONE,
	S_CLOSING,	/* an ERROR is on its way out */
};

struct session_cpu {
	uint64_t	next_seq;
	uint64_t	events;
	uint64_t	missed_pages;
};

struct session {
	struct listener_config	*cfg;
	struct event_base	*base;
	struct bufferevent	*bev;		/* NULL: detached */
	bool			 counted;	/* holds a connection slot */
	bool			 restore;	/* writer dropped: take it back
						   from the checkpoint */
	struct event		*wait;		/* detached: resume deadline */
	struct event		*timer;
	enum session_state	 state;
	char			 peer[128];
	char			 identity[TD_MAX_NAME_LEN + 1];
	char			 label[TD_MAX_NAME_LEN * 2 + 160];
	struct td_hello		 hello;
	struct td_file		*file;
	struct td_codec		*wire;		/* PAGES_Z decompression */
	uint8_t			*zbuf;		/* TD_CHUNK_PAGES pages */
	char			*path;
	struct session_cpu	*cpu;
	uint64_t		 bytes;
	uint64_t		 pages;
	uint64_t		 lost;		/* overrun + dropped (CPUSTAT) */
	uint64_t		 rx_ns;		/* reference time of this read */
	struct td_tsync_sample	*samples;
	uint32_t		 nsamples;
	uint32_t		 samples_dropped;
	uint32_t		 tsc_mult;	/* TSC2NSEC, when the agent sent */
	uint32_t		 tsc_shift;	/* it (x86-tsc) */
	uint64_t		 session_id;
	uint64_t		 rx_off;	/* recording bytes handled */
	uint64_t		 ack_off;	/* checkpointed and acknowledged */
	char			*state_path;	/* PATH.state */
	struct timespec		 start;
	struct td_buf		 out;
	bool			 big_reads;	/* reader_tls() said so */
	bool			 out_blocked;	/* replies unread: no reads */
	struct budget_account	*acct;		/* memory and descriptors */
	size_t			 ck_len;	/* bytes of the last state */
	/* a SECTION_DATA or PAGES frame taken in as it arrives */
	uint16_t		 bulk_type;	/* 0: none */
	uint32_t		 bulk_cpu;
	size_t			 bulk_left;	/* payload bytes still to come */
	size_t			 bulk_total;	/* the whole frame's bytes */
	struct session		*next;
	struct session		*prev;
};


/* checkpoint.c */
/* Write s's checkpoint (PATH.state); -1 with errno (EBUSY: a zlib
   section is open, try later). */
int	checkpoint_write(struct session *s);
/* Take a session's writer and counters back from its checkpoint. */
int	checkpoint_read(struct session *s, const char *statepath, char *err,
	    size_t errlen);
void	checkpoint_remove(struct session *s);

/* timesync.c */
/* Now in clock id, ns. */
uint64_t timesync_now(clockid_t id);
/* Answer a TSYNC_PROBE at once; -1 when s was closed. */
int	timesync_probe(struct session *s, const struct td_frame *f);
/* Keep a TSYNC_SAMPLE (absurd ones are counted); -1 when s was closed. */
int	timesync_sample(struct session *s, const struct td_frame *f);
/* The TSC2NSEC option's factors (x86-tsc), in the agent's byte order. */
void	timesync_tsc2nsec(struct session *s, const uint8_t *p);
/* TIME_SHIFT, DATE and the error-bound option into s's file; -1. */
int	timesync_options(struct session *s);

#endif
