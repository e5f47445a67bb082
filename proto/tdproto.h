/*
 * tdproto.h: the tracedock wire protocol, as pure code.
 *
 * One byte stream (TLS over TCP, AF_VSOCK or a serial device) carries one
 * recording.
 * Every message is a frame: an 8-byte header {be32 length of the payload,
 * be16 type, be16 flags} and the payload.  Integers in headers and message
 * fields are big-endian; section content, option content and ring-buffer
 * pages travel as the agent's trace.dat bytes, in the byte order HELLO
 * declares.  docs/tdproto.md documents every byte.
 *
 * Nothing here touches a socket, an event loop or a log: packers append to
 * a td_buf, unpackers read a payload through a bounds-checked cursor and
 * reject short, long and trailing bytes with -1 (errno EBADMSG).  The table
 * below is the single source of the numbers, names and size limits of the
 * messages; retired numbers are never reused.
 */
#ifndef TD_TDPROTO_H
#define TD_TDPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdlimits.h"

struct td_buf;

#define TD_PROTO_VERSION	6	/* the highest spoken */
#define TD_PROTO_VERSION_MIN	3	/* the lowest spoken */
#define TD_FRAME_HEADER		8

/* Frame flags. */
#define TD_FRAME_URGENT		0x0001	/* jump queues (time-sync probes) */

/*
 * X(name, number, min payload, max payload).  Sizes are checked on every
 * frame before its payload is looked at.
 */
#define TD_MSG_TABLE(X)							\
	X(HELLO,	 1, 39,	TD_MAX_HELLO)				\
	X(WELCOME,	 2, 30,	TD_MAX_HELLO)				\
	X(SECTION,	 3, 2,	2)					\
	X(SECTION_DATA,	 4, 1,	TD_MAX_FRAME)				\
	X(SECTION_END,	 5, 0,	0)					\
	X(OPTION,	 6, 2,	TD_MAX_FRAME)				\
	X(PAGES,	 7, 16,	TD_MAX_FRAME)				\
	X(END,		 8, 4,	4 + 8 * TD_MAX_CPUS)			\
	X(DONE,		 9, 12,	12 + TD_MAX_NAME_LEN * 4)		\
	X(ERROR,	10, 6,	6 + TD_MAX_ERROR_LEN)			\
	X(TSYNC_PROBE,	11, 8,	8)					\
	X(TSYNC_REPLY,	12, 16,	16)					\
	X(TSYNC_SAMPLE,	13, 52,	52)					\
	X(ACK,		14, 8,	8)					\
	X(KEEPALIVE,	15, 0,	0)					\
	X(PAGES_Z,	16, 21,	TD_MAX_FRAME)				\
	X(SECTION_DATA_Z, 17, 9, 8 + TD_SECTION_Z_RAW + 4096)	\
	X(SECTION_OFFER, 18, 2,	2 + TD_HCACHE_REF_LEN * TD_HCACHE_OFFER_MAX) \
	X(SECTION_HAVE,	19, 2,	2 + TD_HCACHE_OFFER_MAX)		\
	X(SECTION_REF,	20, TD_HCACHE_REF_LEN, TD_HCACHE_REF_LEN)	\
	X(STANDBY,	21, 14,	TD_MAX_STANDBY_MSG)			\
	X(START,	22, 20,	TD_MAX_STANDBY_MSG)			\
	X(STOP,		23, 4,	4)					\
	X(ANSWER,	24, 8,	8 + TD_MAX_ERROR_LEN)			\
	X(GO,		25, 4,	4)					\
	X(CMDLINES,	26, 0,	TD_MAX_FRAME)				\
	X(ARM,		27, 16,	TD_MAX_ARM_MSG)				\
	X(DISARM,	28, 4,	4)					\
	X(SNAPSHOT,	29, 18,	18 + 2 * TD_MAX_NAME_LEN)		\
	X(ARMED,	30, 8,	8 + TD_MAX_ERROR_LEN)			\
	X(TRIGGERED,	31, 20,	20)

enum td_msg_type {
#define TD_MSG_ENUM(n, v, lo, hi) TD_MSG_##n = v,
	TD_MSG_TABLE(TD_MSG_ENUM)
#undef TD_MSG_ENUM
};

/* A frame found in a byte stream. */
struct td_frame {
	uint16_t	 type;
	uint16_t	 flags;
	const uint8_t	*payload;
	size_t		 len;		/* payload bytes */
	size_t		 total;		/* header + payload */
};

