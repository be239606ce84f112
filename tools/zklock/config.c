/* The config files: $ZKLOCK_CONFIG, else /etc/zklock.conf and then
 * ~/.config/zklock.conf (or $XDG_CONFIG_HOME/zklock.conf), lines of "key = value". */
#include "zklock.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The strings the config files gave (o points to them), however many. */
static char **config_strings;
static size_t nconfig_strings;

/* ---- the config file ---- */

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* *dst = a copy of s, kept until config_free(). Returns 0, or an exit code after
 * reporting. */
static int keep_string(const char **dst, const char *s, const char *file, int lineno)
{
	char **more = realloc(config_strings, (nconfig_strings + 1) * sizeof *more);
	char *copy = more ? strdup(s) : NULL;
	if (more)
		config_strings = more;
	if (!copy) {
		msg("%s:%d: out of memory", file, lineno);
		return EXIT_SOFTWARE;
	}
	config_strings[nconfig_strings++] = copy;
	*dst = copy;
	return 0;
}

/* Reads a config file into o. A missing file is fine unless `required`. Returns 0 or an
 * exit code after reporting. */
static int read_config(const char *file, bool required, struct opts *o)
{
	FILE *f = fopen(file, "r");
	if (!f) {
		if (errno == ENOENT && !required)
			return 0;
		return usage_error("cannot read the config file %s: %s", file, strerror(errno));
	}
	char line[4096];
	int lineno = 0, rc = 0;
	while (rc == 0 && fgets(line, sizeof line, f)) {
		lineno++;
		char *s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = usage_error("%s:%d: expected \"key = value\"", file, lineno);
			break;
		}
		*eq = '\0';
		char *key = trim(s), *value = trim(eq + 1);
		size_t vl = strlen(value);
		if (vl >= 2 && (value[0] == '"' || value[0] == '\'') && value[vl - 1] == value[0]) {
			value[vl - 1] = '\0';
			value++;
		}
		for (char *k = key; *k; k++)
			if (*k == '-')
				*k = '_';
		if (strcmp(key, "servers") == 0) {
			if (!*value)
				rc = usage_error("%s:%d: empty server list", file, lineno);
			else
				rc = keep_string(&o->servers, value, file, lineno);
		} else if (strcmp(key, "chroot") == 0) {
			if (value[0] != '/' || (value[1] != '\0' && value[strlen(value) - 1] == '/'))
				rc = usage_error("%s:%d: chroot \"%s\" must be an absolute path", file,
				                 lineno, value);
			else
				rc = keep_string(&o->chroot, value, file, lineno);
		} else if (strcmp(key, "session_timeout") == 0) {
			if (!parse_int(value, ZKL_SESSION_TIMEOUT_MIN, ZKL_SESSION_TIMEOUT_MAX,
			               &o->session_timeout_ms))
				rc = usage_error("%s:%d: invalid session timeout \"%s\": expected "
				                 "%d..%d milliseconds", file, lineno, value,
				                 ZKL_SESSION_TIMEOUT_MIN, ZKL_SESSION_TIMEOUT_MAX);
		} else if (strcmp(key, "loss_percent") == 0) {
			if (!parse_int(value, 50, 100, &o->loss_percent))
				rc = usage_error("%s:%d: invalid loss percent \"%s\": expected 50..100",
				                 file, lineno, value);
		} else if (strcmp(key, "connect_timeout") == 0) {
			if (!parse_int(value, 1, INT_MAX, &o->connect_timeout_ms))
				rc = usage_error("%s:%d: invalid connect timeout \"%s\": expected "
				                 "milliseconds > 0", file, lineno, value);
		} else if (strcmp(key, "auth") == 0) {
			if (strncmp(value, "digest:", 7) == 0)
				value += 7;
			if (!strchr(value, ':'))
				rc = usage_error("%s:%d: auth must be \"user:password\"", file, lineno);
			else
				rc = keep_string(&o->auth, value, file, lineno);
		} else if (strcmp(key, "lock_folders") == 0) {
			if (!parse_lock_folders(value, &o->lock_folders))
				rc = usage_error("%s:%d: invalid lock_folders \"%s\": expected auto, "
				                 "container or persistent", file, lineno, value);
		} else if (strcmp(key, "tls_ca") == 0) {
			rc = keep_string(&o->tls_ca, value, file, lineno);
		} else if (strcmp(key, "tls_cert") == 0) {
			rc = keep_string(&o->tls_cert, value, file, lineno);
		} else if (strcmp(key, "tls_key") == 0) {
			rc = keep_string(&o->tls_key, value, file, lineno);
		} else if (strcmp(key, "sasl_mechanism") == 0) {
			rc = keep_string(&o->sasl_mechanism, value, file, lineno);
		} else if (strcmp(key, "sasl_user") == 0) {
			rc = keep_string(&o->sasl_user, value, file, lineno);
		} else if (strcmp(key, "sasl_password_file") == 0) {
			rc = keep_string(&o->sasl_password_file, value, file, lineno);
		} else {
			rc = usage_error("%s:%d: unknown key \"%s\" (known: servers, chroot, "
			                 "session_timeout, loss_percent, connect_timeout, auth, "
			                 "lock_folders, tls_ca, "
			                 "tls_cert, tls_key, sasl_mechanism, sasl_user, "
			                 "sasl_password_file)", file, lineno, key);
		}
	}
	fclose(f);
	return rc;
}

int read_configs(struct opts *o)
{
	const char *env = getenv("ZKLOCK_CONFIG");
	if (env && *env)
		return read_config(env, true, o);
	int rc = read_config(SYSTEM_CONFIG, false, o);
	if (rc != 0)
		return rc;
	char file[PATH_MAX];
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	if (xdg && *xdg == '/')
		snprintf(file, sizeof file, "%s/zklock.conf", xdg);
	else if (home && *home)
		snprintf(file, sizeof file, "%s/.config/zklock.conf", home);
	else
		return 0;
	return read_config(file, false, o);
}


void config_free(void)
{
	for (size_t i = 0; i < nconfig_strings; i++)
		free(config_strings[i]);
	free(config_strings);
	config_strings = NULL;
	nconfig_strings = 0;
}
