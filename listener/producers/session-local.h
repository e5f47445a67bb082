/*
 * session-local.h: struct session, for session.c, session-standby.c and
 * session-hcache.c only (the rest of the listener sees it through session.h).
 */
#ifndef TD_SESSION_LOCAL_H
#define TD_SESSION_LOCAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "session.h"
#include "tdproto.h"

struct hcache_put;
struct probeport_entry;
struct listener_config;
struct recording;
struct standbytab_entry;

/* One agent's conversation. */
struct session {
	const struct listener_config *cfg;
	enum session_phase	 phase;
	char			 identity[TD_MAX_NAME_LEN + 1];
	char			 peer[128];
	char			 label[TD_MAX_NAME_LEN * 2 + 160];
	struct recording	*rec;		/* owned while streaming */
	uint32_t		 page_size;	/* the recording's */
	struct td_buf		 out;		/* replies */
	bool			 urgent;	/* a time-sync reply in out */
	struct td_buf		 err;		/* the ERROR of a verdict */
	size_t			 want;		/* bytes the next step needs */
	/* a SECTION_DATA or PAGES frame taken in as it arrives */
	uint16_t		 bulk_type;	/* 0: none */
	uint32_t		 bulk_cpu;
	size_t			 bulk_left;	/* payload bytes still to come */
	size_t			 bulk_total;	/* the whole frame's bytes */
	void			(*gone)(void *);
	void			*gone_arg;
	/* the header cache (version 4) */
	uint16_t		 version;	/* the protocol spoken */
	bool			 offer_ok;	/* an OFFER may come now */
	struct td_section_offer	 offer;		/* what the agent offered */
	struct td_section_have	 have;		/* and the answer */
	int			 have_fd[TD_HCACHE_OFFER_MAX];	/* the
					   cache's copies, until used; -1 */
	struct hcache_put	*put;		/* the section being kept */
	struct standbytab_entry	*sb;		/* SESSION_STANDBY: its entry */
	struct probeport_entry	*pp;		/* time-sync datagrams, or NULL */
	void			(*kick)(void *);
	void			*kick_arg;
	bool			 resume_only;	/* over --max-sessions */
};

/*
 * STANDBY, the first frame of a standby agent (session-standby.c): 0, s
 * is a standby session now with its entry in standbytab.c (its WELCOME to
 * queue), or -1: end it with an ERROR of *code saying why (len bytes).
 * session-standby.c never calls session.c: it answers, session.c acts.
 */
int	session_standby_admit(struct session *s, const struct td_frame *f,
	    uint32_t *code, char *why, size_t len);
/* A later frame of a standby agent's: 0, or -1 to close it saying why. */
int	session_standby_frame(struct session *s, const struct td_frame *f,
	    char *why, size_t len);
/*
 * A full section of the stream and the header cache (session-hcache.c):
 * begin (section id), its bytes, its end.  The cache keeps the section
 * when it was offered and the cache lacks it; nothing here ends s.
 */
void	session_hcache_keep_begin(struct session *s, uint16_t id);
void	session_hcache_keep(struct session *s, const void *p, size_t n);
void	session_hcache_keep_end(struct session *s);

#endif
