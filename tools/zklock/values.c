/* The values of options: numbers, durations, intervals, thresholds, signals, labels and
 * names, each checked in full (nothing after the value, every range enforced). Pure
 * functions of their text; options.c gives them to the options. */
#include "zklock.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A decimal integer in [min, max], nothing else. */
bool parse_int(const char *s, long min, long max, int *out)
{
	if (*s == '\0' || (*s != '-' && (*s < '0' || *s > '9')))
		return false;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = (int)v;
	return true;
}

/* Whether s is a decimal number: digits with at most one '.', nothing else. */
bool decimal(const char *s)
{
	int digits = 0, dots = 0;
	for (const char *p = s; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.')
			dots++;
		else
			return false;
	}
	return digits > 0 && dots <= 1;
}

/* Non-negative seconds, digits with at most one '.', to whole milliseconds (rounded
 * up, so that 0.0001 waits rather than tries once). */
bool parse_seconds(const char *s, double *secs, int *ms)
{
	if (!decimal(s))
		return false;
	double v = strtod(s, NULL);
	if (!(v >= 0.0) || v > (double)(INT_MAX / 1000))
		return false;
	double msd = v * 1000.0;
	int m = (int)msd;
	if ((double)m < msd)
		m++;
	*secs = v;
	*ms = m;
	return true;
}

/* An interval: a positive whole number of seconds, or of s, m, h or d. */
bool parse_interval(const char *s, long *secs)
{
	if (!isdigit((unsigned char)*s))
		return false;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || v <= 0)
		return false;
	long long unit = 1;
	if (*end == 's')
		end++;
	else if (*end == 'm')
		unit = 60, end++;
	else if (*end == 'h')
		unit = 3600, end++;
	else if (*end == 'd')
		unit = 86400, end++;
	if (*end != '\0' || v > 100LL * 365 * 86400 / unit)
		return false;
	*secs = (long)(v * unit);
	return true;
}

/* A duration: a number of seconds > 0 (decimals allowed), or with a unit s, m, h or d
 * (such as 90s, 1.5h), to whole milliseconds (rounded up); at most 100 years. */
bool parse_duration(const char *s, int64_t *ms)
{
	size_t n = strlen(s);
	if (n == 0 || n > 30)
		return false;
	double unit = 1000.0;
	char num[32];
	memcpy(num, s, n + 1);
	switch (num[n - 1]) {
	case 's': unit = 1000.0; num[--n] = '\0'; break;
	case 'm': unit = 60000.0; num[--n] = '\0'; break;
	case 'h': unit = 3600000.0; num[--n] = '\0'; break;
	case 'd': unit = 86400000.0; num[--n] = '\0'; break;
	default: break;
	}
	if (!decimal(num))
		return false;
	double v = strtod(num, NULL) * unit;
	if (!(v > 0.0) || v > 100.0 * 365 * 86400000.0)
		return false;
	int64_t m = (int64_t)v;
	if ((double)m < v)
		m++;
	*ms = m;
	return true;
}

/* A check's thresholds: "WARN", "WARN,CRIT" or ",CRIT", each a duration (count false)
 * or a count >= 0 (count true). */
bool parse_threshold(const char *s, bool count, struct threshold *t)
{
	t->warn = t->crit = -1;
	const char *comma = strchr(s, ',');
	char part[64];
	for (int i = 0; i < 2; i++) {
		const char *b = i == 0 ? s : comma ? comma + 1 : NULL;
		if (!b)
			break;
		size_t len = i == 0 && comma ? (size_t)(comma - s) : strlen(b);
		if (len >= sizeof part)
			return false;
		memcpy(part, b, len);
		part[len] = '\0';
		int64_t *v = i == 0 ? &t->warn : &t->crit;
		if (len == 0)
			continue;
		int n;
		if (count ? !parse_int(part, 0, INT_MAX, &n) : !parse_duration(part, v))
			return false;
		if (count)
			*v = n;
	}
	return t->warn >= 0 || t->crit >= 0;
}

/* A label value for Prometheus: valid UTF-8 without control characters. */
bool valid_label(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		if (*p < 0x20 || *p == 0x7f)
			return false;
		size_t n = *p < 0x80 ? 1 : *p >= 0xc2 && *p < 0xe0 ? 2 : *p >= 0xe0 && *p < 0xf0 ? 3
		         : *p >= 0xf0 && *p < 0xf5 ? 4 : 0;
		if (n == 0)
			return false;
		for (size_t k = 1; k < n; k++)
			if ((p[k] & 0xc0) != 0x80)
				return false;
		p += n;
	}
	return true;
}

static const struct {
	const char *name;
	int sig;
} signal_names[] = {
	{ "HUP", SIGHUP },   { "INT", SIGINT },   { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
	{ "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "PIPE", SIGPIPE },
};

/* A signal: a name with or without "SIG" (any case), or a number 1..NSIG-1. */
bool parse_signal(const char *s, int *sig)
{
	if (isdigit((unsigned char)*s))
		return parse_int(s, 1, NSIG - 1, sig);
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++) {
		if (strcasecmp(s, signal_names[i].name) == 0) {
			*sig = signal_names[i].sig;
			return true;
		}
	}
	return false;
}

/* An environment variable name: a letter or '_', then letters, digits and '_'. */
bool valid_env_name(const char *s)
{
	if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return false;
	return true;
}
