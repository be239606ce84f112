/* The environment variables zklock reads: $ZKLOCK_SERVERS, $HOME and $XDG_CONFIG_HOME
 * (where the configuration files are), $ZKLOCK_CONFIG (one of a few files, /dev/zero and
 * a folder among them, which must be refused; a fuzzed name could be a pipe that never
 * ends), and $XDG_RUNTIME_DIR (where a holder's deadline
 * is published), with the published deadline file's content fuzzed too. The input is
 * NUL-separated: a selector byte for $ZKLOCK_CONFIG, the values of the others (a value
 * "-" unsets), the deadline file, then a configuration file. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zklock_fuzz.h"

static char dir[64], config[128], runtime[128], deadline[192];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof dir, "/tmp/zklock-fuzz-env-%ld", (long)getpid());
	snprintf(config, sizeof config, "%s/zklock.conf", dir);
	snprintf(runtime, sizeof runtime, "%s/zklock", dir);
	snprintf(deadline, sizeof deadline, "%s/%ld", runtime, (long)getpid());
	if ((mkdir(dir, 0700) != 0 && access(dir, W_OK) != 0) ||
	    (mkdir(runtime, 0700) != 0 && access(runtime, W_OK) != 0))
		abort();
	return 0;
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	fputs(s, f);
	fclose(f);
}

static void set(const char *name, const char *value)
{
	if (strcmp(value, "-") == 0)
		unsetenv(name);
	else
		setenv(name, value, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *f[7] = {"", "-", "-", "-", "-", "", ""}, *buf;
	int n = fuzz_split(data, size, f, 7, &buf);
	if (n < 0)
		return 0;
	/* /dev/zero and a folder are no configuration: refused (64), never read for ever. */
	const char *configs[] = {NULL, "", "/dev/null", config, "/nonexistent/zklock.conf",
	                         "/dev/zero", dir};
	const int pick = (unsigned char)f[0][0] % 7;
	const char *which = configs[pick];
	if (which)
		setenv("ZKLOCK_CONFIG", which, 1);
	else
		unsetenv("ZKLOCK_CONFIG");
	set("ZKLOCK_SERVERS", f[1]);
	set("HOME", f[2]);
	set("XDG_CONFIG_HOME", f[3]);
	/* "." puts the runtime folder where the deadline file is. */
	set("XDG_RUNTIME_DIR", strcmp(f[4], ".") == 0 ? dir : f[4]);
	write_file(deadline, f[5]);
	write_file(config, f[6]);
	char *args[] = {"zklock", "status", "/x", NULL};
	const int status = fuzz_parse(3, args);
	if (pick >= 5)
		CHECK(status == EXIT_USAGE);
	/* status's look at a holder of ours on this host: the published deadline. */
	char host[256];
	if (gethostname(host, sizeof host) == 0) {
		host[sizeof host - 1] = 0;
		(void)deadline_left("/x", host, (long)getpid());
		(void)deadline_left(f[5], host, (long)getpid());
	}
	free(buf);
	return 0;
}
