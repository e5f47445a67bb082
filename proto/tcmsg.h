/*
 * tcmsg.h: the message framing of trace-cmd's "v3" network protocol
 * (trace-cmd record -N HOST:PORT, trace-cmd 2.9 to 3.4), as pure code.
 *
 * The conversation opens with bare strings (TD_TC_GREETING from the
 * listener, "-1V3\0" from a v3 client, "V3\0", the 8-byte magic, "OK"),
 * then every message is a 12-byte header {be32 size of the whole message,
 * be32 command, be32 size of the command's fixed block}, the fixed block
 * and a payload (size - 12 - block).  A message is at most
 * TD_TC_MSG_MAX bytes.  A fixed block longer than the command's is
 * accepted (trace-cmd's forward-compatibility rule: the extra bytes are
 * skipped); a shorter one is not.  docs/tdlisten.8 and
 * ../shared/reference/trace-cmd-notes.md section 1 say what each message
 * means.
 *
 * Nothing here touches a socket or a log: packers append to a td_buf,
 * parsers read a bounded byte range and return -1 with errno EBADMSG on
 * anything malformed (trailing bytes included).
 */
#ifndef TD_TCMSG_H
#define TD_TCMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct td_buf;

#define TD_TC_GREETING		"tracecmd"	/* 8 bytes, no NUL */
#define TD_TC_GREETING_LEN	8
#define TD_TC_V3_CPU		"-1V3"		/* the client's, with NUL */
#define TD_TC_V3		"V3"		/* the listener's, with NUL */
#define TD_TC_MAGIC		"766679\0"	/* 8 bytes with two NULs */
#define TD_TC_MAGIC_LEN		8
#define TD_TC_OK		"OK"		/* 2 bytes, no NUL */
/* Longest first string a client sends ("-1V3", or v1's CPU count). */
#define TD_TC_FIRST_MAX		16
#define TD_TC_MSG_HEADER	12
#define TD_TC_MSG_MAX		8192
/* Longest TINIT option string ("tcp", "vsock"), NUL excluded. */
#define TD_TC_OPT_MAX		32

/* X(name, number, fixed block size).  Numbers are trace-cmd's. */
#define TD_TC_MSG_TABLE(X)						\
	X(CLOSE,	 0,  0)						\
	X(TINIT,	 1, 12)						\
	X(RINIT,	 2,  4)						\
	X(SEND_DATA,	 3,  0)						\
	X(FIN_DATA,	 4,  0)						\
	X(NOT_SUPP,	 5,  0)						\
	X(TRACE_REQ,	 6, 16)						\
	X(TRACE_RESP,	 7, 40)						\
	X(CLOSE_RESP,	 8,  0)						\
	X(TIME_SYNC,	 9, 20)						\
	X(TRACE_PROXY,	10, 24)						\
	X(CONT,		11,  0)

enum td_tc_cmd {
#define TD_TC_ENUM(n, v, b) TD_TC_##n = v,
	TD_TC_MSG_TABLE(TD_TC_ENUM)
#undef TD_TC_ENUM
};

/* A message found in a byte stream. */
struct td_tc_msg {
	uint32_t	 cmd;
	const uint8_t	*block;		/* the fixed block (known part) */
	size_t		 block_len;	/* as sent, extra bytes included */
	const uint8_t	*payload;
	size_t		 len;		/* payload bytes */
	size_t		 total;		/* the whole message */
};

/* What a client asks for in TINIT. */
struct td_tc_tinit {
	uint32_t	 cpus;
	uint32_t	 page_size;
	bool		 tcp;		/* option "tcp": TCP data sockets */
	bool		 vsock;		/* option "vsock" */
	uint32_t	 unknown;	/* other options, counted */
};

/*
 * What the first string of a client (up to its NUL, at most
 * TD_TC_FIRST_MAX bytes) says: 1 and *v3 true for "-1V3", 1 and *v3 false
 * with *cpus for a v1 client's decimal CPU count, 0 when more bytes are
 * needed (no NUL yet), -1 (EBADMSG) for anything else.  *used: bytes
 * taken, NUL included.
 */
int		 td_tc_first(const uint8_t *buf, size_t avail, bool *v3,
		    uint32_t *cpus, size_t *used);
/* Whether the TD_TC_MAGIC_LEN bytes at p are the v3 magic. */
bool		 td_tc_magic_ok(const uint8_t *p);
/*
 * One message at the start of buf: 1 and m filled when it is whole, 0 when
 * more bytes are needed (m->total says how many once the header is in,
 * else 0), -1 (EBADMSG) for an unknown command, a size over TD_TC_MSG_MAX
 * or a fixed block shorter than the command's or longer than the message.
 */
int		 td_tc_msg_parse(const uint8_t *buf, size_t avail,
		    struct td_tc_msg *m);
/* Name of a command ("?" if unknown). */
const char	*td_tc_name(uint32_t cmd);
/*
 * TINIT's fields: cpus 1 to TD_MAX_CPUS, page size TD_MIN_PAGE_SIZE to
 * TD_MAX_PAGE_SIZE and a power of two, exactly opt_num NUL-terminated
 * printable options of at most TD_TC_OPT_MAX bytes, nothing after.
 */
int		 td_tc_unpack_tinit(const struct td_tc_msg *m,
		    struct td_tc_tinit *t);
/* RINIT's ports (cpus of them, each 1 to 65535 in decimal, nothing after). */
int		 td_tc_unpack_rinit(const struct td_tc_msg *m, uint32_t max,
		    uint32_t *cpus, uint16_t *ports);
/* A message with no fixed block: CLOSE, FIN_DATA, NOT_SUPP, SEND_DATA. */
int		 td_tc_pack(struct td_buf *b, uint32_t cmd, const void *p,
		    size_t n);
/* TINIT (opts: NULL-terminated list of option strings, may be NULL). */
int		 td_tc_pack_tinit(struct td_buf *b, uint32_t cpus,
		    uint32_t page_size, const char *const *opts);
/* RINIT with one port per CPU (-1, EINVAL: past TD_TC_MSG_MAX). */
int		 td_tc_pack_rinit(struct td_buf *b, uint32_t cpus,
		    const uint16_t *ports);
/*
 * Whether an RINIT of cpus ports, none above max_port, fits TD_TC_MSG_MAX
 * (some 1,360 CPUs of 5-digit ports): ask before binding them.
 */
bool		 td_tc_rinit_fits(uint32_t cpus, uint16_t max_port);

#endif
