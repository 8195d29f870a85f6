#include "base/ustar.h"
#include "base/banned.h"

unsigned long ustar_checksum(const unsigned char h[USTAR_BLOCK])
{
	unsigned long sum = 0;

	for (size_t i = 0; i < USTAR_BLOCK; i++)
		sum +=
		    (i >= USTAR_CHKSUM_OFF && i < USTAR_CHKSUM_OFF + USTAR_CHKSUM_LEN) ? ' ' : h[i];
	return sum;
}
