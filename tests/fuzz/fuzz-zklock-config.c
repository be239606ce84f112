/* zklock's configuration files: the input is the file ($ZKLOCK_CONFIG names it), read
 * by `zklock status /x` as main() does, then the servers resolved with the chroot it
 * may give. An input that starts with "#special:" and a digit names a file that is no
 * configuration instead (/dev/zero, a folder, a FIFO, /dev/null): each must be refused
 * with 64 (/dev/null read as empty), never read for ever or waited on. What must be
 * refused in a file: a NUL byte, a line over 4,095 bytes (its tail would be read as a
 * line of its own), more than 1 MiB. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zklock_fuzz.h"

static char config[64], folder[64], fifo[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(config, sizeof config, "/tmp/zklock-fuzz-config-%ld", (long)getpid());
	snprintf(folder, sizeof folder, "/tmp/zklock-fuzz-config-%ld.d", (long)getpid());
	snprintf(fifo, sizeof fifo, "/tmp/zklock-fuzz-config-%ld.fifo", (long)getpid());
	if ((mkdir(folder, 0700) != 0 && access(folder, W_OK) != 0) ||
	    (mkfifo(fifo, 0600) != 0 && access(fifo, R_OK) != 0))
		abort();
	unsetenv("ZKLOCK_SERVERS");
	return 0;
}

/* Whether the file is one zklock must refuse: a NUL byte, a line longer than 4,095
 * bytes, or more than 1 MiB. */
static bool refused(const uint8_t *data, size_t size)
{
	if (size > 1024 * 1024 || memchr(data, 0, size))
		return true;
	size_t line = 0;
	for (size_t i = 0; i < size; i++) {
		if (data[i] == '\n')
			line = 0;
		else if (++line > 4095)
			return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char special[] = "#special:";
	char *args[] = {"zklock", "status", "/x", NULL};
	const size_t sl = sizeof special - 1;
	if (size == sl + 1 && memcmp(data, special, sl) == 0 && data[sl] >= '0' &&
	    data[sl] <= '3') {
		const char *files[] = {"/dev/zero", folder, fifo, "/dev/null"};
		const int which = data[sl] - '0';
		setenv("ZKLOCK_CONFIG", files[which], 1);
		int status = fuzz_parse(3, args);
		CHECK(which == 3 ? status != EXIT_USAGE : status == EXIT_USAGE);
		return 0;
	}
	setenv("ZKLOCK_CONFIG", config, 1);
	FILE *f = fopen(config, "wb");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	int status = fuzz_parse(3, args);
	if (refused(data, size))
		CHECK(status == EXIT_USAGE);
	return 0;
}
