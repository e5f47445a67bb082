/*
 * recording.h: one recording on the collection box, whoever produces it.
 *
 * A recording owns its trace.dat writer
 * (DIR/<identity>/<identity>-<time>[-name].dat, written as .part with
 * spools beside it), its per-CPU page sequences and
 * event counts, its loss ledger, its time-sync samples, its checkpoint
 * (PATH.state), its memory account and its place in the registry.  A
 * producer (session.c speaks tdproto for tdagent; others may speak other
 * protocols) finds one in the registry (registry.h) or opens one with
 * struct recording_params, hands it sections, options, pages and
 * samples, and finishes it, or lets it go.
 *
 * Ownership: the producer that opened or attached a recording is its
 * owner; recording_detach() leaves it ownerless for --resume-wait
 * (recording_expire() ends it after that), and recording_attach() by a
 * later producer takes it over (the previous owner, if any, hears it
 * through its taken callback, and must not touch the recording again).
 * recording_close() and recording_leave() free it.
 *
 * Errors: actions return 0, or -1 with recording_fault() saying whose
 * fault it was and recording_why() why (REC_ROOM keeps errno's reason:
 * ENOSPC, EDQUOT, EMFILE, ENOMEM ...: come back later).  The recording
 * logs its own life (recording, wrote, kept, time sync, resumed) under
 * the label its owner gave it; it never logs an error it returns.  Loop
 * thread only.
 */
#ifndef TD_RECORDING_H
#define TD_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recparams.h"

struct event_base;
struct finished;
struct listener_config;
struct output_done;
struct recording;
struct tally_rec;
struct td_tsync_sample;

/* Whose fault a failed action was. */
enum recording_fault {
	REC_INPUT,	/* the producer's data does not fit: close */
	REC_ROOM,	/* no disk, quota, descriptors or memory: later */
	REC_FAIL,	/* this side cannot go on: close */
};

/*
 * Open a recording of p for its owner arg (taken: see recording_attach())
 * under label, and write its first checkpoint.  Its writer's descriptors
 * are reserved from the budget, conns being the connections open now.
 * NULL with err and *fault (REC_ROOM: come back later) when it cannot be.
 */
struct recording *recording_open(const struct listener_config *cfg,
		    const struct recording_params *p, const char *label,
		    void (*taken)(void *), void *arg, int conns, char *err,
		    size_t errlen, enum recording_fault *fault);
/*
 * The loop recordings run on: a cut (tdlisten --rotate) copies its header
 * sections into the next piece a piece a turn of base.  Without one (NULL,
 * the default) a cut copies at once.
 */
void		 recording_set_base(struct event_base *base);
/*
 * What --rotate decides (rotate.c's rotate_policy), given by whoever runs
 * recordings (tdlisten.c, the tests): the recording asks its policy, the
 * policy never reaches into the recording's fields.  Without one (NULL,
 * the default) a recording is one file and nothing is recovered in a cut.
 *   check:     at a checkpoint: cut to the next piece if one is due (-1
 *              with err: the recording fails; *sealed: its piece is whole)
 *   last:      r finished: --keep's removals
 *   recovered: statepath is a piece another recovery took up already
 *   recover:   statepath stopped in a cut: the state to recover instead
 *              (NULL: statepath's own), *done a finished piece to report
 *   cleanup:   the listener stops
 */
struct recording_policy {
	int	 (*check)(struct recording *r, bool *sealed, char *err,
		    size_t errlen);
	void	 (*last)(struct recording *r);
	bool	 (*recovered)(const char *statepath);
	char	*(*recover)(const struct listener_config *c,
		    const char *identity, const char *statepath, char **done);
	void	 (*cleanup)(void);
};
void		 recording_set_policy(const struct recording_policy *p);
/*
 * Whether r is cutting to its next piece (--rotate): its owner must not
 * feed it (sections, options, pages, END) until ready(owner) is called,
 * which recording_set_ready() names; the owner's checkpoints wait too.
 */
