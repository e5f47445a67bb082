/*
 * standby-local.h: the standby agent's state, shared by its two files
 * (standby.h is the public side):
 *
 *	standby.c		the loop, the connection, START and STOP, the
 *				recordings it runs as children
 *	standby-flight.c	the flight recorder: ARM, DISARM, SNAPSHOT
 *
 * One thread: nothing here is locked.
 */
#ifndef TD_STANDBY_LOCAL_H
#define TD_STANDBY_LOCAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "conn.h"
#include "standby.h"
#include "tdproto.h"

struct armed;
struct armsync;
struct instance;
struct td_buf;

/*
 * A ring its trigger froze and nobody asked for (TRIGGERED sent, no
 * SNAPSHOT): re-armed after the collector's idle timeout (three KEEPALIVE
 * periods: a collector that did not answer in that time is as good as
 * gone), at most this.
 */
#define STANDBY_FROZEN_MAX_MS	60000

/* The standby agent. */
struct standby {
	struct standby_opts	 o;
	struct conn_target	 t;
	SSL_CTX			*ctx;
	struct conn		*c;		/* NULL: not connected */
	int			 sigfd;
	char			 self[4096];	/* tdagent's own path */
	struct td_standby	 me;		/* what STANDBY says */
	uint32_t		 keepalive_ms;
	pid_t			 child;		/* the recording, or 0 */
	uint32_t		 start_req;	/* its START */
	uint32_t		 stop_req;	/* a STOP for it, 0: none */
	int			 ready_fd;	/* its --ready-fd's other end */
	int			 err_fd;	/* its stderr's other end */
	char			 errline[512];	/* a line of it, in part */
	size_t			 errlen;
	char			 why[TD_MAX_ERROR_LEN];	/* its last message */
	bool			 before_go;	/* it has not been let trace */
	bool			 quit;
	struct armed		*armed;		/* the flight recorder, or NULL */
	bool			 snap;		/* the child is its snapshot */
	bool			 disarm_after;	/* ... and a DISARM waits */
	bool			 rearmed;	/* re-armed without a collector:
						   say so when back */
	uint64_t		 frozen_at;	/* ms its trigger froze it, 0 */
	uint32_t		 rec_kb;	/* the recording's ring per CPU */
	struct td_welcome	 welcome;	/* the collector's, its probe
						   port for armsync */
	struct armsync		*sync;		/* the armed window's samples */
	const struct instance	*sync_ring;	/* ... of this armed ring */
	bool			 sync_said;	/* a failure warned of */
	bool			 sync_off;	/* none for this ARM */
};

/* standby.c: a whole frame b to the collector: 0, or -1 (then gone). */
int	standby_send(struct standby *sb, struct td_buf *b);
/*
 * standby.c: the one way to reply to request req: type TD_MSG_ANSWER
 * (what: TD_ANSWER_*) or TD_MSG_ARMED (TD_ARMED_*), with text.
 */
void	standby_reply(struct standby *sb, uint16_t type, uint32_t req,
	    uint16_t what, const char *text);
/*
 * standby.c: run the recording r as a child, or (flight: an instance) the
 * snapshot of the frozen ring: 0, or -1 and err.
 */
int	standby_record(struct standby *sb, const struct td_start *r,
	    const char *flight, char *err, size_t errlen);

/* standby-flight.c: the frames, and what the loop calls. */
void	standby_flight_arm(struct standby *sb, const struct td_arm *a);
void	standby_flight_disarm(struct standby *sb, uint32_t req);
void	standby_flight_snapshot(struct standby *sb,
	    const struct td_snapshot *s);
/* Re-arm after a snapshot, or a freeze nobody took (why: logged). */
void	standby_flight_rearm(struct standby *sb, const char *why);
/* Look at the armed ring: its trigger fired (TRIGGERED), or too long. */
void	standby_flight_look(struct standby *sb);
/* With a KEEPALIVE: ARMED WINDOW, how far back the ring reaches. */
void	standby_flight_window(struct standby *sb);
/* The collector is gone: a frozen ring goes on recording. */
void	standby_flight_lost(struct standby *sb);

#endif
