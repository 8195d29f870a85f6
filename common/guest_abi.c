#include <stdio.h>
#include <string.h>

#include "guest_abi.h"
#include "banned.h"

const struct guest_result_file guest_results[RESULT_NFILES] = {
    [RESULT_TRANSCRIPT] = {"transcript.jsonl", RESULT_TRANSCRIPT_MAX},
    [RESULT_SESSION] = {SESSION_FILE_NAME, SESSION_FILE_MAX},
    [RESULT_BUNDLE] = {"changes.bundle", RESULT_BUNDLE_MAX},
    [RESULT_VM_LOG] = {"vm.log", RESULT_VM_LOG_MAX},
    [RESULT_JSON] = {"result.json", RESULT_JSON_MAX},
};

int guest_tag_valid(const char *t)
{
	size_t n = t ? strlen(t) : 0;

	return n > 0 && n <= GUEST_TAG_MAX &&
	       strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

void guest_mount_tag(char out[GUEST_TAG_MAX + 1], size_t i)
{
	snprintf(out, GUEST_TAG_MAX + 1, "aibox.m%zu", i);
}

int guest_env_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > GUEST_ENV_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return 1;
}

int guest_path_valid(const char *p)
{
	size_t n = strlen(p);

	if (n < 2 || n > GUEST_PATH_MAX || p[0] != '/' || p[n - 1] == '/')
		return 0;
	for (const char *c = p; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return 0;
		if (*c == '/') {
			size_t len = strcspn(c + 1, "/");

			if (len == 0 || (len == 1 && c[1] == '.') ||
			    (len == 2 && c[1] == '.' && c[2] == '.'))
				return 0;
		}
	}
	return 1;
}
