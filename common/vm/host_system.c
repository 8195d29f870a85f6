#include "vm/host_system.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/banned.h"

static const char *const names[] = {
    [HOST_LINUX] = "linux",
    [HOST_MACOS] = "macos",
    [HOST_WINDOWS] = "windows",
};

int host_system_get(enum host_system *out)
{
	const char *v = getenv(HOST_SYSTEM_ENV);

	if (!v) {
#if defined(_WIN32)
		*out = HOST_WINDOWS;
#elif defined(__APPLE__)
		*out = HOST_MACOS;
#else
		*out = HOST_LINUX;
#endif
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(v, names[i])) {
			*out = (enum host_system)i;
			return 0;
		}
	return -EINVAL;
}

const char *host_system_name(enum host_system s)
{
	return names[s];
}
