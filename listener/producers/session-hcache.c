/*
 * session-hcache.c: what a session keeps in the header cache (hcache.c):
 * a full section the agent offered and the cache lacks goes into the cache
 * as it streams into the recording.  A failure to keep it costs only the
 * cache's copy: logged, never the session's end (session-local.h).
 */
#include <stddef.h>
#include <stdint.h>

#include "hcache.h"
#include "listener.h"
#include "log.h"
#include "session-local.h"
#include "banned.h"

/* A full section begins: kept if it was offered and the cache lacks it. */
void
session_hcache_keep_begin(struct session *s, uint16_t id)
{
	char err[256];
	uint16_t i;

	for (i = 0; s->cfg->hcache != NULL && i < s->offer.count; i++) {
		if (s->offer.ref[i].id != id || s->have.have[i])
			continue;
		s->put = hcache_put_begin(s->cfg->hcache, s->identity,
		    &s->offer.ref[i], err, sizeof err);
		if (s->put == NULL)
			log_warnx("%s: header cache: %s", s->label, err);
		return;
	}
}

/* More of the section being kept. */
void
session_hcache_keep(struct session *s, const void *p, size_t n)
{
	if (s->put != NULL && hcache_put_write(s->put, p, n) == -1) {
		log_warn("%s: header cache: cannot keep a section", s->label);
		hcache_put_abort(s->put);
		s->put = NULL;
	}
}

/* The section ends: kept if whole and what the agent offered. */
void
session_hcache_keep_end(struct session *s)
{
	char err[256];
	int ret;

	if (s->put == NULL)
		return;
	ret = hcache_put_end(s->put, err, sizeof err);
	s->put = NULL;
	if (ret == -1)
		log_warnx("%s: header cache: %s", s->label, err);
	else if (ret == 0)
		log_warnx("%s: a section was not what the agent offered: not "
		    "kept", s->label);
}
