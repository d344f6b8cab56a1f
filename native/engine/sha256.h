/* sha256.h - SHA-256 (FIPS 180-4), for the model file digest in meta.json. */
#ifndef KITE_SHA256_H
#define KITE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct kt_sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t block[64];
    size_t fill;
} kt_sha256;

void sha256_init(kt_sha256 *s);
void sha256_update(kt_sha256 *s, const void *data, size_t n);
void sha256_final(kt_sha256 *s, uint8_t out[32]);
/* Lower-case hex digest of a buffer into hex[65]. */
void sha256_hex(const void *data, size_t n, char hex[65]);

#endif