bool		 recording_busy(const struct recording *r);
/*
 * ready(arg) when a cut of r is over (its owner's arg of recording_open()
 * or recording_attach(); NULL: nobody).  Set again after each attach.
 * The owner reads its producer again then; a cut that failed shows in
 * its next recording_checkpoint().
 */
void		 recording_set_ready(struct recording *r,
		    void (*ready)(void *));
/*
 * cb(d, arg) for every file a recording puts in place, finished or kept
 * as NAME.incomplete.dat (tdlisten --on-finish); NULL: nobody.  Called
 * after the file is in place and logged.
 */
void		 recording_set_done(void (*cb)(const struct output_done *,
		    void *), void *arg);
/* The producer that callback names ("tdproto" unless told). */
void		 recording_set_producer(struct recording *r,
		    const char *producer);
/*
 * r's file is in place as path (complete: finished, else kept as
 * incomplete): the done callback hears it.  Also for each piece put in
 * place (recording-piece.h, rotate.c).
 */
void		 recording_done(const struct recording *r, const char *path,
		    bool complete);
/* Whether r has an owner now (one that resumes it takes it over). */
bool		 recording_owned(const struct recording *r);
/*
 * arg takes r over under label: a previous owner's taken(arg) is called
 * first, the resume deadline stops, and a writer dropped by a pause or a
 * cut comes back from the checkpoint.  0; 1 when that cannot be now
 * (errno: out of descriptors or memory; r waits on, ownerless); -1 when
 * it cannot be at all (r is closed).  err says why.
 */
int		 recording_attach(struct recording *r, const char *label,
		    void (*taken)(void *), void *arg, char *err,
		    size_t errlen);
/*
 * Its owner lets r go (the connection broke, why: the log's reason, may
 * be NULL): checkpointed unless its writer was dropped, it waits
 * --resume-wait seconds for a producer to resume it.
 */
void		 recording_detach(struct recording *r, const char *why);
/* The label its log lines carry. */
const char	*recording_label(const struct recording *r);
const struct recording_params *recording_params(const struct recording *r);
/* The file it becomes (DIR/<identity>/<time>[-name].dat). */
const char	*recording_path(const struct recording *r);
/* The random id of this recording (TIME_SHIFT's peer, WELCOME). */
uint64_t	 recording_trace_id(const struct recording *r);
/* The producer's position (tdproto: bytes of its stream handled). */
uint64_t	 recording_position(const struct recording *r);
/* ... and the position of the last checkpoint (acknowledged). */
uint64_t	 recording_acked(const struct recording *r);
/* The producer handled n more bytes of its stream (bytes: of the wire). */
void		 recording_advance(struct recording *r, uint64_t n);
/* Bytes received for it, resends included (the summary's). */
void		 recording_received(struct recording *r, uint64_t n);
/* Pages taken in so far. */
uint64_t	 recording_pages(const struct recording *r);
/* What r is now, for the status page and the metrics (tally.h). */
void		 recording_info(const struct recording *r,
		    struct tally_rec *t);
/* Why the last action failed, and whose fault it was. */
const char	*recording_why(const struct recording *r);
enum recording_fault recording_fault(const struct recording *r);

/* Metadata sections (trace.dat's own layout), streamed. */
int		 recording_section_begin(struct recording *r, uint16_t id);
int		 recording_section_write(struct recording *r, const void *p,
		    size_t n);
/*
 * A piece of the open section, compressed (codec: TD_WIRE_*); *rawp is
 * its raw_len bytes decompressed, valid until the next call.
 */
int		 recording_section_z(struct recording *r, uint8_t codec,
		    const void *p, size_t n, size_t raw_len,
		    const uint8_t **rawp);
int		 recording_section_end(struct recording *r);
/*
 * An option: those the listener writes itself (TIME_SHIFT, DATE, ours)
 * are dropped; CPUSTAT adds to the loss ledger, TSC2NSEC feeds time sync.
 */
int		 recording_option(struct recording *r, uint16_t id,
		    const void *p, size_t n);
/*
 * count pages of cpu follow, the first numbered first_seq (checked:
 * a declared CPU, the sequence due); then recording_page() for each.
 */