/*
 * Look for one frame at the start of buf.  Returns 1 and fills f when a
 * whole frame is there, 0 when more bytes are needed (f->total then says how
 * many the frame needs once the header is in, else 0), -1 (EBADMSG) for an
 * unknown type or a length outside the type's limits.
 */
int		 td_frame_parse(const uint8_t *buf, size_t avail,
		    struct td_frame *f);
/* Name of a message type ("?" if unknown). */
const char	*td_msg_name(uint16_t type);
/* Append a frame header for a payload of len bytes. */
int		 td_frame_header(struct td_buf *b, uint16_t type,
		    uint16_t flags, size_t len);

/*
 * Resuming.  Every frame the agent sends after HELLO has a place in the
 * recording's byte stream (its offset: the bytes of the frames before it),
 * except TSYNC_PROBE and KEEPALIVE, which are not part of the recording.
 * The listener acknowledges (ACK) the offset up to which the recording is
 * safe on its disk; the agent keeps every byte after it.  A HELLO with
 * TD_HELLO_RESUME names an earlier recording_id; a WELCOME with
 * TD_WELCOME_RESUMED answers with the offset at which the agent must go on,
 * and the stream continues from there as if never cut.
 */
#define TD_HELLO_RESUME		0x0001
#define TD_WELCOME_RESUMED	0x0001

/* ERROR codes. */
#define TD_ERR_FATAL		1	/* refused: do not come back */
#define TD_ERR_RETRY		2	/* come back later and resume */

/* Whether a frame type counts in the recording's byte stream. */
#define TD_MSG_IN_STREAM(t)	((t) != TD_MSG_TSYNC_PROBE &&		\
				 (t) != TD_MSG_KEEPALIVE &&		\
				 (t) != TD_MSG_HELLO &&			\
				 (t) != TD_MSG_SECTION_OFFER)

/*
 * Standby agents (proto/standbymsg.c, docs/tdproto.md "Standby").  An
 * agent started with --standby sends STANDBY instead of HELLO as its first
 * frame; the listener answers WELCOME and keeps the connection, which
 * carries no recording: only KEEPALIVE, START and STOP from the listener,
 * and ANSWER from the agent.  A START asks for a recording, which the
 * agent makes (or refuses) by its own limits and runs as an ordinary
 * recording over a connection of its own.  Listeners that predate these
 * types close a connection whose first frame is STANDBY (an unknown type),
 * and agents that predate them never send it.
 */
#define TD_STANDBY_VERSION	3	/* 2: the allowance added; 3: it
					   takes ARM, DISARM, SNAPSHOT */
#define TD_STANDBY_CLOCKS	256	/* the clocks, space-separated */
#define TD_STANDBY_EVENTS	1024	/* START's events, comma-separated */

/* STANDBY, agent -> listener: who waits and what it could record. */
struct td_standby {
	uint16_t	 version;	/* TD_STANDBY_VERSION */
	uint32_t	 ncpus;
	char		 host[TD_MAX_NAME_LEN + 1];	/* its host name */
	char		 kernel[TD_MAX_NAME_LEN + 1];	/* uname -r */
	char		 clocks[TD_STANDBY_CLOCKS + 1];	/* trace clocks */
	char		 recording[TD_MAX_NAME_LEN + 1]; /* "" when idle */
	/* version 2: what a collector may ask of it ("", 0 from version 1) */
	char		 allow[TD_STANDBY_EVENTS + 1];	/* --allow-events */
	uint32_t	 max_buffer;	/* --max-buffer KB */
	uint32_t	 max_duration;	/* --max-duration s */
};

/* START, listener -> agent: make a recording (0: the agent's limit). */
struct td_start {
	uint32_t	 req;		/* the listener's number, in ANSWER */
	uint32_t	 buffer_kb;	/* -b; 0: the agent's default */
	uint32_t	 seconds;	/* -s; 0: the agent's --max-duration */
	char		 name[TD_MAX_NAME_LEN + 1];	/* --name */
	char		 clock[TD_MAX_NAME_LEN + 1];	/* -C, "" default */
	char		 events[TD_STANDBY_EVENTS + 1];	/* -e, a,b,c */
	char		 filter[TD_MAX_FILTER_LEN + 1];	/* -f, "" none */
};

