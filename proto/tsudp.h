/*
 * tsudp.h: the time-sync datagrams (docs/tdproto.md, "Time-sync
 * datagrams"), as pure code.
 *
 * A probe path of its own, beside the session's stream: the agent sends a
 * probe over UDP to the port WELCOME (version 5) announced, the listener
 * answers it.  Both are TD_TSUDP_LEN bytes, the same length each way (no
 * amplification), and carry the session's udp_id and an HMAC-SHA256,
 * truncated to TD_TSUDP_MAC_LEN bytes, over everything before it, keyed
 * with the udp_key WELCOME gave over TLS.  td_tsudp_pack() fills buf;
 * td_tsudp_peek() decodes without the key (for the listener to find the
 * session by id); td_tsudp_check() verifies the MAC in constant time.
 * No sockets, no logging.
 */
#ifndef TD_TSUDP_H
#define TD_TSUDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TD_TSUDP_LEN		72
#define TD_TSUDP_MAC_LEN	16
#define TD_TSUDP_KEY_LEN	32
#define TD_TSUDP_VERSION	1
#define TD_TSUDP_PROBE		1
#define TD_TSUDP_REPLY		2

/* One datagram: a probe carries t1, its reply t1 echoed, t2, t3, err. */
struct td_tsudp {
	uint8_t		 type;		/* TD_TSUDP_PROBE, _REPLY */
	uint64_t	 id;		/* WELCOME's udp_id */
	uint32_t	 round;
	uint32_t	 seq;
	uint64_t	 t1;		/* agent: CLOCK_MONOTONIC at send */
	uint64_t	 t2;		/* listener: kernel's receipt */
	uint64_t	 t3;		/* listener: just before sending */
	uint64_t	 err;		/* listener: how far t2 may be off
					   (realtime made monotonic), ns */
};

/* Encode m into buf[TD_TSUDP_LEN] with its MAC under key. */
void	td_tsudp_pack(uint8_t *buf, const struct td_tsudp *m,
	    const uint8_t *key);
/* Decode buf (len bytes) without checking the MAC: -1 if not one. */
int	td_tsudp_peek(const uint8_t *buf, size_t len, struct td_tsudp *m);
/* Whether buf's MAC is right under key (constant time). */
bool	td_tsudp_check(const uint8_t *buf, size_t len, const uint8_t *key);
/*
 * NTP's on-wire math for reply r, received at t4 (the agent's
 * CLOCK_MONOTONIC from its kernel's stamp, within t4_err ns):
 * *offset = listener - agent = ((t2 - t1) + (t3 - t4)) / 2, *delay =
 * (t4 - t1) - (t3 - t2), and the true offset lies within *bound =
 * delay / 2 + r->err + t4_err (+1 for rounding) of *offset
 * (docs/timesync.md, "The network part").  -1 when the four times
 * cannot be in causal order, even within their errors.
 */
int	td_tsudp_offset(const struct td_tsudp *r, uint64_t t4,
	    uint64_t t4_err, int64_t *offset, uint64_t *bound, int64_t *delay);

#endif