int		 recording_pages_begin(struct recording *r, uint32_t cpu,
		    uint64_t first_seq);
/* One page of cpu (page_size bytes): counted and written. */
int		 recording_page(struct recording *r, uint32_t cpu,
		    const void *page);
/*
 * count pages of cpu from first_seq compressed in one block (codec:
 * TD_WIRE_*): decompressed to check and count them; a file of the same
 * codec stores the block as it came.
 */
int		 recording_chunk(struct recording *r, uint32_t cpu,
		    uint64_t first_seq, uint8_t codec, const void *p,
		    size_t n, uint32_t count);
/*
 * What recording_chunk() of count pages will make r hold beyond what it
 * holds now (its pages, and its buffer for them the first time).
 */
size_t		 recording_chunk_mem(const struct recording *r,
		    uint32_t count);
/*
 * Pages its producer lost on the way (a trace-cmd client's UDP datagrams):
 * in the last line of its log (not kept in checkpoints); the producer
 * says how in an option.
 */
void		 recording_lost_pages(struct recording *r, uint64_t n);
/*
 * Its producer has no time sync (a trace-cmd client): the file keeps the
 * producer's clock and the log does not wait for samples.
 */
void		 recording_no_tsync(struct recording *r);
/*
 * The producer's command lines now (CMDLINES, version 6: n bytes of
 * saved_cmdlines text), kept as the latest set under --rotate: a piece
 * sealed before the producer's own CMDLINES section gets them (each
 * piece is read alone and needs its tasks' names).
 */
void		 recording_cmdlines(struct recording *r, const void *p,
		    size_t n);
/* A time-sync sample; absurd ones are dropped and counted. */
void		 recording_sample(struct recording *r,
		    const struct td_tsync_sample *s);
/*
 * The end: pages[ncpus] is what the producer says it sent; every section
 * must be there.  Time-sync options, the file put in place, the DONE
 * remembered (registry_finished()); fills d with what DONE says.  On -1
 * the recording is still open (close it).
 */
int		 recording_finish(struct recording *r, const uint64_t *pages,
		    uint32_t ncpus, struct finished *d);
/*
 * Checkpoint what arrived when enough did since the last and the quota
 * allows: 0 (*acked: the acknowledged position, new when a state was
 * written), -1 on failure (REC_ROOM: over the quota, no room).
 */
int		 recording_checkpoint(struct recording *r, uint64_t *acked);
/*
 * Drop the writer and go back to the last checkpoint: a frame cut in the
 * middle (what NULL), or a pause, whose reason what is logged with
 * errnum's words unless it says "over ...".  The next attach takes the
 * writer back.
 */
void		 recording_rewind(struct recording *r, const char *what,
		    int errnum);
/* Whether the writer is dropped (rewound, waiting to be taken back). */
bool		 recording_rewound(const struct recording *r);
/*
 * Bring the memory account up to date with what the recording holds plus
 * extra (its producer's buffers): 0, or the budget passed: -1, with the
 * reason ("over this session's 48 MiB") in why.
 */
int		 recording_account(struct recording *r, uint64_t extra,
		    char *why, size_t whylen);
/*
 * The end of a recording, finished or not: one not finished is kept as
 * NAME.incomplete.dat when enough arrived to read it.  Frees r.
 */
void		 recording_close(struct recording *r);
/*
 * tdlisten stops: r is checkpointed (unless its writer was dropped: the
 * last checkpoint stands) and left on disk for the next tdlisten.  Frees.
 */
void		 recording_leave(struct recording *r);
/* Close every ownerless recording whose resume deadline passed. */
void		 recording_expire(void);
/* At stop: leave every recording that is still here. */
void		 recording_leave_all(void);
/*
 * Take up the recording left at statepath by an earlier tdlisten (not with
 * --resume-wait 0: nobody could resume it).
 */
void		 recording_recover(const struct listener_config *cfg,
		    const char *identity, const char *statepath);
/* Take up the recordings a previous tdlisten left in cfg->dir. */
void		 recording_recover_all(const struct listener_config *cfg);

#endif
