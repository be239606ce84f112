/* zklock's configuration files: the input is the file ($ZKLOCK_CONFIG names it), read
 * by `zklock status /x` as main() does, then the servers resolved with the chroot it
 * may give. */
#include <stdio.h>
#include <unistd.h>

#include "zklock_fuzz.h"

static char config[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(config, sizeof config, "/tmp/zklock-fuzz-config-%ld", (long)getpid());
	setenv("ZKLOCK_CONFIG", config, 1);
	unsetenv("ZKLOCK_SERVERS");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fopen(config, "wb");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	char *args[] = {"zklock", "status", "/x", NULL};
	fuzz_parse(3, args);
	return 0;
}
