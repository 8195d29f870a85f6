#include <stdio.h>
#include <string.h>

#include "base/guest_abi.h"
#include "base/ustar.h"
#include "base/banned.h"

const struct guest_result_file guest_results[RESULT_NFILES] = {
    [RESULT_TRANSCRIPT] = {"transcript.jsonl", RESULT_TRANSCRIPT_MAX},
    [RESULT_SESSION] = {SESSION_FILE_NAME, SESSION_FILE_MAX},
    [RESULT_BUNDLE] = {"changes.bundle", RESULT_BUNDLE_MAX},
    [RESULT_VM_LOG] = {"vm.log", RESULT_VM_LOG_MAX},
    [RESULT_JSON] = {"result.json", RESULT_JSON_MAX},
};

#define LIT(kind, macro, home)                                                                     \
	{                                                                                          \
#macro, macro, GUEST_LIT_##kind, home                                              \
	}
#define ABI(kind, macro)                                                                           \
	{                                                                                          \
#macro, macro, GUEST_LIT_##kind, "common/base/guest_abi"                           \
	}

const struct guest_literal guest_literals[] = {
    ABI(TOKEN, GUEST_RUN_DIR),
    ABI(TOKEN, GUEST_TASK_DIR),
    ABI(TOKEN, GUEST_GO_SECRETS),
    ABI(TOKEN, GUEST_STATE_DIR),
    ABI(TOKEN, GUEST_HOME),
    ABI(WORD, GUEST_PROJECT_PATH),
    ABI(TOKEN, GUEST_PATH),
    ABI(WORD, GUEST_BRANCH),
    ABI(TOKEN, GUEST_BRANCH_REF),
    ABI(NAME, GUEST_FILE_SETTINGS),
    ABI(NAME, GUEST_FILE_PROMPT),
    ABI(NAME, GUEST_FILE_START_BUNDLE),
    ABI(NAME, GUEST_FILE_START_IDX),
    ABI(NAME, GUEST_FILE_TASK_CA),
    ABI(WORD, GUEST_SSH_SUBDIR),
    ABI(NAME, GUEST_SSH_HOST_KEY),
    ABI(NAME, GUEST_SSH_AUTH),
    ABI(TOKEN, GUEST_CMDLINE_MODE),
    ABI(WORD, GUEST_MODE_TASK),
    ABI(WORD, GUEST_MODE_RUN),
    ABI(TOKEN, GUEST_INIT_PATH),
    ABI(WORD, GUEST_INIT_SESSION),
    ABI(TOKEN, GUEST_FORCED_COMMAND),
    ABI(WORD, GUEST_CMD_TASK),
    ABI(WORD, GUEST_CMD_RUN),
    ABI(TOKEN, GUEST_RUN_ENV_VAR),
    ABI(TOKEN, GUEST_PROXY_HOSTPORT),
    ABI(TOKEN, GUEST_PROXY_URL),
    ABI(TOKEN, GUEST_API_FORWARD_URL),
    ABI(TOKEN, GUEST_API_KEY_PLACEHOLDER),
    ABI(WORD, GUEST_SERIAL_ROOT),
    ABI(WORD, GUEST_SERIAL_STATE),
    ABI(TOKEN, GUEST_PORT_SSH),
    ABI(TOKEN, GUEST_TAG_TASK),
    ABI(TOKEN, GUEST_TAG_PROJECT),
    ABI(TOKEN, GUEST_TAG_HOME),
    LIT(NAME, SESSION_FILE_NAME, "common/base/session_file"),
    LIT(NAME, SESSION_RESUME_NAME, "common/base/session_file"),
    ABI(TOKEN, SNAP_CMDLINE),
    LIT(WORD, USTAR_MAGIC_NAME, "common/base/ustar"),
    {NULL, NULL, 0, NULL},
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

#define PEM_BEGIN "-----BEGIN CERTIFICATE-----\n"
#define PEM_END   "-----END CERTIFICATE-----\n"

static int b64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

int guest_ca_pem_valid(const char *s, size_t n)
{
	size_t b = strlen(PEM_BEGIN), e = strlen(PEM_END), at, lines = 0;
	int padded = 0;

	if (!s || n > GUEST_CA_PEM_MAX || n < b + e || memcmp(s, PEM_BEGIN, b) ||
	    memcmp(s + n - e, PEM_END, e))
		return 0;
	for (at = b; at < n - e;) {
		size_t len = 0, pad = 0;

		if (padded) /* '=' ended the base64: no line after it */
			return 0;
		for (; at + len < n - e && s[at + len] != '\n'; len++) {
			char c = s[at + len];

			if (c == '=')
				pad++;
			else if (pad || !b64_char(c))
				return 0;
		}
		if (at + len >= n - e || len == 0 || len > 76 || pad > 2)
			return 0;
		padded = pad > 0;
		at += len + 1;
		lines++;
	}
	return lines > 0;
}
