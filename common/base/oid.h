/*
 * The size of a git object id, spelled once: every buffer, check and parser
 * of an id in hex (commits in settings.json, result.json and summary.json,
 * a bundle's refs, the broker's ref updates) uses these.
 */
#ifndef AIBOX_OID_H
#define AIBOX_OID_H

#define OID_SHA1_HEX   40 /* a SHA-1 id in hex */
#define OID_SHA256_HEX 64 /* a SHA-256 id in hex */
#define OID_HEX_MAX    OID_SHA256_HEX

/* n is the length of an id in hex of one of the two formats. */
#define OID_HEX_LEN_OK(n) ((n) == OID_SHA1_HEX || (n) == OID_SHA256_HEX)

#endif