/* ANSWER, agent -> listener: what became of a START or STOP. */
#define TD_ANSWER_STARTED	1	/* text: the recording's name */
#define TD_ANSWER_REFUSED	2	/* text: why */
#define TD_ANSWER_FINISHED	3	/* text: name and exit status */
#define TD_ANSWER_READY		4	/* text: the name; tracing waits for GO */
struct td_answer {
	uint32_t	 req;		/* START's or STOP's; 0: none */
	uint16_t	 what;		/* TD_ANSWER_* */
	char		 text[TD_MAX_ERROR_LEN + 1];
};

/*
 * The flight recorder (proto/flightmsg.c, docs/tdproto.md "Flight
 * recorder"): frames of a standby connection whose agent said version 3 or
 * more; the listener sends an older one none of them.  ARM makes the agent
 * record into a ring of its own in overwrite mode and send nothing;
 * SNAPSHOT freezes it and streams what it holds as an ordinary recording
 * (ANSWER STARTED, READY, FINISHED as for START), then re-arms.
 */
/* ARM, listener -> agent. */
struct td_arm {
	uint32_t	 req;		/* the listener's number, in ARMED */
	uint32_t	 buffer_kb;	/* per CPU; 0: the agent's default */
	char		 name[TD_MAX_NAME_LEN + 1];	/* the snapshots' */
	char		 events[TD_STANDBY_EVENTS + 1];	/* -e, a,b,c */
	char		 filter[TD_MAX_FILTER_LEN + 1];	/* -f, "" none */
	char		 trigger[TD_MAX_FILTER_LEN + 1]; /* "SYS:EV if F", "" */
};

/* SNAPSHOT, listener -> agent: why. */
#define TD_SNAP_OPERATOR	1	/* tdctl snapshot */
#define TD_SNAP_TRIGGER		2	/* an agent's trigger fired */
#define TD_SNAP_REARM		3	/* a trigger held off: clear, re-arm,
					   stream nothing */
struct td_snapshot {
	uint32_t	 req;		/* ANSWERs name it */
	uint16_t	 why;		/* TD_SNAP_* */
	uint64_t	 when_ns;	/* trigger: the listener's
					   CLOCK_REALTIME at TRIGGERED */
	char		 name[TD_MAX_NAME_LEN + 1];	/* the recording's */
	char		 host[TD_MAX_NAME_LEN + 1];	/* trigger: who fired */
};

/* ARMED, agent -> listener: what became of an ARM or a DISARM. */
#define TD_ARMED_OK		1	/* text: the instance */
#define TD_ARMED_FAILED		2	/* text: why (the kernel's words) */
#define TD_ARMED_DISARMED	3	/* text: "" */
#define TD_ARMED_REARMED	4	/* req 0: re-armed on its own, text
					   why */
#define TD_ARMED_WINDOW		5	/* req 0, text "NAME MS": the seconds
					   its ring holds now, in ms */
struct td_armed {
	uint32_t	 req;		/* ARM's or DISARM's; 0: none */
	uint16_t	 what;		/* TD_ARMED_* */
	char		 text[TD_MAX_ERROR_LEN + 1];
};

/* TRIGGERED, agent -> listener: its trigger froze its ring. */
struct td_triggered {
	uint64_t	 clock_ns;	/* the instance's trace clock then */
	uint64_t	 real_ns;	/* its CLOCK_REALTIME then */
	uint32_t	 late_ms;	/* noticed at most this after it fired */
};

/* HELLO, agent -> listener: who is recording what. */
struct td_hello {
	uint16_t	 version_min;
	uint16_t	 version_max;
	uint32_t	 ncpus;
	uint32_t	 page_size;
	uint8_t		 long_size;	/* user-space long of the agent */
	uint8_t		 commit_size;	/* ring-buffer commit field */
	uint8_t		 big_endian;	/* byte order of sections and pages */
	uint8_t		 file_version;	/* 0: the listener's choice, 6, 7 */
	uint64_t	 recording_id;	/* random, for resuming later */
	uint64_t	 trace_id;
	uint16_t	 flags;		/* TD_HELLO_RESUME */
	char		 name[TD_MAX_NAME_LEN + 1];	/* --name, may be "" */
	char		 clock[TD_MAX_NAME_LEN + 1];	/* trace clock */
};

