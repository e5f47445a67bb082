/*
 * tsudp.c: the time-sync datagrams (see tsudp.h).
 */
#include <stdint.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "cursor.h"
#include "tsudp.h"
#include "banned.h"

#define TSUDP_BODY	(TD_TSUDP_LEN - TD_TSUDP_MAC_LEN)

static void
tsudp_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static void
tsudp_be64(uint8_t *p, uint64_t v)
{
	tsudp_be32(p, (uint32_t)(v >> 32));
	tsudp_be32(p + 4, (uint32_t)v);
}

/* The truncated HMAC-SHA256 of the body under key. */
static void
tsudp_mac(const uint8_t *buf, const uint8_t *key, uint8_t *mac)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (HMAC(EVP_sha256(), key, TD_TSUDP_KEY_LEN, buf, TSUDP_BODY, md,
	    &mdlen) == NULL || mdlen < TD_TSUDP_MAC_LEN)
		memset(md, 0, TD_TSUDP_MAC_LEN);	/* never matches */
	memcpy(mac, md, TD_TSUDP_MAC_LEN);
}

/* Encode: "TDTS", version, type, 0, id, round, seq, t1, t2, t3, err, MAC. */
void
td_tsudp_pack(uint8_t *buf, const struct td_tsudp *m, const uint8_t *key)
{
	memcpy(buf, "TDTS", 4);
	buf[4] = TD_TSUDP_VERSION;
	buf[5] = m->type;
	buf[6] = buf[7] = 0;
	tsudp_be64(buf + 8, m->id);
	tsudp_be32(buf + 16, m->round);
	tsudp_be32(buf + 20, m->seq);
	tsudp_be64(buf + 24, m->t1);
	tsudp_be64(buf + 32, m->t2);
	tsudp_be64(buf + 40, m->t3);
	tsudp_be64(buf + 48, m->err);
	tsudp_mac(buf, key, buf + TSUDP_BODY);
}

/* Decode, MAC unchecked. */
int
td_tsudp_peek(const uint8_t *buf, size_t len, struct td_tsudp *m)
{
	struct td_cur c;

	if (len != TD_TSUDP_LEN || memcmp(buf, "TDTS", 4) != 0 ||
	    buf[4] != TD_TSUDP_VERSION || buf[6] != 0 || buf[7] != 0 ||
	    (buf[5] != TD_TSUDP_PROBE && buf[5] != TD_TSUDP_REPLY))
		return -1;
	td_cur_init(&c, buf + 8, TSUDP_BODY - 8);
	m->type = buf[5];
	m->id = td_cur_be64(&c);
	m->round = td_cur_be32(&c);
	m->seq = td_cur_be32(&c);
	m->t1 = td_cur_be64(&c);
	m->t2 = td_cur_be64(&c);
	m->t3 = td_cur_be64(&c);
	m->err = td_cur_be64(&c);
	return td_cur_end(&c);
}

/* Check the MAC. */
bool
td_tsudp_check(const uint8_t *buf, size_t len, const uint8_t *key)
{
	uint8_t mac[TD_TSUDP_MAC_LEN];

	if (len != TD_TSUDP_LEN)
		return false;
	tsudp_mac(buf, key, mac);
	return CRYPTO_memcmp(mac, buf + TSUDP_BODY, sizeof mac) == 0;
}

/* The offset, delay and bound of one exchange. */
int
td_tsudp_offset(const struct td_tsudp *r, uint64_t t4, uint64_t t4_err,
    int64_t *offset, uint64_t *bound, int64_t *delay)
{
	int64_t out, back, d, slack;

	if (r->err > INT32_MAX || t4_err > INT32_MAX || t4 < r->t1 ||
	    t4 - r->t1 > INT64_MAX / 4 || r->t3 + r->err < r->t2 ||
	    (r->t3 > r->t2 && r->t3 - r->t2 > INT64_MAX / 4))
		return -1;
	slack = (int64_t)(r->err + t4_err);
	out = (int64_t)(r->t2 - r->t1);
	back = (int64_t)(r->t3 - t4);
	d = (int64_t)(t4 - r->t1) - (int64_t)(r->t3 - r->t2);
	if (d < -slack)
		return -1;
	*offset = (out + back) / 2;
	*delay = d;
	/* d / 2 + slack, rounded up, +1 for the halving of the offset */
	*bound = (uint64_t)((d + 2 * slack + 1) / 2) + 1;
	return 0;
}
