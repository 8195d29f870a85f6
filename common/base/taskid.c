#include "base/taskid.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "base/hex.h"
#include "base/banned.h"

int task_id_new(char id[TASK_ID_LEN + 1])
{
	unsigned char r[TASK_ID_LEN / 2];
	ssize_t n;

	do
		n = getrandom(r, sizeof(r), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n != sizeof(r))
		return -EIO;
	hex_encode(id, r, sizeof(r));
	return 0;
}

int task_id_valid(const char *s)
{
	/* hex_is_lower() stops at the first byte that is no digit, a NUL too. */
	return hex_is_lower(s, TASK_ID_LEN) && s[TASK_ID_LEN] == '\0';
}

int task_name_make(char name[TASK_NAME_LEN + 1], time_t t, const char *id)
{
	struct tm tm;

	if (!id || !task_id_valid(id))
		return -EINVAL;
	if (!localtime_r(&t, &tm) || tm.tm_year + 1900 < 1000 || tm.tm_year + 1900 > 9999)
		return -EOVERFLOW;
	if (strftime(name, TASK_NAME_LEN + 1 - TASK_ID_LEN, "%Y%m%d-%H%M%S-", &tm) !=
	    TASK_NAME_LEN - TASK_ID_LEN)
		return -EOVERFLOW;
	memcpy(name + TASK_NAME_LEN - TASK_ID_LEN, id, TASK_ID_LEN + 1);
	return 0;
}

/* n decimal digits at s, or -1. */
static int digits(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static int days_in_month(int year, int month)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

	return month == 2 && leap ? 29 : days[month - 1];
}

int task_name_parse(const char *name, time_t *start, char *id)
{
	int year, mon, day, hour, min, sec;
	struct tm tm;
	time_t t;

	if (strlen(name) != TASK_NAME_LEN || name[8] != '-' || name[15] != '-')
		return -EINVAL;
	year = digits(name, 4);
	mon = digits(name + 4, 2);
	day = digits(name + 6, 2);
	hour = digits(name + 9, 2);
	min = digits(name + 11, 2);
	sec = digits(name + 13, 2);
	if (year < 1000 || mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon) ||
	    hour < 0 || hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 60)
		return -EINVAL;
	if (!task_id_valid(name + 16))
		return -EINVAL;
	if (start) {
		memset(&tm, 0, sizeof(tm));
		tm.tm_year = year - 1900;
		tm.tm_mon = mon - 1;
		tm.tm_mday = day;
		tm.tm_hour = hour;
		tm.tm_min = min;
		tm.tm_sec = sec;
		tm.tm_isdst = -1;
		t = mktime(&tm);
		if (t == (time_t)-1 && tm.tm_year != 69)
			return -EINVAL;
		*start = t;
	}
	if (id)
		memcpy(id, name + 16, TASK_ID_LEN + 1);
	return 0;
}

int task_name_valid(const char *name)
{
	return task_name_parse(name, NULL, NULL) == 0;
}

int task_lock_name_parse(const char *name, char *folder)
{
	char tmp[TASK_NAME_LEN + 1];

	if (strlen(name) != TASK_NAME_LEN + 5 || strcmp(name + TASK_NAME_LEN, ".lock"))
		return 0;
	memcpy(tmp, name, TASK_NAME_LEN);
	tmp[TASK_NAME_LEN] = '\0';
	if (!task_name_valid(tmp))
		return 0;
	if (folder)
		memcpy(folder, tmp, TASK_NAME_LEN + 1);
	return 1;
}