/* WELCOME, listener -> agent: the recording is accepted. */
#define TD_TSYNC_OFF	UINT32_MAX	/* tsync_interval: no time sync */
struct td_welcome {
	uint16_t	 version;
	uint16_t	 flags;			/* TD_WELCOME_RESUMED */
	uint32_t	 tsync_interval;	/* ms between rounds, 0: start
						   and end only */
	uint64_t	 session_id;
	uint64_t	 resume_offset;		/* go on from this offset */
	uint32_t	 idle_timeout;		/* s of silence the listener
						   takes, 0: no limit */
	char		 identity[TD_MAX_NAME_LEN + 1];	/* from the cert */
	/* version 5: the time-sync datagrams (proto/tsudp.h) */
	uint16_t	 udp_port;		/* 0: none, probe in-band */
	uint64_t	 udp_id;
	uint8_t		 udp_key[32];		/* TD_TSUDP_KEY_LEN */
	uint64_t	 ref_ns;		/* the listener's CLOCK_MONOTONIC
						   as it wrote WELCOME, 0: none */
};

/* PAGES: count whole pages of one CPU, numbered from first_seq. */
struct td_pages {
	uint32_t	 cpu;
	uint32_t	 count;
	uint64_t	 first_seq;
	const uint8_t	*data;		/* count * page_size bytes */
	size_t		 len;
};

/*
 * PAGES_Z: count (1 .. TD_CHUNK_PAGES) whole pages of one CPU as one block
 * compressed with a wire codec: exactly one chunk of a version 7 file, so a
 * listener writing the same codec stores it as it came.
 */
#define TD_WIRE_ZSTD	1
#define TD_WIRE_ZLIB	2

struct td_pages_z {
	uint32_t	 cpu;
	uint32_t	 count;
	uint64_t	 first_seq;
	uint16_t	 codec;		/* TD_WIRE_* */
	const uint8_t	*data;		/* the compressed block */
	size_t		 len;
};

/*
 * SECTION_DATA_Z: a piece of the open section, compressed by the agent: at
 * most TD_SECTION_Z_RAW bytes once decompressed, exactly raw_len.
 */
#define TD_SECTION_Z_RAW	(256 * 1024)
struct td_section_z {
	uint16_t	 codec;		/* TD_WIRE_* */
	uint32_t	 raw_len;	/* 1..TD_SECTION_Z_RAW */
	const uint8_t	*data;		/* the compressed piece */
	size_t		 len;
};

/*
 * The header cache (version 4).  Right after a WELCOME of version 4 to a
 * new recording, the agent may offer (SECTION_OFFER, not in the stream)
 * the header sections it is about to send, each by id, length and the
 * SHA-256 of its exact content; the listener answers SECTION_HAVE, one
 * byte per offer (1: it has that content for this agent).  Then each
 * section goes into the stream either in full or as one SECTION_REF (the
 * same id, length and hash), which the listener replaces by its copy.
 */
#define TD_HCACHE_SHA_LEN	32
#define TD_HCACHE_REF_LEN	(2 + 2 + 8 + TD_HCACHE_SHA_LEN)
#define TD_HCACHE_OFFER_MAX	8

/* One section by content: SECTION_REF, and one entry of SECTION_OFFER. */
struct td_section_ref {
	uint16_t	 id;		/* TD_OPT_HEADER_INFO .. CMDLINES */
	uint64_t	 length;	/* content bytes, <= TD_MAX_SECTION_SIZE */
	uint8_t		 sha[TD_HCACHE_SHA_LEN];	/* SHA-256 of them */
};

/* SECTION_OFFER: up to TD_HCACHE_OFFER_MAX sections of distinct ids. */
struct td_section_offer {
	uint16_t	 count;
	struct td_section_ref ref[TD_HCACHE_OFFER_MAX];
};

/* SECTION_HAVE: the answer, in the offer's order (0: send it, 1: have). */
struct td_section_have {
	uint16_t	 count;
	uint8_t		 have[TD_HCACHE_OFFER_MAX];
};

/* END: the agent's page count of every CPU, to check nothing is missing. */
struct td_end {
	uint32_t	 ncpus;
	uint64_t	 pages[TD_MAX_CPUS];
};

/* DONE, listener -> agent: the file is complete on disk. */
struct td_done {
	uint64_t	 file_size;
	uint16_t	 flags;
	char		 path[TD_MAX_NAME_LEN * 4 + 1];
};

/* ERROR, either way: why the peer is closing. */
struct td_error {
	uint32_t	 code;
	char		 text[TD_MAX_ERROR_LEN + 1];
};

/*
 * Time sync, one round driven by the agent: it writes a marker into its
 * trace clock, sends TSYNC_PROBE, the listener answers TSYNC_REPLY with its
 * reference time of receipt, the agent writes a second marker.  From the
 * probe with the shortest round trip the agent reports one TSYNC_SAMPLE:
 * reference = ((ts * scaling) >> frac) + offset, within +-bound ns.
 */
