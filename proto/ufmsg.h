/*
 * ufmsg.h: the message framing of `uftrace record --host` (uftrace 0.13's
 * cmds/recv.c protocol), as pure decoding.
 *
 * A uftrace client sends one run over one TCP connection, as messages of
 * an 8-byte header {be16 magic 0xface, be16 type, be32 length of the
 * payload} and the payload.  Each payload is a small head (the run's
 * directory name, a thread or CPU number, a file name, the info file's
 * header) followed by a body: bytes of one file of a uftrace data
 * directory, which the caller streams to disk without holding it.  The
 * sequence: SEND_DIR_NAME first, then data (SEND_DATA for <tid>.dat,
 * SEND_KERNEL_DATA for kernel-cpuN.dat, SEND_PERF_DATA for perf-cpuN.dat,
 * appended), the metadata files (SEND_META_DATA: task.txt, sid-*.map,
 * *.sym, *.dbg, kernel_header, kallsyms, events.txt), SEND_INFO (the info
 * file, its 40-byte header in network order) and SEND_END.
 * docs/uftrace-recv.md documents every byte.
 *
 * Nothing here touches a socket, a file or a log: the decoders check the
 * magic, the type, every length against tdlimits.h's TD_UF_* caps and
 * every file name against the kinds of files of the format, and return -1
 * with a message in err for anything else.  Any thread.
 */
#ifndef TD_UFMSG_H
#define TD_UFMSG_H

#include <stddef.h>
#include <stdint.h>

#include "tdlimits.h"

#define TD_UF_MAGIC		0xface
#define TD_UF_HEADER		8	/* bytes of a message header */
#define TD_UF_INFO_HEADER	40	/* bytes of the info file's header */

/* The message types a client sends (uftrace's UFTRACE_MSG_SEND_*). */
enum td_uf_type {
	TD_UF_DIR_NAME = 101,
	TD_UF_DATA,
	TD_UF_KERNEL_DATA,
	TD_UF_PERF_DATA,
	TD_UF_INFO,
	TD_UF_META_DATA,
	TD_UF_END,
};

/* The kinds of files a run's directory may hold. */
enum td_uf_kind {
	TD_UF_K_NONE,		/* no file (DIR_NAME, END) */
	TD_UF_K_TASK_DATA,	/* <tid>.dat */
	TD_UF_K_KERNEL_DATA,	/* kernel-cpuN.dat */
	TD_UF_K_PERF_DATA,	/* perf-cpuN.dat */
	TD_UF_K_INFO,		/* info */
	TD_UF_K_TASK_TXT,	/* task.txt */
	TD_UF_K_MAP,		/* sid-<16 hex digits>.map */
	TD_UF_K_SYM,		/* <object>.sym */
	TD_UF_K_DBG,		/* <object>.dbg */
	TD_UF_K_KERNEL_HEADER,	/* kernel_header */
	TD_UF_K_KALLSYMS,	/* kallsyms */
	TD_UF_K_EVENTS,		/* events.txt */
	TD_UF_K_OTHER,		/* a safe name of no kind of the format (the
				   client's --logfile): the body is skipped */
};

/* A message's header, decoded. */
struct td_uf_hdr {
	uint16_t	 type;		/* enum td_uf_type */
	uint32_t	 len;		/* of the payload */
};

/* The head of a message's payload, decoded; the body follows it. */
struct td_uf_msg {
	uint16_t	 type;
	enum td_uf_kind	 kind;
	uint32_t	 head_len;	/* payload bytes before the body */
	uint32_t	 body_len;	/* bytes of the file that follow */
	int32_t		 id;		/* the tid or CPU of a data message */
	/* the file the body goes to (with kind OTHER: skipped), "" if none */
	char		 name[TD_UF_MAX_NAME + 1];
	/* DIR_NAME: the client's directory, made printable (never a path
	   here: only logged) */
	char		 dir[TD_UF_MAX_NAME + 1];
	/* INFO: the info file's header in host order, as uftrace recv
	   writes it */
	uint8_t		 info[TD_UF_INFO_HEADER];
};

/*
 * Decode the 8 bytes at p: magic, a type a client sends, a length within
 * the type's bounds and TD_UF_MAX_MSG.  0, or -1 with err.
 */
int	td_ufmsg_header(const uint8_t *p, struct td_uf_hdr *h, char *err,
	    size_t errlen);
/*
 * How many bytes of the payload the head needs at least, knowing the n
 * available at p (its start): the head is complete when that many are
 * there.  -1 with err when what is there is already wrong.
 */
long	td_ufmsg_head_need(const struct td_uf_hdr *h, const uint8_t *p,
	    size_t n, char *err, size_t errlen);
/*
 * Decode the head of h's payload from the n bytes at p (at least
 * td_ufmsg_head_need()): m filled, 0; or -1 with err (a name that is not
 * safe, a number out of range, a malformed info header).
 */
int	td_ufmsg_head(const struct td_uf_hdr *h, const uint8_t *p, size_t n,
	    struct td_uf_msg *m, char *err, size_t errlen);
/*
 * The kind of a file name a client sends in SEND_META_DATA, OTHER for a
 * safe name of no kind, or -1: not safe (empty, too long, '/', "..", a
 * leading '.', bytes that are not printable ASCII).
 */
int	td_ufmsg_name_kind(const char *name, size_t len);
/* The type's name, for logs ("SEND_DATA"); "?" for others. */
const char *td_ufmsg_type_name(uint16_t type);

#endif
