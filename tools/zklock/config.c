/* The config files: $ZKLOCK_CONFIG, else /etc/zklock.conf and then
 * ~/.config/zklock.conf (or $XDG_CONFIG_HOME/zklock.conf), lines of "key = value". */
#include "zklock.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static char *config_strings[32];
static int nconfig_strings;

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

static const char *keep_string(const char *s)
{
	if (nconfig_strings >= (int)(sizeof config_strings / sizeof config_strings[0]))
		return NULL;
	char *copy = strdup(s);
	if (copy)
		config_strings[nconfig_strings++] = copy;
	return copy;
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
				o->servers = keep_string(value);
		} else if (strcmp(key, "chroot") == 0) {
			if (value[0] != '/' || (value[1] != '\0' && value[strlen(value) - 1] == '/'))
				rc = usage_error("%s:%d: chroot \"%s\" must be an absolute path", file,
				                 lineno, value);
			else
				o->chroot = keep_string(value);
		} else if (strcmp(key, "session_timeout") == 0) {
			if (!parse_int(value, 1, INT_MAX, &o->session_timeout_ms))
				rc = usage_error("%s:%d: invalid session timeout \"%s\": expected "
				                 "milliseconds > 0", file, lineno, value);
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
				o->auth = keep_string(value);
		} else if (strcmp(key, "lock_folders") == 0) {
			if (!parse_lock_folders(value, &o->lock_folders))
				rc = usage_error("%s:%d: invalid lock_folders \"%s\": expected auto, "
				                 "container or persistent", file, lineno, value);
		} else if (strcmp(key, "tls_ca") == 0) {
			o->tls_ca = keep_string(value);
		} else if (strcmp(key, "tls_cert") == 0) {
			o->tls_cert = keep_string(value);
		} else if (strcmp(key, "tls_key") == 0) {
			o->tls_key = keep_string(value);
		} else if (strcmp(key, "sasl_mechanism") == 0) {
			o->sasl_mechanism = keep_string(value);
		} else if (strcmp(key, "sasl_user") == 0) {
			o->sasl_user = keep_string(value);
		} else if (strcmp(key, "sasl_password_file") == 0) {
			o->sasl_password_file = keep_string(value);
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
	for (int i = 0; i < nconfig_strings; i++)
		free(config_strings[i]);
	nconfig_strings = 0;
}