struct td_tsync_probe {
	uint32_t	 round;
	uint32_t	 seq;
	uint64_t	 ref_ns;	/* REPLY only: listener's time */
};

struct td_tsync_sample {
	uint32_t	 round;
	uint32_t	 probes;	/* probes that made the round */
	uint64_t	 ts;		/* agent trace clock */
	int64_t		 offset;
	uint64_t	 scaling;
	uint32_t	 frac;
	uint64_t	 bound;		/* ns, half the best round trip */
	uint64_t	 rtt;		/* ns, best round trip */
};

/*
 * The content of OPTION TD_OPT_TD_GUEST (0x7467, shared/tdfile.h): one guest
 * of the agent's machine as tdagent --guest sees it now (docs/tdproto.md).
 * Unlike other options it is big-endian and the listener decodes it; each
 * one replaces the previous one of the same name.
 */
#define TD_GUEST_VERSION	1
#define TD_GUEST_KVM		0x01	/* flags: the KVM TSC block follows */
#define TD_GUEST_GONE		0x02	/* flags: the QEMU process is gone */

/* One vCPU of a guest: its host thread, and its TSC as KVM sets it. */
struct td_guest_vcpu {
	uint32_t	 vcpu;		/* QEMU's cpu-index, < TD_MAX_CPUS */
	int32_t		 tid;		/* host thread id, > 0 */
	/* TD_GUEST_KVM: guest TSC = (host TSC * ratio >> frac) + offset */
	int64_t		 tsc_offset;
	uint64_t	 tsc_ratio;	/* > 0 */
	uint32_t	 tsc_frac;	/* < 64 */
};

/* A guest: its name (its recording's identity) and vCPUs by index. */
struct td_guest {
	uint8_t		 flags;		/* TD_GUEST_KVM, TD_GUEST_GONE */
	uint32_t	 pid;		/* QEMU's process id, > 0 */
	uint32_t	 tsc_mult;	/* TD_GUEST_KVM: the host's TSC2NSEC */
	uint32_t	 tsc_shift;
	char		 name[TD_MAX_NAME_LEN + 1];	/* not empty */
	uint32_t	 nvcpus;	/* 0 with TD_GUEST_GONE only */
	struct td_guest_vcpu vcpu[TD_MAX_CPUS];	/* vcpu increasing */
};

int	td_msg_pack_hello(struct td_buf *b, const struct td_hello *h);
int	td_msg_unpack_hello(const struct td_frame *f, struct td_hello *h);
int	td_msg_pack_welcome(struct td_buf *b, const struct td_welcome *w);
int	td_msg_unpack_welcome(const struct td_frame *f, struct td_welcome *w);
int	td_msg_pack_section(struct td_buf *b, uint16_t id);
int	td_msg_unpack_section(const struct td_frame *f, uint16_t *id);
int	td_msg_pack_section_data(struct td_buf *b, const void *p, size_t n);
int	td_msg_pack_section_end(struct td_buf *b);
int	td_msg_pack_section_z(struct td_buf *b, const struct td_section_z *sz);
int	td_msg_unpack_section_z(const struct td_frame *f,
	    struct td_section_z *sz);
int	td_msg_pack_section_offer(struct td_buf *b,
	    const struct td_section_offer *o);
int	td_msg_unpack_section_offer(const struct td_frame *f,
	    struct td_section_offer *o);
int	td_msg_pack_section_have(struct td_buf *b,
	    const struct td_section_have *h);
int	td_msg_unpack_section_have(const struct td_frame *f,
	    struct td_section_have *h);
int	td_msg_pack_section_ref(struct td_buf *b,
	    const struct td_section_ref *r);
int	td_msg_unpack_section_ref(const struct td_frame *f,
	    struct td_section_ref *r);
int	td_msg_pack_option(struct td_buf *b, uint16_t id, const void *p,
	    size_t n);
int	td_msg_unpack_option(const struct td_frame *f, uint16_t *id,
	    const uint8_t **p, size_t *n);
/* Pack the header of a PAGES frame; the caller appends the pages. */
int	td_msg_pack_pages_head(struct td_buf *b, uint32_t cpu, uint32_t count,
	    uint64_t first_seq, size_t page_size);
int	td_msg_unpack_pages(const struct td_frame *f, size_t page_size,
	    struct td_pages *pg);
