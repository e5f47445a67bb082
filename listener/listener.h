/*
 * listener.h: tdlisten's configuration, and the small modules below the
 * others: admit.c (the handshake budget), finished.c (recordings finished
 * lately) and output.c (where files go).  The larger modules have their
 * own headers: server.h, conn.h, session.h, recording.h, registry.h,
 * checkpoint.h, timesync.h, sockio.h, budget.h.  Everything runs on one
 * libevent loop.
 */
#ifndef TD_LISTENER_H
#define TD_LISTENER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>
#include <event2/event.h>

#include "compress.h"
#include "tdlimits.h"

struct onfinish;

struct listener_config {
	const char		*port;
	const char		*bind;		/* NULL: all addresses */
	const char		*unix_path;	/* --unix: also this socket */
	uint32_t		 vsock_port;	/* --vsock: also this port, 0:
						   none */
	const char		*http;		/* --http ADDR:PORT, NULL: off */
	const char		*control;	/* --control PATH, NULL: off */
	const char		*dir;		/* output directory */
	const char		*cert;
	const char		*key;
	const char		*ca;
	const char		*crl;
	bool			 insecure;
	int			 file_version;
	enum td_codec_id	 codec;
	bool			 daemonize;
	const char		*logfile;
	int			 verbosity;
	int			 max_sessions;
	int			 handshake_timeout;	/* seconds */
	int			 max_handshakes;	/* in the handshake */
	int			 max_handshakes_addr;	/* per address */
	const char		*user;		/* -u: run as this user */
	const char		*group;		/* --group: reads the files */
	gid_t			 gid;		/* its gid, or -1 */
	mode_t			 dir_mode;	/* 0700, 02750 with --group */
	mode_t			 file_mode;	/* 0600, 0640 with --group */
	uint32_t		 tsync_interval;	/* ms, TD_TSYNC_OFF */
	int			 resume_wait;	/* s a lost agent may take to
						   resume, 0: no resuming */
	int			 idle_timeout;	/* s of silence, 0: none */
	int			 max_per_identity;
	int			 max_standby_per_identity;	/* standby
						   connections */
	uint64_t		 quota;		/* bytes per identity, 0: none */
	struct td_codec		*codec_ctx;	/* shared by every session */
	struct hcache		*hcache;	/* NULL: --no-header-cache */
	bool			 no_hcache;	/* --no-header-cache */
	bool			 no_udp_probes;	/* --no-udp-probes */
	const char		*tracecmd_port;	/* NULL: no trace-cmd clients */
	const char		*tracecmd_bind;	/* default 127.0.0.1 */
	uint16_t		 tracecmd_lo;	/* their data ports */
	uint16_t		 tracecmd_hi;
	const char		*uftrace_port;	/* NULL: no uftrace clients */
	const char		*uftrace_bind;	/* default 127.0.0.1 */
	struct onfinish		*onfinish;	/* --on-finish, NULL: none */
	uint64_t		 rotate_bytes;	/* --rotate SIZE, 0: none */
	uint32_t		 rotate_secs;	/* --rotate DURATION, 0: none */
	uint32_t		 keep_n;	/* --keep N pieces, 0: all */
	uint64_t		 keep_bytes;	/* --keep SIZE of pieces, 0 */
};

struct sockaddr;
struct hcache;

/*
 * admit.c: the budget of connections in their TLS handshake (slots owned
 * by the caller's pointers; the tables are admit.c's) and the log of
 * refusals at a bounded rate.  Loop thread only.
 */
enum admit_verdict {
	ADMIT_YES,
	ADMIT_EVICT,	/* after closing the victim */
	ADMIT_FULL,	/* no slot free, none to take */
	ADMIT_NO,	/* the address holds its share */
};
/* Why a connection was refused or closed, for the summary line. */
enum admit_kind {
	ADMIT_R_ADDRESS,	/* over --max-handshakes-per-address */
	ADMIT_R_FULL,		/* over --max-handshakes */
	ADMIT_R_EVICTED,	/* its slot went to a newcomer */
	ADMIT_R_SESSIONS,	/* over --max-sessions */
	ADMIT_R_IDENTITY,	/* its identity waits for HELLOs enough */
	ADMIT_R_FAILED,		/* timed out, TLS error, went away */
	ADMIT_R_NKINDS
};
/*
 * max slots, per_addr of them per address (an IPv6 /64); when full, a
 * handshake min_age_ms old gives its slot to a newcomer.
 */
