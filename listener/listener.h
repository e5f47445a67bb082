/*
 * listener.h: tdlisten's configuration (struct listener_config), filled
 * by tdlisten.c from the options and read by the modules.  Each module
 * has its own header: admit.h (the handshake budget), finished.h
 * (recordings finished lately), output.h (where files go), server.h,
 * agentconn.h, session.h, recording.h, registry.h, checkpoint.h, timesync.h,
 * sockio.h, budget.h ...  Everything runs on one libevent loop.
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

struct hcache;

#endif