/* Append a PAGES_Z frame around len compressed bytes. */
int	td_msg_pack_pages_z(struct td_buf *b, const struct td_pages_z *pz);
int	td_msg_unpack_pages_z(const struct td_frame *f,
	    struct td_pages_z *pz);
/* PAGES' first TD_PAGES_HEAD bytes, the pages yet to come (data NULL). */
#define TD_PAGES_HEAD	16
int	td_msg_unpack_pages_head(const uint8_t *p, size_t len,
	    size_t page_size, struct td_pages *pg);
int	td_msg_pack_end(struct td_buf *b, const struct td_end *e);
int	td_msg_unpack_end(const struct td_frame *f, struct td_end *e);
int	td_msg_pack_done(struct td_buf *b, const struct td_done *d);
int	td_msg_unpack_done(const struct td_frame *f, struct td_done *d);
int	td_msg_pack_error(struct td_buf *b, uint32_t code, const char *text);
int	td_msg_pack_tsync_probe(struct td_buf *b, const struct td_tsync_probe *p);
int	td_msg_unpack_tsync_probe(const struct td_frame *f,
	    struct td_tsync_probe *p);
int	td_msg_pack_tsync_reply(struct td_buf *b, const struct td_tsync_probe *p);
int	td_msg_unpack_tsync_reply(const struct td_frame *f,
	    struct td_tsync_probe *p);
int	td_msg_pack_tsync_sample(struct td_buf *b,
	    const struct td_tsync_sample *s);
int	td_msg_unpack_tsync_sample(const struct td_frame *f,
	    struct td_tsync_sample *s);
int	td_msg_unpack_error(const struct td_frame *f, struct td_error *e);
int	td_msg_pack_ack(struct td_buf *b, uint64_t offset);
int	td_msg_unpack_ack(const struct td_frame *f, uint64_t *offset);
int	td_msg_pack_keepalive(struct td_buf *b);
/*
 * CMDLINES (version 6), agent -> listener during a recording: the text of
 * saved_cmdlines now ("PID COMM" lines), n <= TD_MAX_FRAME; the listener
 * keeps the latest for the pieces it seals (--rotate).
 */
int	td_msg_pack_cmdlines(struct td_buf *b, const void *p, size_t n);

/* Standby frames (proto/standbymsg.c); STOP carries the request number. */
int	td_msg_pack_standby(struct td_buf *b, const struct td_standby *s);
int	td_msg_unpack_standby(const struct td_frame *f, struct td_standby *s);
int	td_msg_pack_start(struct td_buf *b, const struct td_start *s);
int	td_msg_unpack_start(const struct td_frame *f, struct td_start *s);
int	td_msg_pack_stop(struct td_buf *b, uint32_t req);
int	td_msg_unpack_stop(const struct td_frame *f, uint32_t *req);
/* GO, listener -> agent: every recording of START req is ready: trace. */
int	td_msg_pack_go(struct td_buf *b, uint32_t req);
int	td_msg_unpack_go(const struct td_frame *f, uint32_t *req);
int	td_msg_pack_answer(struct td_buf *b, const struct td_answer *a);
int	td_msg_unpack_answer(const struct td_frame *f, struct td_answer *a);
/* Flight-recorder frames (proto/flightmsg.c); DISARM carries req alone. */
int	td_msg_pack_arm(struct td_buf *b, const struct td_arm *a);
int	td_msg_unpack_arm(const struct td_frame *f, struct td_arm *a);
int	td_msg_pack_disarm(struct td_buf *b, uint32_t req);
int	td_msg_unpack_disarm(const struct td_frame *f, uint32_t *req);
int	td_msg_pack_snapshot(struct td_buf *b, const struct td_snapshot *s);
int	td_msg_unpack_snapshot(const struct td_frame *f,
	    struct td_snapshot *s);
int	td_msg_pack_armed(struct td_buf *b, const struct td_armed *a);
int	td_msg_unpack_armed(const struct td_frame *f, struct td_armed *a);
int	td_msg_pack_triggered(struct td_buf *b, const struct td_triggered *t);
int	td_msg_unpack_triggered(const struct td_frame *f,
	    struct td_triggered *t);
/* The content of a TD_OPT_TD_GUEST option (not a frame: OPTION wraps it). */
int	td_msg_pack_guest(struct td_buf *b, const struct td_guest *g);
int	td_msg_unpack_guest(const uint8_t *p, size_t n, struct td_guest *g);

#endif
