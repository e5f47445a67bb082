/*
 * tdload.h: what tests/tdload.c takes from tests/tdload-file.c (the
 * recording every connection replays, read once) and from
 * tests/tdload-flight.c (--armed: the flight recorder of a standby agent),
 * and what it gives the latter (a connection, started and fed by
 * tdload.c).  One libevent loop: everything here runs in it.
 */
#ifndef TDLOAD_H
#define TDLOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "buf.h"
#include "tdlimits.h"
#include "tdproto.h"

struct bufferevent;
struct event;
struct event_base;

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

enum conn_state {
	C_IDLE,		/* not started */
	C_CONNECTING,	/* TCP + TLS, HELLO sent, waiting for WELCOME */
	C_WAIT,		/* --together (or a snapshot before its GO):
			   sections sent, waiting for the rest */
	C_QUIET,	/* idle agent: sections sent, waiting */
	C_STANDBY,	/* --standby: WELCOME in, only KEEPALIVE out */
	C_STREAM,	/* sending pages */
	C_FINISH,	/* END sent, waiting for DONE */
	C_OK,
	C_FAILED,
};

struct load_armed;

/*
 * One connection: an agent of the run (load_conns[idx]), or, with
 * --armed, the recording of one agent's snapshot (owner: that agent's
 * standby connection; not counted among the run's connections).
 */
struct conn {
	int			 idx;
	bool			 idle;
	bool			 connected;
	enum conn_state		 state;
	struct bufferevent	*bev;
	struct event		*timer;
	struct event		*keep;		/* KEEPALIVE while quiet */
	uint64_t		*next;		/* next page per CPU */
	double			 credit;	/* pages the rate allows */
	struct timespec		 start;
	double			 secs;
	uint64_t		 file_size;
	char			 name[TD_MAX_NAME_LEN + 1];
	char			 path[TD_MAX_NAME_LEN * 4 + 1];
	char			 why[TD_MAX_ERROR_LEN + 64];
	struct conn		*owner;		/* a snapshot's agent */
	uint64_t		 recording_id;	/* 0: tdload's pid and idx */
	struct load_armed	*fl;		/* --armed: its recorder */
};

/* tdload.c: start c (HELLO, or STANDBY); let a waiting c stream. */
void	load_conn_start(struct conn *c);
void	load_conn_go(struct conn *c);
/* tdload.c: frame b out on c, counted in the bytes sent; c fails. */
void	load_conn_send(struct conn *c, const struct td_buf *b);
void	load_conn_fail(struct conn *c, const char *why);

/*
 * tdload-flight.c: --armed standby agents.  init: before the loop (agent
 * trig_agent, -1 none, sends TRIGGERED trig_secs after its first ARM).
 * stand: c is welcomed as a standby agent.  frame: a frame on c's standby
 * connection: 1 taken, 0 not one of the flight recorder's, -1 a bad one
 * (why).  ready: a snapshot's recording has its WELCOME and sections out.
 * end: it got its DONE (ok) or failed (early: before its WELCOME).  gone: c's standby connection
 * ends.  summary: the snapshots, one line to fp; 0 when none failed.
 */
void	load_flight_init(struct event_base *base, int trig_agent,
	    double trig_secs);
void	load_flight_stand(struct conn *c);
int	load_flight_frame(struct conn *c, const struct td_frame *f,
	    char *why, size_t len);
void	load_flight_ready(struct conn *rec);
void	load_flight_end(struct conn *rec, bool ok, bool early);
void	load_flight_gone(struct conn *c);
int	load_flight_summary(FILE *fp);

#endif
