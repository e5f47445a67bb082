/*
 * hstage.h: the header sections of a recording held back until the first
 * connection (protocol version 4, docs/tdproto.md "The header cache").
 *
 * tdagent reads its header sections before it connects.  They wait here,
 * in an unnamed file (a memfd), each with the SHA-256 of its content, so
 * that once the listener has said which it holds (SECTION_OFFER,
 * SECTION_HAVE), each goes into the stream whole or as one SECTION_REF;
 * from then on the stream is fixed, and resuming replays it as it is.
 * No logging; -1 with errno.  The recorder's thread only.
 */
#ifndef TD_HSTAGE_H
#define TD_HSTAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conn;
struct hstage;
struct stream;
struct td_section_offer;
struct td_section_have;

/* A stage for up to TD_HCACHE_OFFER_MAX sections; NULL with errno. */
struct hstage	*hstage_new(void);
void		 hstage_free(struct hstage *h);
int		 hstage_begin(struct hstage *h, uint16_t id);
int		 hstage_write(struct hstage *h, const void *p, size_t n);
int		 hstage_end(struct hstage *h);
/* The sections worth offering (all but CMDLINES, and tiny ones), in o. */
void		 hstage_offer(struct hstage *h, struct td_section_offer *o);
/*
 * Frame every staged section into s, in the order staged: those that
 * have (the answer to the last hstage_offer(); NULL: none) marks as held
 * by the listener as SECTION_REF, the others whole.  *refs and *saved
 * count the references and the content bytes they stand for.
 */
int		 hstage_frame(struct hstage *h, struct stream *s,
		    const struct td_section_have *have, unsigned *refs,
		    uint64_t *saved);
/*
 * At the first connection (c, blocking, after a WELCOME of version):
 * with version 4, offer the sections and read the answer, then frame
 * them all into s.  note says what the cache saved ("" if nothing was
 * offered).  -1 with err when the connection failed.
 */
int		 hstage_send(struct hstage *h, struct conn *c,
		    uint16_t version, struct stream *s, char *note,
		    size_t notelen, char *err, size_t errlen);

#endif
