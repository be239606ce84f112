/* The config files: $ZKLOCK_CONFIG, else /etc/zklock.conf and then
 * ~/.config/zklock.conf (or $XDG_CONFIG_HOME/zklock.conf), lines of "key = value".
 *
 * A file is read whole before a line is looked at, and only what a configuration can
 * be is read: a regular file (or /dev/null, which says "none") of at most CONFIG_MAX
 * bytes, without a NUL byte, in lines of at most CONFIG_LINE_MAX bytes. Anything else
 * is refused with the reason (exit 64): a folder or a device is no configuration, and
 * /dev/zero would never end; a line cut at some length would have its tail read as a
 * line of its own (the end of a long comment taken as a setting). It is opened with
 * O_NONBLOCK, so that a FIFO is refused rather than waited on. */
#include "zklock.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The most a config file may hold, and a line of it (its newline aside). */
#define CONFIG_MAX (1024 * 1024)
#define CONFIG_LINE_MAX 4095

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

/* What a file of mode m is, when it cannot be a configuration. */
static const char *not_config(mode_t m)
{
	return S_ISDIR(m)    ? "it is a folder"
	       : S_ISFIFO(m) ? "it is a FIFO, not a regular file"
	       : S_ISSOCK(m) ? "it is a socket, not a regular file"
	       : S_ISCHR(m) || S_ISBLK(m) ? "it is a device, not a regular file"
	                                  : "it is not a regular file";
}

/* Reads the whole of file into *text (NUL-terminated, to free), *len bytes. A missing
 * file is *text NULL and 0, unless `required`. Returns 0 or an exit code after
 * reporting. */
static int slurp_config(const char *file, bool required, char **text, size_t *len)
{
	*text = NULL;
	*len = 0;
	int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT && !required)
			return 0;
		return usage_error("cannot read the config file %s: %s", file, strerror(errno));
	}
	struct stat sb;
	if (fstat(fd, &sb) != 0) {
		int e = errno;
		close(fd);
		return usage_error("cannot read the config file %s: %s", file, strerror(e));
	}
	const bool null_device = S_ISCHR(sb.st_mode) && major(sb.st_rdev) == 1 &&
	                         minor(sb.st_rdev) == 3;
	if (!S_ISREG(sb.st_mode) && !null_device) {
		close(fd);
		return usage_error("cannot read the config file %s: %s", file,
		                   not_config(sb.st_mode));
	}
	char *buf = malloc(CONFIG_MAX + 2);
	if (!buf) {
		close(fd);
		msg("cannot read the config file %s: out of memory", file);
		return EXIT_SOFTWARE;
	}
	size_t n = 0;
	while (n <= CONFIG_MAX) {
		ssize_t got = read(fd, buf + n, CONFIG_MAX + 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;
			close(fd);
			free(buf);
			return usage_error("cannot read the config file %s: %s", file, strerror(e));
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	if (n > CONFIG_MAX) {
		free(buf);
		return usage_error("the config file %s is longer than %d bytes", file, CONFIG_MAX);
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

/* Reads a config file into o. A missing file is fine unless `required`. Returns 0 or an
 * exit code after reporting. */
static int read_config(const char *file, bool required, struct opts *o)
{
	char *text;
	size_t len;
	int rc = slurp_config(file, required, &text, &len);
	if (rc != 0 || !text)
		return rc;
	int lineno = 0;
	for (char *next = text; rc == 0 && next < text + len;) {
		char *line = next;
		char *nl = memchr(line, '\n', (size_t)(text + len - line));
		size_t ll = nl ? (size_t)(nl - line) : (size_t)(text + len - line);
		next = line + ll + 1;
		line[ll] = '\0';
		lineno++;
		if (memchr(line, '\0', ll)) {
			rc = usage_error("%s:%d: a NUL byte: not a text file", file, lineno);
			break;
		}
		if (ll > CONFIG_LINE_MAX) {
			rc = usage_error("%s:%d: a line longer than %d bytes", file, lineno,
			                 CONFIG_LINE_MAX);
			break;
		}
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
	free(text);
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