void	admit_init(struct event_base *base, int max, int per_addr,
	    uint64_t min_age_ms);
/*
 * May a connection fd from sa have a slot (EVICT: once *victim is
 * closed)?  fd: for a Unix peer's credentials (-1: none).
 */
enum admit_verdict admit_check(int fd, const struct sockaddr *sa,
	    void **victim);
/* owner, from sa, takes a slot: only after YES, or EVICT and the close. */
void	admit_add(int fd, const struct sockaddr *sa, void *owner);
/* owner gives its slot back; false when it held none. */
bool	admit_release(void *owner);
/* Slots taken. */
int	admit_handshakes(void);
/* Log a refusal (kind), or count it for the interval's summary line. */
void	admit_refused(enum admit_kind kind, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* Connections refused or closed for kind since the start. */
uint64_t admit_refused_total(enum admit_kind kind);
/* A short name for kind, a metric's label ("address", "failed" ...). */
const char *admit_kind_label(enum admit_kind kind);
/* Log what is counted, free the tables. */
void	admit_free(void);

/* finished.c: recordings finished lately (DIR/.tdlisten-finished) */
struct finished {
	char		 identity[TD_MAX_NAME_LEN + 1];
	uint64_t	 recording_id;
	uint64_t	 end_off;	/* the stream's length */
	uint64_t	 size;		/* of the file */
	char		 path[TD_MAX_NAME_LEN * 4 + 1];	/* under DIR */
};
void		 finished_load(const char *dir);
void		 finished_add(const struct finished *e);
const struct finished *finished_find(const char *identity,
		    uint64_t recording_id);
void		 finished_free(void);

/*
 * A file or directory tdlisten put in place (or kept incomplete), as the
 * callback registered for it hears it (recording_set_done(),
 * uftrace_set_done()): every pointer valid for the call only.
 */
struct output_done {
	const char	*path;		/* under DIR, as the log names it */
	bool		 complete;	/* false: kept incomplete */
	const char	*producer;	/* "tdproto", "tracecmd", "uftrace" */
	const char	*identity;	/* its directory under DIR */
	const char	*name;		/* the recording's name, or "" */
};

/* output.c */
/*
 * Directory and file name for a new recording (its PATH.part made, with
 * c's modes); caller frees; pieces: the first piece's name under
 * --rotate (rotate.h).  -1 with *err (caller frees) and errno (ENOSPC,
 * EMFILE ...: another try later may work).
 */
int	output_path(const struct listener_config *c, const char *identity,
	    const char *name, bool pieces, char **path, char **err);
/*
 * Make the directory hostdir (c's modes and group), or give one an older
 * tdlisten made the modes of now: 0, or -1 with errno.
 */
int	output_hostdir(const struct listener_config *c, const char *hostdir);
/* Bytes on disk under DIR/identity. */
uint64_t output_usage(const char *dir, const char *identity);
/* Room for need more bytes of identity (disk, --quota); errno if not. */
bool	output_room(const struct listener_config *c, const char *identity,
	    uint64_t need);
/* Keep characters safe in a path component, map the rest to '_'. */
void	output_sanitize(char *s);
struct td_file;
/*
 * A broken recording's writer f (of path) finished as NAME.incomplete.dat
 * when it holds a readable trace: 0 and *final (caller frees), or -1
 * (too little: dropped).  Frees nothing of f.
 */
int	output_keep_partial(struct td_file *f, const char *path, char **final);
/* fn(c, identity, state path) for each recording left in c->dir. */
void	output_states(const struct listener_config *c,
	    void (*fn)(const struct listener_config *, const char *,
	    const char *));

#endif
